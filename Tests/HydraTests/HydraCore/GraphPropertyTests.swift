import HydraLoop
import Foundation
import Synchronization
import Testing

@testable import Hydra

/// Every way a job can end, by generated graphs: whatever the shape, the
/// steps and the timing, every root reaches exactly one final state, and
/// every step that was queued has exactly one final event.
@Suite(.ownThreads) struct GraphPropertyTests {
    /// The issue's cases: each step of a group fails while the group starts it.
    @Test func groupsWhoseStepsFailAsTheyStartStillFinish() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let specs = [
            #"{"type":"serial","steps":[{"type":"local","name":"echo","input":"${input.a}"},{"type":"local","name":"echo","input":1}]}"#,
            #"{"type":"concurrent","steps":[{"type":"local","name":"echo","input":"${input.a}"},{"type":"local","name":"echo","input":"${input.b}"}]}"#,
            #"{"type":"serial","steps":[{"type":"local","name":"echo","worker":"${input.w}"},{"type":"local","name":"echo"}]}"#,
            #"{"type":"serial","stopWhenFailed":false,"steps":[{"type":"local","name":"echo","input":"${input.a}"},{"type":"serial","steps":[{"type":"local","name":"echo","input":"${input.b}"}]}]}"#,
            #"{"type":"concurrent","maxConcurrency":1,"steps":[{"type":"concurrent","steps":[]},{"type":"local","name":"echo","input":"${input.x}"}]}"#,
        ]
        for text in specs {
            let id = try engine.submit(spec(text))
            let result = try await finalResult(of: id, in: engine)
            #expect(result.state == .failed, "\(text)")
            #expect(result.error?.kind == .invalid, "\(text)")
        }
        // The shipped named job run without the input it needs.
        let shipped = try makeEngine(jobs: PackageRoot.url.appendingPathComponent("jobs").path)
        defer { shipped.shutdown() }
        let id = try shipped.submit(spec(#"{"type":"job","name":"login-and-fetch"}"#))
        let result = try await finalResult(of: id, in: shipped)
        #expect(result.state == .failed)
        #expect(result.error?.kind == .invalid)
    }

    @Test(arguments: [1, 2, 3, 4])
    func generatedGraphsAlwaysEndExactlyOnce(round: Int) async throws {
        let seed = ProcessInfo.processInfo.environment["HYDRA_PROPERTY_SEED"].flatMap(UInt64.init) ?? 0x4859_4452_4100
        var generator = GraphGenerator(seed: seed &+ UInt64(round) &* 0x9E37_79B9_7F4A_7C15)
        let engine = try makeEngine(#", "workers": [{"name":"local","kind":"local","threads":2},{"name":"rest","kind":"remote"}]"#)
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)

        var jobs: [(id: String, text: String)] = []
        for _ in 0..<60 {
            let text = generator.graph(depth: 0).text
            jobs.append((try engine.submit(spec(text)), text))
        }
        // A fifth are cancelled a moment after their submit, while their steps run.
        for job in jobs where generator.chance(0.2) {
            try await Task.sleep(for: .milliseconds(generator.int(0...15)))
            _ = await engine.cancel(job.id)
        }
        for job in jobs {
            let result = try await finalResult(of: job.id, in: engine)
            let context = "seed \(seed) round \(round): \(job.text)"
            #expect(result.state.isFinal, "\(context)")
            check(events: log.all.filter { $0.rootJobId == job.id }, final: result.state, context: context)
        }
    }

    /// Events of one root: per step path, `job.queued` first, one final event,
    /// nothing after it; a group's `group.done` after its steps' final events.
    private func check(events: [HydraEvent], final: JobState, context: String) {
        let finals: Set<String> = ["job.succeeded", "job.failed", "job.cancelled"]
        var byPath: [String: [HydraEvent]] = [:]
        for event in events { byPath[event.stepPath, default: []].append(event) }
        #expect(events.map(\.seq) == events.map(\.seq).sorted(), "\(context)")
        for (path, list) in byPath {
            let names = list.map(\.name)
            #expect(names.first == "job.queued", "\(path): \(names) — \(context)")
            #expect(names.filter(finals.contains).count == 1, "\(path): \(names) — \(context)")
            #expect(finals.contains(names.last ?? ""), "\(path): \(names) — \(context)")
            #expect(names.filter { $0 == "group.done" }.count <= 1, "\(path): \(names) — \(context)")
            if let done = list.first(where: { $0.name == "group.done" }) {
                let prefix = path.isEmpty ? "" : path + "."
                for (child, childEvents) in byPath where child.hasPrefix(prefix) && child != path {
                    let childFinal = childEvents.first { finals.contains($0.name) }
                    #expect(childFinal.map { $0.seq < done.seq } == true, "\(child) after group.done of \(path) — \(context)")
                }
            }
        }
        let rootFinal = byPath[""]?.last?.name
        #expect(rootFinal == "job.\(final.rawValue)", "root ended \(rootFinal ?? "without a final event") — \(context)")
    }
}

/// Waits for a job's final result, failing (instead of hanging) after `seconds`.
/// The wait on the engine is left behind when the time runs out.
func finalResult(of id: String, in engine: HydraEngine, seconds: Double = 20) async throws -> JobResult {
    guard let result = await firstWithin(seconds: seconds, { await engine.result(of: id) }) else {
        Issue.record("job \(id) did not finish within \(seconds) s (state: \(String(describing: engine.status(of: id)?.state)))")
        throw CancellationError()
    }
    return result
}

/// Random job graphs from a seed (SplitMix64): serial and concurrent groups
/// nested up to four deep, with leaves that succeed, fail as they start (a
/// reference or a worker that does not resolve), fail later, are slow, or
/// time out; local and remote (against the test server).
struct GraphGenerator {
    private var random: SeededRandom

    init(seed: UInt64) { random = SeededRandom(seed: seed) }

    mutating func next() -> UInt64 { random.next() }

    mutating func int(_ range: ClosedRange<Int>) -> Int {
        range.lowerBound + Int(next() % UInt64(range.count))
    }

    mutating func chance(_ p: Double) -> Bool { Double(next() % 10_000) < p * 10_000 }

    mutating func graph(depth: Int) -> (text: String, isGroup: Bool) {
        if depth > 0 && (depth >= 4 || chance(0.55)) { return (leaf(), false) }
        let kind = chance(0.5) ? "serial" : "concurrent"
        var members = [#""type":"\#(kind)""#]
        if chance(0.5) { members.append(#""stopWhenFailed":\#(chance(0.5))"#) }
        if kind == "concurrent" && chance(0.3) { members.append(#""maxConcurrency":\#(int(1...3))"#) }
        if chance(0.1) { members.append(#""timeoutMs":\#(int(5...40))"#) }
        let steps = (0..<int(0...4)).map { _ in graph(depth: depth + 1).text }
        members.append(#""steps":[\#(steps.joined(separator: ","))]"#)
        return ("{" + members.joined(separator: ",") + "}", true)
    }

    mutating func leaf() -> String {
        switch int(0...12) {
        case 10: return #"{"type":"remote","endpoint":"/delay/\#(int(1...30))"}"#
        case 11: return #"{"type":"remote","endpoint":"/status/503"}"#
        case 12: return #"{"type":"remote","endpoint":"/delay/2000","timeoutMs":\#(int(5...30))}"#
        case 0: return #"{"type":"local","name":"echo","input":"${input.missing}"}"#
        case 1: return #"{"type":"local","name":"echo","worker":"${input.w}"}"#
        case 2: return #"{"type":"local","name":"fail","input":{"message":"boom"}}"#
        case 3: return #"{"type":"local","name":"delay","input":{"ms":\#(int(1...20))}}"#
        case 4: return #"{"type":"local","name":"delay","input":{"ms":2000},"timeoutMs":\#(int(1...20))}"#
        default: return #"{"type":"local","name":"echo","input":\#(int(0...99))}"#
        }
    }
}
