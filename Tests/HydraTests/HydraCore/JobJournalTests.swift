import Foundation
import Hydra
import HydraCore
import HydraLoop
import Testing

@testable import HydraServer

/// The journal seam, against a fake of one store slice (``JobStore``): the
/// coordinator itself tells the journal when a job started, each leaf step it
/// finished and how it ended, with the final `job.result` already encoded.
@Suite(.ownThreads) struct JobJournalTests {
    /// Records what reaches the jobs slice; reads are not part of the seam.
    final class RecordingJobStore: JobStore {
        enum Call: Equatable {
            case started(String)
            case step(String, String, JobState)
            case finished(String, JobState, [UInt8])
            /// A final event (`name@stepPath`), seen by ``FinalEvents`` on the same log.
            case event(String)
            /// A step record or finish that said its final event follows.
            case withFinalEvent(String)
        }
        let calls = Locked<[Call]>([])
        /// The result JSON of each recorded step, by path.
        let stepResults = Locked<[String: [UInt8]]>([:])

        func insert(_ jobs: [StoredJob], done: @escaping @Sendable (Result<[InsertOutcome], StoreError>) -> Void) {
            done(.success(jobs.map { _ in .inserted }))
        }
        func existing(_ jobs: [StoredJob], done: @escaping @Sendable (Result<[InsertOutcome?], StoreError>) -> Void) {
            done(.success(jobs.map { _ in nil }))
        }
        func markStarted(jobId: String, at time: Double) { calls.withLock { $0.append(.started(jobId)) } }
        func finish(jobId: String, state: JobState, result: [UInt8], at time: Double,
                    done: (@Sendable (Result<Void, StoreError>) -> Void)?) {
            calls.withLock { $0.append(.finished(jobId, state, result)) }
            done?(.success(()))
        }
        func recordStep(jobId: String, stepPath: String, step: EncodedStep,
                        done: (@Sendable (Result<Void, StoreError>) -> Void)?) {
            calls.withLock { $0.append(.step(jobId, stepPath, step.state)) }
            if let result = step.result { stepResults.withLock { $0[stepPath] = result } }
            done?(.success(()))
        }
        func finish(jobId: String, state: JobState, result: [UInt8], at time: Double, withFinalEvent: Bool,
                    done: (@Sendable (Result<Void, StoreError>) -> Void)?) {
            if withFinalEvent { calls.withLock { $0.append(.withFinalEvent("")) } }
            finish(jobId: jobId, state: state, result: result, at: time, done: done)
        }
        func recordStep(jobId: String, stepPath: String, step: EncodedStep, withFinalEvent: Bool,
                        done: (@Sendable (Result<Void, StoreError>) -> Void)?) {
            if withFinalEvent { calls.withLock { $0.append(.withFinalEvent(stepPath)) } }
            recordStep(jobId: jobId, stepPath: stepPath, step: step, done: done)
        }
        func job(_ jobId: String) throws(StoreError) -> StoredJob? { nil }
        func recordedStepPaths(of jobId: String) throws(StoreError) -> [String] { [] }
        func jobs(state: JobState?, limit: Int, after cursor: String?) throws(StoreError) -> (jobs: [StoredJob], next: String?) {
            ([], nil)
        }
        func unfinishedJobs() throws(StoreError) -> [(job: StoredJob, steps: [String: StoredStep], emitted: EmittedEvents)] { [] }
    }

    /// Puts each final event on the store's log, to see the order of records and events.
    final class FinalEvents: EventSink {
        let store: RecordingJobStore
        init(_ store: RecordingJobStore) { self.store = store }
        func receive(_ event: HydraEvent) {
            guard EventName.finals.contains(event.name) else { return }
            store.calls.withLock { $0.append(.event("\(event.name)@\(event.stepPath)")) }
        }
    }

    @Test func theCoordinatorJournalsStartStepsAndTheEncodedEnd() async throws {
        let store = RecordingJobStore()
        let journal = StoreJobJournal(store: store)
        let engine = try HydraEngine(journal: journal)
        defer { engine.shutdown() }
        _ = engine.subscribe(sink: FinalEvents(store))
        let spec = try JobSpec(json: [
            "type": "serial",
            "steps": [
                ["type": "local", "name": "echo", "input": ["n": 1]],
                ["type": "local", "name": "fail", "input": ["message": "no \"luck\""]],
            ],
        ])
        let (id, result) = try await runJournaled(spec, on: engine)
        #expect(result.state == .failed)
        // Each record is told before its final event, saying that event follows
        // (the store keeps the two together): the job's end came after its event.
        #expect(store.calls.withLock { $0 } == [
            .started(id), .withFinalEvent("0"), .step(id, "0", .succeeded), .event("job.succeeded@0"),
            .withFinalEvent("1"), .step(id, "1", .failed), .event("job.failed@1"),
            .withFinalEvent(""), .finished(id, .failed, JSONWriter.bytes(result.json)), .event("job.failed@"),
        ])
        #expect(journal.endings.withLock { ($0.succeeded, $0.failed, $0.cancelled) } == (0, 1, 0))

        // A job run without the journal (embedded `run`) leaves nothing in it (its final event aside).
        _ = try await engine.run(try JobSpec(json: ["type": "local", "name": "echo"]))
        #expect(store.calls.withLock { $0.count { if case .event = $0 { false } else { true } } } == 7)
    }

    /// A remote step's result reaches the journal encoded straight from the
    /// worker's unbuilt parts: the bytes must be the built result's JSON.
    @Test func aRemoteStepIsJournaledAsItsBuiltResult() async throws {
        let store = RecordingJobStore()
        let config = try Configuration(json: try JSONParser.parse(
            #"{"servers": {"testsvr": "\#(TestServer.base)"}, "defaults": {"server": "testsvr", "timeoutMs": 10000}}"#))
        let engine = try HydraEngine(configuration: config, journal: StoreJobJournal(store: store))
        defer { engine.shutdown() }
        let (_, final) = try await runJournaled(try JobSpec(json: [
            "type": "concurrent", "steps": [["type": "remote", "endpoint": "/items"], ["type": "remote", "endpoint": "/text"]],
        ]), on: engine)
        let results = try #require(final.result?["results"]?.arrayValue)
        let journaled = store.stepResults.withLock { $0 }
        #expect(journaled.keys.sorted() == ["0", "1"])
        for (i, built) in results.enumerated() {
            #expect(journaled[String(i)] == JSONWriter.bytes(built), "step \(i)")
        }
    }

    /// Queues `spec` as a journaled job (as the server does) and waits for its
    /// end without blocking a thread of the cooperative pool.
    private func runJournaled(_ spec: JobSpec, on engine: HydraEngine) async throws -> (id: String, result: JobResult) {
        let prepared = try engine.prepare(spec)
        try engine.reserve(1)
        let result: JobResult = await withCheckedContinuation { continuation in
            engine.enqueue([QueuedJob(prepared: prepared, input: .null, priority: 0, createdAt: 1, completion: { result in
                continuation.resume(returning: result)
            })])
        }
        return (prepared.jobId, result)
    }
}
