import Glibc
import Foundation
import HydraCore
import HydraLoop

/// Keeping the repository and its index in agreement, and within bounds:
/// startup reconciliation, and the purge every `resources.purgeIntervalSec`.
/// Both run off the worker loops (the caller's thread at startup, the chores
/// thread for the timer).
extension ResourceManager {
    /// Removes files without an index entry and entries without a file (what
    /// a crash between the two writes can leave). Call at startup, before jobs
    /// run and after the temporary files of interrupted downloads were removed.
    /// Only with a durable index: an in-memory one knows no file of a previous run.
    /// Returns how many of each it removed.
    public func reconcile() throws(StoreError) -> (files: Int, entries: Int) {
        let records = try index.resourcesByUse()
        // Each known key with the size and identity of its file at rest.
        let known = Dictionary(records.map { ($0.key, (size: $0.diskBytes, id: $0.fileID)) }, uniquingKeysWith: { first, _ in first })
        var present: Set<String> = []
        var files = 0
        let fm = FileManager.default
        // Only names the repository gives are touched (`ab/ab….bin`): a file of
        // anyone else's in the folder is left where it is.
        // Never through a symbolic link (the repository's writes never follow one: it was
        // planted, and what it points at is outside the state folder): not taken as a folder.
        let folders = repositoryIsPlain ? (try? fm.contentsOfDirectory(atPath: repositoryPath)) ?? [] : []
        for folder in folders where ResourceManager.isFolderName(folder) {
            let path = repositoryPath + "/" + folder
            guard ResourceManager.isPlainFolder(path) else { continue }
            for name in (try? fm.contentsOfDirectory(atPath: path)) ?? [] {
                guard name.hasSuffix(".bin"), ResourceManager.isKey(String(name.dropLast(4))) else { continue }
                let key = String(name.dropLast(4))
                // A file of another size than its entry says, or another file than the one
                // it was given (a new copy renamed into place just before a crash, its entry
                // not committed), is not that entry's copy: both go.
                var info = Glibc.stat()
                if let entry = known[key], key.hasPrefix(folder), lstat(path + "/" + name, &info) == 0,
                   info.st_mode & S_IFMT == S_IFREG, Int(info.st_size) == entry.size,
                   entry.id.map({ $0 == UInt64(info.st_ino) }) ?? true {
                    present.insert(key)
                } else if (try? fm.removeItem(atPath: path + "/" + name)) != nil {
                    files += 1
                }
            }
        }
        let missing = records.map(\.key).filter { !present.contains($0) }
        if !missing.isEmpty {
            let signal = DispatchSemaphore(value: 0)
            index.removeResources(missing) { _ in signal.signal() }
            signal.wait()
        }
        return (files, missing.count)
    }

    /// True for a key's text: 64 lowercase hex digits (a SHA-256).
    public static func isKey(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// True for a folder of the repository: the first two characters of the keys it holds.
    static func isFolderName(_ text: String) -> Bool {
        text.utf8.count == 2 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// Starts the purge every `resources.purgeIntervalSec`: copies unused for
    /// `resources.maxAgeSec` go (as nginx's `inactive`), then the least
    /// recently used until the repository holds at most `resources.maxBytes`.
    /// Runs on the chores thread; ends with ``stopUpkeep()``.
    public func startUpkeep() {
        guard upkeepRunning.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        chores.every(seconds: settings.purgeIntervalSec) { [weak self] done in
            guard let self, self.upkeepRunning.load(ordering: .acquiring) else { return }
            self.purge(olderThanSec: Double(self.settings.maxAgeSec), maxBytes: self.settings.maxBytes, reason: "evicted") { _ in
                done()
            }
        }
    }

    /// Called once a new copy is indexed: when the repository may now hold
    /// more than `resources.maxBytes`, the least recently used copies go
    /// (reason `evicted`) on the chores thread, without waiting for the purge
    /// timer (as a cache keeps its bound). At most one such eviction is
    /// queued at a time; each recounts the bytes from the index. Any thread.
    func copyStored(diskBytes: Int) {
        let estimate = diskEstimate.add(diskBytes, ordering: .relaxed).newValue
        guard estimate > settings.maxBytes, upkeepRunning.load(ordering: .acquiring),
              !evictionQueued.exchange(true, ordering: .acquiringAndReleasing) else { return }
        purge(olderThanSec: nil, maxBytes: settings.maxBytes, reason: "evicted") { [weak self] result in
            guard let self else { return }
            self.evictionQueued.store(false, ordering: .releasing)
            // Stores that came while this one ran were not looked at: again if they took it
            // over (not after a failure: the timer's purge tries later).
            if case .success = result { self.copyStored(diskBytes: 0) }
        }
    }

    /// True on the repository's chores thread (a removal's or purge's reply
    /// runs there): ``stopUpkeep()`` joins that thread, so it must not run on it.
    public var ownsCurrentThread: Bool { chores.isCurrentThread }

    /// Stops the purge timer and the chores thread, once the chores already
    /// asked for are done; later removals and purges run on their caller's thread.
    public func stopUpkeep() {
        upkeepRunning.store(false, ordering: .releasing)
        chores.shutdown()
    }
}
