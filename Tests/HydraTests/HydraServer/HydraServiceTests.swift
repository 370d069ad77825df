import HydraLoop
import Foundation
import HydraCore
import HydraServer
import HydraStore
import Synchronization
import Testing

@testable import HydraRPC

/// The service over a real SQLite store, without the RPC server in front.
@Suite(.ownThreads) struct HydraServiceTests {
    /// With a memory window of one job, every other finished job is answered from the
    /// store, including those whose finish is still queued for the writer: none may
    /// read as running or queued once the engine has finished it.
    @Test func jobsTheEngineForgotAreAnsweredFinalFromTheStore() async throws {
        let folder = NSTemporaryDirectory() + "hydra-service-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try SQLiteStore(directory: folder)
        let service = try HydraService(configuration: Configuration(), store: store, stateDirectory: folder,
                                       retainFinished: 1)
        // A burst: submitted without waiting, so finishes pile up behind the writer.
        let count = 2000
        let submitted = Locked<[Int: String]>([:])
        let allIn = DispatchSemaphore(value: 0)
        for i in 0..<count {
            let request = HydraService.SubmitRequest(job: ["type": "local", "name": "echo", "input": .int(i)])
            service.submit(request) { result in
                let n = submitted.withLock { ids in
                    ids[i] = (try? result.get()) ?? "failed"
                    return ids.count
                }
                if n == count { allIn.signal() }
            }
        }
        allIn.wait()
        let ids = submitted.withLock { ids in (0..<count).map { ids[$0]! } }
        // Once the last job is final, all are (one local worker, first in, first out);
        // newest first, so the reads land where the writer is most behind.
        _ = await service.engine.result(of: ids[count - 1])
        let last = try waitForResult { service.result(of: ids[count - 1], reply: $0) }
        #expect(last["state"] == "succeeded")
        for id in ids.reversed().prefix(500) {
            let status = try waitForResult { service.status(of: id, reply: $0) }
            #expect(status["state"] == "succeeded", "\(id): \(status)")
        }
        for id in ids.prefix(100) {
            let result = try waitForResult { service.result(of: id, reply: $0) }
            #expect(result["state"] == "succeeded", "\(id): \(result)")
        }
        do {
            _ = try waitForResult { service.status(of: "j-nope", reply: $0) }
            Issue.record("an unknown job had a status")
        } catch {
            #expect(error.kind == .notFound)
        }
        _ = await service.shutdown(gracePeriod: .seconds(1))
        store.close()
    }

    /// A root remote job's result is encoded once, straight from the worker's
    /// unbuilt parts, for its job row and its stored `job.succeeded` event; a
    /// live subscriber builds the same fields from it. All three must say
    /// exactly what the built result says.
    @Test func aRemoteJobsStoredRowAndEventAreItsBuiltResult() async throws {
        let folder = NSTemporaryDirectory() + "hydra-service-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try SQLiteStore(directory: folder)
        let config = try Configuration(json: try JSONParser.parse(
            #"{"servers": {"testsvr": "\#(TestServer.base)"}, "defaults": {"server": "testsvr", "timeoutMs": 10000}}"#))
        let service = try HydraService(configuration: config, store: store, stateDirectory: folder)
        let live = EventLog()
        _ = service.engine.subscribe(sink: live)
        let id = try waitForResult { service.submit(HydraService.SubmitRequest(job: ["type": "remote", "endpoint": "/items"]), reply: $0) }
        let final = try #require(await service.engine.result(of: id))
        #expect(final.state == .succeeded)
        let built = try #require(final.result)
        #expect(built["body"]?["count"] == 3 && built["headers"]?["content-type"] != nil)
        store.flush()
        #expect(try store.job(id)?.result == final.json)
        let stored = try store.events(after: 0, limit: 100).filter { $0.jobId == id && $0.name == EventName.succeeded }
        #expect(stored.map { $0.fields["result"] } == [built])
        let heard = live.all.filter { $0.jobId == id && $0.name == EventName.succeeded }
        #expect(heard.map { $0.fields["result"] } == [built])
        #expect(heard.map { try? JSONParser.parse($0.encodedJSON()) } == heard.map(\.json))
        _ = await service.shutdown(gracePeriod: .seconds(1))
    }

    /// Between the end of the grace period (the store closed) and the
    /// listeners closing, a `shared.set` or `shared.remove` answered -32603
    /// "store is closed" (21 times in a crash soak's graceful stops): the
    /// server is stopping, so it is -32005, as a `job.submit` then.
    @Test func writesAfterTheStoreClosedAreShuttingDown() async throws {
        let folder = NSTemporaryDirectory() + "hydra-service-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try SQLiteStore(directory: folder)
        let service = try HydraService(configuration: Configuration(), store: store, stateDirectory: folder)
        _ = await service.shutdown(gracePeriod: .seconds(1))
        let set = Locked<Result<Void, ServiceError>?>(nil)
        let removed = Locked<Result<Bool, ServiceError>?>(nil)
        let answered = DispatchSemaphore(value: 0)
        service.setShared("k", value: 1, cipher: nil) { result in set.withLock { $0 = result }; answered.signal() }
        service.removeShared("k") { result in removed.withLock { $0 = result }; answered.signal() }
        answered.wait()
        answered.wait()
        func error<T>(_ result: Result<T, ServiceError>?) -> ServiceError? {
            if case .failure(let error)? = result { return error }
            return nil
        }
        #expect(error(set.withLock { $0 })?.kind == .shuttingDown)
        #expect(error(set.withLock { $0 })?.message.contains("shutting down") == true)
        #expect(error(removed.withLock { $0 })?.kind == .shuttingDown)
    }

    /// A `job.cancel` the engine cannot answer once it stopped looks the job up
    /// in the store; with the store closed (a graceful stop's last moments) it
    /// answered -32002 "no job" for a job that exists: now -32005.
    @Test func aCancelAfterTheStoreClosedIsShuttingDownNotUnknown() async throws {
        let folder = NSTemporaryDirectory() + "hydra-service-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try SQLiteStore(directory: folder)
        let service = try HydraService(configuration: Configuration(), store: store, stateDirectory: folder)
        let submitted = Locked<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        service.submit(HydraService.SubmitRequest(job: ["type": "local", "name": "echo", "input": 1])) { result in
            submitted.withLock { $0 = try? result.get() }
            done.signal()
        }
        done.wait()
        let id = try #require(submitted.withLock { $0 })
        _ = await service.engine.result(of: id)
        _ = await service.shutdown(gracePeriod: .seconds(1))
        let answer = Locked<Result<JSONValue, ServiceError>?>(nil)
        service.cancel(id) { result in answer.withLock { $0 = result }; done.signal() }
        done.wait()
        guard case .failure(let error)? = answer.withLock({ $0 }) else {
            Issue.record("answered \(String(describing: answer.withLock { $0 }))")
            return
        }
        #expect(error.kind == .shuttingDown, "\(error)")
    }
}
