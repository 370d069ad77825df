import Dispatch
import Foundation
import HydraCore
import HydraLoop
import Synchronization

/// Copies committed pages from the WAL into the database file on a thread
/// of its own (`hydra-checkpt`), so the writer thread never waits for those
/// writes and their fsync: with SQLite's automatic checkpoints, every
/// thousandth page stalled a commit, and single-call submits, one commit
/// each, felt every stall.
///
/// The writer asks for a checkpoint once the WAL passes ``backgroundFrames``. Checkpoints here are passive: they copy
/// what is committed and never block the writer. A WAL that keeps growing
/// because commits never pause (SQLite restarts the WAL only once a
/// checkpoint has caught up with the last commit) is checkpointed by the
/// writer itself at ``writerFrames``; by then most pages are already copied.
/// Durability does not change: a commit is durable once in the WAL.
final class Checkpointer: @unchecked Sendable {
    // @unchecked: `connection` is used only on the checkpoint thread; the
    // rest is a lock, atomics, a semaphore and a group.
    private let connection: SQLiteConnection
    private let state = Locked<(requested: Bool, closed: Bool)>((false, false))
    /// The WAL's size in frames when the last background checkpoint ran (0: none
    /// since the WAL started over): everything before it is copied.
    private let copiedThrough = Atomic<Int>(0)
    private let wake = DispatchSemaphore(value: 0)
    private let running = DispatchGroup()
    /// Commits that found the WAL past ``backgroundFrames``, and checkpoints
    /// run on this thread (for tests: one is not run for each of the other).
    let commitsPastThreshold = Atomic<Int>(0)
    let checkpointsRun = Atomic<Int>(0)

    /// WAL frames (about 32 MiB) after which the writer asks for a background
    /// checkpoint. Not SQLite's 1,000: the hot pages (the jobs' rows, the right
    /// edges of the indexes) are rewritten in the WAL by commit after commit, and
    /// a longer WAL copies each of them once for more commits: the checkpoint
    /// thread's CPU per durable submit fell by half (16 clients, single calls).
    static let backgroundFrames = 8000
    /// WAL frames after which the writer checkpoints itself (about 64 MiB of 4 KiB pages).
    static let writerFrames = 16_000
    /// Frames the WAL grows by, past ``backgroundFrames``, before the next
    /// background checkpoint. Asked for after every commit, checkpoints copied
    /// the pages each commit rewrites (the right edges of the tables and
    /// indexes) once per commit, and woke this thread as often: its CPU per
    /// durable submit was 2.7–14 µs, and is 1.3–1.9 µs (16 clients, single calls).
    static let stepFrames = 2000

    /// Called by the writer after each commit with the WAL's size in frames:
    /// asks for a background checkpoint when due. Returns true when the
    /// writer must checkpoint itself (past ``writerFrames``). Writer thread.
    func walGrew(to frames: Int) -> Bool {
        if frames >= Self.backgroundFrames {
            commitsPastThreshold.add(1, ordering: .relaxed)
            let copied = copiedThrough.load(ordering: .relaxed)
            // A WAL smaller than at the last checkpoint has started over.
            if frames < copied || frames - copied >= Self.stepFrames { request() }
        }
        return frames >= Self.writerFrames
    }

    /// Takes over `connection` (its own, to the same database).
    init(connection: SQLiteConnection) {
        self.connection = connection
    }

    func start() {
        running.enter()
        let thread = Thread { [self] in run() }
        thread.name = "hydra-checkpt"
        thread.start()
    }

    /// Asks for a checkpoint soon. Any thread; cheap when one is already asked for.
    func request() {
        let signal = state.withLock { s -> Bool in
            if s.requested || s.closed { return false }
            s.requested = true
            return true
        }
        if signal { wake.signal() }
    }

    /// Stops the thread (after the checkpoint in progress) and closes its connection. Idempotent.
    func close() {
        let first = state.withLock { s -> Bool in
            defer { s.closed = true }
            return !s.closed
        }
        if first { wake.signal() }
        running.wait()
    }

    private func run() {
        nameCurrentThread("hydra-checkpt")
        var reported = false
        while true {
            wake.wait()
            let closed = state.withLock { s -> Bool in
                s.requested = false
                return s.closed
            }
            if closed { break }
            do throws(StoreError) {
                copiedThrough.store(try connection.checkpoint(), ordering: .relaxed)
                checkpointsRun.add(1, ordering: .relaxed)
            } catch {
                // The writer checkpoints itself past `writerFrames`: say it once, go on.
                if !reported { StoreWriter.report("background checkpoint failed: \(error)") }
                reported = true
            }
        }
        connection.close()
        running.leave()
    }
}
