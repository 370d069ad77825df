import Foundation
import Synchronization
import Testing

@testable import Hydra
@testable import HydraStore

/// The SQLite state store on real files.
@Suite struct SQLiteStoreTests {
    func folder() -> String { NSTemporaryDirectory() + "hydra-store-\(UUID().uuidString)" }

    func job(_ id: String, at time: Double, key: String? = nil, input: JSONValue = .null) -> StoredJob {
        StoredJob(jobId: id, spec: ["type": "local", "name": "echo"], input: input, priority: 0,
                  idempotencyKey: key, createdAt: time)
    }

    func insert(_ store: SQLiteStore, _ jobs: [StoredJob]) throws -> [InsertOutcome] {
        let result = Mutex<Result<[InsertOutcome], StoreError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        store.insert(jobs) { r in result.withLock { $0 = r }; done.signal() }
        done.wait()
        return try result.withLock { $0! }.get()
    }

    @Test func migratesOnceAndKeepsDataAcrossReopen() throws {
        let dir = folder()
        var store = try SQLiteStore(directory: dir)
        _ = try insert(store, [job("a", at: 1)])
        store.close()
        store = try SQLiteStore(directory: dir)
        defer { store.close() }
        #expect(try store.job("a")?.state == .queued)
        #expect(Migrations.all.count == 1)
    }

    @Test func pagesNewestFirstWithAStateFilter() throws {
        let store = try SQLiteStore(directory: folder())
        defer { store.close() }
        _ = try insert(store, (0..<25).map { job("j\($0)", at: Double($0 / 2)) })  // equal times tie-break by id
        store.finish(jobId: "j3", state: .failed, result: ["state": "failed"], at: 100, done: nil)
        store.flush()
        var seen: [String] = []
        var cursor: String?
        repeat {
            let page = try store.jobs(state: nil, limit: 10, after: cursor)
            seen += page.jobs.map(\.jobId)
            cursor = page.next
        } while cursor != nil
        #expect(seen.count == 25)
        #expect(Set(seen).count == 25)
        #expect(seen.first == "j24")
        #expect(try store.jobs(state: .failed, limit: 10, after: nil).jobs.map(\.jobId) == ["j3"])
        #expect(throws: StoreError.self) { try store.jobs(state: nil, limit: 10, after: "garbage") }
    }

    @Test func idempotencyKeysEvenWithinOneBatch() throws {
        let store = try SQLiteStore(directory: folder())
        defer { store.close() }
        let outcomes = try insert(store, [job("a", at: 1, key: "k"), job("b", at: 1, key: "k"),
                                          job("c", at: 1, key: "k", input: 5)])
        #expect(outcomes == [.inserted, .existing(jobId: "a", sameSpec: true), .existing(jobId: "a", sameSpec: false)])
        #expect(try store.job("b") == nil)
    }

    @Test func unfinishedJobsComeBackWithTheirSteps() throws {
        let store = try SQLiteStore(directory: folder())
        defer { store.close() }
        _ = try insert(store, [job("a", at: 1), job("b", at: 2), job("c", at: 3)])
        store.markStarted(jobId: "a", at: 5)
        store.recordStep(jobId: "a", stepPath: "0", outcome: StoredStep(state: .succeeded, result: 7, error: nil), done: nil)
        store.finish(jobId: "c", state: .succeeded, result: ["state": "succeeded"], at: 6, done: nil)
        store.flush()
        let unfinished = try store.unfinishedJobs()
        #expect(unfinished.map(\.job.jobId) == ["a", "b"])
        #expect(unfinished[0].job.state == .running)
        #expect(unfinished[0].steps["0"]?.result == 7)
    }

    @Test func eventsReplayInOrderAndSurviveReopen() throws {
        let dir = folder()
        var store = try SQLiteStore(directory: dir)
        store.append((1...5).map {
            HydraEvent(seq: UInt64($0), name: "job.queued", jobId: "j", rootJobId: "j", stepPath: "", time: 1,
                       fields: ["n": .int($0)])
        })
        store.flush()
        #expect(try store.events(after: 2, limit: 2).map(\.seq) == [3, 4])
        #expect(try store.events(after: 0, limit: 10)[4].fields["n"] == 5)
        store.close()
        store = try SQLiteStore(directory: dir)
        defer { store.close() }
        #expect(try store.lastSeq() == 5)
    }

    @Test func sharedValuesWithCiphers() throws {
        let dir = folder()
        var store = try SQLiteStore(directory: dir, sharedKey: "a passphrase of 16+ chars")
        for (key, cipher) in [("p", SharedCipher.none), ("g", .gzip), ("e", .aesGCM)] {
            let done = DispatchSemaphore(value: 0)
            store.setShared(key, value: ["secret": "clear-text-value", "k": .string(key)], cipher: cipher) { r in
                #expect((try? r.get()) != nil)
                done.signal()
            }
            done.wait()
        }
        #expect(store.isEncrypted("e"))
        store.close()
        store = try SQLiteStore(directory: dir, sharedKey: "a passphrase of 16+ chars")
        #expect(try store.sharedValue("g")?["k"] == "g")
        #expect(try store.sharedValue("e")?["k"] == "e")
        store.close()
        // The encrypted value is not in the file in clear (the gzip and plain ones differ by design).
        let bytes = try Data(contentsOf: URL(fileURLWithPath: dir + "/hydra.db"))
        #expect(bytes.range(of: Data(#""k":"e""#.utf8)) == nil)
        #expect(throws: StoreError.self) { try SQLiteStore(directory: dir, sharedKey: "another passphrase, also long") }
        #expect(throws: StoreError.self) { try SQLiteStore(directory: dir, sharedKey: "short") }
    }

    @Test func cacheTTLAndRemoval() throws {
        let store = try SQLiteStore(directory: folder())
        defer { store.close() }
        store.storeResponse("http://h/a%1", api: "a", value: 1, ttl: 10, now: 100)
        store.storeResponse("http://h/ab", api: "b", value: 2, ttl: 10, now: 100)
        store.storeResponse("http://h/x", api: "a", value: 3, ttl: 10, now: 100)
        store.flush()
        #expect(try store.cachedResponse("http://h/ab", now: 105) == 2)
        #expect(try store.cachedResponse("http://h/ab", now: 111) == nil)
        func remove(api: String? = nil, key: String? = nil, prefix: String? = nil) -> Int {
            let count = Mutex(0)
            let done = DispatchSemaphore(value: 0)
            store.removeResponses(api: api, key: key, prefix: prefix) { r in count.withLock { $0 = (try? r.get()) ?? -1 }; done.signal() }
            done.wait()
            return count.withLock { $0 }
        }
        #expect(remove(prefix: "http://h/a%") == 1)  // `%` is literal
        #expect(remove(api: "a") == 1)
        #expect(remove() == 1)
    }

    @Test func concurrentInsertsAreAllAcknowledgedAndClosedStoresRefuse() throws {
        let store = try SQLiteStore(directory: folder())
        let acknowledged = Atomic(0)
        DispatchQueue.concurrentPerform(iterations: 4) { t in
            let group = DispatchGroup()
            for i in 0..<1000 {
                group.enter()
                store.insert([job("t\(t)-\(i)", at: Double(i))]) { r in
                    if case .success = r { acknowledged.add(1, ordering: .relaxed) }
                    group.leave()
                }
            }
            group.wait()
        }
        let count = acknowledged.load(ordering: .relaxed)
        #expect(count == 4000)
        #expect(try store.jobs(state: .queued, limit: 5000, after: nil).jobs.count == 4000)
        store.close()
        #expect(throws: StoreError.self) { try store.job("t0-0") }
        let failed = Atomic(false)
        store.insert([job("late", at: 1)]) { r in if case .failure = r { failed.store(true, ordering: .relaxed) } }
        let refused = failed.load(ordering: .relaxed)
        #expect(refused)
    }
}
