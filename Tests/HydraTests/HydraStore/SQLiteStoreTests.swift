import HydraLoop
import Foundation
import HydraCore
import Synchronization
import Testing

@testable import HydraStore

/// The SQLite state store, on real files in a fresh folder per test (removed after it).
@Suite(.ownThreads) final class SQLiteStoreTests: Sendable {
    static let key = "a passphrase of 16+ chars"

    /// This test's folder; each store gets a subfolder of its own.
    let root = NSTemporaryDirectory() + "hydra-store-\(UUID().uuidString)"

    deinit { try? FileManager.default.removeItem(atPath: root) }

    func folder() -> String { root + "/\(UUID().uuidString)" }

    func job(_ id: String, at time: Double, key: String? = nil, input: JSONValue = .null) -> StoredJob {
        StoredJob(jobId: id, spec: ["type": "local", "name": "echo"], input: input, priority: 0,
                  idempotencyKey: key, createdAt: time)
    }

    func insert(_ store: SQLiteStore, _ jobs: [StoredJob]) throws(StoreError) -> [InsertOutcome] {
        try waitForResult { store.insert(jobs, done: $0) }
    }

    func setShared(_ store: SQLiteStore, _ key: String, _ value: JSONValue, _ cipher: SharedCipher) throws(StoreError) {
        try waitForResult { store.setShared(key, value: value, cipher: cipher, done: $0) }
    }

    /// The rows of a query on a connection of the test's own.
    func rows(_ path: String, _ sql: String) throws -> [[String]] {
        let db = try SQLiteConnection(path: path, sync: .normal)
        defer { db.close() }
        var rows: [[String]] = []
        try db.query(sql) { row in rows.append((0..<4).compactMap { row.text(Int32($0)) }) }
        return rows
    }

    /// The database file and its WAL, as bytes.
    func fileBytes(_ dir: String) -> Data {
        var bytes = Data()
        for suffix in ["", "-wal"] {
            if let data = FileManager.default.contents(atPath: dir + "/hydra.db" + suffix) { bytes += data }
        }
        return bytes
    }

    // MARK: - Schema

    /// Generated events (names and ids with quotes, backslashes, control
    /// bytes, non-ASCII; any seq and time; fields compact or with raw
    /// newlines): each line is one line, the JSON array of the event, and
    /// byte for byte the compact JSON of that array when its fields are
    /// compact (whether it was counted and written at its exact size, or
    /// appended piece by piece).
    @Test func generatedEventLinesAreTheEventsJSON() throws {
        var random = SeededRandom(seed: 0x4576_656E_744C_696E)
        let pieces = ["job.succeeded", "j", "0", ".", "\"", "\\", "\n", "\t", "\u{01}", "\u{7F}", "é", "✓", "abcdefghijklmnop"]
        let ascii = pieces.filter { $0.utf8.allSatisfy { $0 < 0x80 } }
        func text() -> String {
            let pool = Int.random(in: 0..<4, using: &random) == 0 ? pieces : ascii
            return (0..<Int.random(in: 0...4, using: &random)).map { _ in pool.randomElement(using: &random)! }.joined()
        }
        for _ in 0..<800 {
            let seq = [0, 1, 9, 10, 123_456, Int.max, Int.random(in: 0...Int.max, using: &random)].randomElement(using: &random)!
            let time = [0, 1_764_000_000.123456, -1.5, 1e-7, Double.random(in: 0..<2e9, using: &random)].randomElement(using: &random)!
            let fieldsValue: JSONValue = ["result": .string(text()), "n": .int(Int.random(in: -5...5, using: &random))]
            let pretty = Bool.random(using: &random)
            let fields = pretty ? Array("{\n \"result\": \(JSONWriter.string(fieldsValue["result"]!)),\n \"n\": \(fieldsValue["n"]!.intValue!)\n}".utf8)
                                : JSONWriter.bytes(fieldsValue)
            let event = HydraEvent(seq: UInt64(seq), name: text(), jobId: text(), rootJobId: text(), stepPath: text(),
                                   time: time, fields: [:])
            let line = EventBatch.line(seq: seq, event, fields: fields)
            #expect(line.last == UInt8(ascii: "\n") && line.dropLast().allSatisfy { $0 != UInt8(ascii: "\n") })
            let expected: JSONValue = [.int(seq), .string(event.name), .string(event.jobId), .string(event.rootJobId),
                                       .string(event.stepPath), .int(EventBatch.microseconds(time)), fieldsValue]
            #expect(try JSONParser.parse(Array(line.dropLast())) == expected, "\(String(decoding: line, as: UTF8.self))")
            if !pretty {
                #expect(Array(line.dropLast()) == JSONWriter.bytes(expected), "\(String(decoding: line, as: UTF8.self))")
            }
        }
    }

    @Test func migratesOnceAndKeepsDataAcrossReopen() throws {
        let dir = folder()
        var store = try SQLiteStore(directory: dir)
        #expect(FileManager.default.fileExists(atPath: dir + "/hydra.db"))
        _ = try insert(store, [job("a", at: 1)])
        store.close()
        store = try SQLiteStore(directory: dir)
        #expect(try store.job("a")?.state == .queued)
        let path = store.path
        store.close()
        // One row per migration, applied once although opened twice.
        let versions = try rows(path, "SELECT version FROM migrations ORDER BY version").map { $0[0] }
        #expect(versions == (1...Migrations.all.count).map(String.init))
        #expect(try rows(path, "PRAGMA journal_mode") == [["wal"]])
    }

    @Test func refusesASchemaFromANewerHydra() throws {
        let dir = folder()
        let store = try SQLiteStore(directory: dir)
        let path = store.path
        store.close()
        let db = try SQLiteConnection(path: path, sync: .normal)
        try db.run("INSERT INTO migrations (version, applied_at) VALUES (?, 0)", [.int(Migrations.all.count + 1)])
        db.close()
        let error = #expect(throws: StoreError.self) { try SQLiteStore(directory: dir) }
        #expect(error?.description.contains(path) == true)
        #expect(error?.description.contains("newer") == true)
    }

    @Test func errorsNameTheFile() throws {
        let dir = folder()
        try FileManager.default.createDirectory(atPath: dir + "/hydra.db", withIntermediateDirectories: true)
        let error = #expect(throws: StoreError.self) { try SQLiteStore(directory: dir) }
        #expect(error?.description.contains(dir + "/hydra.db") == true)
    }

    // MARK: - Jobs

    @Test func jobsRoundTripEveryField() throws {
        let store = try SQLiteStore(directory: folder())
        defer { store.close() }
        let spec: JSONValue = ["type": "rest", "z": 1, "a": ["nested": [1, 2.5, "x", nil, true]]]
        let stored = StoredJob(jobId: "j1", spec: spec, input: ["q": "ünïcödé \u{0}"], priority: -3,
                               idempotencyKey: "k1", createdAt: 1_700_000_000.125)
        #expect(try insert(store, [stored]) == [.inserted])
        #expect(try store.job("j1") == stored)
        #expect(try store.job("missing") == nil)
        // Key order is kept (canonical JSON depends on it).
        #expect(try store.job("j1")?.spec.objectValue?.keys.elementsEqual(["type", "z", "a"]) == true)
    }

    @Test func pagesNewestFirstWithAStateFilter() throws {
        let store = try SQLiteStore(directory: folder())
        defer { store.close() }
        _ = try insert(store, (0..<25).map { job("j\($0 + 10)", at: Double($0 / 2)) })  // equal times tie-break by id
        store.finish(jobId: "j13", state: .failed, result: Array(#"{"state":"failed"}"#.utf8), at: 100, done: nil)
        store.finish(jobId: "j20", state: .failed, result: Array(#"{"state":"failed"}"#.utf8), at: 100, done: nil)
        store.finish(jobId: "j30", state: .failed, result: Array(#"{"state":"failed"}"#.utf8), at: 100, done: nil)
        store.flush()
        var seen: [String] = []
        var cursor: String?
        var pages = 0
        repeat {
            let page = try store.jobs(state: nil, limit: 10, after: cursor)
            seen += page.jobs.map(\.jobId)
            cursor = page.next
            pages += 1
        } while cursor != nil
        #expect(pages == 3)
        #expect(seen == (10..<35).reversed().map { "j\($0)" })
        // Exactly one full page: no next cursor.
        let all = try store.jobs(state: nil, limit: 25, after: nil)
        #expect(all.jobs.count == 25 && all.next == nil)

        let first = try store.jobs(state: .failed, limit: 2, after: nil)
        #expect(first.jobs.map(\.jobId) == ["j30", "j20"])
        let second = try store.jobs(state: .failed, limit: 2, after: first.next)
        #expect(second.jobs.map(\.jobId) == ["j13"])
        #expect(second.next == nil)
        #expect(try store.jobs(state: .running, limit: 10, after: nil).jobs.isEmpty)

        #expect(throws: StoreError.self) { try store.jobs(state: nil, limit: 10, after: "garbage") }
        #expect(try store.jobs(state: nil, limit: 0, after: nil).jobs.isEmpty)
        #expect(try store.jobs(state: nil, limit: -5, after: nil).jobs.isEmpty)
        #expect(try store.jobs(state: nil, limit: .max, after: nil).jobs.count == 25)
    }

    @Test func idempotencyKeys() throws {
        let store = try SQLiteStore(directory: folder())
        defer { store.close() }
        // Within one batch: the second and third are the first.
        let outcomes = try insert(store, [job("a", at: 1, key: "k"), job("b", at: 1, key: "k"),
                                          job("c", at: 1, key: "k", input: 5), job("d", at: 1)])
        #expect(outcomes == [.inserted, .existing(jobId: "a", sameSpec: true),
                             .existing(jobId: "a", sameSpec: false), .inserted])
        #expect(try store.job("b") == nil)
        #expect(try store.job("c") == nil)
        // In a later call.
        #expect(try insert(store, [job("e", at: 2, key: "k")]) == [.existing(jobId: "a", sameSpec: true)])
        #expect(try insert(store, [job("f", at: 2, key: "k", input: ["x": 1])]) == [.existing(jobId: "a", sameSpec: false)])
        var otherSpec = job("g", at: 2, key: "k")
        otherSpec.spec = ["type": "local", "name": "other"]
        #expect(try insert(store, [otherSpec]) == [.existing(jobId: "a", sameSpec: false)])
        #expect(try insert(store, [job("h", at: 2, key: "k2")]) == [.inserted])
        #expect(try store.jobs(state: nil, limit: 100, after: nil).jobs.map(\.jobId) == ["h", "d", "a"])
    }

    @Test func aFailingWriteFailsAlone() throws {
        let store = try SQLiteStore(directory: folder())
        defer { store.close() }
        _ = try insert(store, [job("a", at: 1)])
        // Queued together, so very likely in one batch: the duplicate id fails alone.
        let results = Locked<[String: Bool]>([:])
        let group = DispatchGroup()
        for id in ["x", "a", "y"] {
            group.enter()
            store.insert([job(id, at: 2)]) { r in
                results.withLock { $0[id] = (try? r.get()) != nil }
                group.leave()
            }
        }
        // Events ride along (inserted again in the isolated retry); one whose seq
        // cannot be stored is refused alone (on stderr), its neighbours stay.
        store.append([HydraEvent(seq: 1, name: "job.queued", jobId: "x", rootJobId: "x", stepPath: "", time: 1, fields: [:])])
        store.append([HydraEvent(seq: .max, name: "job.queued", jobId: "x", rootJobId: "x", stepPath: "", time: 1, fields: [:])])
        store.append([HydraEvent(seq: 2, name: "job.queued", jobId: "y", rootJobId: "y", stepPath: "", time: 1, fields: [:])])
        group.wait()
        store.flush()
        #expect(results.withLock { $0 } == ["x": true, "a": false, "y": true])
        #expect(try store.events(after: 0, limit: 10).map(\.seq) == [1, 2])
        #expect(try store.lastSeq() == 2)
    }

    /// A job's finish (and a step's record) is kept with its final event, never
    /// one without the other: the writer took the event in one batch and the
    /// finish queued a moment later in the next, and a crash between them left
    /// `job.succeeded` stored and the job queued: it ran again after the
    /// restart, and its second result contradicted the event clients had.
    @Test func aFinishIsKeptWithItsFinalEvent() throws {
        let dir = folder()
        var store = try SQLiteStore(directory: dir)
        _ = try insert(store, [job("a", at: 1), job("b", at: 1), job("c", at: 1), job("d", at: 1)])
        func event(_ seq: UInt64, _ name: String, _ job: String, _ path: String) -> HydraEvent {
            HydraEvent(seq: seq, name: name, jobId: job, rootJobId: job, stepPath: path, time: 2, fields: [:])
        }
        let result = Array(#"{"jobId":"a","state":"succeeded","result":1}"#.utf8)
        store.finish(jobId: "a", state: .succeeded, result: result, at: 2, withFinalEvent: true, done: nil)
        store.flush()
        #expect(try store.job("a")?.state == .queued, "held until its event")
        // Not its final event: another name, a step's, another job's.
        store.append(event(1, "job.started", "a", ""))
        store.append([event(2, "job.succeeded", "a", "0"), event(3, "job.succeeded", "b", "")])
        store.flush()
        #expect(try store.job("a")?.state == .queued)
        store.append(event(4, "job.succeeded", "a", ""))
        store.flush()
        #expect(try store.job("a")?.state == .succeeded)
        #expect(try store.events(after: 0, limit: 10).map(\.seq) == [1, 2, 3, 4])
        // A step's record, released by its event in a batch of events.
        let step = EncodedStep(StoredStep(state: .failed, result: nil, error: ["kind": "http"]))
        store.recordStep(jobId: "b", stepPath: "1", step: step, withFinalEvent: true, done: nil)
        store.flush()
        #expect(try store.unfinishedJobs().first { $0.job.jobId == "b" }?.steps.isEmpty == true)
        store.append([event(5, "job.progress", "b", "1"), event(6, "job.failed", "b", "1")])
        store.flush()
        #expect(try store.unfinishedJobs().first { $0.job.jobId == "b" }?.steps["1"]?.state == .failed)
        // A write whose event never comes is not lost: it goes after a second.
        store.finish(jobId: "c", state: .failed, result: Array(#"{"state":"failed"}"#.utf8), at: 2, withFinalEvent: true, done: nil)
        usleep(1_200_000)
        store.flush()
        #expect(try store.job("c")?.state == .failed)
        // Nor at a close.
        store.finish(jobId: "d", state: .cancelled, result: Array(#"{"state":"cancelled"}"#.utf8), at: 2, withFinalEvent: true, done: nil)
        store.close()
        store = try SQLiteStore(directory: dir)
        defer { store.close() }
        #expect(try store.job("d")?.state == .cancelled)
    }

    /// A full disk (here a page limit: SQLite answers SQLITE_FULL the same way)
    /// used to drop every write nobody waited for: a job's finish and result,
    /// its events. The job then ran again after a restart (its request sent
    /// twice) and the event history had a gap. They are kept now and stored
    /// once the store can write; a write someone waits for still fails to them.
    @Test func writesNobodyWaitsForOutliveAFullDisk() throws {
        let store = try SQLiteStore(directory: folder())
        defer { store.close() }
        _ = try insert(store, [job("a", at: 1)])
        store.limitPages(to: 1)  // as large as it is now, and no larger
        let result = Array(("\"" + String(repeating: "r", count: 300_000) + "\"").utf8)  // needs new pages
        store.finish(jobId: "a", state: .succeeded, result: result, at: 2, done: nil)
        store.append([HydraEvent(seq: 1, name: "job.succeeded", jobId: "a", rootJobId: "a", stepPath: "", time: 2,
                                 fields: ["big": .string(String(repeating: "e", count: 100_000))])])
        // (A submit that fits in the pages there are is committed on its own, first.)
        let big = JSONValue.string(String(repeating: "i", count: 300_000))
        #expect(throws: StoreError.self, "a submit is refused, not acknowledged") { try insert(store, [job("b", at: 3, input: big)]) }
        usleep(600_000)  // tried again, and failed again, meanwhile
        #expect(try store.job("a")?.state == .queued)
        store.limitPages(to: 1 << 30)
        store.flush()
        #expect(try store.job("a")?.state == .succeeded)
        #expect(try store.job("a")?.result?.stringValue?.count == 300_000)
        #expect(try store.events(after: 0, limit: 10).map(\.seq) == [1])
        #expect(try store.job("b") == nil)
    }

    /// A database file deleted under the store (its state folder removed):
    /// SQLite goes on writing to the unlinked file, and every job acknowledged
    /// from then on was lost at the next start. Writes fail instead.
    @Test func aDatabaseDeletedUnderTheStoreRefusesWrites() throws {
        let dir = folder()
        let store = try SQLiteStore(directory: dir)
        defer { store.close() }
        _ = try insert(store, [job("a", at: 1)])
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: dir + "/hydra.db" + suffix) }
        usleep(150_000)  // (the file is looked at every 100 ms at most)
        do {
            _ = try insert(store, [job("b", at: 2)])
            Issue.record("a job was acknowledged into a deleted database")
        } catch {
            #expect(error.description.contains("deleted or replaced"), "\(error)")
        }
    }

    @Test func unfinishedJobsComeBackWithTheirSteps() throws {
        let store = try SQLiteStore(directory: folder())
        defer { store.close() }
        _ = try insert(store, [job("b", at: 2), job("a", at: 1), job("c", at: 3)])
        store.markStarted(jobId: "a", at: 5)
        store.recordStep(jobId: "a", stepPath: "0", step: EncodedStep(StoredStep(state: .succeeded, result: 7, error: nil)), done: nil)
        store.recordStep(jobId: "a", stepPath: "1.0", step: EncodedStep(StoredStep(state: .failed, result: nil, error: ["kind": "http"])),
                         done: nil)
        store.recordStep(jobId: "c", stepPath: "0", step: EncodedStep(StoredStep(state: .succeeded, result: 1, error: nil)), done: nil)
        try waitForResult { store.finish(jobId: "c", state: .succeeded, result: Array(#"{"state":"succeeded"}"#.utf8), at: 6, done: $0) }
        store.markStarted(jobId: "c", at: 7)  // too late: c is final
        store.flush()

        let unfinished = try store.unfinishedJobs()
        #expect(unfinished.map(\.job.jobId) == ["a", "b"])
        #expect(unfinished[0].job.state == .running)
        #expect(unfinished[0].job.startedAt == 5)
        #expect(unfinished[0].steps == ["0": StoredStep(state: .succeeded, result: 7, error: nil),
                                        "1.0": StoredStep(state: .failed, result: nil, error: ["kind": "http"])])
        #expect(unfinished[1].steps.isEmpty)

        let c = try #require(try store.job("c"))
        #expect(c.state == .succeeded)
        #expect(c.result == ["state": "succeeded"])
        #expect(c.finishedAt == 6)
        #expect(c.startedAt == nil)
    }

    // MARK: - Events

    /// A replay for one job (or some names) is matched in the store: rows
    /// without the job's id (or any of the names) are passed over without
    /// being decoded (a filtered replay of 1.2M events took 9 s when every
    /// event was decoded). Same answer as filtering every event.
    @Test func eventsAreFilteredByJobAndNameInTheStore() throws {
        let store = try SQLiteStore(directory: folder())
        defer { store.close() }
        let names = ["job.queued", "job.started", "job.succeeded", "shared.updated"]
        var events: [HydraEvent] = []
        var random = SeededRandom(seed: 7)
        for seq in 1...3_000 {
            let root = "r\(random.next() % 5)"
            let own = random.next() % 3 == 0 ? root : "s\(seq)"
            events.append(HydraEvent(seq: UInt64(seq), name: names[Int(random.next() % 4)], jobId: own, rootJobId: root,
                                     stepPath: "", time: Double(seq), fields: ["n": .int(seq)]))
        }
        store.append(events)
        store.flush()
        func expected(after: UInt64, limit: Int, jobId: String?, names: Set<String>?) -> [UInt64] {
            Array(events.filter { e in
                e.seq > after && (jobId.map { e.jobId == $0 || e.rootJobId == $0 } ?? true) && (names?.contains(e.name) ?? true)
            }.prefix(limit).map(\.seq))
        }
        for (jobId, wanted) in [("r1", nil), ("r3", Set(["job.succeeded"])), (nil, Set(["shared.updated", "job.queued"])),
                                ("s7", nil), ("nobody", nil), ("r2", Set<String>())] as [(String?, Set<String>?)] {
            for (after, limit) in [(0, 1_000_000), (0, 7), (1_500, 100), (2_999, 10), (3_000, 10)] as [(UInt64, Int)] {
                let read = try store.events(after: after, limit: limit, jobId: jobId, names: wanted)
                #expect(read.map(\.seq) == expected(after: after, limit: limit, jobId: jobId, names: wanted),
                        "jobId \(jobId ?? "-") names \(wanted ?? []) after \(after) limit \(limit)")
                #expect(read.allSatisfy { $0.fields["n"] == .int(Int($0.seq)) })
            }
        }
        // A list of names longer than the query looks for is matched on the decoded events.
        let many = Set((0...SQLiteStore.maxQueriedNames).map { "custom.n\($0)" } + ["job.started"])
        #expect(try store.events(after: 0, limit: 10, jobId: nil, names: many).map(\.seq) ==
                expected(after: 0, limit: 10, jobId: nil, names: ["job.started"]))
    }

    @Test func eventsReplayInOrderAndSurviveReopen() throws {
        let dir = folder()
        var store = try SQLiteStore(directory: dir)
        #expect(try store.lastSeq() == 0)
        func event(_ seq: Int, _ n: Int) -> HydraEvent {
            HydraEvent(seq: UInt64(seq), name: "job.progress", jobId: "j\(seq)", rootJobId: "r", stepPath: "0.\(seq)",
                       time: Double(seq) + 0.5, fields: ["n": .int(n), "a": ["b": nil]])
        }
        store.append((1...5).map { event($0, $0) })
        store.append([event(3, 99)])  // already stored: ignored
        store.append([])
        store.flush()
        #expect(try store.events(after: 2, limit: 2).map(\.seq) == [3, 4])
        let all = try store.events(after: 0, limit: 10)
        #expect(all.map(\.seq) == [1, 2, 3, 4, 5])
        #expect(all[2].fields["n"] == 3)
        #expect(all[4].fields.keys.elementsEqual(["n", "a"]))
        #expect(all[4].name == "job.progress" && all[4].jobId == "j5" && all[4].rootJobId == "r")
        #expect(all[4].stepPath == "0.5" && all[4].time == 5.5)
        #expect(try store.events(after: 5, limit: 10).isEmpty)
        #expect(try store.events(after: 0, limit: 0).isEmpty)
        #expect(try store.events(after: .max, limit: 10).isEmpty)
        store.close()
        store = try SQLiteStore(directory: dir)
        defer { store.close() }
        #expect(try store.lastSeq() == 5)
        #expect(try store.events(after: 4, limit: 10).map(\.seq) == [5])
    }

    /// The writer holds a job's start back and folds it into the job's finish
    /// (one row update); a recorded step, a flush or the time limit writes it
    /// anyway. The rows read the same as when they are written apart.
    @Test func startsFoldIntoFinishes() throws {
        let noop: @Sendable () -> Void = {}
        let ms: UInt64 = 1_000_000
        var marks = StartMarks()
        let first = marks.plan([
            .markStarted(jobId: "a", time: 10), .markStarted(jobId: "b", time: 20), .markStarted(jobId: "s", time: 30),
            .finish(jobId: "c", state: .failed, result: Array("null".utf8), time: 31, done: nil),
        ], writeAll: false, now: 1000 * ms)
        #expect(first.skipped == [0, 1, 2] && first.startTimes.isEmpty && first.written.isEmpty && !marks.isEmpty)
        // A later batch: a's finish takes its start; s's step writes s's start.
        let second = marks.plan([
            .finish(jobId: "a", state: .succeeded, result: Array("1".utf8), time: 11, done: nil),
            .step(jobId: "s", stepPath: "0", EncodedStep(state: .succeeded, result: Array("1".utf8), error: nil), done: nil),
        ], writeAll: false, now: 1010 * ms)
        #expect(second.startTimes == [0: 10] && second.written.map(\.jobId) == ["s"])
        // b waits until the limit, then goes alone.
        #expect(marks.plan([], writeAll: false, now: 1100 * ms).written.isEmpty)
        let late = marks.plan([], writeAll: false, now: (1000 + UInt64(StartMarks.maxDelayMs)) * ms)
        #expect(late.written.map(\.jobId) == ["b"] && marks.isEmpty)
        // A barrier (a flush) writes every start held.
        _ = marks.plan([.markStarted(jobId: "d", time: 40)], writeAll: false, now: 2000 * ms)
        #expect(marks.plan([.barrier(reached: noop)], writeAll: false, now: 2001 * ms).written.map(\.jobId) == ["d"])

        let store = try SQLiteStore(directory: folder())
        defer { store.close() }
        _ = try insert(store, [job("a", at: 1), job("b", at: 2), job("c", at: 3)])
        store.markStarted(jobId: "a", at: 10)
        store.markStarted(jobId: "b", at: 20)
        store.finish(jobId: "a", state: .succeeded, result: Array("1".utf8), at: 11, done: nil)
        store.finish(jobId: "c", state: .failed, result: Array("null".utf8), at: 31, done: nil)
        store.flush()
        let a = try #require(try store.job("a")), b = try #require(try store.job("b")), c = try #require(try store.job("c"))
        #expect(a.state == .succeeded && a.startedAt == 10 && a.finishedAt == 11 && a.result == 1)
        #expect(b.state == .running && b.startedAt == 20 && b.finishedAt == nil)
        #expect(c.state == .failed && c.startedAt == nil && c.finishedAt == 31 && c.result == .null)
        // Without a finish nor a flush, a start is written once the limit passes.
        _ = try insert(store, [job("e", at: 4)])
        store.markStarted(jobId: "e", at: 50)
        let deadline = Date().addingTimeInterval(10)
        while try store.job("e")?.state != .running && Date() < deadline { usleep(10_000) }
        #expect(try store.job("e")?.startedAt == 50)
    }

    /// A job's row keeps the `job.result` text the journal gave, whatever its
    /// events said (a `job.succeeded` event may leave a large body out).
    @Test func aFinishedJobsRowKeepsTheResultItWasGiven() throws {
        let store = try SQLiteStore(directory: folder())
        defer { store.close() }
        _ = try insert(store, [job("j1", at: 1)])
        let result: JSONValue = ["status": 200, "body": ["text": "a \"quoted\" line\n", "n": 1.5]]
        let final = JobResult(jobId: "j1", state: .succeeded, result: result, error: nil)
        store.append(HydraEvent(seq: 1, name: EventName.succeeded, jobId: "j1", rootJobId: "j1", stepPath: "", time: 2,
                                fields: ["result": ["status": 200, "bodyOmitted": true]]))
        try waitForResult { store.finish(jobId: "j1", state: .succeeded, result: final.encodedJSON(), at: 3, done: $0) }
        #expect(try store.job("j1")?.result == final.json)
        #expect(try store.events(after: 0, limit: 10).map { $0.fields["result"] } == [["status": 200, "bodyOmitted": true]])
    }

    /// The events a transaction takes go in one row; a batch larger than a
    /// row's bytes takes several, and comes back whole and in order. Reads
    /// page through many rows, skipping those that cannot match.
    @Test func eventsGoInOneRowPerTransaction() throws {
        let store = try SQLiteStore(directory: folder())
        defer { store.close() }
        func count() throws -> Int { Int(try rows(store.path, "SELECT COUNT(*) FROM event_batches")[0][0]) ?? -1 }
        // About 2 KB each: 300 of them are more than two rows' worth.
        let padding = String(repeating: "p", count: 2000)
        let count1 = 300
        store.append((1...count1).map {
            HydraEvent(seq: UInt64($0), name: "job.queued", jobId: "j\($0)", rootJobId: "j\($0)", stepPath: "",
                       time: Double($0), fields: ["n": .int($0), "pad": .string(padding)])
        })
        store.flush()
        let rowsTaken = try count()
        #expect(rowsTaken >= count1 * 2000 / EventBatch.maxRowBytes && rowsTaken <= count1 * 2100 / EventBatch.maxRowBytes + 1)
        #expect(try rows(store.path, "SELECT MAX(length(events)) FROM event_batches")[0][0].count > 0)
        let all = try store.events(after: 0, limit: count1 + 10)
        #expect(all.map(\.seq) == (1...count1).map { UInt64($0) })
        #expect(all.last?.fields["n"] == .int(count1) && all[70].jobId == "j71" && all[70].fields["pad"] == .string(padding))

        // One event per flushed write: a row each, more than a page of rows.
        let count2 = SQLiteStore.eventRowsPerPage * 2 + 10
        for seq in (count1 + 1)...(count1 + count2) {
            store.append([HydraEvent(seq: UInt64(seq), name: seq % 3 == 0 ? "job.started" : "job.progress",
                                     jobId: "k\(seq)", rootJobId: "r\(seq % 2)", stepPath: "0", time: Double(seq), fields: [:])])
            store.flush()
        }
        #expect(try count() == rowsTaken + count2)
        let more = try store.events(after: UInt64(count1), limit: 500)
        #expect(more.map(\.seq) == ((count1 + 1)...(count1 + count2)).map { UInt64($0) })
        #expect(more.allSatisfy { $0.jobId == "k\($0.seq)" && $0.stepPath == "0" })
        // A job's events after many rows without it; a limit reached inside a page; names.
        let last = count1 + count2
        #expect(try store.events(after: 0, limit: 10, jobId: "k\(last)", names: nil).map(\.seq) == [UInt64(last)])
        let odd = try store.events(after: 0, limit: 1000, jobId: "r1", names: ["job.started"])
        let oddStarted: [UInt64] = ((count1 + 1)...last).filter { (seq: Int) -> Bool in seq % 6 == 3 }.map { UInt64($0) }
        #expect(odd.map(\.seq) == oddStarted)
        #expect(try store.events(after: UInt64(count1), limit: 3, jobId: "r0", names: nil).count == 3)

        // Fields encoded by their emitter with newlines between tokens (a line each is how rows hold events).
        let pretty = HydraEvent(seq: UInt64(last + 1), name: "job.succeeded", jobId: "p", rootJobId: "p", stepPath: "",
                                time: 7, encodedFields: Array("{\n  \"result\": {\"text\": \"a\\nb\"}\n}\n".utf8),
                                build: { ["result": ["text": "a\nb"]] })
        store.append([pretty])
        store.flush()
        let read = try store.events(after: UInt64(last), limit: 10)
        #expect(read.map(\.seq) == [UInt64(last + 1)] && read.first?.fields["result"]?["text"] == "a\nb")

        // The same events again (a seq already stored) are left out.
        store.append([HydraEvent(seq: 5, name: "job.failed", jobId: "x", rootJobId: "x", stepPath: "", time: 1, fields: [:])])
        store.flush()
        #expect(try store.events(after: 4, limit: 1).first?.name == "job.queued")
        #expect(try count() == rowsTaken + count2 + 1)
    }

    // MARK: - Shared data

    @Test func sharedValuesWithEveryCipher() throws {
        let dir = folder()
        var store = try SQLiteStore(directory: dir, sharedKey: Self.key)
        let values: [(String, SharedCipher)] = [("p", .none), ("g", .gzip), ("e", .aesGCM)]
        for (key, cipher) in values {
            try setShared(store, key, ["secret": .string("clear-text-\(key)"), "k": .string(key), "list": [1, 2, 3]], cipher)
        }
        for (key, _) in values { #expect(try store.sharedValue(key)?["k"] == .string(key)) }
        #expect((store.sharedCipher("e") == .aesGCM))
        #expect(!(store.sharedCipher("g") == .aesGCM) && !(store.sharedCipher("p") == .aesGCM) && !(store.sharedCipher("missing") == .aesGCM))
        #expect(try store.sharedValue("missing") == nil)
        // Replaced with another cipher.
        try setShared(store, "g", "now plain", .none)
        #expect(try store.sharedValue("g") == "now plain")
        #expect(try waitForResult { store.removeShared("p", done: $0) } == true)
        #expect(try waitForResult { store.removeShared("p", done: $0) } == false)
        #expect(try store.sharedValue("p") == nil)
        store.close()

        store = try SQLiteStore(directory: dir, sharedKey: Self.key)
        defer { store.close() }
        #expect(try store.sharedValue("e") == ["secret": "clear-text-e", "k": "e", "list": [1, 2, 3]])
        #expect(try store.sharedValue("g") == "now plain")
        #expect(try store.sharedValue("p") == nil)
        #expect((store.sharedCipher("e") == .aesGCM))
        try setShared(store, "z", ["deep": ["gzip": .string(String(repeating: "abc", count: 10_000))]], .gzip)
        store.close()
        store = try SQLiteStore(directory: dir, sharedKey: Self.key)
        #expect(try store.sharedValue("z")?["deep"]?["gzip"]?.stringValue?.count == 30_000)
    }

    @Test func encryptedValuesNeverReachTheFileInClear() throws {
        let dir = folder()
        let store = try SQLiteStore(directory: dir, sharedKey: Self.key)
        try setShared(store, "e", "MARKER-encrypted-4f1c", .aesGCM)
        try setShared(store, "p", "MARKER-plain-9a2b", .none)
        store.flush()
        store.close()
        let bytes = fileBytes(dir)
        #expect(bytes.range(of: Data("MARKER-plain-9a2b".utf8)) != nil)  // the check sees values in clear
        #expect(bytes.range(of: Data("MARKER-encrypted-4f1c".utf8)) == nil)
        #expect(bytes.range(of: Data(Self.key.utf8)) == nil)
    }

    @Test func aesGCMWithoutAKeyStoresNothing() throws {
        let dir = folder()
        var store = try SQLiteStore(directory: dir)
        let error = #expect(throws: StoreError.self) { try setShared(store, "e", "secret", .aesGCM) }
        #expect(error?.description == "cipher: aes-gcm needs HYDRA_SHARED_KEY (a passphrase of 16+ characters)")
        store.flush()
        #expect(try store.sharedValue("e") == nil)
        #expect(!(store.sharedCipher("e") == .aesGCM))
        store.close()
        store = try SQLiteStore(directory: dir)
        defer { store.close() }
        #expect(try store.sharedValue("e") == nil)
        #expect(try rows(store.path, "SELECT COUNT(*) FROM shared") == [["0"]])
    }

    @Test func encryptedValuesNeedTheRightKey() throws {
        let dir = folder()
        var store = try SQLiteStore(directory: dir, sharedKey: Self.key)
        try setShared(store, "e", "secret-value-1234", .aesGCM)
        try setShared(store, "p", 42, .gzip)
        store.close()

        func refused(_ store: SQLiteStore) {
            let error = #expect(throws: StoreError.self) { try store.sharedValue("e") }
            #expect(error?.description.contains("HYDRA_SHARED_KEY") == true)
            #expect(error?.description.contains("secret-value") == false)
        }
        // Another key, or none: the store opens, the other values read, the encrypted one throws.
        store = try SQLiteStore(directory: dir, sharedKey: "another passphrase, also long")
        refused(store)
        #expect(try store.sharedValue("p") == 42)
        #expect((store.sharedCipher("e") == .aesGCM))
        store.close()
        store = try SQLiteStore(directory: dir)
        refused(store)
        // It can still be replaced or removed.
        #expect(try waitForResult { store.removeShared("e", done: $0) } == true)
        #expect(try store.sharedValue("e") == nil)
        store.close()

        let error = #expect(throws: StoreError.self) { try SQLiteStore(directory: dir, sharedKey: "short") }
        #expect(error?.description.contains("HYDRA_SHARED_KEY") == true)
    }

    // MARK: - Response cache

    @Test func cacheTTLAndRemoval() throws {
        let store = try SQLiteStore(directory: folder())
        defer { store.close() }
        store.storeResponse("GET http://h/a%1", api: "a", value: 1, ttl: 10, now: 100)
        store.storeResponse("GET http://h/ab", api: "b", value: 2, ttl: 10, now: 100)
        store.storeResponse("GET http://h/x", api: "a", value: 3, ttl: 10, now: 100)
        store.storeResponse("GET http://h/a_2", api: "a", value: 4, ttl: 10, now: 100)
        store.storeResponse("GET http://h/ac", api: nil, value: ["v": 5], ttl: 10, now: 100)
        store.flush()
        #expect(try store.cachedResponse("GET http://h/ab", now: 105) == 2)
        #expect(try store.cachedResponse("GET http://h/ab", now: 110) == nil)  // stored_at + ttl must be > now
        #expect(try store.cachedResponse("GET http://h/ab", now: 111) == nil)
        #expect(try store.cachedResponse("GET http://h/ac", now: 101) == ["v": 5])
        #expect(try store.cachedResponse("missing", now: 101) == nil)
        // Stored again: fresh.
        store.storeResponse("GET http://h/ab", api: "b", value: 22, ttl: 10, now: 200)
        store.flush()
        #expect(try store.cachedResponse("GET http://h/ab", now: 205) == 22)

        func remove(api: String? = nil, key: String? = nil, prefix: String? = nil) throws -> Int {
            try waitForResult { store.removeResponses(api: api, key: key, prefix: prefix, done: $0) }.count
        }
        #expect(try remove(prefix: "GET http://h/a%") == 1)  // `%` is literal, not a wildcard
        #expect(try remove(prefix: "GET http://h/a_") == 1)  // so is `_`
        #expect(try remove(api: "b", prefix: "GET http://h/x") == 0)  // criteria combine with AND
        #expect(try remove(api: "a", key: "GET http://h/ab") == 0)
        #expect(try remove(key: "GET http://h/ab") == 1)
        #expect(try remove(api: "a") == 1)
        #expect(try remove() == 1)
        #expect(try remove() == 0)
    }

    // MARK: - Upkeep

    /// Migration 7 keeps succeeded jobs out of the state index: listing them,
    /// listing the others, recovery and prune each still find an index (a
    /// plan that scans the whole table would grow with the 24 h retained).
    @Test func listingRecoveryAndPruneUseAnIndex() throws {
        let store = try SQLiteStore(directory: folder())
        defer { store.close() }
        _ = try insert(store, (0..<6).map { job("j\($0)", at: Double($0)) })
        for id in ["j0", "j2", "j4"] { store.finish(jobId: id, state: .succeeded, result: Array("{}".utf8), at: 10, done: nil) }
        store.finish(jobId: "j1", state: .failed, result: Array("{}".utf8), at: 10, done: nil)
        store.markStarted(jobId: "j3", at: 6)
        store.flush()
        #expect(try store.jobs(state: .succeeded, limit: 10, after: nil).jobs.map(\.jobId) == ["j4", "j2", "j0"])
        #expect(try store.jobs(state: .failed, limit: 10, after: nil).jobs.map(\.jobId) == ["j1"])
        #expect(try store.unfinishedJobs().map(\.job.jobId) == ["j3", "j5"])

        func plan(_ sql: String) throws -> String {
            try rows(store.path, "EXPLAIN QUERY PLAN " + sql).map { $0.last ?? "" }.joined(separator: "; ")
        }
        let columns = "SELECT * FROM jobs"
        let byState = try plan("\(columns) WHERE state = 'failed' AND \(SQLiteStore.notSucceeded) ORDER BY created_at DESC, job_id DESC LIMIT 10")
        #expect(byState.contains("INDEX jobs_unsucceeded"), "\(byState)")
        let succeeded = try plan("\(columns) WHERE state = 'succeeded' ORDER BY created_at DESC, job_id DESC LIMIT 10")
        #expect(succeeded.contains("INDEX jobs_by_created"), "\(succeeded)")
        let unfinished = try plan("\(columns) WHERE state IN ('queued', 'running') AND \(SQLiteStore.notSucceeded) ORDER BY created_at, job_id")
        #expect(unfinished.contains("INDEX jobs_unsucceeded"), "\(unfinished)")
        let prune = try plan("\(columns) WHERE created_at < 5 AND finished_at < 5 AND +state IN \(WriteOperation.finalStates)")
        #expect(prune.contains("INDEX jobs_by_created"), "\(prune)")
        // Migration 11 keeps the time indexes ascending (new rows go in at the
        // right end): newest-first listings read them backwards, never sorting.
        let newest = try plan("\(columns) ORDER BY created_at DESC, job_id DESC LIMIT 10")
        #expect(newest.contains("INDEX jobs_by_created") && !newest.contains("TEMP B-TREE"), "\(newest)")
        let page = try plan("\(columns) WHERE (created_at, job_id) < (3, 'j3') ORDER BY created_at DESC, job_id DESC LIMIT 10")
        #expect(page.contains("INDEX jobs_by_created") && !page.contains("TEMP B-TREE"), "\(page)")
        for sql in [byState, succeeded] { #expect(!sql.contains("TEMP B-TREE"), "\(sql)") }
        let resources = try plan("SELECT * FROM resources ORDER BY stored_at DESC, key DESC LIMIT 10")
        #expect(resources.contains("INDEX resources_by_stored") && !resources.contains("TEMP B-TREE"), "\(resources)")
    }

    /// The newest job's index entries go in at the right end of the time
    /// index (migration 11): its leaves fill up, where newest-first entries
    /// left each one half empty (and rewrote the path to it in every commit).
    @Test func timeIndexLeavesFillUp() throws {
        let store = try SQLiteStore(directory: folder())
        defer { store.close() }
        for batch in 0..<20 {
            _ = try insert(store, (0..<100).map { job("j\(batch * 100 + $0)", at: Double(batch * 100 + $0)) })
        }
        store.flush()
        // Leaves but the last full (SQLite leaves a little room); newest-first, about half empty.
        let stat = try rows(store.path, """
            SELECT SUM(unused), SUM(pgsize), COUNT(*) FROM dbstat WHERE name = 'jobs_by_created' AND pagetype = 'leaf'
            """)
        let unused = Double(stat[0][0]) ?? 0, size = Double(stat[0][1]) ?? 1, leaves = Int(stat[0][2]) ?? 0
        #expect(leaves > 4)
        #expect(unused / size < 0.25, "\(Int(unused)) of \(Int(size)) bytes unused in \(leaves) leaves")
    }

    @Test func pruneDropsOldFinishedWork() throws {
        let directory = folder()
        let store = try SQLiteStore(directory: directory)
        defer { store.close() }
        _ = try insert(store, [job("old", at: 1), job("recent", at: 1), job("running", at: 1), job("queued", at: 1)])
        store.finish(jobId: "old", state: .succeeded, result: Array("{}".utf8), at: 10, done: nil)
        store.finish(jobId: "recent", state: .cancelled, result: Array("{}".utf8), at: 1000, done: nil)
        store.markStarted(jobId: "running", at: 2)
        for id in ["old", "recent", "running"] {
            store.recordStep(jobId: id, stepPath: "0", step: EncodedStep(StoredStep(state: .succeeded, result: 1, error: nil)), done: nil)
        }
        store.append((1...5).map {
            HydraEvent(seq: UInt64($0), name: "job.queued", jobId: "j", rootJobId: "j", stepPath: "",
                       time: $0 == 3 ? 1000 : 10, fields: [:])
        })
        let now = Date().timeIntervalSince1970
        store.storeResponse("expired", api: nil, value: 1, ttl: 10, now: now - 100)
        store.storeResponse("fresh", api: nil, value: 2, ttl: 3600, now: now)
        store.prune(before: 500)
        store.flush()

        #expect(try store.job("old") == nil)
        #expect(try store.jobs(state: nil, limit: 10, after: nil).jobs.map(\.jobId).sorted() == ["queued", "recent", "running"])
        // Events go as a prefix: those before the first one within retention
        // (seq 3). Seq 4, whose clock went back, stays: a replay has no gap.
        #expect(try store.events(after: 0, limit: 10).map(\.seq) == [3, 4, 5])
        #expect(try store.cachedResponse("fresh", now: now) == 2)
        #expect(try rows(store.path, "SELECT key FROM cache") == [["fresh"]])
        #expect(try rows(store.path, "SELECT job_id FROM steps ORDER BY job_id") == [["recent"], ["running"]])

        // With no event within retention, none stays (protocol §7: a replay from 0
        // showed the newest, of a job long gone); the highest seq is remembered, so
        // seq never goes back, after a reopen too.
        store.prune(before: 2000)
        store.flush()
        #expect(try store.events(after: 0, limit: 10).isEmpty)
        #expect(try store.lastSeq() == 5)
        store.close()
        let reopened = try SQLiteStore(directory: directory)
        defer { reopened.close() }
        #expect(try reopened.lastSeq() == 5)
        reopened.append(HydraEvent(seq: 6, name: "job.queued", jobId: "j", rootJobId: "j", stepPath: "", time: 3000, fields: [:]))
        reopened.flush()
        #expect(try reopened.lastSeq() == 6)
    }

    /// The WAL reaches the database file through the checkpoint thread: the
    /// writer's own threshold is far above what is written here, and SQLite's
    /// automatic checkpoints are off on the write connection.
    @Test func checkpointsRunBesideTheWriter() throws {
        let store = try SQLiteStore(directory: folder())
        defer { store.close() }
        let big = JSONValue.string(String(repeating: "x", count: 8000))
        // Rows of 8 KB (about three WAL frames each) past the background threshold,
        // far below `Checkpointer.writerFrames`.
        let chunks = Checkpointer.backgroundFrames / 200
        for chunk in 0..<chunks {
            _ = try insert(store, (0..<100).map { job("j\(chunk)-\($0)", at: 1, input: big) })
        }
        func size(_ path: String) -> Int {
            ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
        }
        let expected = chunks * 100 * 8000 / 2
        let deadline = Date().addingTimeInterval(20)
        while size(store.path) < expected && Date() < deadline { usleep(20_000) }
        #expect(size(store.path) >= expected)
        #expect(try store.job("j\(chunks - 1)-99")?.input == big)
    }

    /// Past the threshold, a background checkpoint runs each time the WAL grew
    /// by ``Checkpointer/stepFrames``, not after every commit.
    @Test func backgroundCheckpointsRunEveryFewThousandFrames() throws {
        let store = try SQLiteStore(directory: folder())
        defer { store.close() }
        // Commits of one job each (a few frames), until many came past the threshold.
        var n = 0
        while store.checkpointer.commitsPastThreshold.load(ordering: .relaxed) < 1000 && n < 40_000 {
            _ = try insert(store, [job("j\(n)", at: Double(n))])
            n += 1
        }
        let past = store.checkpointer.commitsPastThreshold.load(ordering: .relaxed)
        let runs = store.checkpointer.checkpointsRun.load(ordering: .relaxed)
        #expect(past >= 1000)
        // 1,000 commits of 3 or more frames: at least one step, and far fewer runs than commits.
        #expect(runs >= 1 && runs * 20 < past, "\(runs) checkpoints for \(past) commits past the threshold")
        #expect(try store.job("j\(n - 1)") != nil)
    }

    @Test func migrationThreeKeepsJobsAndIdempotencyKeys() throws {
        // A database as Hydra left it at schema version 2.
        let dir = folder()
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let path = dir + "/hydra.db"
        let old = try SQLiteConnection(path: path, sync: .normal)
        try old.execute("CREATE TABLE migrations (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)")
        for version in 1...2 {
            try old.execute(Migrations.all[version - 1])
            try old.run("INSERT INTO migrations (version, applied_at) VALUES (?, 0)", [.int(version)])
        }
        for (id, key) in [("a", "k1"), ("b", nil), ("c", nil)] as [(String, String?)] {
            try old.run("""
                INSERT INTO jobs (job_id, spec, input, canonical, priority, idempotency_key, state, created_at)
                VALUES (?, '{"type":"local","name":"echo"}', 'null', '', 0, ?, 'queued', 1)
                """, [.text(id), SQLValue(key)])
        }
        old.close()

        let store = try SQLiteStore(directory: dir)
        defer { store.close() }
        #expect(try store.jobs(state: .queued, limit: 10, after: nil).jobs.map(\.jobId).sorted() == ["a", "b", "c"])
        #expect(try store.job("a")?.idempotencyKey == "k1")
        // The key still answers a repeated submit; jobs without a key never collide.
        #expect(try insert(store, [job("a2", at: 2, key: "k1"), job("d", at: 2), job("e", at: 2)]) ==
                [.existing(jobId: "a", sameSpec: false), .inserted, .inserted])
        let indexes = try rows(store.path, "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name")
        // (Later migrations add the resource index's own.)
        #expect(indexes == [["cache_by_api"], ["jobs_by_created"], ["jobs_by_idempotency_key"],
                            ["jobs_unsucceeded"], ["resources_by_stored"], ["resources_by_use"]])
    }

    /// A restart finds what an unfinished job already sent, however many rows
    /// of other jobs' events came after it: with a few such jobs SQLite passes
    /// over the rows that name none of them, with many every row is decoded.
    @Test func aRestartFindsWhatOldUnfinishedJobsSent() throws {
        let store = try SQLiteStore(directory: folder())
        defer { store.close() }
        _ = try insert(store, [job("old", at: 1)])
        var seq: UInt64 = 0
        func event(_ name: String, _ root: String, attempt: Int? = nil) -> HydraEvent {
            seq += 1
            return HydraEvent(seq: seq, name: name, jobId: root, rootJobId: root, stepPath: "", time: Double(seq),
                              fields: attempt.map { ["attempt": .int($0)] } ?? [:])
        }
        store.append([event("job.queued", "old"), event("job.started", "old"), event("job.retrying", "old", attempt: 3)])
        store.flush()
        for i in 0..<300 {
            store.append([event("job.queued", "x\(i)"), event("job.succeeded", "x\(i)")])
            store.flush()
        }
        func old() throws -> EmittedEvents? { try store.unfinishedJobs().first { $0.job.jobId == "old" }?.emitted }
        #expect(try old()?.attemptsMade(stepPath: "") == 2)
        #expect(try old()?.contains(stepPath: "", name: "job.started") == true)
        // More unfinished jobs than a query names: the same answer.
        let many = (0...SQLiteStore.maxQueriedNames).map { "u\($0)" }
        _ = try insert(store, many.map { job($0, at: 2) })
        store.append(many.map { event("job.queued", $0) })
        store.flush()
        #expect(try store.unfinishedJobs().count == many.count + 1)
        #expect(try old()?.attemptsMade(stepPath: "") == 2)
        #expect(try store.unfinishedJobs().first { $0.job.jobId == "u3" }?.emitted.contains(stepPath: "", name: "job.queued") == true)
    }

    /// Migration 13 moves each stored event into `event_batches`: a replay
    /// reads them as they were, numbering goes on after them, and a restart
    /// still finds what an unfinished job already sent.
    @Test func migrationThirteenKeepsEvents() throws {
        let dir = folder()
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let old = try SQLiteConnection(path: dir + "/hydra.db", sync: .normal)
        try old.execute("CREATE TABLE migrations (version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)")
        for version in 1...12 {
            try old.execute(Migrations.all[version - 1])
            try old.run("INSERT INTO migrations (version, applied_at) VALUES (?, 0)", [.int(version)])
        }
        try old.run("""
            INSERT INTO jobs (job_id, spec, input, canonical, state, created_at)
            VALUES ('u', '{"type":"local","name":"echo"}', 'null', '', 'running', 1)
            """)
        let events: [(Int, String, String, String, Double, String)] = [
            (1, "job.queued", "u", "", 1.25, #"{"spec":{"type":"local","name":"echo"}}"#),
            (2, "job.started", "u", "", 2, #"{"worker":"local"}"#),
            (3, "job.retrying", "u", "0", 3, #"{"attempt":2,"delayMs":10,"error":{"code":"x","message":"a \"quoted\"\nline"}}"#),
            (7, "custom.odd", "w", "", 4, "not json"),
        ]
        for (seq, name, root, path, time, fields) in events {
            try old.run("INSERT INTO events (seq, name, job_id, root_job_id, step_path, time, fields) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [.int(seq), .text(name), .text(root), .text(root), .text(path), .double(time), .text(fields)])
        }
        old.close()

        let store = try SQLiteStore(directory: dir)
        defer { store.close() }
        let read = try store.events(after: 0, limit: 10)
        #expect(read.map(\.seq) == [1, 2, 3, 7])
        #expect(read[0].fields["spec"]?["name"] == "echo" && read[0].time == 1.25 && read[0].rootJobId == "u")
        #expect(read[2].stepPath == "0" && read[2].fields["error"]?["message"] == .string("a \"quoted\"\nline"))
        #expect(read[3].name == "custom.odd" && read[3].fields.isEmpty)
        #expect(try store.lastSeq() == 7)
        let unfinished = try store.unfinishedJobs()
        #expect(unfinished.map(\.job.jobId) == ["u"])
        #expect(unfinished.first?.emitted.attemptsMade(stepPath: "0") == 1)
        #expect(unfinished.first?.emitted.contains(stepPath: "", name: "job.started") == true)
        #expect(try rows(store.path, "SELECT name FROM sqlite_master WHERE name = 'events'").isEmpty)
        store.append([HydraEvent(seq: 8, name: "job.succeeded", jobId: "u", rootJobId: "u", stepPath: "", time: 5, fields: [:])])
        store.flush()
        #expect(try store.events(after: 6, limit: 10).map(\.seq) == [7, 8])
    }

    @Test func closedStoresRefuse() throws {
        let store = try SQLiteStore(directory: folder(), sharedKey: Self.key)
        try setShared(store, "s", 1, .none)
        store.storeResponse("k", api: nil, value: 1, ttl: 10, now: 1)
        store.close()  // commits what is queued first
        store.close()
        #expect(throws: StoreError.self) { try store.job("a") }
        #expect(throws: StoreError.self) { try store.jobs(state: nil, limit: 1, after: nil) }
        #expect(throws: StoreError.self) { try store.unfinishedJobs() }
        #expect(throws: StoreError.self) { try store.events(after: 0, limit: 1) }
        #expect(throws: StoreError.self) { try store.lastSeq() }
        #expect(throws: StoreError.self) { try store.sharedValue("s") }
        #expect(throws: StoreError.self) { try store.cachedResponse("k", now: 1) }
        let error = #expect(throws: StoreError.self) { try insert(store, [job("late", at: 1)]) }
        #expect(error?.description == "store is closed")
        #expect(throws: StoreError.self) { try setShared(store, "s", 2, .none) }
        #expect(throws: StoreError.self) { try waitForResult { store.removeShared("s", done: $0) } }
        #expect(throws: StoreError.self) { try waitForResult { store.removeResponses(api: nil, key: nil, prefix: nil, done: $0) } }
        #expect(throws: StoreError.self) {
            try waitForResult { store.finish(jobId: "a", state: .failed, result: Array("null".utf8), at: 1, done: $0) }
        }
        store.markStarted(jobId: "a", at: 1)
        store.append([HydraEvent(seq: 1, name: "job.queued", jobId: "a", rootJobId: "a", stepPath: "", time: 1, fields: [:])])
        store.flush()  // returns at once
    }

    @Test func callbacksMayFlushAndClose() throws {
        let store = try SQLiteStore(directory: folder())
        // flush() from a callback (the writer thread) must not wait for itself.
        let seen = try waitForResult { (done: @escaping @Sendable (Result<StoredJob?, StoreError>) -> Void) in
            store.insert([job("a", at: 1)]) { _ in
                store.markStarted(jobId: "a", at: 2)
                store.flush()
                done(Result { () throws(StoreError) in try store.job("a") })
            }
        }
        #expect(seen?.state == .running)
        // Nor close().
        _ = try waitForResult { (done: @escaping @Sendable (Result<Bool, StoreError>) -> Void) in
            store.insert([job("b", at: 1)]) { _ in
                store.storeResponse("k", api: nil, value: 1, ttl: 10, now: 1)
                store.close()
                done(.success(true))
            }
        }
        #expect(throws: StoreError.self) { try store.job("a") }
    }

    // MARK: - Concurrency

    @Test func concurrentInsertsAreAllAcknowledged() throws {
        let store = try SQLiteStore(directory: folder())
        defer { store.close() }
        let (threads, perThread) = (4, 2500)
        let acknowledged = Atomic(0)
        let start = ContinuousClock.now
        DispatchQueue.concurrentPerform(iterations: threads) { t in
            let group = DispatchGroup()
            for i in 0..<perThread {
                group.enter()
                store.insert([job("t\(t)-\(i)", at: Double(i), key: i % 2 == 0 ? "k\(t)-\(i)" : nil)]) { r in
                    if case .success([.inserted]) = r { acknowledged.add(1, ordering: .relaxed) }
                    group.leave()
                }
            }
            group.wait()
        }
        let elapsed = ContinuousClock.now - start
        let total = threads * perThread
        #expect(acknowledged.load(ordering: .relaxed) == total)
        #expect(try store.jobs(state: .queued, limit: 20_000, after: nil).jobs.count == total)
        #expect(try rows(store.path, "SELECT COUNT(*) FROM jobs") == [["\(total)"]])
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        print("SQLiteStore: \(total) single inserts from \(threads) threads, all acknowledged in "
              + "\(Int(seconds * 1000)) ms (\(Int(Double(total) / seconds)) jobs/s)")
    }

    /// A submit's insert is committed, and answered, before the other jobs'
    /// record queued beside it (their finishes and events), which follows at
    /// once; a batch with any other kind of write (a prune here: it may remove
    /// what an idempotent submit would find) stays whole and in order.
    @Test func insertsAreAnsweredBeforeTheRecordBesideThem() throws {
        let store = try SQLiteStore(directory: folder())
        defer { store.close() }
        _ = try insert(store, [job("a", at: 1), job("b", at: 1)])
        let result = Array(#"{"state":"succeeded"}"#.utf8)
        /// Queues `before` while the writer is held in a callback, then an
        /// insert of `id` whose callback reads job `probe`: the two are taken in one batch.
        func state(of probe: String, seenBy id: String, before: () -> Void) throws -> JobState? {
            let hold = DispatchSemaphore(value: 0)
            let held = DispatchSemaphore(value: 0)
            store.insert([job(id + "-hold", at: 2)]) { _ in
                held.signal()
                hold.wait()
            }
            held.wait()
            before()
            let seen = Locked<JobState?>(nil)
            let answered = DispatchSemaphore(value: 0)
            store.insert([job(id, at: 2)]) { _ in
                seen.withLock { $0 = try? store.job(probe)?.state }
                answered.signal()
            }
            hold.signal()
            answered.wait()
            store.flush()
            return seen.withLock { $0 }
        }
        let first = try state(of: "a", seenBy: "c") {
            store.finish(jobId: "a", state: .succeeded, result: result, at: 3, done: nil)
            store.append([HydraEvent(seq: 1, name: "job.succeeded", jobId: "a", rootJobId: "a", stepPath: "", time: 3, fields: [:])])
        }
        #expect(first == .queued, "the insert was answered before a's finish, queued earlier, was committed")
        #expect(try store.job("a")?.state == .succeeded)
        #expect(try store.events(after: 0, limit: 10).map(\.seq) == [1])
        // With a prune in the batch, everything commits together, in order.
        let second = try state(of: "b", seenBy: "d") {
            store.finish(jobId: "b", state: .succeeded, result: result, at: 3, done: nil)
            store.prune(before: 0)
        }
        #expect(second == .succeeded, "b's finish was committed with the insert")
        #expect(try store.job("b")?.state == .succeeded && store.job("d")?.state == .queued)
    }

    @Test func readersRunBesideTheWriter() throws {
        let store = try SQLiteStore(directory: folder())
        defer { store.close() }
        let failures = Atomic(0)
        DispatchQueue.concurrentPerform(iterations: 4) { t in
            for i in 0..<200 {
                if t % 2 == 0 {
                    let id = "t\(t)-\(i)"
                    // A read right after `done` sees the write.
                    let seen = try? waitForResult { (done: @escaping @Sendable (Result<Bool, StoreError>) -> Void) in
                        store.insert([job(id, at: Double(i))]) { r in done(r.map { _ in true }) }
                    }
                    if seen != true || (try? store.job(id)) == nil { failures.add(1, ordering: .relaxed) }
                } else if (try? store.jobs(state: nil, limit: 50, after: nil)) == nil {
                    failures.add(1, ordering: .relaxed)
                }
            }
        }
        #expect(failures.load(ordering: .relaxed) == 0)
    }
}
