import Foundation
import Hydra
import Synchronization

/// Prints events (JSON lines, or readable lines with `--pretty`) and/or draws a
/// live progress line on stderr (steps done/total, in flight, failed, retries,
/// elapsed). Events arrive on the coordinator thread and are handed to a printing
/// task, so the engine never waits on the terminal.
final class EventPrinter: EventSink {
    /// How events themselves are printed on stdout.
    enum Style: Sendable {
        case none, json, pretty
    }

    private let continuation: AsyncStream<HydraEvent>.Continuation
    private let printing: Task<Void, Never>

    /// `totalSteps`: the job's leaf steps when known, for `done/total`.
    init(style: Style, progress: Bool, totalSteps: Int?) {
        let (stream, continuation) = AsyncStream<HydraEvent>.makeStream()
        self.continuation = continuation
        printing = Task {
            var tracker = ProgressTracker(total: totalSteps)
            var lastDraw = Date.distantPast
            for await event in stream {
                if style != .none {
                    if progress { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
                    writeLine(style == .pretty ? EventLine.string(event.json) : JSONWriter.string(event.json))
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
