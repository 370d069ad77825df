/// A finished step as the journal hands it to the store: its state, and its
/// result and error already encoded as JSON on the coordinator (a remote
/// step's straight from the worker's unbuilt result), so neither the
/// coordinator nor the store writer builds a tree only to journal it. Read
/// back as a ``StoredStep``.
public struct EncodedStep: Sendable, Equatable {
    public var state: JobState
    /// The result's JSON (a failed group's partial results too), or nil.
    public var result: [UInt8]?
    /// The error's JSON, or nil.
    public var error: [UInt8]?

    public init(state: JobState, result: [UInt8]?, error: [UInt8]?) {
        self.state = state
        self.result = result
        self.error = error
    }

    /// A stored step, encoded (tools and tests).
    public init(_ step: StoredStep) {
        self.init(state: step.state, result: step.result.map(JSONWriter.bytes), error: step.error.map(JSONWriter.bytes))
    }

    /// The record of a step that ended with `outcome`; `deferred`: a
    /// success's unbuilt result, encoded without building it.
    init(_ outcome: StepOutcome, deferred: (any DeferredResult)?) {
        switch outcome {
        case .success(let result):
            var bytes: [UInt8] = []
            if let deferred { deferred.encode(into: &bytes) } else { JSONWriter.write(result, into: &bytes) }
            self.init(state: .succeeded, result: bytes, error: nil)
        case .failure(let error, let partial):
            self.init(state: error.kind == .cancelled ? .cancelled : .failed, result: partial.map(JSONWriter.bytes),
                      error: JSONWriter.bytes(error.json))
        }
    }
}
