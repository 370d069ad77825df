import Foundation
import Hydra
import Synchronization

/// Prints events as JSON lines and/or draws a live progress line on stderr
/// (steps done/total, in flight, failed, elapsed). Events arrive on the
/// coordinator thread and are handed to a printing task, so the engine never
/// waits on the terminal.
final class EventPrinter: EventSink {
    private let continuation: AsyncStream<HydraEvent>.Continuation
    private let printing: Task<Void, Never>

    init(printEvents: Bool, progress: Bool) {
        let (stream, continuation) = AsyncStream<HydraEvent>.makeStream()
        self.continuation = continuation
        printing = Task {
            var tracker = ProgressTracker()
            var lastDraw = Date.distantPast
            for await event in stream {
                if printEvents {
                    if progress { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
                    writeLine(JSONWriter.string(event.json))
                }
                guard progress else { continue }
                tracker.observe(event)
                if Date().timeIntervalSince(lastDraw) > 0.1 {
                    lastDraw = Date()
                    FileHandle.standardError.write(Data("\r\u{1B}[K\(tracker.line)".utf8))
                }
            }
            if progress { FileHandle.standardError.write(Data("\r\u{1B}[K\(tracker.line)\n".utf8)) }
        }
    }

    func receive(_ event: HydraEvent) { continuation.yield(event) }

    /// Prints what is buffered and ends.
    func finish() async {
        continuation.finish()
        await printing.value
    }
}

/// Counts leaf steps from events for the progress line.
struct ProgressTracker {
    private let start = Date()
    private var running: Set<String> = []
    private var done = 0
    private var failed = 0
    var total: Int?

    mutating func observe(_ event: HydraEvent) {
        let key = event.rootJobId + "/" + event.stepPath
        switch event.name {
        case EventName.started where event.fields["worker"] != nil:
            running.insert(key)
        case EventName.succeeded, EventName.failed, EventName.cancelled:
            if running.remove(key) != nil || event.fields["worker"] != nil {
                done += 1
                if event.name != EventName.succeeded { failed += 1 }
            }
        case EventName.queued where event.stepPath.isEmpty:
            if let steps = event.fields["spec"]?["steps"]?.intValue { total = steps }
        default:
            break
        }
    }

    /// The same, for an event received as JSON (`hydra submit --follow`).
    mutating func observe(json event: JSONValue) {
        guard case .object(var fields) = event, let name = event["event"]?.stringValue else { return }
        for key in ["seq", "event", "jobId", "rootJobId", "stepPath", "time"] { fields[key] = nil }
        observe(HydraEvent(seq: UInt64(event["seq"]?.intValue ?? 0), name: name,
                           jobId: event["jobId"]?.stringValue ?? "", rootJobId: event["rootJobId"]?.stringValue ?? "",
                           stepPath: event["stepPath"]?.stringValue ?? "", time: 0, fields: fields))
    }

    var line: String {
        let elapsed = String(format: "%.1fs", Date().timeIntervalSince(start))
        return "hydra: steps \(done) done · \(running.count) in flight · \(failed) failed · \(elapsed)"
    }
}
