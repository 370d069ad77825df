import HydraLoop
import Synchronization

/// Keeps copies being put in place apart from copies being removed. A new
/// copy is renamed over the old file before its index entry is committed:
///
/// - a reader holding the old entry then finds a file that does not match it.
///   Taking that for corruption deleted the new copy. A reader drops a
///   mismatching copy only when no replacement was under way when it looked
///   the entry up and none began since (``mark()``, ``mayHaveReplaced(since:)``);
///   otherwise it fetches, and the fetch puts a good copy in place either way.
/// - a removal (eviction, purge, a corrupt copy) that deletes the old entry
///   could unlink the new file, leaving the new entry without one. A removal
///   deletes an entry only while it is the copy it chose (the index compares
///   `storedAt`), and unlinks the file only if no copy of that key began being
///   put in place since it chose (``unlinkUnlessReplaced(_:since:_:)``, which
///   excludes ``begin(_:)``); otherwise the file is the new copy's.
///
/// Thread-safe. ``begin(_:)`` may wait for an unlink under way for the same
/// key (one system call): never longer.
final class ReplacementWatch: Sendable {
    private let underWay = Atomic<Int>(0)
    private let begun = Atomic<Int>(0)
    private let keys = Locked(Keys())

    /// Per key: replacements under way, and when (in ``generation()``'s
    /// count) the last one began. Keys with nothing under way are forgotten
    /// past `limit` of them: `floor` then stands for when any of them began.
    private struct Keys {
        var underWay: [String: Int] = [:]
        var lastBegun: [String: Int] = [:]
        /// The `storedAt` of the entry the last replacement of a key committed.
        var lastCommitted: [String: Double] = [:]
        var generation = 0
        var floor = 0
        static let limit = 4096
    }

    /// What a reader notes before it looks an entry up.
    struct Mark {
        fileprivate let underWay: Int
        fileprivate let begun: Int
        /// For ``unlinkUnlessReplaced(_:since:_:)`` when the reader removes the copy.
        let generation: Int
    }

    func mark() -> Mark {
        // `begun` first: a replacement that begins between the two reads shows in `underWay`.
        let begun = begun.load(ordering: .acquiring)
        return Mark(underWay: underWay.load(ordering: .acquiring), begun: begun, generation: generation())
    }

    /// Whether a replacement (of any key) could have changed a file since `mark`.
    func mayHaveReplaced(since mark: Mark) -> Bool {
        mark.underWay > 0 || begun.load(ordering: .acquiring) != mark.begun
    }

    /// The count of replacements begun so far: what a removal notes when it chooses its copies.
    func generation() -> Int { keys.withLock { $0.generation } }

    /// Before a copy of `key` is renamed into place.
    func begin(_ key: String) {
        underWay.add(1, ordering: .acquiringAndReleasing)
        begun.add(1, ordering: .acquiringAndReleasing)
        keys.withLock { k in
            k.generation += 1
            k.underWay[key, default: 0] += 1
            k.lastBegun[key] = k.generation
            guard k.lastBegun.count > Keys.limit else { return }
            for (other, at) in k.lastBegun where k.underWay[other] == nil {
                k.floor = max(k.floor, at)
                k.lastBegun[other] = nil
                k.lastCommitted[other] = nil
            }
        }
    }

    /// Once the copy's index entry is committed (`committed`: its `storedAt`),
    /// or it failed (nil): once per ``begin(_:)``.
    func end(_ key: String, committed storedAt: Double?) {
        underWay.subtract(1, ordering: .acquiringAndReleasing)
        keys.withLock { k in
            let left = (k.underWay[key] ?? 1) - 1
            k.underWay[key] = left > 0 ? left : nil
            if let storedAt { k.lastCommitted[key] = storedAt }
        }
    }

    /// Runs `unlink` (removing `key`'s file) when the file is the copy whose
    /// entry the removal deleted (`removed`: its `storedAt`): no copy of `key`
    /// is being put in place, and none began since `generation`, or the last
    /// one to commit was that very copy (the removal read it after it was
    /// stored). True when it ran.
    func unlinkUnlessReplaced(_ key: String, since generation: Int, removed storedAt: Double,
                              _ unlink: () -> Void) -> Bool {
        keys.withLock { k in
            guard k.underWay[key] == nil else { return false }
            if let began = k.lastBegun[key] {
                guard began <= generation || k.lastCommitted[key] == storedAt else { return false }
            } else if k.floor > generation {
                return false
            }
            unlink()
            return true
        }
    }
}
