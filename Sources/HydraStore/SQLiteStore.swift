import Dispatch
import Foundation
import HydraCore
import OrderedCollections
import Synchronization

/// The ``StateStore`` on SQLite: one database file (`hydra.db`) in WAL mode.
///
/// Threads: one writer thread owns the write connection and commits every
/// write queued since its last wake-up in one transaction (group commit), then
/// calls the `done` callbacks on that thread. Reads use a second connection
/// under a lock, on the caller's thread; WAL lets them run beside the writer.
/// Shared values are also kept in memory, so `${shared.KEY}` reads on the
/// coordinator's hot path are a lock and a dictionary lookup.
public final class SQLiteStore: StateStore {
    /// SQLite's `synchronous` setting: `normal` survives a process crash,
    /// `full` also a power loss, at one fsync per commit.
    public enum SyncMode: String, Sendable { case normal, full }

    public let path: String
    private let reader: LockedConnection
    private let queue = Mutex(WriteQueue())
    private let wake = DispatchSemaphore(value: 0)
    private let stopped = DispatchSemaphore(value: 0)
    private let codec: SharedCodec
    private let shared: Mutex<[String: (value: JSONValue, cipher: SharedCipher)]>

    private struct WriteQueue {
        var operations: [WriteOperation] = []
        var signalled = false
        var closed = false
    }

    /// Opens (creating when missing) `directory/hydra.db` and migrates it.
    /// `sharedKey` is the `HYDRA_SHARED_KEY` passphrase for aes-gcm values.
    public init(directory: String, sync: SyncMode = .normal, sharedKey: String? = nil) throws(StoreError) {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw StoreError("\(directory): cannot create the state folder: \(error.localizedDescription)")
        }
        path = directory + "/hydra.db"
        codec = try SharedCodec(passphrase: sharedKey)
        let writer = try SQLiteConnection(path: path, sync: sync)
        try Migrations.apply(to: writer)
        let reader = try SQLiteConnection(path: path, sync: sync)
        var values: [String: (value: JSONValue, cipher: SharedCipher)] = [:]
        var undecodable: StoreError?
        try reader.run("SELECT key, cipher, value FROM shared") { [codec] row in
            let cipher = SharedCipher(rawValue: row.text(1) ?? "") ?? .none
            do throws(StoreError) {
                values[row.text(0) ?? ""] = (try codec.decode(row.blob(2), cipher: cipher), cipher)
            } catch {
                undecodable = error
            }
        }
        if let undecodable { throw undecodable }
        self.reader = LockedConnection(reader)
        shared = Mutex(values)
        let box = WriterBox(writer)
        let thread = Thread { [self] in self.writerLoop(box) }
        thread.name = "hydra-store"
        thread.stackSize = 8 << 20  // JSON of deeply nested specs is written recursively
        thread.start()
    }

    // MARK: - Writer thread

    /// Moves the write connection to the writer thread.
    private final class WriterBox: @unchecked Sendable {
        let connection: SQLiteConnection
        init(_ connection: SQLiteConnection) { self.connection = connection }
    }

    private func enqueue(_ operation: WriteOperation) {
        let wakeWriter = queue.withLock { q -> Bool? in
            if q.closed { return nil }
            q.operations.append(operation)
            if q.signalled { return false }
            q.signalled = true
            return true
        }
        switch wakeWriter {
        case nil: operation.fail(StoreError("store is closed"))
        case true?: wake.signal()
        case false?: break
        }
    }

    private func writerLoop(_ box: WriterBox) {
        let db = box.connection
        while true {
            wake.wait()
            let (batch, closing) = queue.withLock { q -> ([WriteOperation], Bool) in
                q.signalled = false
                defer { q.operations.removeAll(keepingCapacity: true) }
                return (q.operations, q.closed)
            }
            if !batch.isEmpty { commit(batch, on: db) }
            if closing {
                db.close()
                stopped.signal()
                return
            }
        }
    }

    /// One transaction for the whole batch; each operation in a savepoint, so
    /// one failing write fails alone.
    private func commit(_ batch: [WriteOperation], on db: SQLiteConnection) {
        var outcomes: [(WriteOperation, Result<WriteOperation.Output, StoreError>)] = []
        outcomes.reserveCapacity(batch.count)
        do {
            try db.execute("BEGIN IMMEDIATE")
        } catch {
            for operation in batch { operation.fail(error) }
            return
        }
        for operation in batch {
            if case .barrier = operation {
                outcomes.append((operation, .success(.none)))
                continue
            }
            // Writes someone waits for get a savepoint, so one failing write
            // fails alone; fire-and-forget writes (events, most updates) skip
            // that cost: if one fails, the batch fails.
            let isolated = operation.hasCallback
            do {
                if isolated { try db.run("SAVEPOINT op") }
                let output = try apply(operation, on: db)
                if isolated { try db.run("RELEASE op") }
                outcomes.append((operation, .success(output)))
            } catch {
                guard isolated else {
                    try? db.execute("ROLLBACK")
                    for operation in batch { operation.fail(error) }
                    return
                }
                try? db.run("ROLLBACK TO op")
                try? db.run("RELEASE op")
                outcomes.append((operation, .failure(error)))
            }
        }
        do {
            try db.execute("COMMIT")
        } catch {
            try? db.execute("ROLLBACK")
            for operation in batch { operation.fail(error) }
            return
        }
        for (operation, outcome) in outcomes {
            if case .success = outcome { afterCommit(operation) }
            operation.complete(outcome)
        }
    }

    private func apply(_ operation: WriteOperation, on db: SQLiteConnection) throws(StoreError) -> WriteOperation.Output {
        switch operation {
        case .insert(let jobs, _):
            var outcomes: [InsertOutcome] = []
            for job in jobs {
                // Only a job with an idempotency key is ever compared with another.
                let canonical = job.idempotencyKey == nil ? "" : JSONWriter.string([job.spec, job.input])
                if let key = job.idempotencyKey {
                    var existing: (String, String)?
                    try db.run("SELECT job_id, canonical FROM jobs WHERE idempotency_key = ?", [.text(key)]) { row in
                        existing = (row.text(0) ?? "", row.text(1) ?? "")
                    }
                    if let (jobId, text) = existing {
                        outcomes.append(.existing(jobId: jobId, sameSpec: text == canonical))
                        continue
                    }
                }
                try db.run("""
                    INSERT INTO jobs (job_id, spec, input, canonical, priority, idempotency_key, state, created_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """, [.text(job.jobId), .text(JSONWriter.string(job.spec)), .text(JSONWriter.string(job.input)),
                          .text(canonical), .int(job.priority), SQLValue(job.idempotencyKey),
                          .text(job.state.rawValue), .double(job.createdAt)])
                outcomes.append(.inserted)
            }
            return .inserted(outcomes)
        case .markStarted(let jobId, let time):
            try db.run("UPDATE jobs SET state = 'running', started_at = ? WHERE job_id = ? AND state = 'queued'",
                       [.double(time), .text(jobId)])
        case .finish(let jobId, let state, let result, let time, _):
            try db.run("UPDATE jobs SET state = ?, result = ?, finished_at = ?, started_at = COALESCE(started_at, ?) WHERE job_id = ?",
                       [.text(state.rawValue), .text(JSONWriter.string(result)), .double(time), .double(time), .text(jobId)])
        case .step(let jobId, let stepPath, let step, _):
            try db.run("INSERT OR REPLACE INTO steps (job_id, step_path, state, result, error) VALUES (?, ?, ?, ?, ?)",
                       [.text(jobId), .text(stepPath), .text(step.state.rawValue),
                        SQLValue(step.result.map(JSONWriter.string)), SQLValue(step.error.map(JSONWriter.string))])
        case .events(let events):
            for event in events {
                try db.run("INSERT OR IGNORE INTO events (seq, name, job_id, root_job_id, step_path, time, fields) VALUES (?, ?, ?, ?, ?, ?, ?)",
                           [.int(Int(event.seq)), .text(event.name), .text(event.jobId), .text(event.rootJobId),
                            .text(event.stepPath), .double(event.time), .text(JSONWriter.string(.object(event.fields)))])
            }
        case .setShared(let key, let bytes, let cipher, _, _):
            try db.run("INSERT OR REPLACE INTO shared (key, cipher, value) VALUES (?, ?, ?)",
                       [.text(key), .text(cipher.rawValue), .blob(bytes)])
        case .removeShared(let key, _):
            try db.run("DELETE FROM shared WHERE key = ?", [.text(key)])
            return .count(db.changes)
        case .storeResponse(let key, let api, let value, let ttl, let now):
            try db.run("INSERT OR REPLACE INTO cache (key, api, value, stored_at, ttl) VALUES (?, ?, ?, ?, ?)",
                       [.text(key), SQLValue(api), .text(JSONWriter.string(value)), .double(now), .double(ttl)])
        case .removeResponses(let api, let key, let prefix, _):
            var conditions: [String] = []
            var bindings: [SQLValue] = []
            if let api { conditions.append("api = ?"); bindings.append(.text(api)) }
            if let key { conditions.append("key = ?"); bindings.append(.text(key)) }
            if let prefix {
                conditions.append("substr(key, 1, ?) = ?")
                bindings.append(.int(prefix.unicodeScalars.count))
                bindings.append(.text(prefix))
            }
            let clause = conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND ")
            try db.run("DELETE FROM cache" + clause, bindings)
            return .count(db.changes)
        case .prune(let time):
            try db.run("""
                DELETE FROM steps WHERE job_id IN (SELECT job_id FROM jobs
                    WHERE finished_at < ? AND state IN ('succeeded', 'failed', 'cancelled'))
                """, [.double(time)])
            try db.run("DELETE FROM jobs WHERE finished_at < ? AND state IN ('succeeded', 'failed', 'cancelled')",
                       [.double(time)])
            // The newest event is kept so the seq never goes back after a restart.
            try db.run("DELETE FROM events WHERE time < ? AND seq < (SELECT MAX(seq) FROM events)", [.double(time)])
            try db.run("DELETE FROM cache WHERE stored_at + ttl < ?", [.double(Date().timeIntervalSince1970)])
        case .barrier:
            break
        }
        return .none
    }

    /// Keeps the in-memory shared values in step with what was committed.
    private func afterCommit(_ operation: WriteOperation) {
        switch operation {
        case .setShared(let key, _, let cipher, let value, _):
            shared.withLock { $0[key] = (value, cipher) }
        case .removeShared(let key, _):
            shared.withLock { $0[key] = nil }
        default:
            break
        }
    }

    // MARK: - Jobs

    public func insert(_ jobs: [StoredJob], done: @escaping @Sendable (Result<[InsertOutcome], StoreError>) -> Void) {
        enqueue(.insert(jobs, done))
    }

    public func markStarted(jobId: String, at time: Double) { enqueue(.markStarted(jobId, time)) }

    public func finish(jobId: String, state: JobState, result: JSONValue, at time: Double,
                       done: (@Sendable (Result<Void, StoreError>) -> Void)?) {
        enqueue(.finish(jobId, state, result, time, done))
    }

    public func recordStep(jobId: String, stepPath: String, outcome: StoredStep,
                           done: (@Sendable (Result<Void, StoreError>) -> Void)?) {
        enqueue(.step(jobId, stepPath, outcome, done))
    }

    private func read<T>(_ body: (SQLiteConnection) throws(StoreError) -> T) throws(StoreError) -> T {
        try reader.use(body)
    }

    private static let jobColumns =
        "job_id, spec, input, priority, idempotency_key, state, created_at, started_at, finished_at, result"

    private static func job(from row: SQLRow) throws(StoreError) -> StoredJob {
        StoredJob(jobId: row.text(0) ?? "", spec: try row.json(1) ?? .null, input: try row.json(2) ?? .null,
                  priority: row.int(3), idempotencyKey: row.text(4),
                  state: JobState(rawValue: row.text(5) ?? "") ?? .queued, createdAt: row.double(6),
                  startedAt: row.optionalDouble(7), finishedAt: row.optionalDouble(8), result: try row.json(9))
    }

    public func job(_ jobId: String) throws(StoreError) -> StoredJob? {
        try read { db throws(StoreError) in
            var job: StoredJob?
            try db.run("SELECT \(SQLiteStore.jobColumns) FROM jobs WHERE job_id = ?", [.text(jobId)]) { row throws(StoreError) in
                job = try SQLiteStore.job(from: row)
            }
            return job
        }
    }

    public func jobs(state: JobState?, limit: Int, after cursor: String?) throws(StoreError) -> (jobs: [StoredJob], next: String?) {
        var conditions: [String] = []
        var bindings: [SQLValue] = []
        if let state {
            conditions.append("state = ?")
            bindings.append(.text(state.rawValue))
        }
        if let cursor {
            let parts = cursor.split(separator: "|", maxSplits: 1)
            guard parts.count == 2, let bits = UInt64(parts[0], radix: 16) else {
                throw StoreError("after: not a cursor returned by job.list")
            }
            let created = Double(bitPattern: bits)
            conditions.append("(created_at < ? OR (created_at = ? AND job_id < ?))")
            bindings += [.double(created), .double(created), .text(String(parts[1]))]
        }
        let clause = conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND ")
        bindings.append(.int(limit + 1))
        var page: [StoredJob] = try read { db throws(StoreError) in
            var out: [StoredJob] = []
            try db.run("SELECT \(SQLiteStore.jobColumns) FROM jobs\(clause) ORDER BY created_at DESC, job_id DESC LIMIT ?",
                       bindings) { row throws(StoreError) in out.append(try SQLiteStore.job(from: row)) }
            return out
        }
        var next: String?
        if page.count > limit {
            page.removeLast()
            if let last = page.last { next = String(last.createdAt.bitPattern, radix: 16) + "|" + last.jobId }
        }
        return (page, next)
    }

    public func unfinishedJobs() throws(StoreError) -> [(job: StoredJob, steps: [String: StoredStep])] {
        try read { db throws(StoreError) in
            var jobs: [StoredJob] = []
            try db.run("SELECT \(SQLiteStore.jobColumns) FROM jobs WHERE state IN ('queued', 'running') ORDER BY created_at, job_id") {
                row throws(StoreError) in jobs.append(try SQLiteStore.job(from: row))
            }
            var out: [(job: StoredJob, steps: [String: StoredStep])] = []
            for job in jobs {
                var steps: [String: StoredStep] = [:]
                try db.run("SELECT step_path, state, result, error FROM steps WHERE job_id = ?", [.text(job.jobId)]) {
                    row throws(StoreError) in
                    steps[row.text(0) ?? ""] = StoredStep(state: JobState(rawValue: row.text(1) ?? "") ?? .failed,
                                                          result: try row.json(2), error: try row.json(3))
                }
                out.append((job, steps))
            }
            return out
        }
    }

    // MARK: - Events

    public func append(_ events: [HydraEvent]) { enqueue(.events(events)) }

    public func events(after seq: UInt64, limit: Int) throws(StoreError) -> [HydraEvent] {
        try read { db throws(StoreError) in
            var out: [HydraEvent] = []
            try db.run("SELECT seq, name, job_id, root_job_id, step_path, time, fields FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
                       [.int(Int(seq)), .int(limit)]) { row throws(StoreError) in
                out.append(HydraEvent(seq: UInt64(row.int(0)), name: row.text(1) ?? "", jobId: row.text(2) ?? "",
                                      rootJobId: row.text(3) ?? "", stepPath: row.text(4) ?? "", time: row.double(5),
                                      fields: try row.json(6)?.objectValue ?? [:]))
            }
            return out
        }
    }

    public func lastSeq() throws(StoreError) -> UInt64 {
        try read { db throws(StoreError) in
            var seq = 0
            try db.run("SELECT COALESCE(MAX(seq), 0) FROM events") { row in seq = row.int(0) }
            return UInt64(seq)
        }
    }

    // MARK: - Shared data

    public func sharedValue(_ key: String) throws(StoreError) -> JSONValue? {
        shared.withLock { $0[key]?.value }
    }

    public func isEncrypted(_ key: String) -> Bool {
        shared.withLock { $0[key]?.cipher == .aesGCM }
    }

    public func setShared(_ key: String, value: JSONValue, cipher: SharedCipher,
                          done: @escaping @Sendable (Result<Void, StoreError>) -> Void) {
        let bytes: [UInt8]
        do {
            bytes = try codec.encode(value, cipher: cipher)
        } catch {
            done(.failure(error))
            return
        }
        enqueue(.setShared(key, bytes, cipher, value, done))
    }

    public func removeShared(_ key: String, done: @escaping @Sendable (Result<Bool, StoreError>) -> Void) {
        enqueue(.removeShared(key, done))
    }

    // MARK: - Response cache

    public func cachedResponse(_ key: String, now: Double) throws(StoreError) -> JSONValue? {
        try read { db throws(StoreError) in
            var value: JSONValue?
            try db.run("SELECT value FROM cache WHERE key = ? AND stored_at + ttl > ?", [.text(key), .double(now)]) {
                row throws(StoreError) in value = try row.json(0)
            }
            return value
        }
    }

    public func storeResponse(_ key: String, api: String?, value: JSONValue, ttl: Double, now: Double) {
        enqueue(.storeResponse(key, api, value, ttl, now))
    }

    public func removeResponses(api: String?, key: String?, prefix: String?,
                                done: @escaping @Sendable (Result<Int, StoreError>) -> Void) {
        enqueue(.removeResponses(api, key, prefix, done))
    }

    // MARK: - Upkeep

    public func prune(before time: Double) { enqueue(.prune(time)) }

    public func flush() {
        let done = DispatchSemaphore(value: 0)
        enqueue(.barrier(done))
        done.wait()
    }

    public func close() {
        let first = queue.withLock { q -> Bool in
            if q.closed { return false }
            q.closed = true
            return true
        }
        guard first else { return }
        wake.signal()
        stopped.wait()
        reader.close()
    }
}

/// A write queued for the writer thread, with its callback.
enum WriteOperation: @unchecked Sendable {
    case insert([StoredJob], @Sendable (Result<[InsertOutcome], StoreError>) -> Void)
    case markStarted(String, Double)
    case finish(String, JobState, JSONValue, Double, (@Sendable (Result<Void, StoreError>) -> Void)?)
    case step(String, String, StoredStep, (@Sendable (Result<Void, StoreError>) -> Void)?)
    case events([HydraEvent])
    case setShared(String, [UInt8], SharedCipher, JSONValue, @Sendable (Result<Void, StoreError>) -> Void)
    case removeShared(String, @Sendable (Result<Bool, StoreError>) -> Void)
    case storeResponse(String, String?, JSONValue, Double, Double)
    case removeResponses(String?, String?, String?, @Sendable (Result<Int, StoreError>) -> Void)
    case prune(Double)
    case barrier(DispatchSemaphore)

    enum Output {
        case none
        case inserted([InsertOutcome])
        case count(Int)
    }

    func fail(_ error: StoreError) { complete(.failure(error)) }

    /// True when someone waits for this write's outcome.
    var hasCallback: Bool {
        switch self {
        case .insert, .setShared, .removeShared, .removeResponses: return true
        case .finish(_, _, _, _, let done), .step(_, _, _, let done): return done != nil
        case .markStarted, .events, .storeResponse, .prune, .barrier: return false
        }
    }

    /// Calls the operation's callback with its outcome.
    func complete(_ outcome: Result<Output, StoreError>) {
        switch self {
        case .insert(_, let done):
            done(outcome.map { if case .inserted(let o) = $0 { return o } else { return [] } })
        case .finish(_, _, _, _, let done?), .step(_, _, _, let done?), .setShared(_, _, _, _, let done):
            done(outcome.map { _ in () })
        case .removeShared(_, let done):
            done(outcome.map { if case .count(let n) = $0 { return n > 0 } else { return false } })
        case .removeResponses(_, _, _, let done):
            done(outcome.map { if case .count(let n) = $0 { return n } else { return 0 } })
        case .barrier(let semaphore):
            semaphore.signal()
        default:
            break
        }
    }
}

/// The read connection behind a lock: any thread may read, one at a time.
private final class LockedConnection: @unchecked Sendable {
    private let lock = NSLock()
    private var connection: SQLiteConnection?

    init(_ connection: SQLiteConnection) { self.connection = connection }

    func use<T>(_ body: (SQLiteConnection) throws(StoreError) -> T) throws(StoreError) -> T {
        lock.lock()
        defer { lock.unlock() }
        guard let connection else { throw StoreError("store is closed") }
        return try body(connection)
    }

    func close() {
        lock.lock()
        defer { lock.unlock() }
        connection?.close()
        connection = nil
    }
}
