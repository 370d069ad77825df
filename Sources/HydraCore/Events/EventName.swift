import Foundation
import OrderedCollections

/// The event names of protocol §6.
public enum EventName {
    public static let queued = "job.queued"
    public static let started = "job.started"
    public static let retrying = "job.retrying"
    public static let progress = "job.progress"
    public static let succeeded = "job.succeeded"
    public static let skipped = "job.skipped"
    public static let failed = "job.failed"
    public static let cancelled = "job.cancelled"
    /// A root job picked up again after a restart, before its steps run again.
    public static let resumed = "job.resumed"
    public static let groupDone = "group.done"
    public static let cacheUpdated = "cache.updated"
    public static let cacheRemoved = "cache.removed"
    public static let sharedUpdated = "shared.updated"
    public static let sharedRemoved = "shared.removed"
    /// A copy entered the resource repository (resources.md §3).
    public static let resourceStored = "resource.stored"
    /// A copy left it (`reason`: remove, purge, evicted, corrupt).
    public static let resourceRemoved = "resource.removed"

    /// The events that end a job or a step: it sends exactly one of them.
    public static let finals: Set<String> = [succeeded, failed, cancelled]

    /// True for a name in ``finals``: three comparisons of short inline
    /// strings, not a hash (asked for every event the store appends).
    @inlinable
    public static func isFinal(_ name: String) -> Bool { name == succeeded || name == failed || name == cancelled }

    public static let all: Set<String> = [queued, started, retrying, progress, succeeded, skipped, failed, cancelled,
                                          resumed, groupDone, cacheUpdated, cacheRemoved, sharedUpdated, sharedRemoved,
                                          resourceStored, resourceRemoved]

    /// The prefix of the events programs send themselves (`events.emit`, the `emit` local job).
    public static let customPrefix = "custom."

    /// True for `custom.NAME`: a name after the prefix, of letters, digits and `._-`
    /// (at most 100 characters in all).
    public static func isCustom(_ name: String) -> Bool {
        guard name.hasPrefix(customPrefix), name.utf8.count > customPrefix.utf8.count, name.utf8.count <= 100 else {
            return false
        }
        return name.utf8.dropFirst(customPrefix.utf8.count).allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A)
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
        }
    }

    /// The members every event has (protocol §6), and `subscription`, which
    /// the notification carrying an event puts beside them: a custom event's
    /// fields may not repeat them (a client would read one or the other).
    public static let reservedFields: Set<String> = ["seq", "event", "jobId", "rootJobId", "stepPath", "time", "subscription"]
}
