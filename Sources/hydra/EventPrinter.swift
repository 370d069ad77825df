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

    /// An event, or a tick of the clock (the progress line's elapsed time and
    /// steps in flight are redrawn while no event comes).
    private enum Item: Sendable {
        case event(HydraEvent)
        case tick
    }

    private let continuation: AsyncStream<Item>.Continuation
    private let printing: Task<Void, Never>
    private let ticking: Task<Void, Never>?

    /// How often the progress line is redrawn at the most, and at the least while it is shown.
    static let redrawSeconds = 0.2

    /// `totalSteps`: the job's leaf steps when known, for `done/total`.
    init(style: Style, progress: Bool, totalSteps: Int?) {
        let (stream, continuation) = AsyncStream<Item>.makeStream()
        self.continuation = continuation
        ticking = progress ? Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(Int(EventPrinter.redrawSeconds * 1000)))
                continuation.yield(.tick)
            }
        } : nil
        printing = Task {
            var tracker = ProgressTracker(total: totalSteps)
            var lastDraw = Date.distantPast
            for await item in stream {
                if case .event(let event) = item {
                    if style != .none {
                        if progress { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
                        writeLine(style == .pretty ? EventLine.string(event.json) : JSONWriter.string(event.json))
                    }
                    guard progress else { continue }
                    tracker.observe(event)
                }
                if Date().timeIntervalSince(lastDraw) >= EventPrinter.redrawSeconds * 0.9 {
                    lastDraw = Date()
                    FileHandle.standardError.write(Data("\r\u{1B}[K\(tracker.line)".utf8))
                }
            }
            if progress { FileHandle.standardError.write(Data("\r\u{1B}[K\(tracker.line)\n".utf8)) }
        }
    }

    func receive(_ event: HydraEvent) { continuation.yield(.event(event)) }

    /// Prints what is buffered and ends.
    func finish() async {
        ticking?.cancel()
        continuation.finish()
        await printing.value
    }
}
