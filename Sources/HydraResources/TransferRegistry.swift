import HydraCore
import HydraLoop

/// The keys being fetched, across the remote workers.
///
/// Each worker's executor merges the jobs of one key into one transfer on
/// its own loop; a job for that key on *another* worker (its `worker` names
/// it) joins here instead: it waits for the transfer under way and then
/// starts again, finding the copy it stored (resources.md: two jobs for the
/// same resource at the same time make one transfer). If that transfer
/// failed, the job fetches for itself. Thread-safe.
final class TransferRegistry: Sendable {
    /// Who fetches a key, and the callbacks of the jobs waiting on other workers.
    private struct Entry {
        let owner: ObjectIdentifier
        var followers: [@Sendable () -> Void]
    }

    private let entries = Locked<[String: Entry]>([:])

    enum Join { case own, following }

    /// `owner` (an executor) is about to fetch `key`: `.own` when no other
    /// executor fetches it (the key is now `owner`'s until ``ended(_:by:)``),
    /// else `.following`, and `follower` runs (on the owner's thread) when
    /// that transfer ends.
    func join(_ key: String, owner: ObjectIdentifier, follower: @escaping @Sendable () -> Void) -> Join {
        entries.withLock { entries in
            if let entry = entries[key], entry.owner != owner {
                entries[key]!.followers.append(follower)
                return .following
            }
            entries[key] = Entry(owner: owner, followers: [])
            return .own
        }
    }

    /// `owner`'s transfer of `key` ended (a copy stored, a failure, or nobody
    /// waiting any more): the jobs that followed it go on.
    func ended(_ key: String, by owner: ObjectIdentifier) {
        let followers: [@Sendable () -> Void] = entries.withLock { entries in
            guard let entry = entries[key], entry.owner == owner else { return [] }
            entries[key] = nil
            return entry.followers
        }
        for follower in followers { follower() }
    }
}
