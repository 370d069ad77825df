import Foundation
import Testing

@testable import Hydra

/// `limits.maxResultBytes` (protocol §4 Size limits): held while references
/// resolve, for every leaf's result and a group's collected results.
@Suite(.ownThreads) struct ResultSizeTests {
    private static let limits = #", "limits": {"maxResultBytes": 65536}"#

    @Test func aReferenceBombStopsAtTheLimitNotAtTheMachinesMemory() async throws {
        let engine = try makeEngine(Self.limits)
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        for doubling in [#"["${prev}","${prev}"]"#, #""${prev}${prev}""#] {
            let steps = [#"{"type":"local","name":"echo","input":"0123456789abcdef"}"#]
                + Array(repeating: #"{"type":"local","name":"echo","input":\#(doubling)}"#, count: 41)
            let id = try engine.submit(spec(#"{"type":"serial","steps":[\#(steps.joined(separator: ","))]}"#))
            let result = try await finalResult(of: id, in: engine)
            #expect(result.state == .failed)
            #expect(result.error?.kind == .tooLarge, "\(String(describing: result.error))")
            #expect(result.error?.message.contains("maxResultBytes") == true)
            // 16 bytes doubled: the steps' results add up to 64 KiB by step 12; it never gets further.
            let reached = log.names(job: id).filter { $0.hasPrefix("job.succeeded@") }.count
            #expect(reached >= 8 && reached <= 13, "\(reached) steps succeeded; \(String(describing: result.error))")
        }
    }

    @Test func aLocalResultOverTheLimitFailsTheStep() async throws {
        let engine = try makeEngine(Self.limits)
        defer { engine.shutdown() }
        engine.register(localJob: "big", .inline { call in .string(String(repeating: "x", count: call.input.intValue ?? 0)) })
        let big = try await engine.run(.local("big", input: 70_000))
        #expect(big.state == .failed)
        #expect(big.error?.kind == .tooLarge)
        #expect(big.result == nil)
        // Escapes count: 40,000 quotes encode to 80,000 bytes.
        engine.register(localJob: "quotes", .inline { _ in .string(String(repeating: "\"", count: 40_000)) })
        #expect(try await engine.run(.local("quotes")).error?.kind == .tooLarge)
        let fits = try await engine.run(.local("big", input: 60_000))
        #expect(fits.state == .succeeded)
    }

    @Test func aGroupsCollectedResultsOverTheLimitFailTheGroupWhole() async throws {
        let engine = try makeEngine(Self.limits)
        defer { engine.shutdown() }
        engine.register(localJob: "big", .inline { call in .string(String(repeating: "x", count: call.input.intValue ?? 0)) })
        let step = #"{"type":"local","name":"big","input":30000}"#
        let events = engine.events()
        let result = try await engine.run(spec(#"{"type":"serial","steps":[{"type":"concurrent","steps":[\#(step),\#(step),\#(step)]},{"type":"local","name":"echo","input":1}]}"#))
        // Its group.done (stored, replayed) does not carry what the group could not keep either.
        let done = try await nextEvent(in: events) { $0.name == "group.done" && $0.stepPath == "0" }
        #expect(done.fields["results"] == [nil, nil, nil] && done.fields["tooLarge"] == true, "\(done.fields)")
        #expect(result.state == .failed)
        #expect(result.error?.kind == .tooLarge)
        #expect(result.error?.stepPath == "0")
        // The outer group keeps what fits: the inner group's slot is empty, nothing half-kept.
        #expect(result.result?["results"] == [nil, nil])
    }

    /// Results nest at most `JSONParser.maxResultDepth` levels (what the store and
    /// clients read back): a deeper step result, or a group that would wrap its
    /// steps' results past it, fails with kind `tooLarge`.
    @Test func aResultNestedPastTheDepthLimitFailsItsStep() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        engine.register(localJob: "deep", .inline { call in
            var value: JSONValue = 1
            for _ in 0..<(call.input.intValue ?? 0) { value = [value] }
            return value
        })
        let limit = JSONParser.maxResultDepth
        let tooDeep = try await engine.run(spec(#"{"type":"local","name":"deep","input":\#(limit + 1)}"#))
        #expect(tooDeep.error?.kind == .tooLarge && tooDeep.error?.message.contains("deeper than") == true,
                "\(String(describing: tooDeep.error))")
        // Two groups around a step 4 levels short of the limit: exactly at it; a third (the root) is past it.
        let leaf = #"{"type":"local","name":"deep","input":\#(limit - 4)}"#
        let fits = try await engine.run(spec(#"{"type":"serial","steps":[{"type":"serial","steps":[\#(leaf)]}]}"#))
        #expect(fits.state == .succeeded, "\(String(describing: fits.error))")
        let over = try await engine.run(spec(#"{"type":"serial","steps":[{"type":"serial","steps":[{"type":"serial","steps":[\#(leaf)]}]}]}"#))
        #expect(over.error?.kind == .tooLarge && over.error?.stepPath == "", "\(String(describing: over.error))")
    }

    @Test func aRemoteResultOverTheLimitFailsTheJob() async throws {
        let engine = try makeEngine(Self.limits)
        defer { engine.shutdown() }
        let big = try await engine.run(spec(#"{"type":"remote","endpoint":"/large/100000"}"#))
        #expect(big.state == .failed)
        #expect(big.error?.kind == .tooLarge)
        let small = try await engine.run(spec(#"{"type":"remote","endpoint":"/large/1000"}"#))
        #expect(small.state == .succeeded, "\(String(describing: small.error))")
    }
}
