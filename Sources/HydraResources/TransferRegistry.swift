import HydraCore
import HydraLoop

/// The keys being fetched, across the remote workers.
///
/// Each worker's executor merges the jobs of one key into one transfer on
/// its own loop; a job for that key on *another* worker (its `worker` names
/// it) joins here instead: it waits for the transfer under way and then
/// starts again, finding the copy it stored (resources.md: two jobs for the
/// same resource at the same time make one transfer). If that transfer
/// failed on the network (kinds `network`, `timeout`, `tls`: the server's
/// doing, the same for every job), the job is told that error and judges it
/// by its own `retry` and `timeoutMs` (the executor's `followed`); after any
/// other ending (a failure of the first job's own making, such as its
/// `sha256`, or nobody waiting any more) it starts again and fetches for
/// itself. Thread-safe.
final class TransferRegistry: Sendable {
    /// Who fetches a key, and the callbacks of the jobs waiting on other workers.
    private struct Entry {
        let owner: ObjectIdentifier
        var followers: [@Sendable (JobError?) -> Void]
    }

    private let entries = Locked<[String: Entry]>([:])

    enum Join { case own, following }

    /// `owner` (an executor) is about to fetch `key`: `.own` when no other
    /// executor fetches it (the key is now `owner`'s until ``ended(_:by:)``),
    /// else `.following`, and `follower` runs (on the owner's thread) when
    /// that transfer ends.
    func join(_ key: String, owner: ObjectIdentifier, follower: @escaping @Sendable (JobError?) -> Void) -> Join {
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
    /// waiting any more): the jobs that followed it go on, told `failure`
    /// when it is one every job shares (see above).
    func ended(_ key: String, by owner: ObjectIdentifier, failure: JobError? = nil) {
        let followers: [@Sendable (JobError?) -> Void] = entries.withLock { entries in
            guard let entry = entries[key], entry.owner == owner else { return [] }
            entries[key] = nil
            return entry.followers
        }
        let shared = failure.flatMap { [.network, .timeout, .tls].contains($0.kind) ? $0 : nil }
        for follower in followers { follower(shared) }
    }
}
