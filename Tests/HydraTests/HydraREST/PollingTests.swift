import Foundation
import Testing

@testable import Hydra

/// Polling (rest.md §5): `repeat` against the test server's counters.
@Suite(.ownThreads) struct PollingTests {
    @Test func pollsUntilTheConditionHoldsOrFailsWithCondition() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let key = UUID().uuidString
        let done = try await engine.run(spec("""
            {"type":"remote","endpoint":"/hits/\(key)",
             "repeat":{"everyMs":5,"until":{"path":"body.hits","equals":3},"maxTimes":10}}
            """))
        #expect(done.state == .succeeded, "\(String(describing: done.error))")
        #expect(done.result?["body"]?["hits"] == 3)
        // rest.md §5: each round emits job.progress with its number, the one that met the condition
        // included (3 rounds, 3 events), all before the final event.
        let events = log.all.filter { $0.rootJobId == done.jobId }
        let rounds = events.filter { $0.name == "job.progress" }.map { $0.fields["round"] }
        #expect(rounds == [1, 2, 3])
        // Each carries `bytes` too, as every `job.progress` does (protocol §6): that round's body.
        #expect(events.filter { $0.name == "job.progress" }.allSatisfy { ($0.fields["bytes"]?.intValue ?? 0) > 0 })
        #expect(events.last?.name == "job.succeeded")
        let lastProgress = try #require(events.lastIndex { $0.name == "job.progress" })
        #expect(events[(lastProgress + 1)...].map(\.name) == ["job.succeeded"])

        // Rounds are `everyMs` apart (rest.md §5): three rounds wait at least twice (a lower bound only).
        let paced = UUID().uuidString
        let start = ContinuousClock.now
        let three = try await engine.run(spec("""
            {"type":"remote","endpoint":"/hits/\(paced)","repeat":{"everyMs":200,"until":{"path":"body.hits","equals":3}}}
            """))
        #expect(three.result?["body"]?["hits"] == 3 && ContinuousClock.now - start >= .milliseconds(400))

        let other = UUID().uuidString
        let notEquals = try await engine.run(spec("""
            {"type":"remote","endpoint":"/hits/\(other)","repeat":{"everyMs":1,"until":{"path":"body.hits","notEquals":1}}}
            """))
        #expect(notEquals.result?["body"]?["hits"] == 2)

        // `null` is a value to wait for like any other (a missing field counts as null).
        let absent = try await engine.run(spec("""
            {"type":"remote","endpoint":"/hits/\(other)","repeat":{"everyMs":1,"until":{"path":"body.missing","equals":null}}}
            """))
        #expect(absent.state == .succeeded && absent.result?["body"]?["hits"] == 3, "\(String(describing: absent.error))")
        let present = try await engine.run(spec("""
            {"type":"remote","endpoint":"/hits/\(other)","repeat":{"everyMs":1,"until":{"path":"body.hits","notEquals":null}}}
            """))
        #expect(present.state == .succeeded && present.result?["body"]?["hits"] == 4, "\(String(describing: present.error))")

        let third = UUID().uuidString
        let gaveUp = try await engine.run(spec("""
            {"type":"remote","endpoint":"/hits/\(third)",
             "repeat":{"everyMs":1,"until":{"path":"body.hits","equals":100},"maxTimes":2}}
            """))
        #expect(gaveUp.state == .failed)
        #expect(gaveUp.error?.kind == .condition)
        #expect(gaveUp.error?.message.contains("after 2 rounds") == true)
        #expect(gaveUp.result?["body"]?["hits"] == 2)
        // The last of maxTimes rounds is reported too, before the failure.
        let gaveUpEvents = log.all.filter { $0.rootJobId == gaveUp.jobId }
        #expect(gaveUpEvents.filter { $0.name == "job.progress" }.map { $0.fields["round"] } == [1, 2])
        #expect(gaveUpEvents.last?.name == "job.failed")
    }

    @Test func aPollIsCancelledBetweenRounds() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let id = try engine.submit(try spec("""
            {"type":"remote","endpoint":"/hits/\(UUID().uuidString)",
             "repeat":{"everyMs":60000,"until":{"path":"body.hits","equals":-1}}}
            """)) { _ in }
        let deadline = Date().addingTimeInterval(10)
        while !log.all.contains(where: { $0.rootJobId == id && $0.name == "job.progress" }) && Date() < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        let started = Date()
        _ = await engine.cancel(id)
        let result = await engine.result(of: id)
        #expect(result?.state == .cancelled)
        #expect(Date().timeIntervalSince(started) < 30)
    }

    @Test func badRepeatsAreRefusedAtSubmit() throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        func refusal(_ polling: String) -> String {
            do {
                _ = try engine.submit(try spec(#"{"type":"remote","endpoint":"/x","repeat":\#(polling)}"#)) { _ in }
                return ""
            } catch {
                return "\(error)"
            }
        }
        #expect(refusal(#"{"everyMs":10}"#).contains("repeat.until"))
        #expect(refusal(#"{"everyMs":0,"until":{"path":"a","equals":1}}"#).contains("repeat.everyMs"))
        #expect(refusal(#"{"until":{"path":"a","equals":1}}"#).contains("repeat.everyMs"))
        #expect(refusal(#"{"everyMs":5,"until":{"path":"a"}}"#).contains("repeat.until.equals"))
        #expect(refusal(#"{"everyMs":5,"until":{"path":"a","equals":1,"notEquals":2}}"#).contains("repeat.until.notEquals"))
        #expect(refusal(#"{"everyMs":5,"until":{"path":"a","equals":1},"maxTimes":0}"#).contains("repeat.maxTimes"))
        #expect(refusal(#"{"everyMs":5,"until":{"path":"a","equals":1},"every":1}"#).contains("repeat.every"))
    }
}
