import Foundation
import HydraLoop
import Testing

/// Runs a suite's tests on threads of their own instead of Swift's
/// cooperative pool, a few tests at a time.
///
/// The cooperative pool has one thread per core (two on the CI machine).
/// Many tests here block the thread they run on for seconds: they wait for a
/// server process, read a socket, poll a folder. On the pool, two such tests
/// stall every other test of the run, and an awaited engine result resumes
/// late: in a full run, tests of a few milliseconds reported "passed after
/// 25 seconds" together. Under this trait a test prefers
/// ``ThreadPerJobExecutor``: its body, and every resumption after an `await`,
/// runs on a thread of its own, so blocking costs nobody else. Task-local
/// values (what `#expect` attributes a failure by) stay with the task.
///
/// Unbounded, every test of the run would start at once; many check what a
/// server does while requests are in flight, and on two cores (ten times
/// slower under a sanitizer) they would no longer see it. So at most
/// ``TestSlots/shared``'s count of them run at a time.
struct OwnThreads: SuiteTrait, TestTrait, TestScoping {
    /// Children inherit it: every test of a suite so marked runs on its own threads.
    var isRecursive: Bool { true }

    func provideScope(for test: Test, testCase: Test.Case?,
                      performing function: @Sendable () async throws -> Void) async throws {
        // Only the test case's own scope moves; the suite's just passes through.
        guard testCase != nil else { return try await function() }
        await TestSlots.shared.acquire()
        defer { TestSlots.shared.release() }
        try await withTaskExecutorPreference(ThreadPerJobExecutor.shared) {
            try await function()
        }
    }
}

extension Trait where Self == OwnThreads {
    /// Runs every test of the suite off the cooperative pool (see ``OwnThreads``).
    static var ownThreads: Self { OwnThreads() }
}

/// How many tests run at a time: `HYDRA_TEST_PARALLEL` when set, else 8,
/// or 3 under a sanitizer. Waiting tests queue in order of arrival.
final class TestSlots: Sendable {
    static let shared = TestSlots(count: {
        if let text = ProcessInfo.processInfo.environment["HYDRA_TEST_PARALLEL"], let n = Int(text), n > 0 { return n }
        return BuiltProducts.sanitized ? 3 : 8
    }())

    private struct State {
        var free: Int
        var waiting: [CheckedContinuation<Void, Never>] = []
    }
    private let state: Locked<State>

    init(count: Int) { state = Locked(State(free: count)) }

    func acquire() async {
        await withCheckedContinuation { (slot: CheckedContinuation<Void, Never>) in
            let now = state.withLock { state -> Bool in
                guard state.free > 0 else {
                    state.waiting.append(slot)
                    return false
                }
                state.free -= 1
                return true
            }
            if now { slot.resume() }
        }
    }

    func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.waiting.isEmpty else {
                state.free += 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}

/// A task executor that runs each job it is given on a new thread.
///
/// Made for tests that block: a thread costs tens of microseconds, which
/// only matters to a test that awaits thousands of times.
final class ThreadPerJobExecutor: TaskExecutor {
    static let shared = ThreadPerJobExecutor()

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        let thread = Thread { job.runSynchronously(on: executor) }
        // Tests build deep JSON recursively, as the engine's own threads may.
        thread.stackSize = 8 << 20
        thread.start()
    }
}
