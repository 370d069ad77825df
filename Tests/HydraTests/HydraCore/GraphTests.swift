import HydraLoop
import Foundation
import Synchronization
import Testing

@testable import Hydra

/// Serial and concurrent graphs, references, events, cancellation, priorities, workers.
@Suite(.ownThreads) struct GraphTests {
    @Test func serialStepsUseEarlierResults() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let result = try await engine.run(spec("""
            {"type":"serial","steps":[
              {"type":"remote","id":"list","api":"items"},
              {"type":"local","name":"pick","input":{"from":"${prev.body}","path":"items.2"}},
              {"type":"remote","method":"POST","endpoint":"/echo/${steps.list.body.items.0.id}",
               "body":{"picked":"${prev}","count":"${steps.list.body.count}","text":"n=${steps.list.body.count}"}}
            ]}
            """))
        #expect(result.state == .succeeded)
        let third = try #require(result.result?["results"]?[2])
        #expect(third["body"]?["path"] == "/echo/1")
        #expect(third["body"]?["json"] == ["picked": ["id": 3, "name": "three"], "count": 3, "text": "n=3"])
        #expect(result.result?["errors"] == [nil, nil, nil])
        #expect(result.result?["stopped"] == false)
    }

    /// A succeeded group keeps its steps' results unbuilt (`GroupResult`) and
    /// encodes them straight to JSON (`hydra run`, the journal): the text must
    /// be the built result's, byte for byte, nested groups, `${prev}` readers
    /// and ids included, and the result must be the one a reader builds.
    @Test func anUnbuiltGroupResultEncodesAsItsBuiltOne() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let result = try await engine.run(spec("""
            {"type":"concurrent","steps":[
              {"type":"remote","api":"items"},
              {"type":"serial","steps":[{"type":"remote","endpoint":"/text"},
                                         {"type":"local","name":"echo","input":{"before":"${prev.status}"}},
                                         {"type":"remote","id":"named","endpoint":"/items"}]},
              {"type":"local","name":"echo","input":{"text":"quoted \\" and \\u00e9"}},
              {"type":"concurrent","steps":[]}
            ]}
            """))
        #expect(result.state == .succeeded, "\(String(describing: result.error))")
        let built = try #require(result.result)
        #expect(result.encodedJSON() == JSONWriter.bytes(result.json))
        #expect(built["results"]?[1]?["results"]?[1] == ["before": 200])
        #expect(built["results"]?[0]?["body"]?["count"] == 3 && built["results"]?[1]?["results"]?[2]?["status"] == 200)
    }

    /// A group result of megabytes is written in parts on several threads
    /// (`GroupResult.bytesPerPart`): the parts join into the built result's
    /// text, byte for byte, in step order, unbuilt and failed steps included.
    @Test func aLargeGroupResultIsWrittenInPartsAsOne() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let big = String(repeating: "0123456789abcdef", count: 40_000)  // 640 KB a step
        var steps: [String] = []
        for i in 0..<9 {
            steps.append(#"{"type":"local","name":"echo","input":{"i":\#(i),"text":"\#(big)"}}"#)
            steps.append(#"{"type":"remote","api":"items"}"#)
        }
        steps.append(#"{"type":"local","name":"fail","input":{"message":"late"}}"#)
        let result = try await engine.run(spec(#"{"type":"concurrent","steps":[\#(steps.joined(separator: ","))]}"#))
        #expect(result.state == .failed && result.error?.message == "late")
        let encoded = result.encodedJSON()
        #expect(encoded.count > 5 << 20)
        #expect(encoded == JSONWriter.bytes(result.json))
        let results = try #require(result.result?["results"]?.arrayValue)
        #expect(results.count == 19 && results[16]["i"] == 8 && results[17]["body"]?["count"] == 3 && results[18] == nil)
    }

    @Test func unresolvableReferenceFailsTheStepAsInvalid() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let result = try await engine.run(spec("""
            {"type":"serial","steps":[{"type":"local","id":"first","name":"echo","input":1},
              {"type":"local","name":"echo","input":"${steps.first.x}"},{"type":"local","name":"echo"}]}
            """))
        #expect(result.state == .failed)
        #expect(result.error?.kind == .invalid)
        #expect(result.error?.stepPath == "1")
        #expect(result.result?["results"] == [1, nil, nil])
        #expect(result.result?["stopped"] == true)
    }

    @Test func serialStopWhenFailedNeverStartsLaterSteps() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let result = try await engine.run(spec("""
            {"type":"serial","steps":[{"type":"local","name":"fail","input":{"message":"boom"}},{"type":"local","name":"echo"}]}
            """))
        #expect(result.error?.message == "boom")
        #expect(result.error?.kind == .internal)
        #expect(!log.all.contains { $0.rootJobId == result.jobId && $0.stepPath == "1" })

        let goOn = try await engine.run(spec("""
            {"type":"serial","stopWhenFailed":false,"steps":[{"type":"local","name":"fail"},{"type":"local","name":"echo","input":2}]}
            """))
        #expect(goOn.state == .failed)
        #expect(goOn.result?["results"] == [nil, 2])
        #expect(goOn.result?["stopped"] == false)
    }

    /// A concurrent group's steps start together: one that fails as it starts
    /// (a reference that does not resolve) stops the others as any failure does,
    /// they are cancelled. They were left unstarted, with no event, as in a serial
    /// group (a model-based audit of the spec found it; a `fail` step got them cancelled).
    @Test func aConcurrentStepThatFailsAsItStartsCancelsTheOthers() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        for first in [#"{"type":"local","name":"echo","input":"${input.missing}"}"#,
                      #"{"type":"concurrent","steps":[{"type":"local","name":"echo","input":"${input.missing}"}]}"#,
                      #"{"type":"local","name":"fail"}"#] {
            let result = try await engine.run(spec("""
                {"type":"concurrent","stopWhenFailed":true,"steps":[\(first),{"type":"local","name":"delay","input":{"ms":5000}},
                  {"type":"local","name":"echo","input":2}]}
                """))
            #expect(result.state == .failed)
            #expect(result.result?["stopped"] == true)
            let errors = try #require(result.result?["errors"]?.arrayValue)
            #expect(errors.count == 3 && errors.dropFirst().allSatisfy { $0["kind"] == "cancelled" || $0 == .null }, "\(first): \(errors)")
            #expect(errors[1]["kind"] == "cancelled", "\(first): \(errors)")
            #expect(engine.status(of: result.jobId)?.json["steps"] == ["done": 3, "total": 3], "\(first)")
            let stepOne = log.names(job: result.jobId).filter { $0.hasSuffix("@1") }
            #expect(stepOne.first == "job.queued@1" && stepOne.last == "job.cancelled@1", "\(first): \(stepOne)")
        }
        // A nested group cancelled before its turn to run ends as a leaf does: no
        // result (it ended with an empty `{results: [], errors: []}`), an error.
        let nested = try await engine.run(spec("""
            {"type":"concurrent","stopWhenFailed":true,"steps":[{"type":"local","name":"echo","input":"${input.missing}"},
              {"type":"serial","steps":[{"type":"local","name":"delay","input":{"ms":5000}}]}]}
            """))
        #expect(nested.result?["results"] == [nil, nil])
        #expect(nested.result?["errors"]?[1]?["kind"] == "cancelled")
        #expect(log.names(job: nested.jobId).filter { $0.hasSuffix("@1") } == ["job.queued@1", "job.cancelled@1"])
    }

    /// A failed nested group's result (its steps' results and errors) is its
    /// parent's result for that step: partial results are never lost, at any depth.
    @Test func aFailedNestedGroupKeepsItsPartialResultsInItsParent() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let done = try await engine.run(spec("""
            {"type":"serial","stopWhenFailed":false,"steps":[
              {"type":"serial","stopWhenFailed":false,"steps":[
                {"type":"local","name":"echo","input":"keep-me"},
                {"type":"concurrent","steps":[{"type":"local","name":"echo","input":"deep"},{"type":"local","name":"fail","input":{"message":"x"}}]}]},
              {"type":"local","name":"echo","input":"${prev}"},
              {"type":"local","name":"echo","input":"after"}]}
            """))
        #expect(done.state == .failed && done.error?.stepPath == "0.1.1", "\(done.json)")
        let inner = try #require(done.result?["results"]?[0])
        #expect(inner["results"]?[0] == "keep-me", "\(done.json)")
        #expect(inner["results"]?[1]?["results"] == ["deep", nil], "\(done.json)")
        #expect(inner["errors"]?[1]?["stepPath"] == "0.1.1", "\(done.json)")
        #expect(done.result?["results"]?[2] == "after" && done.result?["errors"]?[0]?["stepPath"] == "0.1.1")
        // `prev` is a step that succeeded: a failed group's partial result is not one.
        #expect(done.result?["errors"]?[1]?["kind"] == "invalid", "\(done.json)")
        #expect(done.result?["errors"]?[1]?["message"]?.stringValue?.contains("no result from a previous step") == true)

        // A partial result that would make the parent too large is left out: the step's own error stays.
        let small = try makeEngine(#", "limits": {"maxResultBytes": 2048}"#)
        defer { small.shutdown() }
        let big = String(repeating: "x", count: 1100)
        let kept = try await small.run(spec("""
            {"type":"serial","steps":[{"type":"local","name":"echo","input":"\(big)"},
              {"type":"serial","steps":[{"type":"local","name":"echo","input":"\(big)"},{"type":"local","name":"fail","input":{"message":"the real error"}}]}]}
            """))
        #expect(kept.error?.message == "the real error" && kept.error?.stepPath == "1.1", "\(kept.json)")
        #expect(kept.result?["results"]?[0]?.stringValue == big && kept.result?["results"]?[1] == .null)
    }

    @Test func concurrentStopWhenFailedCancelsRunningSteps() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let result = try await engine.run(spec("""
            {"type":"concurrent","stopWhenFailed":true,"steps":[
              {"type":"remote","endpoint":"/delay/30000","timeoutMs":120000},
              {"type":"local","name":"delay","input":{"ms":30000}},
              {"type":"local","name":"fail","input":{"message":"early"}}]}
            """))
        // The running steps ended cancelled (checked below), not after their 30 s:
        // no wall-clock bound, which a sanitized build on 2 cores is too slow for.
        #expect(result.error?.message == "early")
        #expect(result.error?.stepPath == "2")
        #expect(result.result?["stopped"] == true)
        #expect(result.result?["errors"]?[0]?["kind"] == "cancelled")
        #expect(result.result?["errors"]?[1]?["kind"] == "cancelled")
    }

    @Test func concurrentRespectsMaxConcurrency() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let running = Atomic<Int>(0), peak = Atomic<Int>(0)
        engine.register(localJob: "track", .async { _ in
            let now = running.add(1, ordering: .relaxed).newValue
            _ = peak.max(now, ordering: .relaxed)
            try await Task.sleep(for: .milliseconds(30))
            running.subtract(1, ordering: .relaxed)
            return .null
        })
        let steps = Array(repeating: #"{"type":"local","name":"track"}"#, count: 12).joined(separator: ",")
        let result = try await engine.run(spec(#"{"type":"concurrent","maxConcurrency":3,"steps":[\#(steps)]}"#))
        #expect(result.state == .succeeded)
        #expect(peak.load(ordering: .relaxed) == 3)
    }

    @Test func nestedGroupsEventOrderAndStepPaths() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let result = try await engine.run(spec("""
            {"type":"serial","steps":[
              {"type":"local","name":"echo","input":"a"},
              {"type":"concurrent","steps":[{"type":"remote","api":"items"},
                {"type":"serial","steps":[{"type":"local","name":"delay","input":{"ms":10}}]}]}]}
            """))
        #expect(result.state == .succeeded)
        let events = log.all.filter { $0.rootJobId == result.jobId }
        #expect(events.map(\.seq) == events.map(\.seq).sorted())
        // Per job: queued < started < exactly one final event.
        for path in ["", "0", "1", "1.0", "1.1", "1.1.0"] {
            let names = events.filter { $0.stepPath == path }.map(\.name)
            #expect(names.first == "job.queued", "\(path): \(names)")
            #expect(names.dropFirst().first == "job.started", "\(path): \(names)")
            #expect(names.filter { ["job.succeeded", "job.failed", "job.cancelled"].contains($0) }.count == 1)
            #expect(names.last == "job.succeeded")
        }
        // group.done after the final events of all its steps.
        let groupDone = try #require(events.firstIndex { $0.name == "group.done" && $0.stepPath == "1" })
        for step in ["1.0", "1.1", "1.1.0"] {
            let final = try #require(events.firstIndex { $0.stepPath == step && $0.name == "job.succeeded" })
            #expect(final < groupDone)
        }
        #expect(events.first { $0.stepPath == "1.0" && $0.name == "job.started" }?.fields["worker"] == "rest")
        // Every job.started has `worker` (protocol §6): null for a group, which runs on none.
        for group in ["", "1", "1.1"] {
            let started = events.first { $0.stepPath == group && $0.name == "job.started" }
            #expect(started?.fields.keys.contains("worker") == true && started?.fields["worker"] == .null, "\(group)")
        }
        #expect(events.allSatisfy { $0.jobId == result.jobId })
    }

    @Test func eventStreamFiltersByJobAndName() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let id = "pending"
        _ = id
        let stream = engine.events(EventFilter(events: ["job.succeeded"]))
        let job = try engine.submit(spec(#"{"type":"serial","steps":[{"type":"local","name":"echo","input":1},{"type":"local","name":"echo","input":2}]}"#))
        var seen: [String] = []
        for await event in stream where event.rootJobId == job {
            seen.append(event.stepPath)
            if event.stepPath.isEmpty { break }
        }
        #expect(seen == ["0", "1", ""])
        let filter = EventFilter(jobId: "other")
        #expect(!filter.matches(HydraEvent(seq: 1, name: "job.queued", jobId: job, rootJobId: job, stepPath: "",
                                           time: 0, fields: [:])))
    }

    @Test func groupAndLocalTimeouts() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let local = try await engine.run(spec(#"{"type":"local","name":"delay","input":{"ms":5000},"timeoutMs":100}"#))
        #expect(local.error?.kind == .timeout)
        // The group's time must cover the first step on a loaded machine and run out in the second.
        let group = try await engine.run(spec(#"{"type":"serial","timeoutMs":1000,"steps":[{"type":"local","name":"delay","input":{"ms":50}},{"type":"remote","endpoint":"/delay/5000"}]}"#))
        #expect(group.error?.kind == .timeout)
        #expect(group.result?["results"]?[0] == ["ms": 50])
        #expect(group.result?["errors"]?[1]?["kind"] == "cancelled")
    }

    @Test func cancellingAGraphCancelsRunningSteps() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let started = engine.events(EventFilter(events: ["job.started"]))
        let id = try engine.submit(spec("""
            {"type":"concurrent","steps":[{"type":"remote","endpoint":"/delay/60000","timeoutMs":120000},{"type":"local","name":"delay","input":{"ms":60000}}]}
            """))
        // Both steps are running: their workers started them.
        let running = Locked(Set<String>())
        try await nextEvent(in: started) { event in
            running.withLock { $0.insert(event.stepPath); return $0.isSuperset(of: ["0", "1"]) }
        }
        #expect(await engine.cancel(id) == .cancelled)
        let result = await engine.result(of: id)
        #expect(result?.state == .cancelled)
        let names = log.names(job: id)
        #expect(names.contains("job.cancelled@0") && names.contains("job.cancelled@1"))
        #expect(names.last == "job.cancelled@")
        #expect(names.contains("group.done@"))
    }

    @Test func namedJobsFromTheJobsFolder() async throws {
        let folder = NSTemporaryDirectory() + "hydra-jobs-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try #"{"type":"serial","steps":[{"type":"remote","id":"login","method":"POST","endpoint":"/login","body":{"user":"${input.user}","password":"secret"}},{"type":"remote","endpoint":"/me","headers":{"Authorization":"Bearer ${steps.login.body.token}"}}]}"#
            .write(toFile: folder + "/login-and-fetch.json", atomically: true, encoding: .utf8)
        let engine = try makeEngine(jobs: folder)
        defer { engine.shutdown() }
        let result = try await engine.run(spec(#"{"type":"serial","steps":[{"type":"local","name":"echo","input":"x"},{"type":"job","name":"login-and-fetch","input":{"user":"gandalf"}}]}"#))
        #expect(result.state == .succeeded)
        #expect(result.result?["results"]?[1]?["results"]?[1]?["body"] == ["user": "gandalf"])
        let missing = #expect(throws: ValidationError.self) { try engine.submit(spec(#"{"type":"job","name":"missing"}"#)) }
        #expect(missing?.isNotFound == true)
        // A mistake inside a named job's graph: at the submitted spec's `name`, the file and place in the reason.
        try #"{"type":"serial","steps":[{"type":"local","name":"nope"}]}"#.write(toFile: folder + "/bad.json", atomically: true, encoding: .utf8)
        let bad = #expect(throws: ValidationError.self) {
            try engine.submit(spec(#"{"type":"serial","steps":[{"type":"job","name":"bad"}]}"#))
        }
        #expect(bad?.path == "steps[0].name" && bad?.reason.hasPrefix("jobs folder: bad.json: steps[0].name: ") == true,
                "\(String(describing: bad))")
        // A named job that is one step with a field from a reference keeps the time limit it was submitted with.
        try #"{"type":"remote","url":"\#(TestServer.url("/delay/3000"))","expect":["${input.code}"]}"#
            .write(toFile: folder + "/slow.json", atomically: true, encoding: .utf8)
        let limited = try await engine.run(spec(#"{"type":"job","name":"slow","timeoutMs":300,"input":{"code":200}}"#))
        #expect(limited.error?.kind == .timeout, "\(String(describing: limited.error))")
        // The same for a repeated key in a job's file, which a person wrote.
        try #"{"type":"local","name":"echo","name":"echo"}"#.write(toFile: folder + "/twice.json", atomically: true, encoding: .utf8)
        let twice = #expect(throws: ValidationError.self) { try engine.submit(spec(#"{"type":"job","name":"twice"}"#)) }
        #expect(twice?.path == "name" && twice?.reason.contains(#"the key "name" is repeated"#) == true, "\(String(describing: twice))")
    }

    /// A named job that is a single step sees its own `input` (protocol §4), as a named graph's steps do.
    @Test func aNamedLeafJobSeesItsOwnInput() async throws {
        let folder = NSTemporaryDirectory() + "hydra-jobs-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try #"{"type":"local","name":"echo","input":{"hello":"${input.user}"}}"#
            .write(toFile: folder + "/greet.json", atomically: true, encoding: .utf8)
        let engine = try makeEngine(jobs: folder)
        defer { engine.shutdown() }
        let alone = try await engine.run(spec(#"{"type":"job","name":"greet","input":{"user":"gandalf"}}"#), input: ["user": "saruman"])
        #expect(alone.result == ["hello": "gandalf"], "\(String(describing: alone.error))")
        // As a step: its input may come from the graph around it, its own strings see only that input.
        let step = try await engine.run(spec(#"{"type":"serial","steps":[{"type":"local","name":"echo","input":"frodo"},{"type":"job","name":"greet","input":{"user":"${prev}"}}]}"#))
        #expect(step.result?["results"]?[1] == ["hello": "frodo"], "\(String(describing: step.error))")
    }

    /// Protocol §4: a job's file holds any job spec, so also one that names
    /// another job (it used to stop the coordinator: the chain was unwrapped
    /// one level only). Each level's `input` is resolved against the level
    /// above; every time limit of the chain holds (the shortest wins); the
    /// step counts are the graph's at the end.
    @Test func aNamedJobMayNameAnotherNamedJob() async throws {
        let folder = NSTemporaryDirectory() + "hydra-jobs-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let files = [
            "greet": #"{"type":"local","name":"echo","input":{"hello":"${input.user}"}}"#,
            "middle": #"{"type":"job","name":"greet","input":{"user":"${input.who}"}}"#,
            "outer": #"{"type":"job","name":"middle"}"#,
            "pair": #"{"type":"serial","steps":[{"type":"local","name":"echo","input":"${input}"},{"type":"job","name":"outer"}]}"#,
            "toPair": #"{"type":"job","name":"pair","input":{"who":"${input}"}}"#,
            "slow": #"{"type":"remote","url":"\#(TestServer.url("/delay/3000"))"}"#,
            "toSlow": #"{"type":"job","name":"slow"}"#,
            "slowOwn": #"{"type":"remote","url":"\#(TestServer.url("/delay/3000"))","timeoutMs":60000}"#,
        ]
        for (name, text) in files { try text.write(toFile: folder + "/\(name).json", atomically: true, encoding: .utf8) }
        let engine = try makeEngine(jobs: folder)
        defer { engine.shutdown() }

        let leaf = try await engine.run(spec(#"{"type":"job","name":"outer","input":{"who":"gandalf"}}"#))
        #expect(leaf.state == .succeeded && leaf.result == ["hello": "gandalf"], "\(String(describing: leaf.error))")
        // As a step, with its input from the graph around it; a chain that ends in a graph.
        let step = try await engine.run(spec(#"{"type":"serial","steps":[{"type":"local","name":"echo","input":"frodo"},{"type":"job","name":"toPair","input":"${prev}"}]}"#))
        #expect(step.state == .succeeded, "\(String(describing: step.error))")
        #expect(step.result?["results"]?[1]?["results"]?[0] == ["who": "frodo"])
        #expect(step.result?["results"]?[1]?["results"]?[1] == ["hello": "frodo"])
        let id = try engine.submit(spec(#"{"type":"job","name":"toPair","input":"sam"}"#))
        _ = await engine.result(of: id)
        let status = try #require(engine.status(of: id))
        #expect(status.state == .succeeded && status.stepsDone == 2 && status.stepsTotal == 2, "\(status)")
        // The time limit written where the chain starts.
        let limited = try await engine.run(spec(#"{"type":"job","name":"toSlow","timeoutMs":300}"#))
        #expect(limited.error?.kind == .timeout, "\(String(describing: limited.error))")
        // A file's own, longer limit does not lift the step's (the shorter holds).
        let shorter = try await engine.run(spec(#"{"type":"job","name":"slowOwn","timeoutMs":300}"#))
        #expect(shorter.error?.kind == .timeout, "\(String(describing: shorter.error))")
        // A cycle through the chain is still refused at submit.
        try #"{"type":"job","name":"loopB"}"#.write(toFile: folder + "/loopA.json", atomically: true, encoding: .utf8)
        try #"{"type":"job","name":"loopA"}"#.write(toFile: folder + "/loopB.json", atomically: true, encoding: .utf8)
        #expect(throws: ValidationError.self) { try engine.submit(spec(#"{"type":"job","name":"loopA"}"#)) }
    }

    /// Protocol §4: every spec may carry `worker`. On a group or a named job it
    /// is the default of the steps inside of that worker's kind (it used to be
    /// accepted and ignored, an unknown name too); a step's own wins.
    @Test func aGroupsOrNamedJobsWorkerIsItsStepsDefault() async throws {
        let folder = NSTemporaryDirectory() + "hydra-jobs-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try #"{"type":"concurrent","steps":[{"type":"remote","endpoint":"/items"},{"type":"local","name":"echo","input":1}]}"#
            .write(toFile: folder + "/pair.json", atomically: true, encoding: .utf8)
        let engine = try makeEngine(#", "workers": [{"name":"rest","kind":"remote"},{"name":"rest2","kind":"remote"},{"name":"local","kind":"local"}]"#,
                                    jobs: folder)
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let group = try await startedWorkers(engine, log, #"{"type":"serial","worker":"rest2","steps":[{"type":"remote","endpoint":"/items"},{"type":"local","name":"echo","input":1},{"type":"remote","endpoint":"/items","worker":"rest"}]}"#)
        #expect(group == ["0": "rest2", "1": "local", "2": "rest"], "\(group)")
        let named = try await startedWorkers(engine, log, #"{"type":"serial","steps":[{"type":"job","name":"pair","worker":"rest2"}]}"#)
        #expect(named == ["0.0": "rest2", "0.1": "local"], "\(named)")
        let unknown = #expect(throws: ValidationError.self) { try engine.submit(spec(#"{"type":"job","name":"pair","worker":"nope"}"#)) }
        #expect(unknown?.isNotFound == true && unknown?.path == "worker", "\(String(describing: unknown))")
        let templated = engine.refusal(#"{"type":"serial","worker":"${input.w}","steps":[{"type":"local","name":"echo"}]}"#)
        #expect(templated?.0 == "worker", "\(String(describing: templated))")
    }

    /// The worker each leaf step of the job `json` started on, by step path.
    private func startedWorkers(_ engine: HydraEngine, _ log: EventLog, _ json: String) async throws -> [String: String] {
        let id = try engine.submit(spec(json))
        let done = await engine.result(of: id)
        #expect(done?.state == .succeeded, "\(String(describing: done?.error))")
        var workers: [String: String] = [:]
        for event in log.all where event.rootJobId == id && event.name == "job.started" {
            if let worker = event.fields["worker"]?.stringValue { workers[event.stepPath] = worker }
        }
        return workers
    }

    /// Named jobs cannot take a job past what one request could write:
    /// groups nest at most `Dispatcher.maxGroupDepth` levels counted through
    /// the files (deeper, the engine's recursion overflowed its stack), and a
    /// few files that name each other ten times over are refused past
    /// `Dispatcher.maxNamedExpansionSteps` (a 40-byte submit made a million
    /// steps, checked on the submitting thread) before they are all expanded.
    @Test func namedJobsCannotNestOrMultiplyWithoutBound() async throws {
        let folder = NSTemporaryDirectory() + "hydra-jobs-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        func nested(_ levels: Int, around inner: String) -> String {
            String(repeating: #"{"type":"serial","steps":["#, count: levels) + inner + String(repeating: "]}", count: levels)
        }
        try nested(120, around: #"{"type":"local","name":"echo","input":"deep"}"#).write(toFile: folder + "/deep0.json", atomically: true, encoding: .utf8)
        try nested(120, around: #"{"type":"job","name":"deep0"}"#).write(toFile: folder + "/deep1.json", atomically: true, encoding: .utf8)
        try nested(120, around: #"{"type":"job","name":"deep1"}"#).write(toFile: folder + "/deep2.json", atomically: true, encoding: .utf8)
        for level in 0..<6 {
            let next = level == 5 ? #"{"type":"local","name":"echo","input":1}"# : #"{"type":"job","name":"fan\#(level + 1)"}"#
            try #"{"type":"concurrent","steps":[\#(Array(repeating: next, count: 10).joined(separator: ","))]}"#
                .write(toFile: folder + "/fan\(level).json", atomically: true, encoding: .utf8)
        }
        let engine = try makeEngine(jobs: folder)
        defer { engine.shutdown() }
        // 240 levels through two files run (and their result nests as deep).
        let deep = try await engine.run(spec(#"{"type":"job","name":"deep1"}"#))
        #expect(deep.state == .succeeded, "\(String(describing: deep.error))")
        let tooDeep = engine.refusal(#"{"type":"job","name":"deep2"}"#)
        #expect(tooDeep?.1.contains("groups nest deeper than 255 levels") == true, "\(String(describing: tooDeep))")
        // 10^4 steps are fine; 10^6 are refused, naming the step that multiplies them.
        let ten000 = try await engine.run(spec(#"{"type":"job","name":"fan2"}"#))
        #expect(ten000.state == .succeeded && ten000.result?["results"]?.arrayValue?.count == 10)
        let million = engine.refusal(#"{"type":"job","name":"fan0"}"#)
        #expect(million?.0 == "name" && million?.1.contains("larger than 100000 steps") == true, "\(String(describing: million))")
    }

    /// `startedAt` says when a job started (protocol §5: optional): a job
    /// still queued, behind a paused worker, has none; once it runs it has one.
    @Test func aQueuedJobHasNoStartedAt() async throws {
        let engine = try makeEngine(#", "workers": [{"name":"local","kind":"local","maxActive":1},{"name":"rest","kind":"remote"}]"#)
        defer { engine.shutdown() }
        let worker = try #require(engine.workers.first { $0.name == "local" })
        worker.pause()
        let id = try engine.submit(.local("echo", input: 1))
        try await waitUntil { worker.stats().queued == 1 }
        let queued = try #require(engine.status(of: id))
        #expect(queued.state == .queued && queued.startedAt == nil, "\(queued)")
        #expect(queued.json["startedAt"] == nil)
        worker.resume()
        _ = await engine.result(of: id)
        let done = try #require(engine.status(of: id))
        #expect(done.startedAt != nil && done.startedAt! >= queued.createdAt && done.finishedAt! >= done.startedAt!)
    }

    /// Protocol §6: queued < started < the final event, for a step whose time
    /// runs out in its worker's queue too (it sent `job.failed` right after
    /// `job.queued`). A local step's limit counts from when it was queued.
    @Test func aStepTimedOutInItsWorkersQueueStartedFirst() async throws {
        let engine = try makeEngine(#", "workers": [{"name":"local","kind":"local","maxActive":1},{"name":"rest","kind":"remote"}]"#)
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let done = try await engine.run(spec("""
            {"type":"concurrent","steps":[{"type":"local","name":"delay","input":{"ms":400}},
                                          {"type":"local","name":"delay","input":{"ms":10},"timeoutMs":50}]}
            """))
        #expect(done.state == .failed && done.error?.kind == .timeout && done.error?.stepPath == "1", "\(String(describing: done.error))")
        let second = log.all.filter { $0.rootJobId == done.jobId && $0.stepPath == "1" }
        #expect(second.map(\.name) == ["job.queued", "job.started", "job.failed"], "\(second.map(\.name))")
        #expect(second.first { $0.name == "job.started" }?.fields["worker"] == "local")
        #expect(engine.status(of: done.jobId)?.stepsDone == 2)
    }

    /// Protocol §4: a failed group's error is the first failing step's. A group
    /// that timed out after a step had failed carried the timeout instead; a
    /// cancelled one stays cancelled, and a timeout with no failure before is the group's.
    @Test func aGroupThatTimesOutAfterAFailureCarriesTheFailure() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let failedFirst = try await engine.run(spec("""
            {"type":"serial","stopWhenFailed":false,"timeoutMs":300,"steps":[
              {"type":"local","name":"fail","input":{"message":"first"}},{"type":"local","name":"delay","input":{"ms":3000}}]}
            """))
        #expect(failedFirst.state == .failed)
        #expect(failedFirst.error?.message == "first" && failedFirst.error?.stepPath == "0", "\(String(describing: failedFirst.error))")
        #expect(failedFirst.result?["stopped"] == true && failedFirst.result?["errors"]?[1]?["kind"] == "cancelled")
        let timedOut = try await engine.run(spec("""
            {"type":"serial","timeoutMs":200,"steps":[{"type":"local","name":"delay","input":{"ms":3000}}]}
            """))
        #expect(timedOut.error?.kind == .timeout && timedOut.error?.stepPath == "", "\(String(describing: timedOut.error))")
        let id = try engine.submit(spec("""
            {"type":"serial","stopWhenFailed":false,"steps":[
              {"type":"local","name":"fail","input":{"message":"first"}},{"type":"local","name":"delay","input":{"ms":3000}}]}
            """))
        try await waitUntil { engine.status(of: id)?.stepsDone == 1 }
        #expect(await engine.cancel(id) == .cancelled)
        #expect(await engine.result(of: id)?.state == .cancelled)
    }

    @Test func pauseResumeAndPriorityPushToFront() async throws {
        let engine = try makeEngine(#", "workers": [{"name":"local","kind":"local","maxActive":1},{"name":"rest","kind":"remote"}]"#)
        defer { engine.shutdown() }
        let order = Locked<[Int]>([])
        engine.register(localJob: "record", .inline { call in
            order.withLock { $0.append(call.input.intValue ?? -1) }
            return .null
        })
        let worker = try #require(engine.workers.first { $0.name == "local" })
        worker.pause()
        var ids: [String] = []
        for i in 1...3 { ids.append(try engine.submit(.local("record", input: .int(i)))) }
        ids.append(try engine.submit(.local("record", input: 99), priority: 5))
        // All four reached the paused worker, which started none of them.
        try await waitUntil { worker.stats().queued == 4 }
        #expect(order.withLock { $0 }.isEmpty)
        #expect(worker.stats().paused)
        #expect(worker.stats().queued == 4)
        worker.resume()
        for id in ids { _ = await engine.result(of: id) }
        #expect(order.withLock { $0 } == [99, 1, 2, 3])
        #expect(worker.stats().done == 4)
    }

    @Test func blockingLocalJobDoesNotDelayRemoteJobs() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        // The blocking job holds its thread until the test lets it go: the other
        // jobs finishing first shows they did not wait for it, however slow the
        // machine (no wall-clock bound to miss under a sanitizer).
        let release = DispatchSemaphore(value: 0)
        engine.register(localJob: "block", .blocking { _ in
            _ = release.wait(timeout: .now() + 60)
            return "done"
        })
        let starts = engine.events(EventFilter(events: ["job.started"]))
        let slow = try engine.submit(.local("block"))
        try await nextEvent(in: starts) { $0.jobId == slow }
        let fast = try await engine.run(spec(#"{"type":"remote","api":"items"}"#))
        let echo = try await engine.run(.local("echo", input: 1))
        #expect(fast.state == .succeeded && echo.state == .succeeded)
        #expect(engine.status(of: slow)?.state == .running)
        release.signal()
        #expect(await engine.result(of: slow)?.result == "done")
    }
}
