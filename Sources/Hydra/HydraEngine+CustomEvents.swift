import HydraCore
import HydraLocal
import OrderedCollections

/// Custom events (rest.md §6): a program's own `custom.NAME` events, sent to
/// every subscriber whose filter matches, like the engine's.
extension HydraEngine {
    /// Sends the custom event `name` (`custom.NAME`) with `fields`; returns its
    /// seq. From a job (`jobId`, `stepPath`), it carries that job's ids, so a
    /// subscription to the job receives it too. Errors name the field: `event`
    /// (not `custom.NAME`), `fields.seq` (a member every event has).
    @discardableResult
    public func emit(custom name: String, fields: OrderedDictionary<String, JSONValue> = [:],
                     jobId: String = "", stepPath: String = "") throws(ValidationError) -> UInt64 {
        guard EventName.isCustom(name) else {
            throw ValidationError(path: "event", "expected custom.NAME (letters, digits, '.', '_', '-'; at most 100 characters)")
        }
        if let reserved = fields.keys.first(where: EventName.reservedFields.contains) {
            throw ValidationError(path: "fields.\(reserved)", "every event has this member; choose another name")
        }
        return scheduler.bus.emit(name, jobId: jobId, rootJobId: jobId, stepPath: stepPath) { fields }
    }

    /// The `emit {event, fields?}` local job: sends a custom event from inside a
    /// graph and answers `{"seq"}`.
    func registerEmitJob() {
        register(localJob: "emit", .inline { [unowned self] call in
            guard let name = call.input["event"]?.stringValue else {
                throw JobError(.invalid, "emit: input.event: expected custom.NAME")
            }
            var fields: OrderedDictionary<String, JSONValue> = [:]
            if let given = call.input["fields"] {
                guard case .object(let members) = given else { throw JobError(.invalid, "emit: input.fields: expected object") }
                fields = members
            }
            do throws(ValidationError) {
                let seq = try emit(custom: name, fields: fields, jobId: call.jobId, stepPath: call.stepPath)
                return ["seq": .int(Int(seq))]
            } catch {
                throw JobError(.invalid, "emit: input.\(error.path): \(error.fullReason)")
            }
        })
    }
}
