import Foundation
import HydraLoop
import Testing

@testable import HydraCore

/// The coordinator on its own: a scheduler whose only manager is a scripted
/// executor (the test says when each step ends and how) and whose clock the
/// test moves, so timeouts and ordering are checked without waiting and
/// without a network. Real workers and loops; only the work is scripted.
@Suite(.ownThreads) struct CoordinatorTests {
    /// A step that ended before a restart sends no second final event after
    /// it, whichever: a group's end is not journaled, and its resumed run may
    /// end it otherwise (a black-box crash test saw `job.failed` then
    /// `job.cancelled` for one group step, replaying across the restart).
    @Test func aStepThatEndedBeforeARestartNeverEndsTwice() {
        var emitted = EmittedEvents()
        emitted.insert(stepPath: "0.1", name: EventName.failed)
        emitted.insert(stepPath: "0.1", name: EventName.groupDone)
        for final in [EventName.succeeded, EventName.failed, EventName.cancelled] {
            #expect(emitted.contains(stepPath: "0.1", name: final))
            #expect(!emitted.contains(stepPath: "0", name: final))
        }
        #expect(emitted.contains(stepPath: "0.1", name: EventName.groupDone))
        #expect(!emitted.contains(stepPath: "0.1", name: EventName.queued))
        emitted.insert(stepPath: "0.1", name: EventName.progress)  // not once per step: never suppressed
        #expect(!emitted.contains(stepPath: "0.1", name: EventName.progress))
    }

    @Test func aStepTimesOutWhenTheClockPassesItsLimit() async throws {
        let (scheduler, executor, clock) = try Self.make()
        defer { scheduler.shutdown() }
        let id = try scheduler.submit(try spec(#"{"type":"serial","steps":[{"type":"local","name":"x","timeoutMs":60000},{"type":"local","name":"y"}]}"#))
        try await waitUntil { executor.running == ["0"] }
        clock.advance(milliseconds: 59_999)
        try await waitUntil { clock.firedCount == 0 }
        #expect(scheduler.status(of: id)?.state == .running)
        clock.advance(milliseconds: 1)
        let result = try #require(await scheduler.result(of: id))
        #expect(result.state == .failed)
        #expect(result.error?.kind == .timeout)
        #expect(result.error?.stepPath == "0")
        // The executor was told to stop; the step after it never started.
        try await waitUntil { executor.cancelled == ["0"] }
        #expect(executor.started == ["0"])
    }

    @Test func timestampsComeFromTheClock() async throws {
        let (scheduler, executor, clock) = try Self.make()
        defer { scheduler.shutdown() }
        clock.set(now: 1_000)
        let id = try scheduler.submit(try spec(#"{"type":"local","name":"x"}"#))
        try await waitUntil { executor.running == [""] }
        // The coordinator stamps `startedAt` when the worker's start report reaches it.
        try await waitUntil { scheduler.status(of: id)?.startedAt != nil }
        clock.set(now: 1_005)
        executor.finish("", .success("done"))
        let result = await scheduler.result(of: id)
        #expect(result?.result == "done")
        let status = try #require(scheduler.status(of: id))
        #expect(status.createdAt == 1_000)
        #expect(status.startedAt == 1_000)
        #expect(status.finishedAt == 1_005)
    }

    @Test func concurrencyLimitAndResultOrderFollowTheSpecNotTheFinishOrder() async throws {
        let (scheduler, executor, _) = try Self.make()
        defer { scheduler.shutdown() }
        let steps = (0..<4).map { _ in #"{"type":"local","name":"x"}"# }.joined(separator: ",")
        let id = try scheduler.submit(try spec(#"{"type":"concurrent","maxConcurrency":2,"steps":[\#(steps)]}"#))
        try await waitUntil { executor.running == ["0", "1"] }
        executor.finish("1", .success(1))
        try await waitUntil { executor.running == ["0", "2"] }
        executor.finish("2", .success(2))
        executor.finish("0", .failure(JobError(.http, "HTTP 500", status: 500)))
        try await waitUntil { executor.running == ["3"] }
        executor.finish("3", .success(3))
        let result = try #require(await scheduler.result(of: id))
        #expect(result.state == .failed)
        #expect(result.result?["results"] == [nil, 1, 2, 3])
        #expect(result.error?.stepPath == "0")
        #expect(executor.started == ["0", "1", "2", "3"])
    }

    @Test func aReportAfterCancellationChangesNothing() async throws {
        let (scheduler, executor, _) = try Self.make()
        defer { scheduler.shutdown() }
        let finals = Locked(0)
        let sink = FinalCounter(count: finals)
        _ = scheduler.bus.subscribe(EventFilter(), sink: sink)
        let id = try scheduler.submit(try spec(#"{"type":"local","name":"x"}"#))
        try await waitUntil { executor.running == [""] }
        #expect(await scheduler.cancel(id) == .cancelled)
        try await waitUntil { executor.cancelled == [""] }
        // The executor reports success after all (the work had already ended).
        executor.finish("", .success("late"))
        let result = await scheduler.result(of: id)
        #expect(result?.state == .cancelled)
        #expect(result?.result == nil)
        try await waitUntil { executor.running.isEmpty }
        #expect(finals.withLock { $0 } == 1)
    }

    private static func make() throws -> (Scheduler, ScriptedExecutor, ManualClock) {
        let executor = ScriptedExecutor()
        let clock = ManualClock()
        let worker = Configuration.Worker(name: "w", kind: .local, maxConnections: 1, maxHostConnections: 1,
                                          maxActive: 8, threads: 1)
        let scheduler = try Scheduler(workers: [worker], managers: [ScriptedManager(executor: executor)],
                                      library: nil, clock: clock)
        return (scheduler, executor, clock)
    }
}

/// Counts root jobs' final events.
private final class FinalCounter: EventSink {
    let count: Locked<Int>
    init(count: Locked<Int>) { self.count = count }
    func receive(_ event: HydraEvent) {
        if event.stepPath.isEmpty && ["job.succeeded", "job.failed", "job.cancelled"].contains(event.name) {
            count.withLock { $0 += 1 }
        }
    }
}

/// A manager of `local` jobs whose executor the test drives.
private final class ScriptedManager: JobManager {
    let name = "scripted"
    let kinds: Set<JobKind> = [.local]
    let executor: ScriptedExecutor
    init(executor: ScriptedExecutor) { self.executor = executor }
    func validate(_ spec: JobSpec, path: String) throws(ValidationError) {}
    func makeExecutor(for worker: WorkerContext) -> any JobExecutor {
        executor.attach(worker.loop)
        return executor.onLoop
    }
}

/// Records what the worker starts and cancels, and finishes a step when the
/// test says so, on the worker's loop (as a real executor would).
final class ScriptedExecutor: Sendable {
    private struct State {
        var started: [String] = []
        var cancelled: [String] = []
        var loop: EventLoop?
    }
    private let state = Locked(State())
    /// The loop-confined part, handed to the worker.
    let onLoop = Confined()

    final class Confined: JobExecutor, @unchecked Sendable {
        /// Worker loop only.
        var handles: [String: TaskHandle] = [:]
        weak var owner: ScriptedExecutor?
        func start(_ task: WorkTask, handle: TaskHandle) {
            handles[task.stepPath] = handle
            owner?.state.withLock { $0.started.append(task.stepPath) }
        }
        func cancel(_ task: WorkTask, handle: TaskHandle) {
            owner?.state.withLock { $0.cancelled.append(task.stepPath) }
        }
        func close() {}
    }

    init() { onLoop.owner = self }

    func attach(_ loop: EventLoop) { state.withLock { $0.loop = loop } }

    var started: [String] { state.withLock { $0.started } }
    var cancelled: [String] { state.withLock { $0.cancelled } }
    /// Steps started and not finished, by path.
    var running: [String] {
        let loop = state.withLock { $0.loop }!
        let confined = onLoop
        return loop.submitAndWait { confined.handles.keys.sorted() }
    }

    func finish(_ stepPath: String, _ outcome: StepOutcome) {
        let loop = state.withLock { $0.loop }!
        let confined = onLoop
        let box = OutcomeBox(outcome)
        loop.submitAndWait { confined.handles.removeValue(forKey: stepPath)?.finish(box.outcome) }
    }

    private struct OutcomeBox: @unchecked Sendable {
        let outcome: StepOutcome
        init(_ outcome: StepOutcome) { self.outcome = outcome }
    }
}

/// A clock the test sets and moves; timers fire on the coordinator's loop
/// when `advance` passes their deadline.
final class ManualClock: CoordinatorClock {
    private struct Pending {
        let deadline: UInt64
        let loop: EventLoop
        let timer: Timer
    }
    private struct State {
        var now: Double = 1_700_000_000
        var elapsedMs: UInt64 = 0
        var pending: [Pending] = []
        var fired = 0
    }
    private let state = Locked(State())

    /// A scheduled timeout. Its body is touched only on the coordinator loop.
    final class Timer: CoordinatorTimer, @unchecked Sendable {
        var body: (() -> Void)?
        init(_ body: @escaping () -> Void) { self.body = body }
        func cancel() { body = nil }
    }

    func now() -> Double { state.withLock { $0.now } }
    func set(now: Double) { state.withLock { $0.now = now } }
    var firedCount: Int { state.withLock { $0.fired } }

    func schedule(afterMilliseconds milliseconds: UInt64, on loop: EventLoop,
                  _ body: @escaping () -> Void) -> any CoordinatorTimer {
        let timer = Timer(body)
        state.withLock { $0.pending.append(Pending(deadline: $0.elapsedMs + milliseconds, loop: loop, timer: timer)) }
        return timer
    }

    /// Moves time on; timers now due run on their loop before this returns.
    func advance(milliseconds: UInt64) {
        let due: [Pending] = state.withLock { s in
            s.elapsedMs += milliseconds
            s.now += Double(milliseconds) / 1000
            let due = s.pending.filter { $0.deadline <= s.elapsedMs }
            s.pending.removeAll { $0.deadline <= s.elapsedMs }
            s.fired += due.count
            return due
        }
        for pending in due {
            let timer = pending.timer
            pending.loop.submitAndWait {
                let body = timer.body
                timer.body = nil
                body?()
            }
        }
    }
}
