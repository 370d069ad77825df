import Foundation
import Testing

@testable import Hydra
@testable import HydraREST

/// Routes of rest.md §8: endpoint segments with defaults.
@Suite(.ownThreads) struct RouteTests {
    @Test func segmentDefaultsFillInOrGoAway() async throws {
        let engine = try makeEngine(#", "apis": {"mine": {"server": "testsvr", "endpoint": "/echo/:who=me/items/:page="}}"#)
        defer { engine.shutdown() }
        func path(_ job: String) async throws -> String? {
            let result = try await engine.run(spec(job))
            #expect(result.state == .succeeded, "\(String(describing: result.error))")
            return result.result?["body"]?["path"]?.stringValue
        }
        // No value: the default; "" (given, or as the default): the segment goes.
        #expect(try await path(#"{"type":"remote","api":"mine"}"#) == "/echo/me/items")
        #expect(try await path(#"{"type":"remote","api":"mine","pathVars":{"who":"a b","page":2}}"#) == "/echo/a%20b/items/2")
        #expect(try await path(#"{"type":"remote","api":"mine","pathVars":{"who":""}}"#) == "/echo/items")
        #expect(try await path(#"{"type":"remote","endpoint":"/echo/:x=/:y=z"}"#) == "/echo/z")
        // A variable without a default is still required at submit.
        #expect(throws: ValidationError.self) {
            _ = try engine.submit(try spec(#"{"type":"remote","endpoint":"/echo/:who/:page=1"}"#)) { _ in }
        }
    }

    @Test func pathVariableSegments() {
        #expect(RouteResolver.pathVariable(":id")! == ("id", nil))
        #expect(RouteResolver.pathVariable(":id=me")! == ("id", "me"))
        #expect(RouteResolver.pathVariable(":id=")! == ("id", ""))
        #expect(RouteResolver.pathVariable(":id=a=b")! == ("id", "a=b"))
        #expect(RouteResolver.pathVariable(":") == nil && RouteResolver.pathVariable(":=x") == nil)
        #expect(RouteResolver.pathVariable("id") == nil)
        #expect(RouteResolver.pathVariables(in: "/v1/:a/:b=x/:c=/d") == ["a"])
    }

    /// A remote step's `label` is echoed in every event of that step, and only there.
    @Test func aLabelIsEchoedInEveryEventOfItsStep() async throws {
        let engine = try makeEngine(#", "apis": {"flaky": {"server": "testsvr", "endpoint": "/flaky/:k/1"}}"#)
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let graph = try await engine.run(spec("""
            {"type":"serial","steps":[
              {"type":"remote","api":"flaky","pathVars":{"k":"\(UUID().uuidString)"},"label":"call #7",
               "retry":{"maxAttempts":2,"backoffMs":1}},
              {"type":"remote","endpoint":"/items"}]}
            """))
        #expect(graph.state == .succeeded, "\(String(describing: graph.error))")
        let labelled = log.all.filter { $0.rootJobId == graph.jobId && $0.stepPath == "0" }
        #expect(Set(labelled.map(\.name)).isSuperset(of: ["job.queued", "job.started", "job.retrying", "job.succeeded"]))
        #expect(labelled.allSatisfy { $0.fields["label"] == "call #7" })
        #expect(log.all.filter { $0.rootJobId == graph.jobId && $0.stepPath != "0" }.allSatisfy { $0.fields["label"] == nil })
        #expect(graph.result?["results"]?[0]?["status"] == 200)

        let single = try await engine.run(spec(#"{"type":"remote","endpoint":"/items","label":"one"}"#))
        let events = log.all.filter { $0.rootJobId == single.jobId }
        #expect(events.map(\.name) == ["job.queued", "job.started", "job.succeeded"])
        #expect(events.allSatisfy { $0.fields["label"] == "one" })
        #expect(events.last?.fields["result"]?["body"]?["count"] == 3)
    }
}

