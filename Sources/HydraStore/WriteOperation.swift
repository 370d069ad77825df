import Foundation
import HydraCore

/// A job row with its JSON already encoded, on the caller's thread: the one
/// writer thread is the store's bottleneck, so it only binds bytes.
struct EncodedJob: Sendable {
    let jobId: String
    let spec: [UInt8]
    let input: [UInt8]
    /// The JSON text of `[spec, input]` for a job with an idempotency key
    /// (compared with a repeated submit's); empty otherwise.
    let canonical: String
    let priority: Int
    let idempotencyKey: String?
    let state: JobState
    let createdAt: Double
    let startedAt: Double?
    let finishedAt: Double?
    let result: [UInt8]?
    let namedJobs: [UInt8]?

    init(_ job: StoredJob) {
        jobId = job.jobId
        spec = JSONWriter.bytes(job.spec)
        input = JSONWriter.bytes(job.input)
        namedJobs = job.namedJobs.map { JSONWriter.bytes($0) }
        // Compared as JSON values, not as text (see `sameJSON`).
        canonical = job.idempotencyKey == nil ? "" : JSONWriter.string([job.spec, job.input])
        priority = job.priority
        idempotencyKey = job.idempotencyKey
        state = job.state
        createdAt = job.createdAt
        startedAt = job.startedAt
        finishedAt = job.finishedAt
        result = job.result.map(JSONWriter.bytes)
    }
}

/// An event encoded as the store keeps it (an ``EventBatch`` line) on the
/// emitting thread. Events do not queue as writes: the writer takes all those
/// appended since its last batch and inserts them first, as one row.
struct EncodedEvent: Sendable {
    let seq: Int
    let name: String
    let rootJobId: String
    let stepPath: String
    let time: Double
    let line: [UInt8]

    /// Nil when `seq` does not fit SQLite's INTEGER (63 bits).
    init?(_ event: HydraEvent) {
        guard let seq = Int(exactly: event.seq) else { return nil }
        self.seq = seq
        name = event.name
        rootJobId = event.rootJobId
        stepPath = event.stepPath
        time = event.time
        line = EventBatch.line(seq: seq, event, fields: event.encodedFields ?? JSONWriter.bytes(.object(event.fields)))
    }
}

/// One write queued for the writer thread, with its callback if someone waits
/// for it. ``StoreWriter`` runs a batch of them in one transaction; `apply`
/// holds the SQL of each.
enum WriteOperation: Sendable {
    case insert([EncodedJob], done: @Sendable (Result<[InsertOutcome], StoreError>) -> Void)
    /// Finds the jobs the idempotency keys already name, writing nothing (``SQLiteStore/existing(_:done:)``).
    case lookUp([EncodedJob], done: @Sendable (Result<[InsertOutcome?], StoreError>) -> Void)
    case markStarted(jobId: String, time: Double)
    /// `result`: the `job.result` object's JSON, encoded on the caller's thread.
    case finish(jobId: String, state: JobState, result: [UInt8], time: Double,
                done: (@Sendable (Result<Void, StoreError>) -> Void)?)
    /// The step's result and error are JSON encoded on the caller's thread.
    case step(jobId: String, stepPath: String, EncodedStep, done: (@Sendable (Result<Void, StoreError>) -> Void)?)
    /// `bytes` is the encoded value (encoded on the caller's thread); `value`
    /// the clear one, for the in-memory cache once committed.
    case setShared(key: String, bytes: [UInt8], cipher: SharedCipher, value: JSONValue,
                   done: @Sendable (Result<Void, StoreError>) -> Void)
    case removeShared(key: String, done: @Sendable (Result<Bool, StoreError>) -> Void)
    case storeResponse(key: String, api: String?, value: JSONValue, ttl: Double, keep: Double, now: Double)
    case removeResponses(api: String?, key: String?, prefix: String?, done: @Sendable (Result<[String], StoreError>) -> Void)
    case prune(before: Double)
    /// A write to the resource index (its SQL is in `SQLiteStore+ResourceIndex.swift`);
    /// `done` receives the rows it changed.
    case resourceIndex(ResourceIndexWrite, done: (@Sendable (Result<Int, StoreError>) -> Void)?)
    /// Replaces (nil: removes) the sealed tokens of one auth session.
    case authTokens(name: String, sealed: [UInt8]?)
    /// A marker: `reached` runs once every write queued before it is committed (or failed).
    case barrier(reached: @Sendable () -> Void)

    /// What a write produced, for its callback.
    enum Output {
        case none
        case inserted([InsertOutcome])
        case found([InsertOutcome?])
        case count(Int)
        case keys([String])
    }

    /// True when someone waits for this write's outcome (else its failure is reported on stderr).
    var hasCallback: Bool {
        switch self {
        case .insert, .lookUp, .setShared, .removeShared, .removeResponses: return true
        case .finish(_, _, _, _, let done), .step(_, _, _, let done): return done != nil
        case .markStarted, .storeResponse, .prune, .barrier, .authTokens: return false
        case .resourceIndex(_, let done): return done != nil
        }
    }

    var isBarrier: Bool {
        if case .barrier = self { return true }
        return false
    }

    var isStep: Bool {
        if case .step = self { return true }
        return false
    }

    /// Calls the callback (if any) with `outcome`. Writer thread, after the commit.
    func complete(_ outcome: Result<Output, StoreError>) {
        switch self {
        case .insert(_, let done):
            done(outcome.map { if case .inserted(let outcomes) = $0 { return outcomes } else { return [] } })
        case .lookUp(_, let done):
            done(outcome.map { if case .found(let outcomes) = $0 { return outcomes } else { return [] } })
        case .finish(_, _, _, _, let done?), .step(_, _, _, let done?), .setShared(_, _, _, _, let done):
            done(outcome.map { _ in () })
        case .removeShared(_, let done):
            done(outcome.map { if case .count(let n) = $0 { return n > 0 } else { return false } })
        case .removeResponses(_, _, _, let done):
            done(outcome.map { if case .keys(let keys) = $0 { return keys } else { return [] } })
        case .barrier(let reached):
            reached()
        case .resourceIndex(_, let done?):
            done(outcome.map { if case .count(let n) = $0 { return n } else { return 0 } })
        case .finish, .step, .markStarted, .storeResponse, .prune, .resourceIndex, .authTokens:
            break
        }
    }

    // MARK: - SQL (writer thread, inside the batch's transaction)

    static let insertJob = """
        INSERT INTO jobs (job_id, spec, input, canonical, priority, idempotency_key, state, created_at,
                          started_at, finished_at, result, named_jobs)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """
    static let finalStates = "('succeeded', 'failed', 'cancelled')"

    /// The job `job`'s idempotency key already names (nil: none, or no key).
    /// Sees the jobs inserted earlier in the same transaction too.
    static func existing(_ job: EncodedJob, on db: SQLiteConnection) throws(StoreError) -> InsertOutcome? {
        // Only a job with an idempotency key is ever compared with another,
        // so only those carry the canonical text.
        guard let key = job.idempotencyKey else { return nil }
        var existing: (jobId: String, canonical: String)?
        try db.query("SELECT job_id, canonical FROM jobs WHERE idempotency_key = ?", [.text(key)]) { row in
            existing = (row.text(0) ?? "", row.text(1) ?? "")
        }
        guard let existing else { return nil }
        let same = existing.canonical == job.canonical || sameJSON(existing.canonical, job.canonical)
        return .existing(jobId: existing.jobId, sameSpec: same)
    }

    /// True when two JSON texts hold the same value: members in any order,
    /// `1` and `1.0` alike. (A repeated submit is "the same spec" by value.)
    static func sameJSON(_ a: String, _ b: String) -> Bool {
        guard let x = try? JSONParser.parse(Array(a.utf8)), let y = try? JSONParser.parse(Array(b.utf8)) else { return false }
        return x == y
    }

    /// Runs this write's statements on `db`. `startedAt`: for a `finish`, the
    /// start time of a `markStarted` folded into it (see ``StartMarks``).
    func apply(on db: SQLiteConnection, startedAt: Double? = nil) throws(StoreError) -> Output {
        switch self {
        case .insert(let jobs, _):
            var outcomes: [InsertOutcome] = []
            outcomes.reserveCapacity(jobs.count)
            for job in jobs {
                if let existing = try Self.existing(job, on: db) {
                    outcomes.append(existing)
                    continue
                }
                try db.run(Self.insertJob, [
                    .text(job.jobId), .utf8(job.spec), .utf8(job.input), .text(job.canonical), .int(job.priority),
                    SQLValue(job.idempotencyKey), .text(job.state.rawValue), .double(job.createdAt),
                    SQLValue(job.startedAt), SQLValue(job.finishedAt), job.result.map { .utf8($0) } ?? .null,
                    job.namedJobs.map { .utf8($0) } ?? .null,
                ])
                outcomes.append(.inserted)
            }
            return .inserted(outcomes)

        case .lookUp(let jobs, _):
            var outcomes: [InsertOutcome?] = []
            for job in jobs { outcomes.append(try Self.existing(job, on: db)) }
            return .found(outcomes)

        case .markStarted(let jobId, let time):
            try db.run("UPDATE jobs SET state = 'running', started_at = ? WHERE job_id = ? AND state = 'queued'",
                       [.double(time), .text(jobId)])

        case .finish(let jobId, let state, let result, let time, _) where startedAt != nil:
            try db.run("UPDATE jobs SET state = ?, result = ?, finished_at = ?, started_at = COALESCE(started_at, ?) WHERE job_id = ?",
                       [.text(state.rawValue), .utf8(result), .double(time), .double(startedAt!), .text(jobId)])

        case .finish(let jobId, let state, let result, let time, _):
            try db.run("UPDATE jobs SET state = ?, result = ?, finished_at = ? WHERE job_id = ?",
                       [.text(state.rawValue), .utf8(result), .double(time), .text(jobId)])

        case .step(let jobId, let stepPath, let step, _):
            try db.run("INSERT OR REPLACE INTO steps (job_id, step_path, state, result, error) VALUES (?, ?, ?, ?, ?)",
                       [.text(jobId), .text(stepPath), .text(step.state.rawValue), step.result.map { .utf8($0) } ?? .null,
                        step.error.map { .utf8($0) } ?? .null])

        case .setShared(let key, let bytes, let cipher, _, _):
            try db.run("INSERT OR REPLACE INTO shared (key, cipher, value) VALUES (?, ?, ?)",
                       [.text(key), .text(cipher.rawValue), .blob(bytes)])

        case .removeShared(let key, _):
            try db.run("DELETE FROM shared WHERE key = ?", [.text(key)])
            return .count(db.changes)

        case .storeResponse(let key, let api, let value, let ttl, let keep, let now):
            try db.run("INSERT OR REPLACE INTO cache (key, api, value, stored_at, ttl, keep) VALUES (?, ?, ?, ?, ?, ?)",
                       [.text(key), SQLValue(api), .json(value), .double(now), .double(ttl), .double(keep)])

        case .removeResponses(let api, let key, let prefix, _):
            var conditions: [String] = []
            var bindings: [SQLValue] = []
            if let api {
                conditions.append("api = ?")
                bindings.append(.text(api))
            }
            if let key {
                // The key and every variant of it (`KEY auth=…`, `KEY session=NAME`, and both):
                // a URL holds no space, so `KEY ` starts only the variants of this key.
                conditions.append("(key = ? OR substr(key, 1, ?) = ?)")
                bindings += [.text(key), .int((key + " ").unicodeScalars.count), .text(key + " ")]
            }
            if let prefix {
                // Not LIKE: `%` and `_` in a prefix are literal. substr counts characters.
                conditions.append("substr(key, 1, ?) = ?")
                bindings += [.int(prefix.unicodeScalars.count), .text(prefix)]
            }
            let clause = conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND ")
            var keys: [String] = []
            try db.query("DELETE FROM cache" + clause + " RETURNING key", bindings) { row in keys.append(row.text(0) ?? "") }
            return .keys(keys)

        case .prune(let time):
            // A job finishes after it was created: the range of `jobs_by_created`
            // before `time` holds every job to prune (`+state`: not by state).
            try db.run("""
                DELETE FROM steps WHERE job_id IN
                    (SELECT job_id FROM jobs WHERE created_at < ? AND finished_at < ? AND +state IN \(Self.finalStates))
                """, [.double(time), .double(time)])
            try db.run("DELETE FROM jobs WHERE created_at < ? AND finished_at < ? AND +state IN \(Self.finalStates)",
                       [.double(time), .double(time)])
            try EventBatch.prune(before: time, on: db)
            try db.run("DELETE FROM cache WHERE stored_at + ttl + keep <= ?", [.double(Date().timeIntervalSince1970)])

        case .resourceIndex(let write, _):
            return .count(try write.apply(on: db))

        case .authTokens(let name, let sealed?):
            try db.run("INSERT OR REPLACE INTO auth_tokens (name, sealed, updated_at) VALUES (?, ?, ?)",
                       [.text(name), .blob(sealed), .double(Date().timeIntervalSince1970)])

        case .authTokens(let name, nil):
            try db.run("DELETE FROM auth_tokens WHERE name = ?", [.text(name)])

        case .barrier:
            break
        }
        return .none
    }
}
