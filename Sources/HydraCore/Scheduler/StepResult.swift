/// A finished step's result as its group keeps it: built, or still the
/// worker's unbuilt parts (see ``DeferredResult``), built only if someone
/// reads it (a reference, an event, the job's reader) and else encoded
/// straight to JSON with the group's result. Coordinator loop only.
enum StepResult: Sendable {
    case built(JSONValue)
    case deferred(any DeferredResult)

    /// The result; builds an unbuilt one (each time: keep it if needed twice).
    var value: JSONValue {
        switch self {
        case .built(let value): return value
        case .deferred(let deferred): return deferred.build()
        }
    }

    func encode(into out: inout [UInt8]) {
        switch self {
        case .built(let value): JSONWriter.write(value, into: &out)
        case .deferred(let deferred): deferred.encode(into: &out)
        }
    }
}
