import Foundation
import HydraAtRest
import HydraCore
import HydraHTTP
import HydraLoop
import OrderedCollections

/// What the repository answers outside jobs (resources.md §2, and the
/// embedding API): stat, read, list, remove, purge, stats. Reads run on the
/// caller's thread (index reads and, for `read`, one file); removals do file
/// I/O, so they run on the chores thread (``RepositoryChores``), never on a
/// worker loop, and call `done` there. Thread-safe.
extension ResourceManager {
    /// The key a plain `{"url": …}` resource (no remaker) has.
    public func key(forURL url: String) -> String { ResourceKey.make(url: url, remaker: nil, options: nil) }

    /// The stat object of a copy: a job's result without `content`, whose
    /// `source` is `disk` (the repository's copy), or nil.
    public func stat(key: String) throws(StoreError) -> JSONValue? {
        try index.resource(key: key).map { .object(statObject($0)) }
    }

    /// A copy's stat object: the result of a job without `content`, `source` `disk`.
    func statObject(_ record: ResourceRecord) -> OrderedDictionary<String, JSONValue> {
        var o = ResourceExecutor.stat(record, path: relativePath(of: record.key))
        o["source"] = "disk"
        return o
    }

    /// The content of a copy from the repository only (never the network):
    /// `{"key", "content", "bytes", "eof"}`, `bytes` being the copy's size and
    /// `content` the `length` bytes from `offset` as `presentation` (default base64).
    /// Nil when there is no good copy (a corrupt one is removed). Throws kind
    /// `decode` when the bytes are not what `presentation` asks for, kind
    /// `invalid` for an `aes-gcm` copy while `HYDRA_SHARED_KEY` is not set (the copy stays).
    public func read(key: String, as presentation: ResourceSpec.Presentation = .base64, offset: Int = 0,
                     length: Int? = nil) throws(JobError) -> JSONValue? {
        let mark = replacements.mark()
        guard var record = try? index.resource(key: key) else { return nil }
        var loaded = load(record)
        if case .unreadable = loaded, replacements.mayHaveReplaced(since: mark) {
            // Not corrupt, maybe: a new copy was being put in place. Once its entry is
            // committed, that copy is read; while it is not, there is no copy to give yet.
            guard let newer = try? index.resource(key: key), newer != record else { return nil }
            record = newer
            loaded = load(record)
            if case .unreadable = loaded { return nil }
        }
        let clear: [UInt8]
        switch loaded {
        case .content(let content): clear = content
        case .sealed: throw ResourceManager.sealedError
        case .unreadable:
            removeCopies([record], reason: "corrupt", since: mark.generation) { _ in }
            return nil
        }
        // Peers' numbers: neither may overflow, however large.
        let start = min(max(0, offset), clear.count)
        let end = start + min(max(0, length ?? clear.count), clear.count - start)
        let slice = clear[start..<end]
        let content: JSONValue
        switch presentation {
        case .base64: content = .string(Data(slice).base64EncodedString())
        case .text:
            guard let text = UTF8Text.string(validating: slice) else { throw JobError(.decode, "as: the content is not UTF-8 text") }
            content = .string(text)
        case .json:
            do { content = try JSONParser.parse(Array(slice)) } catch { throw JobError(.decode, "as: the content is not JSON: \(error)") }
        case .path: content = .string(relativePath(of: key))
        }
        return ["key": .string(key), "content": content, "bytes": .int(record.bytes), "eof": .bool(end == clear.count)]
    }

    /// Why an `aes-gcm` copy cannot be opened: the key is not there.
    static let sealedError = JobError(.invalid, "cipher: the copy is kept with aes-gcm and HYDRA_SHARED_KEY is not set")

    /// What reading a copy's file gave.
    enum Loaded {
        /// The clear content: the file is there and checks out.
        case content([UInt8])
        /// Missing, truncated or corrupt (size, SHA-256 or aes-gcm tag): the copy must go.
        case unreadable
        /// An `aes-gcm` copy while `HYDRA_SHARED_KEY` is not set: it cannot be
        /// opened and is not corrupt, so it stays.
        case sealed
    }

    /// Reads `record`'s file and checks it (size and SHA-256 of the file at
    /// rest, and for aes-gcm its tag). Blocking file I/O.
    func load(_ record: ResourceRecord) -> Loaded {
        guard let path = plainPath(of: record.key, checkingRepository: false), let stored = ResourceManager.readPlainFile(path, expecting: record.diskBytes)
        else { return .unreadable }
        switch record.cipher {
        case .none:
            guard ResourceKey.sha256(stored) == record.sha256 else { return .unreadable }
            return .content(stored)
        case .aesGCM:
            guard ResourceKey.sha256(stored) == record.sha256 else { return .unreadable }
            guard let atRestKey else { return .sealed }
            guard let clear = try? atRestKey.open(stored), clear.count == record.bytes else { return .unreadable }
            return .content(clear)
        case .gzip:
            // The index keeps the clear content's digest (the result's `sha256`, as for a plain
            // copy); an entry written before 2026-11-25 keeps the compressed file's.
            guard let clear = try? Gzip.decompress(stored, limit: record.bytes), clear.count == record.bytes,
                  ResourceKey.sha256(clear) == record.sha256 || ResourceKey.sha256(stored) == record.sha256
            else { return .unreadable }
            return .content(clear)
        }
    }

    /// The SHA-256 of a copy's clear content: the index's for a plain copy,
    /// else taken from `content` (an `aes-gcm` entry keeps the sealed file's
    /// digest; a gzip entry from before 2026-11-25 the compressed file's).
    static func contentDigest(_ record: ResourceRecord, _ content: [UInt8]) -> String {
        record.cipher == .none ? record.sha256 : ResourceKey.sha256(content)
    }

    /// A page of stat objects, newest first: `{"resources": [...], "next"?}`;
    /// nil when `after` names no copy any more (removed, purged or evicted
    /// since the page before was read): where the page starts is lost, and an
    /// empty page would read as the end of the list.
    public func list(prefix: String?, limit: Int, after: String?) throws(StoreError) -> JSONValue? {
        if let after, try index.resource(key: after) == nil { return nil }
        let limit = min(max(1, limit), 10_000)
        // The index keeps URLs without their `user:password` (shown `***`): so is the prefix.
        let page = try index.resources(urlPrefix: prefix.map(RemoteSpec.redactingCredentials), after: after, limit: limit + 1)
        var o: OrderedDictionary<String, JSONValue> = [
            "resources": .array(page.prefix(limit).map { .object(statObject($0)) })]
        if page.count > limit, let last = page.prefix(limit).last { o["next"] = .string(last.key) }
        return .object(o)
    }

    /// Removes the copies of `key`, `url` (its plain copy and every copy
    /// remade from it), or every URL starting with `prefix` (at least one
    /// given; each copy counted once): `done` gets `{"removed", "bytes"}`.
    public func remove(key: String?, url: String?, prefix: String?,
                       done: @escaping @Sendable (Result<JSONValue, StoreError>) -> Void) {
        chores.run { [self] in
            let chosenAt = replacements.generation()  // before the entries are read
            do throws(StoreError) {
                var keys: [String] = []
                if let key { keys.append(key) }
                if let url {
                    keys.append(self.key(forURL: url))
                    // The copies remade from it, found by URL. Not for a URL with a
                    // `user:password`: the index keeps URLs without it, so they would
                    // be every caller's copies, not this one's.
                    if RemoteSpec.credentials(in: url) == nil {
                        let wanted = ResourceKey.canonicalURL(url)
                        keys += try records(ofURLsStartingWith: url).filter { ResourceKey.canonicalURL($0.url) == wanted }.map(\.key)
                    }
                }
                if let prefix { keys += try records(ofURLsStartingWith: prefix).map(\.key) }
                var seen: Set<String> = []
                let records = keys.filter { seen.insert($0).inserted }.compactMap { try? index.resource(key: $0) }
                removeCopies(records, reason: "remove", since: chosenAt) { result in
                    done(result.map { _ in ["removed": .int(records.count), "bytes": .int(records.reduce(0) { $0 + $1.diskBytes })] })
                }
            } catch {
                done(.failure(error))
            }
        }
    }

    /// Every entry whose URL starts with `prefix`, read from the index a page at a time.
    private func records(ofURLsStartingWith prefix: String) throws(StoreError) -> [ResourceRecord] {
        var out: [ResourceRecord] = []
        var after: String?
        while true {
            let page = try index.resources(urlPrefix: prefix, after: after, limit: 1000)
            out += page
            guard page.count == 1000 else { return out }
            after = page.last?.key
        }
    }

    /// Removes copies unused for `olderThanSec`, then the least recently used
    /// until the repository holds at most `maxBytes`: `done` gets `{"removed", "bytes"}`.
    public func purge(olderThanSec: Double?, maxBytes: Int?, reason: String = "purge",
                      done: @escaping @Sendable (Result<JSONValue, StoreError>) -> Void) {
        chores.run { [self] in
            let chosenAt = replacements.generation()  // before the entries are read
            do throws(StoreError) {
                // Hits the index does not show yet count: the copy just used stays.
                let estimated = diskEstimate.load(ordering: .relaxed)
                let records = uses.overlaid(try index.resourcesByUse())
                var total = records.reduce(0) { $0 + $1.diskBytes }
                let cutoff = olderThanSec.map { Date().timeIntervalSince1970 - $0 }
                var picked: [ResourceRecord] = []
                for record in records {
                    let old = cutoff.map { record.lastUsedAt < $0 } ?? false
                    let over = maxBytes.map { total > $0 } ?? false
                    guard old || over else { continue }
                    picked.append(record)
                    total -= record.diskBytes
                }
                // The estimate, less what the index read shows gone: stores committed
                // meanwhile stay counted (it may run over the truth, never under).
                diskEstimate.subtract(estimated - total, ordering: .relaxed)
                let chosen = picked
                removeCopies(chosen, reason: reason, since: chosenAt) { result in
                    done(result.map { _ in ["removed": .int(chosen.count), "bytes": .int(chosen.reduce(0) { $0 + $1.diskBytes })] })
                }
            } catch {
                done(.failure(error))
            }
        }
    }

    /// Has every worker's memory tier drop its copies now (each on its own
    /// loop), rather than at its next job, and waits for them (at most a
    /// second each: a loop that is shutting down does not answer).
    /// Chores thread (or, once it stopped, the caller's: a tier of the
    /// caller's own loop is emptied in place, not waited for).
    func syncMemoryTiers() {
        let tiers = memoryTiers.withLock { $0 }
        let answered = DispatchSemaphore(value: 0)
        var asked = 0
        let removals = self.removals.load(ordering: .acquiring)
        // On a worker's loop (the chores thread stopped): never wait for another loop.
        let onALoop = tiers.contains { $0.loop.inEventLoop }
        for tier in tiers {
            if tier.loop.inEventLoop {
                tier.value.forget(ifRemovalsMovedTo: removals)
            } else if tier.loop.execute({
                tier.value.forget(ifRemovalsMovedTo: removals)
                answered.signal()
            }) { asked += 1 }
        }
        guard !onALoop else { return }
        for _ in 0..<asked { _ = answered.wait(timeout: .now() + 1) }
    }

    /// `resource.stats`.
    public func statsJSON() throws(StoreError) -> JSONValue {
        let records = try index.resourcesByUse()
        let s = statistics.snapshot
        return ["count": .int(records.count), "bytes": .int(records.reduce(0) { $0 + $1.diskBytes }),
                "memoryBytes": .int(memoryBytes.load(ordering: .relaxed)),
                "hits": ["memory": .int(s.memoryHits), "disk": .int(s.diskHits)],
                "misses": .int(s.misses), "revalidated": .int(s.revalidated), "merged": .int(s.merged)]
    }

    /// Removes the copies `copies` (their index entries, then their files)
    /// and tells every memory tier; one `resource.removed` per copy. A copy
    /// replaced since it was chosen stays (see ``ReplacementWatch``): its entry
    /// is removed only while it is that copy, its file only when no copy of
    /// the key began being put in place since `generation` (taken before the
    /// copies were read from the index).
    /// Runs on the chores thread (file I/O never on a worker loop nor on the
    /// store's writer); `done` there.
    func removeCopies(_ copies: [ResourceRecord], reason: String, since chosenAt: Int,
                      done: @escaping @Sendable (Result<Void, StoreError>) -> Void) {
        guard !copies.isEmpty else {
            done(.success(()))
            return
        }
        chores.run { [self] in
            removals.add(1, ordering: .releasing)
            // The entry goes first: a crash between the two leaves a file without
            // an entry, which startup reconciliation removes, never an entry without a file.
            // Each entry that went (a failed one stays, with its file: the others still go).
            let outcome = Locked<(gone: [ResourceRecord], error: StoreError?)>(([], nil))
            let group = DispatchGroup()
            for copy in copies {
                group.enter()
                index.removeResource(copy.key, ifStoredAt: copy.storedAt) { result in
                    outcome.withLock { o in
                        switch result {
                        case .success(true): o.gone.append(copy)
                        case .success(false): break  // replaced since it was chosen: it stays
                        case .failure(let error): o.error = o.error ?? error
                        }
                    }
                    group.leave()
                }
            }
            group.wait()
            let (gone, error) = outcome.withLock { $0 }
            for copy in gone {
                _ = replacements.unlinkUnlessReplaced(copy.key, since: chosenAt, removed: copy.storedAt) {
                    if let path = plainPath(of: copy.key) { unlink(path) }
                }
                emit(EventName.resourceRemoved, ["key": .string(copy.key), "url": .string(copy.url), "reason": .string(reason)])
            }
            // Again once the files are gone: a tier that refilled meanwhile forgets again.
            removals.add(1, ordering: .releasing)
            syncMemoryTiers()
            done(error.map { .failure($0) } ?? .success(()))
        }
    }
}

extension ResourceManager {
    /// The bytes of the regular file at `path`, when it has exactly `count` of
    /// them; nil for anything else (missing, another size, a symbolic link: the
    /// file is opened with `O_NOFOLLOW`). Blocking.
    static func readPlainFile(_ path: String, expecting count: Int) -> [UInt8]? {
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var info = Glibc.stat()
        guard fstat(descriptor, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, Int(info.st_size) == count else { return nil }
        var complete = true
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            var done = 0
            while done < count {
                let n = Glibc.read(descriptor, buffer.baseAddress! + done, count - done)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { complete = false; break }
                done += n
            }
            initialized = done
        }
        return complete ? bytes : nil
    }
}
