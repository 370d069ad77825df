import Foundation
import Testing

@testable import Hydra

/// References that can never resolve are refused at submit, naming the field
/// (protocol §4 References); those only the run can judge still fail the step.
@Suite(.ownThreads) struct ReferenceCheckTests {
    @Test func referencesThatCanNeverResolveAreRefusedAtSubmit() throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let echo = #"{"type":"local","name":"echo","input":1}"#
        let refused: [(String, String)] = [
            (#"{"type":"serial","steps":[\#(echo),{"type":"local","name":"echo","input":{"a":"${prv.x}"}}]}"#,
             "steps[1].input.a"),
            (#"{"type":"serial","steps":[\#(echo),{"type":"local","name":"echo","input":"${steps}"}]}"#, "steps[1].input"),
            (#"{"type":"serial","steps":[\#(echo),{"type":"local","name":"echo","input":"x ${input.x"}]}"#, "steps[1].input"),
            (#"{"type":"serial","steps":[\#(echo),{"type":"local","name":"echo","input":"${steps.nope.body}"}]}"#,
             "steps[1].input"),
            (#"{"type":"serial","steps":[{"type":"local","name":"echo","input":"${prev}"}]}"#, "steps[0].input"),
            // The first step of a nested serial group has no previous step either (it took the outer one's).
            (#"{"type":"serial","steps":[\#(echo),{"type":"serial","steps":[{"type":"local","name":"echo","input":"${prev}"}]}]}"#,
             "steps[1].steps[0].input"),
            (#"{"type":"concurrent","steps":[\#(echo),{"type":"local","name":"echo","input":"${prev}"}]}"#, "steps[1].input"),
            (#"{"type":"local","name":"echo","input":"${prev}"}"#, "input"),
            (#"{"type":"remote","url":"http://h/${shared.}"}"#, "url"),
            (#"{"type":"remote","url":"http://h/","headers":{"X":"${what.x}"}}"#, "headers.X"),
            // Steps that cannot have ended when the referring step starts: itself, a
            // group it is in, a later step of a serial group around it (at any depth).
            (#"{"type":"serial","steps":[{"type":"local","id":"a","name":"echo","input":"${steps.a}"}]}"#, "steps[0].input"),
            (#"{"type":"serial","id":"g","steps":[\#(echo),{"type":"local","name":"echo","input":"${steps.g.results}"}]}"#,
             "steps[1].input"),
            (#"{"type":"serial","steps":[{"type":"local","name":"echo","input":"${steps.b}"},{"type":"local","id":"b","name":"echo","input":2}]}"#,
             "steps[0].input"),
            (#"{"type":"serial","steps":[{"type":"concurrent","steps":[\#(echo),{"type":"local","name":"echo","input":"${steps.c}"}]},{"type":"serial","steps":[{"type":"local","id":"c","name":"echo","input":3}]}]}"#,
             "steps[0].steps[1].input"),
            // A variable the config does not list (allowEnv: [] here).
            (#"{"type":"local","name":"echo","input":"${env.HOME}"}"#, "input"),
            // A path with an empty name names nothing a value has.
            (#"{"type":"local","name":"echo","input":{"a":"${input..a}"}}"#, "input.a"),
            (#"{"type":"local","name":"echo","input":"${input.}"}"#, "input"),
            (#"{"type":"serial","steps":[\#(echo),{"type":"local","name":"echo","input":"${prev.body.}"}]}"#, "steps[1].input"),
            (#"{"type":"serial","steps":[{"type":"local","id":"a","name":"echo","input":1},{"type":"local","name":"echo","input":"${steps.a..x}"}]}"#,
             "steps[1].input"),
        ]
        for (text, field) in refused {
            let error = #expect(throws: ValidationError.self, "\(text)") { try engine.submit(spec(text)) }
            #expect(error?.path == field, "\(text): \(String(describing: error))")
            #expect(error?.kind == .invalid)
        }
    }

    @Test func referencesThatMayResolveAreAccepted() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let accepted = [
            // prev inside a concurrent group that follows a serial step: that step's result.
            #"{"type":"serial","steps":[{"type":"local","name":"echo","input":7},{"type":"concurrent","steps":[{"type":"local","name":"echo","input":"${prev}"}]}]}"#,
            #"{"type":"concurrent","steps":[{"type":"local","id":"a","name":"echo","input":1},{"type":"local","name":"echo","input":"${steps.a}"}]}"#,
            #"{"type":"local","name":"echo","input":"${input.x} and ${shared.k}"}"#,
            // An earlier step of a serial group around it, at any depth; a step of another branch of a concurrent group.
            #"{"type":"serial","steps":[{"type":"concurrent","steps":[{"type":"local","id":"d","name":"echo","input":4}]},{"type":"serial","steps":[{"type":"local","name":"echo","input":"${steps.d}"}]}]}"#,
            #"{"type":"concurrent","steps":[{"type":"serial","steps":[{"type":"local","name":"echo","input":"${steps.e}"}]},{"type":"local","id":"e","name":"echo","input":5}]}"#,
        ]
        for text in accepted { _ = try engine.submit(spec(text)) }
        let first = try await engine.run(spec(accepted[0]))
        #expect(first.result?["results"]?[1]?["results"] == [7])
        let nested = try await engine.run(spec(accepted[3]))
        #expect(nested.result?["results"]?[1]?["results"] == [4], "\(String(describing: nested.error))")
    }

    /// `${env.NAME}` of a listed variable: accepted at submit; unset, it fails the step when it runs.
    @Test func aListedVariableIsReadWhenTheStepRuns() async throws {
        let name = "HYDRA_TEST_UNSET_\(UInt32.random(in: 0...UInt32.max))"
        let engine = try makeEngine(#", "allowEnv": ["HOME", "\#(name)"]"#)
        defer { engine.shutdown() }
        let home = try await engine.run(spec(#"{"type":"local","name":"echo","input":"${env.HOME}"}"#))
        #expect(home.result == .string(ProcessInfo.processInfo.environment["HOME"] ?? ""))
        let unset = try await engine.run(spec(#"{"type":"local","name":"echo","input":"${env.\#(name)}"}"#))
        #expect(unset.error?.kind == .invalid, "\(String(describing: unset.error))")
    }

    /// A step failed by a reference that did not resolve counts as done in
    /// `job.status` (protocol §5), and its events keep the causal order of
    /// protocol §6: queued, started (on the worker it was for), failed.
    @Test func aStepFailedByItsReferenceCountsAsDone() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let text = #"{"type":"serial","stopWhenFailed":false,"steps":[{"type":"local","id":"x","name":"fail","input":{"message":"m"}},{"type":"local","name":"echo","input":"${steps.x}"}]}"#
        let id = try engine.submit(spec(text))
        let done = await engine.result(of: id)
        #expect(done?.error != nil)
        let status = try #require(engine.status(of: id))
        #expect(status.stepsDone == 2 && status.stepsTotal == 2, "\(status)")
        let step = log.all.filter { $0.rootJobId == id && $0.stepPath == "1" }
        #expect(step.map(\.name) == ["job.queued", "job.started", "job.failed"], "\(step.map(\.name))")
        #expect(step.first { $0.name == "job.started" }?.fields["worker"] == "local")
    }

    /// Protocol §4: any string of a step may be a reference, and one that is
    /// exactly `${EXPR}` takes the value's JSON type; so fields that are not free
    /// text (a number, a list, a choice) may be references too. They are checked
    /// once resolved, when the step runs; everything else is still checked at submit.
    @Test func referencesInTypedFieldsAreCheckedWhenTheStepRuns() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let delay = #"{"type":"local","name":"delay","input":{"ms":5000},"timeoutMs":"${input.limit}"}"#
        let timedOut = try await engine.run(spec(delay), input: ["limit": 50])
        #expect(timedOut.error?.kind == .timeout, "\(String(describing: timedOut.error))")
        let refused = try await engine.run(spec(delay), input: ["limit": "soon"])
        #expect(refused.error?.kind == .invalid)
        #expect(refused.error?.message.hasPrefix("timeoutMs: expected integer") == true, "\(String(describing: refused.error))")

        // A list and a nested object, resolved from an earlier step's result.
        let graph = #"""
            {"type":"serial","steps":[{"type":"local","name":"echo","input":{"code":404,"tries":1}},
             {"type":"remote","url":"\#(TestServer.base)/status/404","expect":["${prev.code}"],
              "retry":{"maxAttempts":"${prev.tries}"}}]}
            """#
        let fetched = try await engine.run(spec(graph))
        #expect(fetched.state == .succeeded, "\(String(describing: fetched.error))")
        #expect(fetched.result?["results"]?[1]?["status"] == 404)

        // Still refused at submit: a reference that can never resolve, an unknown
        // key beside a deferred field, a reference in a field that names a step.
        let never = #expect(throws: ValidationError.self) {
            try engine.submit(spec(#"{"type":"local","name":"echo","timeoutMs":"${nope.x}"}"#))
        }
        #expect(never?.path == "timeoutMs")
        let typo = #expect(throws: ValidationError.self) {
            try engine.submit(spec(#"{"type":"local","name":"echo","timeoutMs":"${input.x}","inptu":1}"#))
        }
        #expect(typo?.path == "inptu")
        let id = #expect(throws: ValidationError.self) {
            try engine.submit(spec(#"{"type":"serial","steps":[{"type":"local","id":"${input.x}.y","name":"echo"}]}"#))
        }
        #expect(id?.path == "steps[0].id")
        // A key no spec has, or one a resource job does not take, is refused whatever its value.
        for (text, field) in [(#"{"type":"local","name":"echo","inptu":"${input.x}"}"#, "inptu"),
                              (#"{"type":"remote","url":"http://h/","retry":{"maxAttemps":"${input.n}"}}"#, "retry.maxAttemps"),
                              (#"{"type":"resource","url":"http://h/","method":"${input.m}"}"#, "method")] {
            let refused = #expect(throws: ValidationError.self, "\(text)") { try engine.submit(spec(text)) }
            #expect(refused?.path == field, "\(text): \(String(describing: refused))")
        }
        // A required member from a reference: the object it belongs to is checked when the step runs.
        let polled = try await engine.run(spec(#"""
            {"type":"remote","url":"\#(TestServer.url("/status/200"))","repeat":{"everyMs":"${input.every}","until":{"path":"status","equals":200}}}
            """#), input: ["every": 10])
        #expect(polled.state == .succeeded, "\(String(describing: polled.error))")
        // A method and a `cache` from references: refused as at submit once both are known.
        let post = try await engine.run(spec(#"{"type":"remote","url":"\#(TestServer.url("/echo/p"))","method":"${input.m}","cache":"${input.c}"}"#),
                                        input: ["m": "POST", "c": ["mode": "only"]])
        #expect(post.error?.kind == .invalid && post.error?.message.hasPrefix("cache: only GET responses are cached") == true,
                "\(String(describing: post.error))")
        // What is kept and stored is the step as submitted: it decodes to the same deferred step.
        let deferred = try spec(delay)
        #expect(deferred.json == (try JSONParser.parse(delay)))
        #expect(try JobSpec(json: deferred.json).deferredJSON != nil)
        // A mode from a reference reads as the reference in job.queued, not as the default.
        let summary = try spec(#"{"type":"resource","url":"http://h/r","mode":"${input.m}"}"#).summary
        #expect(summary["mode"] == "${input.m}", "\(summary)")
    }
}
