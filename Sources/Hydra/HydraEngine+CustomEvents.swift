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
        try HydraEngine.checkCustom(name, fields)
        return scheduler.bus.emit(name, jobId: jobId, rootJobId: jobId, stepPath: stepPath) { fields }
    }

    /// Refuses what a custom event may not be, naming the field.
    private static func checkCustom(_ name: String, _ fields: OrderedDictionary<String, JSONValue>) throws(ValidationError) {
        guard EventName.isCustom(name) else {
            throw ValidationError(path: "event", "expected custom.NAME (letters, digits, '.', '_', '-'; at most 100 characters)")
        }
        if let reserved = fields.keys.first(where: EventName.reservedFields.contains) {
            throw ValidationError(path: "fields.\(reserved)", "every event has this member; choose another name")
        }
    }

    /// The `emit {event, fields?}` local job: sends a custom event from inside a
    /// graph and answers `{"seq"}`. The event goes to the coordinator with the
    /// step's own reports (``TaskHandle/emit(_:)``), so it comes after the
    /// step's `job.started`; the seq is known there, so the result is built there too.
    func registerEmitJob() {
        register(localJob: "emit", .onWorker { call, handle in
            guard let name = call.input["event"]?.stringValue else {
                handle.finish(.failure(JobError(.invalid, "emit: input.event: expected custom.NAME")))
                return
            }
            var fields: OrderedDictionary<String, JSONValue> = [:]
            if let given = call.input["fields"] {
                guard case .object(let members) = given else {
                    handle.finish(.failure(JobError(.invalid, "emit: input.fields: expected object")))
                    return
                }
                fields = members
            }
            do throws(ValidationError) {
                try HydraEngine.checkCustom(name, fields)
            } catch {
                handle.finish(.failure(JobError(.invalid, "emit: input.\(error.path): \(error.fullReason)")))
                return
            }
            let emission = CustomEmission(name: name, fields: fields)
            handle.emit(emission)
            handle.succeed(building: EmittedEvent(emission: emission))
        })
    }
}

/// The `emit` job's result, `{"seq"}`: built on the coordinator, after it issued the event.
private final class EmittedEvent: DeferredResult {
    let emission: CustomEmission
    init(emission: CustomEmission) { self.emission = emission }
    func build() -> JSONValue { ["seq": .int(Int(clamping: emission.seq))] }
}
