import Dispatch
import Foundation
import HydraCore
import HydraLoop
import Synchronization

/// The one writer thread of a store, with group commit.
///
/// Any thread enqueues writes and appends events (lock-protected arrays, then
/// a semaphore wakes the writer). The writer takes everything queued since it
/// last woke, runs it in one `BEGIN IMMEDIATE` transaction (the events first,
/// as one row: ``EventBatch``), commits, then calls every callback on its own
/// thread, so one fsync covers a whole batch (a batch's job inserts commit
/// first, in a transaction of their own, when the rest is only other jobs'
/// record: see ``insertsFirst(_:)``). A write that is kept with a
/// final event (a job's finish, a step's record) is held, under the same
/// lock, until that event is appended: the two are then taken together.
///
/// Writes rarely fail (a duplicate job id, a full disk), so a batch first
/// runs without savepoints; if a write fails, the batch is rolled back and
/// run again with each write in a savepoint of its own, so that write fails
/// alone and the others commit.
final class StoreWriter: @unchecked Sendable {
    // @unchecked: `connection` is used only on the writer thread; everything
    // else is a lock, a semaphore, a group or immutable.
    private let connection: SQLiteConnection
    private let state = Locked(State())
    private let wake = DispatchSemaphore(value: 0)
    private let running = DispatchGroup()
    /// The writer thread's `Thread`, while it runs: flush and close from a
    /// callback must not wait for the thread they run on.
    private let writerThread = Locked<ObjectIdentifier?>(nil)
    /// Runs on the writer thread for each write once committed, before any callback.
    private let committed: @Sendable (WriteOperation) -> Void
    /// Runs on the writer thread after each batch that had events: every
    /// event up to that seq is stored (or failed to be, reported on stderr).
    private let eventsWritten: @Sendable (UInt64) -> Void
    /// Job starts not written yet (writer thread only): see ``StartMarks``.
    private var startMarks = StartMarks()
    /// Writes are kept through a transient failure (writer thread only): said once on stderr, and when it ends.
    private var retaining = false
    /// The last commit kept its writes for later (writer thread only; see ``drain()``).
    private var retainedInLastCommit = false
    /// The highest event seq stored (writer thread only): an event appended
    /// again is left out (see ``EventBatch/insert(_:after:on:)``).
    private var eventsStoredThrough: Int

    private struct State {
        var queue: [WriteOperation] = []
        /// Events appended since the last batch, in `seq` order.
        var events: [EncodedEvent] = []
        /// A wake-up is pending: the next writes need not signal again.
        var signalled = false
        /// Someone waits for a queued write (a callback, a flush, a close):
        /// the writer must not linger (see ``lingerMicroseconds``).
        var urgent = false
        var closed = false
        /// Writes that go with a final event not appended yet, by job and step
        /// (see ``StoreWriter/enqueue(_:withFinalEventOf:stepPath:)``), with when they were held (uptime ns).
        var held: [HeldKey: (operation: WriteOperation, since: UInt64)] = [:]

        /// Moves the write held for `event` (a final event: the job's or a
        /// step's) to the queue; true when that write is urgent.
        mutating func releaseHeld(for event: EncodedEvent) -> Bool {
            guard EventName.isFinal(event.name),
                  let write = held.removeValue(forKey: HeldKey(jobId: event.rootJobId, stepPath: event.stepPath)) else { return false }
            queue.append(write.operation)
            return write.operation.hasCallback || write.operation.isStep
        }

        /// Moves held writes to the queue: all of them, or those held since before `before`.
        mutating func releaseHeld(before: UInt64 = .max) {
            for (key, write) in held where write.since < before {
                queue.append(write.operation)
                held[key] = nil
            }
        }
    }

    /// A held write's job and step. Two strings, not one joined: a joined
    /// key (16 bytes and more) was a heap string made twice per finished job.
    struct HeldKey: Hashable {
        let jobId: String
        let stepPath: String
    }

    /// How long a write waits for its final event at most: the event is
    /// appended right after it by the same thread, so only a bug could make
    /// it wait longer, and the write is not to be lost for that.
    static let maxHoldNanoseconds: UInt64 = 1_000_000_000

    /// The failure of every call on a closed store.
    static let closedError = StoreError.closed

    /// Takes over `connection` (migrated, not used by anyone else). Call `start()` next.
    init(connection: SQLiteConnection, committed: @escaping @Sendable (WriteOperation) -> Void,
         eventsWritten: @escaping @Sendable (UInt64) -> Void = { _ in }) throws(StoreError) {
        self.connection = connection
        eventsStoredThrough = try EventBatch.lastSeq(on: connection)
        self.committed = committed
        self.eventsWritten = eventsWritten
    }

    /// Starts the writer thread (8 MiB of stack: JSON of deeply nested specs is written recursively).
    func start() {
        running.enter()
        let thread = Thread { [self] in run() }
        thread.name = "hydra-store"
        thread.stackSize = 8 << 20
        thread.start()
    }

    /// Queues a write. Any thread. On a closed store, the callback gets the
    /// failure at once, on the calling thread.
    func enqueue(_ operation: WriteOperation) {
        // A finished step is not held either: a graph resumed after a crash
        // restarts after the steps whose records were committed.
        let urgent = operation.hasCallback || operation.isBarrier || operation.isStep
        switch queue(urgent: urgent, { $0.queue.append(operation); return false }) {
        case nil: operation.complete(.failure(Self.closedError))
        case true?: wake.signal()
        case false?: break
        }
    }

    /// Queues a write that is kept with the final event (`job.succeeded`,
    /// `job.failed`, `job.cancelled`) of `jobId`'s step `stepPath` (`""`: the
    /// job's own): held until that event is appended, it goes in the same
    /// batch, so a crash never keeps one without the other. (The writer takes
    /// writes and events together; a job's finish queued before its event,
    /// or after it, could be committed a batch apart.) Any thread; the event
    /// must follow (a write left waiting goes after ``maxHoldNanoseconds``).
    func enqueue(_ operation: WriteOperation, withFinalEventOf jobId: String, stepPath: String) {
        // Nothing to take yet: no wake-up (the event's append brings one).
        let held = state.withLock { state -> Bool in
            if state.closed { return false }
            let earlier = state.held.updateValue((operation, DispatchTime.now().uptimeNanoseconds),
                                                 forKey: HeldKey(jobId: jobId, stepPath: stepPath))
            if let earlier { state.queue.append(earlier.operation) }  // not expected: a step records once a run
            return true
        }
        if !held { operation.complete(.failure(Self.closedError)) }
    }

    /// Appends an event for the next batch, with the write held for it if any
    /// (see ``enqueue(_:withFinalEventOf:stepPath:)``). Fire and forget; any
    /// thread. Events are inserted before the batch's other writes: nothing
    /// the writer runs depends on an event being absent.
    func append(_ event: EncodedEvent) {
        let signal = queue(urgent: false) { state in
            state.events.append(event)
            return !state.held.isEmpty && state.releaseHeld(for: event)
        }
        if signal == true { wake.signal() }
    }

    /// Appends events for the next batch, as ``append(_:)-(EncodedEvent)`` does.
    func append(_ events: [EncodedEvent]) {
        guard !events.isEmpty else { return }
        let signal = queue(urgent: false) { state in
            state.events += events
            guard !state.held.isEmpty else { return false }
            var urgent = false
            for event in events where state.releaseHeld(for: event) { urgent = true }
            return urgent
        }
        if signal == true { wake.signal() }
    }

    /// Runs `add` under the lock (it returns true when what it added is
    /// urgent). Returns nil when closed (nothing added), true when the caller
    /// must wake the writer: the first write since the last batch, or the
    /// first urgent one (it ends a linger).
    private func queue(urgent: Bool, _ add: (inout State) -> Bool) -> Bool? {
        state.withLock { state in
            if state.closed { return nil }
            let urgent = add(&state) || urgent
            if urgent && !state.urgent {
                state.urgent = true
                state.signalled = true
                return true
            }
            if state.signalled { return false }
            state.signalled = true
            return true
        }
    }

    /// How long the writer waits for more writes when nobody waits for the
    /// ones queued (events, finishes, starts: fire and forget): the stream of
    /// a busy coordinator then commits in fewer, larger transactions, one
    /// BEGIN, WAL append and lock round for many. A write someone waits for (a
    /// submit's insert, a flush) or a graph's finished step is committed at
    /// once. The price: a job that finished within this time before a crash
    /// is not recorded as finished, and runs again after the restart.
    static let lingerMicroseconds = 1000

    /// Returns once every write queued before the call is committed (or
    /// failed). Any thread; from a callback (the writer thread), commits
    /// what is queued right there instead of waiting for itself.
    func flush() {
        if isWriterThread {
            drain()
            return
        }
        let reached = DispatchSemaphore(value: 0)
        enqueue(.barrier { reached.signal() })
        reached.wait()
    }

    /// Commits what is queued, stops the thread and closes the connection;
    /// later writes fail with "store is closed". Any thread; idempotent.
    /// From a callback, the thread stops once the callback returns.
    func close() {
        let first = state.withLock { state in
            defer { state.closed = true }
            return !state.closed
        }
        if isWriterThread {
            if first { drain() }
            wake.signal()
            return
        }
        if first { wake.signal() }
        running.wait()
    }

    private var isWriterThread: Bool {
        let current = ObjectIdentifier(Thread.current)
        return writerThread.withLock { $0 == current }
    }

    private func take() -> (batch: Batch, closing: Bool) {
        state.withLock { state in
            if !state.held.isEmpty {
                // Closing: everything goes. Else only a write whose event never came.
                let now = DispatchTime.now().uptimeNanoseconds
                state.releaseHeld(before: state.closed ? .max : now &- min(now, Self.maxHoldNanoseconds))
            }
            state.signalled = false
            state.urgent = false
            let batch = Batch(writes: state.queue, events: state.events)
            state.queue = []
            state.events = []
            return (batch, state.closed)
        }
    }

    /// A batch's job inserts, to commit on their own before the rest, when
    /// the rest is only the fire-and-forget record of other jobs' lives
    /// (starts, finishes, steps, events, cached responses); nil otherwise.
    ///
    /// Each submit's answer waits for its insert's commit, and a busy server's
    /// batch is mostly that record: 16 clients' single submits came ~8 inserts
    /// to a batch beside ~17 other writes and ~25 events. Committed first,
    /// the inserts are answered after a quarter of the batch's work instead of
    /// all of it (the rest follows at once; a job's record still commits with
    /// its final event). None of those writes touches a job being inserted
    /// (a job's life is recorded only once its insert is answered); any other
    /// kind (a prune, a barrier, shared data, the resource index) keeps the
    /// batch whole and in order: a prune queued before an idempotent submit
    /// must run before it.
    private static func insertsFirst(_ batch: Batch) -> (inserts: Batch, rest: Batch)? {
        guard batch.writes.count > 1 || !batch.events.isEmpty else { return nil }
        var inserts: [WriteOperation] = []
        var rest: [WriteOperation] = []
        for write in batch.writes {
            switch write {
            case .insert: inserts.append(write)
            case .markStarted, .finish, .step, .storeResponse: rest.append(write)
            default: return nil
            }
        }
        guard !inserts.isEmpty, !rest.isEmpty || !batch.events.isEmpty else { return nil }
        return (Batch(writes: inserts, events: []), Batch(writes: rest, events: batch.events))
    }

    /// What the writer commits in one transaction.
    private struct Batch {
        var writes: [WriteOperation]
        var events: [EncodedEvent]
        var isEmpty: Bool { writes.isEmpty && events.isEmpty }
    }

    private func run() {
        nameCurrentThread("hydra-store")
        let current = ObjectIdentifier(Thread.current)
        writerThread.withLock { $0 = current }
        while true {
            // A held write waits for its event; one whose event never comes goes
            // at the next wake-up past its time, so the writer wakes now and then.
            let holding = state.withLock { !$0.held.isEmpty }
            if startMarks.isEmpty && !holding {
                wake.wait()
            } else if wake.wait(timeout: .now() + .milliseconds(StartMarks.maxDelayMs)) == .timedOut {
                commit(take().batch, writeAllStarts: true)
                continue
            }
            if !state.withLock({ $0.urgent || $0.closed }) {
                // Nobody waits: more fire-and-forget writes may join (an urgent one wakes us).
                _ = wake.wait(timeout: .now() + .microseconds(Self.lingerMicroseconds))
            }
            let (batch, closing) = take()
            if !closing, let (inserts, rest) = Self.insertsFirst(batch) {
                commit(inserts)
                commit(rest)
            } else if !batch.isEmpty || closing {
                commit(batch, writeAllStarts: closing)
            }
            if closing { break }
        }
        writerThread.withLock { $0 = nil }
        connection.close()
        running.leave()
    }

    /// Commits everything queued (and every start mark held back), on the
    /// writer thread, until the queue is empty.
    private func drain() {
        while true {
            let batch = take().batch
            if batch.isEmpty && startMarks.isEmpty { return }
            retainedInLastCommit = false
            commit(batch, writeAllStarts: true)
            if retainedInLastCommit { return }  // the store cannot write now: the writer's loop tries again
        }
    }

    // MARK: - One batch

    private enum Attempt {
        case committed([Result<WriteOperation.Output, StoreError>])
        /// A write failed outside a savepoint: rolled back, to run again isolated.
        case retryIsolated
        case failed(StoreError)
    }

    private func commit(_ batch: Batch, writeAllStarts: Bool = false) {
        let folding = startMarks.plan(batch.writes, writeAll: writeAllStarts, now: DispatchTime.now().uptimeNanoseconds)
        if batch.isEmpty && folding.written.isEmpty { return }
        var attempt = self.attempt(batch, folding, isolated: false)
        if case .retryIsolated = attempt { attempt = self.attempt(batch, folding, isolated: true) }
        let writes = batch.writes
        switch attempt {
        case .committed(let results):
            if retaining {
                Self.report("the writes kept in memory are stored")
                retaining = false
            }
            // By index: each write is used in place, not copied (its payload retained) per loop.
            for i in writes.indices {
                switch results[i] {
                case .success: committed(writes[i])
                case .failure(let error) where !writes[i].hasCallback && !writes[i].isBarrier:
                    Self.report("a write without a callback failed and was dropped: \(error)")
                case .failure: break
                }
            }
            for i in writes.indices { writes[i].complete(results[i]) }
        case .failed(let error) where error.isTransient && !state.withLock({ $0.closed }):
            // The disk is full (or failing) for now. What nobody waits for (a job's start,
            // its finish and result, events) is kept and written once it can be: dropped, a
            // finished job ran again after the restart. A write someone waits for fails to
            // them (a submit is refused, not acknowledged).
            retain(writes.filter { !$0.hasCallback && !$0.isBarrier }, batch.events, error)
            for operation in writes where operation.hasCallback || operation.isBarrier { operation.complete(.failure(error)) }
        case .failed(let error):
            // (A database deleted under the server was said once: not again for every batch.)
            if !moved, writes.contains(where: { !$0.hasCallback && !$0.isBarrier }) {
                Self.report("a batch of \(writes.count) writes failed: \(error)")
            }
            if !moved, !batch.events.isEmpty { Self.report("\(batch.events.count) events were not stored: \(error)") }
            for operation in writes { operation.complete(.failure(error)) }
        case .retryIsolated:
            // Never returned when every write is isolated.
            for operation in writes { operation.complete(.failure(StoreError("store writer: batch not committed"))) }
        }
        // Told even when the events could not be stored (reported above): whoever
        // waits for them to be durable must not wait for ever.
        if let last = batch.events.last { eventsWritten(UInt64(last.seq)) }
    }

    /// Writes and events kept through a transient failure, at most this many of
    /// each (past it the oldest go, said on stderr): a disk that stays full must
    /// not fill the memory too.
    static let maxRetained = 1_000_000

    /// Puts `writes` and `events` back at the front of the queue, to be written
    /// after a pause (the writer thread sleeps: the failure is the disk's).
    private func retain(_ writes: [WriteOperation], _ events: [EncodedEvent], _ error: StoreError) {
        var dropped = (writes: 0, events: 0)
        retainedInLastCommit = true
        state.withLock { state in
            state.queue.insert(contentsOf: writes, at: 0)
            state.events.insert(contentsOf: events, at: 0)
            dropped = (max(0, state.queue.count - Self.maxRetained), max(0, state.events.count - Self.maxRetained))
            if dropped.writes > 0 { state.queue.removeFirst(dropped.writes) }
            if dropped.events > 0 { state.events.removeFirst(dropped.events) }
            state.signalled = true
        }
        if !retaining {
            Self.report("writes are kept in memory until they can be stored: \(error)")
            retaining = true
        }
        if dropped.writes > 0 || dropped.events > 0 {
            Self.report("\(dropped.writes) writes and \(dropped.events) events dropped: kept past \(Self.maxRetained) while the store could not write")
        }
        usleep(Self.retainPauseMicroseconds)
        wake.signal()  // the writer tries again, whether or not anything new comes
    }

    /// A page limit (`PRAGMA max_page_count`) the writer applies before its next
    /// transaction: past it SQLite answers `SQLITE_FULL`, as on a full disk, so a
    /// test can fill the store and free it again. Nothing else sets it.
    private let pageLimit = Locked<Int?>(nil)

    /// Limits the database to `pages` pages (at least its current size) from the next transaction on.
    func limitPages(to pages: Int) {
        pageLimit.withLock { $0 = pages }
        wake.signal()
    }

    /// When the database file was last checked (``databaseMoved()``), and whether it had moved (writer thread only).
    private var movedCheckedAt: UInt64 = 0
    private var moved = false

    /// The failure of every write once the database file was deleted or
    /// replaced under the server (its state folder removed): SQLite would go on
    /// writing to the unlinked file, and every job acknowledged from then on
    /// would be lost at the next start. Checked at most every 100 ms (a `stat`).
    private func databaseMoved() -> StoreError? {
        let now = DispatchTime.now().uptimeNanoseconds
        if !moved, now &- movedCheckedAt > 100_000_000 {
            movedCheckedAt = now
            moved = connection.fileHasMoved
            if moved { Self.report("the database file was deleted or replaced while the server ran: nothing more can be recorded; restart the server") }
        }
        return moved ? StoreError("the state store's database file was deleted or replaced while the server ran: nothing can be recorded; restart the server") : nil
    }

    /// How long the writer waits after a transient failure before it tries again.
    static let retainPauseMicroseconds: UInt32 = 200_000

    /// Fault injection for tests (`HYDRA_FAULT_COMMIT_DELAY_MS`, at most 10 s):
    /// every transaction starts that much later, so a test can kill the server
    /// while writes are queued and not committed. Debug builds only (the ones
    /// the tests run); a release build never reads it.
    static let faultCommitDelay: UInt32 = {
        #if DEBUG
        guard let text = ProcessInfo.processInfo.environment["HYDRA_FAULT_COMMIT_DELAY_MS"], let ms = UInt32(text) else { return 0 }
        return min(ms, 10_000) * 1000
        #else
        return 0
        #endif
    }()

    private func attempt(_ batch: Batch, _ folding: StartMarks.Plan, isolated: Bool) -> Attempt {
        if Self.faultCommitDelay > 0 { usleep(Self.faultCommitDelay) }
        let db = connection
        if let pages = pageLimit.withLock({ limit in defer { limit = nil }; return limit }) {
            try? db.execute("PRAGMA max_page_count=\(pages)")
        }
        if let moved = databaseMoved() { return .failed(moved) }
        do throws(StoreError) {
            try db.run("BEGIN IMMEDIATE")
        } catch {
            return .failed(error)
        }
        /// Runs one step: alone in a savepoint when isolated, so that its
        /// failure undoes only itself. A failure outside isolation ends the
        /// attempt (`.retryIsolated`); `nil` means go on.
        func step(_ body: () throws(StoreError) -> WriteOperation.Output)
            -> (output: Result<WriteOperation.Output, StoreError>?, end: Attempt?)
        {
            do throws(StoreError) {
                if isolated { try db.run("SAVEPOINT op") }
                let output = try body()
                if isolated { try db.run("RELEASE op") }
                return (.success(output), nil)
            } catch {
                // After some I/O errors SQLite rolls the whole transaction back itself. A
                // transient failure is the store's, not one write's: no write is isolated for it.
                if db.isAutocommit { return (nil, .failed(error)) }
                if error.isTransient {
                    rollback()
                    return (nil, .failed(error))
                }
                guard isolated else {
                    rollback()
                    return (nil, .retryIsolated)
                }
                do throws(StoreError) {
                    try db.run("ROLLBACK TO op")
                    try db.run("RELEASE op")
                } catch {
                    rollback()
                    return (nil, .failed(error))
                }
                return (.failure(error), nil)
            }
        }

        var eventsThrough = eventsStoredThrough
        if !batch.events.isEmpty {
            let (output, end) = step { () throws(StoreError) in
                eventsThrough = try EventBatch.insert(batch.events, after: eventsStoredThrough, on: db)
                return .none
            }
            if let end { return end }
            if case .failure(let error)? = output {
                Self.report("\(batch.events.count) events were not stored: \(error)")
            }
        }
        for start in folding.written {
            let (_, end) = step { () throws(StoreError) in
                try WriteOperation.markStarted(jobId: start.jobId, time: start.time).apply(on: db)
            }
            if let end { return end }
        }
        var results: [Result<WriteOperation.Output, StoreError>] = []
        results.reserveCapacity(batch.writes.count)
        let writes = batch.writes
        for index in writes.indices {
            if writes[index].isBarrier || (!folding.skipped.isEmpty && folding.skipped.contains(index)) {
                results.append(.success(.none))
                continue
            }
            let (output, end) = step { () throws(StoreError) in
                try writes[index].apply(on: db, startedAt: folding.startTimes.isEmpty ? nil : folding.startTimes[index])
            }
            if let end { return end }
            if let output { results.append(output) }
        }
        do throws(StoreError) {
            try db.run("COMMIT")
        } catch {
            rollback()
            return .failed(error)
        }
        eventsStoredThrough = eventsThrough
        return .committed(results)
    }

    private func rollback() {
        if !connection.isAutocommit { try? connection.run("ROLLBACK") }
    }

    /// Failures nobody waits for would otherwise vanish: one line on stderr (never a value).
    static func report(_ message: String) {
        FileHandle.standardError.write(Data("hydra: state store: \(message)\n".utf8))
    }
}
