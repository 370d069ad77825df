import OrderedCollections

/// A finished job as `job.result` reports it.
public struct JobResult: Sendable {
    public var jobId: String
    public var state: JobState
    /// The job's result. A single remote job's is kept unbuilt until read (when
    /// no event needed it): reading builds it, every time, on the reader's
    /// thread; keep the value when you read it more than once.
    public var result: JSONValue? {
        get {
            switch storage {
            case .value(let value): return value
            case .deferred(let deferred): return deferred.build()
            }
        }
        set { storage = .value(newValue) }
    }
    public var error: JobError?
    private var storage: Storage

    private enum Storage: Sendable {
        case value(JSONValue?)
        case deferred(any DeferredResult)
    }

    public init(jobId: String, state: JobState, result: JSONValue?, error: JobError?) {
        self.jobId = jobId
        self.state = state
        storage = .value(result)
        self.error = error
    }

    /// A succeeded job whose result is built when read.
    init(jobId: String, deferred: any DeferredResult) {
        self.jobId = jobId
        state = .succeeded
        storage = .deferred(deferred)
        error = nil
    }

    /// The JSON text of ``json``, written straight from an unbuilt result
    /// (what the journal stores: no tree is built for it). `result`: the
    /// result's JSON when the caller already has it.
    public func encodedJSON(result encoded: [UInt8]? = nil) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64 + (encoded?.count ?? 192))
        out.append(contentsOf: #"{"jobId":"#.utf8)
        JSONWriter.writeString(jobId, into: &out)
        out.append(contentsOf: #","state":"#.utf8)
        JSONWriter.writeString(state.rawValue, into: &out)
        switch storage {
        case _ where encoded != nil:
            out.append(contentsOf: #","result":"#.utf8)
            out.append(contentsOf: encoded!)
        case .deferred(let deferred):
            out.append(contentsOf: #","result":"#.utf8)
            deferred.encode(into: &out)
        case .value(let value?):
            out.append(contentsOf: #","result":"#.utf8)
            JSONWriter.write(value, into: &out)
        case .value(nil):
            break
        }
        if let error {
            out.append(contentsOf: #","error":"#.utf8)
            JSONWriter.write(error.json, into: &out)
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// `{"jobId", "state", "result"?, "error"?}`.
    public var json: JSONValue {
        var o: OrderedDictionary<String, JSONValue> = ["jobId": .string(jobId), "state": .string(state.rawValue)]
        if let result { o["result"] = result }
        if let error { o["error"] = error.json }
        return .object(o)
    }
}
