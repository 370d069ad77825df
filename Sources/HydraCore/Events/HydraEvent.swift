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
    ///
    /// An event whose emitter had its fields already encoded (a root job's
    /// `job.succeeded`, its result straight from the worker's unbuilt one)
    /// builds them here, on the reader's thread, each time they are read:
    /// the store keeps ``encodedFields`` and never builds them.
    public var fields: OrderedDictionary<String, JSONValue> {
        get {
            switch storage {
            case .built(let fields): return fields
            case .deferred(let build): return build()
            }
        }
        set {
            storage = .built(newValue)
            encodedFields = nil
        }
    }

    /// The fields as the JSON text of an object, when the emitter had them
    /// encoded (see ``fields``); nil otherwise.
    public private(set) var encodedFields: [UInt8]?

    private var storage: Storage

    private enum Storage: Sendable {
        case built(OrderedDictionary<String, JSONValue>)
        case deferred(@Sendable () -> OrderedDictionary<String, JSONValue>)
    }

    public init(seq: UInt64, name: String, jobId: String, rootJobId: String, stepPath: String, time: Double,
                fields: OrderedDictionary<String, JSONValue>) {
        self.init(seq: seq, name: name, jobId: jobId, rootJobId: rootJobId, stepPath: stepPath, time: time,
                  storage: .built(fields), encodedFields: nil)
    }

    /// An event whose fields are `encodedFields` (a JSON object's text), built
    /// by `build` when someone reads ``fields``. The two must agree.
    public init(seq: UInt64, name: String, jobId: String, rootJobId: String, stepPath: String, time: Double,
                encodedFields: [UInt8], build: @escaping @Sendable () -> OrderedDictionary<String, JSONValue>) {
        self.init(seq: seq, name: name, jobId: jobId, rootJobId: rootJobId, stepPath: stepPath, time: time,
                  storage: .deferred(build), encodedFields: encodedFields)
    }

    private init(seq: UInt64, name: String, jobId: String, rootJobId: String, stepPath: String, time: Double,
                 storage: Storage, encodedFields: [UInt8]?) {
        self.seq = seq
        self.name = name
        self.jobId = jobId
        self.rootJobId = rootJobId
        self.stepPath = stepPath
        self.time = time
        self.storage = storage
        self.encodedFields = encodedFields
    }

    /// True for events about jobs and groups (not shared data or the cache),
    /// custom events sent from a job included.
    public var isJobEvent: Bool {
        name.hasPrefix("job.") || name == EventName.groupDone
            || (!rootJobId.isEmpty && name.hasPrefix(EventName.customPrefix))
    }

    /// `{"seq", "event", "jobId", "rootJobId", "stepPath", "time", ...fields}`.
    /// The ids are always present (protocol §6): empty for shared-data and cache events.
    public var json: JSONValue {
        var o = OrderedDictionary<String, JSONValue>()
        let fields = self.fields
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

    /// The JSON text of ``json``, written from ``encodedFields`` when the
    /// event has them (nothing is built).
    public func encodedJSON() -> [UInt8] {
        guard let encodedFields, encodedFields.count >= 2 else { return JSONWriter.bytes(json) }
        var out: [UInt8] = []
        out.reserveCapacity(encodedFields.count + 160)
        out.append(contentsOf: #"{"seq":"#.utf8)
        out.append(contentsOf: String(seq).utf8)
        out.append(contentsOf: #","event":"#.utf8)
        JSONWriter.writeString(name, into: &out)
        out.append(contentsOf: #","jobId":"#.utf8)
        JSONWriter.writeString(jobId, into: &out)
        out.append(contentsOf: #","rootJobId":"#.utf8)
        JSONWriter.writeString(rootJobId, into: &out)
        out.append(contentsOf: #","stepPath":"#.utf8)
        JSONWriter.writeString(stepPath, into: &out)
        out.append(contentsOf: #","time":"#.utf8)
        JSONWriter.writeString(HydraEvent.format(time), into: &out)
        if encodedFields.count > 2 {
            // `{…}` without its opening brace, after a comma.
            out.append(UInt8(ascii: ","))
            out.append(contentsOf: encodedFields[1...])
        } else {
            out.append(UInt8(ascii: "}"))
        }
        return out
    }

    /// RFC 3339 UTC with milliseconds: `2026-11-22T10:00:00.123Z`. The one
    /// format of every time on the wire (event `time`, `createdAt`, a cached
    /// response's `storedAt`/`expiresAt`, a token's `expiresAt`). Times outside
    /// years 1970–9999 (a cache lifetime of `Int.max` seconds) are clamped to
    /// that range, so a four-digit year always comes out and nothing traps.
    public static func format(_ time: Double) -> String {
        let time = time.isNaN ? 0 : min(max(time, 0), 253_402_300_799.999)
        var seconds = time_t(time.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let millis = min(999, max(0, Int((time - time.rounded(.down)) * 1000)))
        // Written digit by digit: Foundation's `String(format:)` took ~6 µs a call,
        // paid by every event on the wire and every result that carries a time.
        return String(unsafeUninitializedCapacity: 24) { out in
            func put(_ value: Int, width: Int, at start: Int) {
                var value = value
                for i in stride(from: start + width - 1, through: start, by: -1) {
                    out[i] = UInt8(truncatingIfNeeded: 48 + value % 10)
                    value /= 10
                }
            }
            put(Int(parts.tm_year) + 1900, width: 4, at: 0)
            out[4] = UInt8(ascii: "-")
            put(Int(parts.tm_mon) + 1, width: 2, at: 5)
            out[7] = UInt8(ascii: "-")
            put(Int(parts.tm_mday), width: 2, at: 8)
            out[10] = UInt8(ascii: "T")
            put(Int(parts.tm_hour), width: 2, at: 11)
            out[13] = UInt8(ascii: ":")
            put(Int(parts.tm_min), width: 2, at: 14)
            out[16] = UInt8(ascii: ":")
            put(Int(parts.tm_sec), width: 2, at: 17)
            out[19] = UInt8(ascii: ".")
            put(millis, width: 3, at: 20)
            out[23] = UInt8(ascii: "Z")
            return 24
        }
    }
}
