import Foundation
import OrderedCollections

/// One event of protocol §6. Events of steps carry their root job's id and a
/// `stepPath`; `seq` is global and strictly increasing.
public struct HydraEvent: Sendable {
    public var seq: UInt64
    public var name: String
    public var jobId: String
    public var rootJobId: String
    public var stepPath: String
    /// Seconds since 1970.
    public var time: Double
    /// The event's own fields (`result`, `error`, `worker`, `key`, ...).
    public var fields: OrderedDictionary<String, JSONValue>

    public init(seq: UInt64, name: String, jobId: String, rootJobId: String, stepPath: String, time: Double,
                fields: OrderedDictionary<String, JSONValue>) {
        self.seq = seq
        self.name = name
        self.jobId = jobId
        self.rootJobId = rootJobId
        self.stepPath = stepPath
        self.time = time
        self.fields = fields
    }

    /// True for events about jobs and groups (not shared data or the cache).
    public var isJobEvent: Bool { name.hasPrefix("job.") || name == EventName.groupDone }

    /// `{"seq", "event", "jobId", "rootJobId", "stepPath", "time", ...fields}`.
    /// The ids are always present (protocol §6): empty for shared-data and cache events.
    public var json: JSONValue {
        var o = OrderedDictionary<String, JSONValue>()
        o.reserveCapacity(6 + fields.count)
        o["seq"] = .int(Int(seq))
        o["event"] = .string(name)
        o["jobId"] = .string(jobId)
        o["rootJobId"] = .string(rootJobId)
        o["stepPath"] = .string(stepPath)
        o["time"] = .string(HydraEvent.format(time))
        for (key, value) in fields { o[key] = value }
        return .object(o)
    }

    /// RFC 3339 UTC with milliseconds: `2026-11-22T10:00:00.123Z`.
    public static func format(_ time: Double) -> String {
        var seconds = time_t(time.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let millis = Int((time - time.rounded(.down)) * 1000)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1,
                      Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), millis)
    }
}
