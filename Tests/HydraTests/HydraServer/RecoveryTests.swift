import CSpawn
import Foundation
import Testing

@testable import Hydra
@testable import HydraRPC

/// What a job that was running when the server died tells its clients after the restart.
@Suite(.ownThreads) struct RecoveryTests {
    /// A finished job's `job.status` does not change when only the store knows
    /// it: a stopped serial group's steps that never ran are not done, after a
    /// restart as before (it read done 1, then 3 of 3).
    @Test func aFinishedJobsStepsDoneOutlivesTheRestart() throws {
        let state = NSTemporaryDirectory() + "hydra-server-\(UUID().uuidString)"
        var server = try ServerProcess(state: state)
        var client = try server.client()
        let graph = try client.call("job.submit", ["job": ["type": "serial", "steps": [
            ["type": "local", "name": "fail", "input": ["message": "x"]],
            ["type": "local", "name": "echo", "input": 1], ["type": "local", "name": "echo", "input": 2]]]])["jobId"]!
        let leaf = try client.call("job.submit", ["job": ["type": "local", "name": "echo", "input": 3]])["jobId"]!
        #expect(try client.call("job.result", ["jobId": graph, "waitMs": 10_000])["state"] == "failed")
        #expect(try client.call("job.result", ["jobId": leaf, "waitMs": 10_000])["state"] == "succeeded")
        #expect(try client.call("job.status", ["jobId": graph])["steps"] == ["done": 1, "total": 3])
        _ = server.terminate()

        server = try ServerProcess(state: state)
        defer { server.terminate() }
        client = try server.client()
        #expect(try client.call("job.status", ["jobId": graph])["steps"] == ["done": 1, "total": 3])
        #expect(try client.call("job.status", ["jobId": leaf])["steps"] == ["done": 1, "total": 1])
        let listed = try client.call("job.list", ["limit": 10])["jobs"]?.arrayValue ?? []
        #expect(listed.first { $0["jobId"] == graph }?["steps"] == ["done": 1, "total": 3], "\(listed)")
    }

    @Test func aResumedJobSaysSoAndKeepsItsStartTime() throws {
        let state = NSTemporaryDirectory() + "hydra-server-\(UUID().uuidString)"
        var server = try ServerProcess(state: state)
        var client = try server.client()
        let job = try client.call("job.submit", ["job": ["type": "serial", "steps": [
            ["type": "local", "name": "echo", "input": 1],
            ["type": "local", "name": "delay", "input": ["ms": 1500]],
            ["type": "local", "name": "echo", "input": "${prev.ms}"]]]])["jobId"]!
        var before: JSONValue = .null
        try waitUntilBlocking(timeout: .seconds(10)) {
            before = (try? client.call("job.status", ["jobId": job])) ?? .null
            return before["steps"]?["done"] == 1
        }
        #expect(before["state"] == "running")
        // `job.list` answers once every write queued before it is committed: the
        // finished step is in the journal (a step that finished a moment before a
        // crash, not yet committed, would run again; that is not what this tests).
        _ = try client.call("job.list", ["limit": 1])
        server.kill9()

        server = try ServerProcess(state: state)
        defer { server.terminate() }
        client = try server.client()
        let result = try client.call("job.result", ["jobId": job, "waitMs": 10_000])
        #expect(result["state"] == "succeeded", "\(result)")
        #expect(result["result"]?["results"] == [1, ["ms": 1500], 1500])
        let after = try client.call("job.status", ["jobId": job])
        #expect(after["startedAt"] == before["startedAt"], "startedAt was reset: \(before) → \(after)")
        #expect(after["steps"] == ["done": 3, "total": 3])

        var events: [(name: String, path: String, fields: JSONValue)] = []
        let watcher = try server.client()
        _ = try watcher.call("events.subscribe", ["jobId": job, "fromSeq": 0])
        while let note = try watcher.nextNotification(timeout: .milliseconds(500)) {
            guard let event = note["params"], let name = event["event"]?.stringValue else { continue }
            events.append((name, event["stepPath"]?.stringValue ?? "?", event))
        }
        let resumed = events.enumerated().filter { $0.element.name == "job.resumed" }
        #expect(resumed.count == 1, "\(events.map { "\($0.name)@\($0.path)" })")
        #expect(resumed.first?.element.path == "")
        #expect(resumed.first?.element.fields["stepsDone"] == 1)
        // Before the steps that run again end.
        let stepTwoEnds = events.firstIndex { $0.name == "job.succeeded" && $0.path == "2" }
        #expect(resumed.first.map { $0.offset } ?? .max < stepTwoEnds ?? -1)
    }

    /// `maxAttempts` counts every attempt, across a restart too: a step that
    /// made two attempts before `kill -9` has two left of four (the one it
    /// announced, waiting in its backoff at the crash, runs again).
    @Test func aRetryingStepKeepsCountingItsAttemptsAfterKill9() throws {
        let key = "retry-kill-\(UUID().uuidString.prefix(8))"
        let (server, client, job) = try Self.killed(after: "job.retrying", with: "attempt", reaching: 3, of: [
            "type": "remote", "url": .string(TestServer.url("/count-status/\(key)/503")),
            "retry": ["maxAttempts": 4, "backoffMs": 1500, "maxBackoffMs": 1500]])
        defer { server.terminate() }
        let result = try client.call("job.result", ["jobId": job, "waitMs": 20_000])
        #expect(result["state"] == "failed", "\(result)")
        #expect(try Self.requestsSeen(key, through: client) == 4, "the origin saw every attempt")
    }

    /// `repeat.maxTimes` counts every round, across a restart too: a polling
    /// step that made three rounds before `kill -9` makes three more of six
    /// (it started its rounds over, and the origin saw up to nine requests).
    @Test func aPollingStepKeepsCountingItsRoundsAfterKill9() throws {
        let key = "poll-kill-\(UUID().uuidString.prefix(8))"
        let (server, client, job) = try Self.killed(after: "job.progress", with: "round", reaching: 3, of: [
            "type": "remote", "url": .string(TestServer.url("/count-status/\(key)/200")),
            "repeat": ["everyMs": 1500, "until": ["path": "body.never", "equals": 1], "maxTimes": 6]])
        defer { server.terminate() }
        let result = try client.call("job.result", ["jobId": job, "waitMs": 20_000])
        #expect(result["state"] == "failed" && result["error"]?["kind"] == "condition", "\(result)")
        #expect(result["error"]?["message"]?.stringValue?.contains("after 6 rounds") == true, "\(result)")
        #expect(try Self.requestsSeen(key, through: client) == 6, "the origin saw six rounds in all")
    }

    /// A server that cannot have its address stops before it resumes anything:
    /// a start that fails does not send an unfinished job's request again
    /// (under a supervisor that restarts it, every failed start did), and the
    /// next start that succeeds runs it.
    @Test func aStartThatCannotListenResumesNothing() throws {
        let state = NSTemporaryDirectory() + "hydra-server-\(UUID().uuidString)"
        let key = "nolisten-\(UUID().uuidString.prefix(8))"
        var server = try ServerProcess(state: state)
        let client = try server.client()
        let job = try client.call("job.submit", ["job": [
            "type": "remote", "url": .string(TestServer.url("/count-status/\(key)/503")),
            "retry": ["maxAttempts": 2, "backoffMs": 60_000, "maxBackoffMs": 60_000]]])["jobId"]!
        let watcher = try server.client()
        _ = try watcher.call("events.subscribe", ["jobId": job, "events": ["job.retrying"], "fromSeq": 0])
        #expect(try watcher.nextNotification(timeout: .seconds(10)) != nil)
        server.kill9()

        // Another server holds a port (and counts the origin's requests for the test).
        let other = try ServerProcess()
        defer { other.terminate() }
        let counter = try other.client()
        func count() throws -> JSONValue? { try Self.requestsSeen(key, through: counter) }
        #expect(try count() == 1)
        guard case .tcp(_, let port)? = other.address else { Issue.record("no TCP address"); return }
        let refused = try RunCommandTests().hydra(["serve", "--config", server.configPath, "--state", state,
                                                   "--listen", "127.0.0.1:\(port)"])
        #expect(refused.status == 2 && refused.err.contains("address already in use"), "\(refused.err)")
        usleep(500_000)
        #expect(try count() == 1, "a start that could not listen sent the unfinished job's request")

        server = try ServerProcess(state: state)
        defer { server.terminate() }
        var seen: JSONValue? = nil
        for _ in 0..<100 where seen != 2 {
            seen = try count()
            if seen != 2 { usleep(100_000) }
        }
        #expect(seen == 2, "the next start resumed the job")
        // Its last attempt (the crash came in its backoff) has run: the job ends.
        #expect(try server.client().call("job.result", ["jobId": job, "waitMs": 10_000])["state"] == "failed")
    }

    /// A result nested deeper than a request may be (groups wrap their steps'
    /// results) is read back after a restart: `job.list`, `job.result` and a
    /// replay of its events work (the store refused it as corrupt, which broke
    /// listing and replay for every client until the job aged out).
    @Test func aDeeplyNestedResultIsReadBackAfterARestart() throws {
        let state = NSTemporaryDirectory() + "hydra-server-\(UUID().uuidString)"
        var server = try ServerProcess(state: state)
        var client = try server.client()
        var job: JSONValue = ["type": "local", "name": "echo", "input": "${input.a}"]
        for _ in 0..<150 { job = ["type": "serial", "steps": [job]] }
        var input: JSONValue = 1
        for _ in 0..<300 { input = [input] }
        let id = try client.call("job.submit", ["job": job, "input": ["a": input]])["jobId"]!
        #expect(try client.call("job.result", ["jobId": id, "waitMs": 10_000])["state"] == "succeeded")
        _ = server.terminate()

        server = try ServerProcess(state: state)
        defer { server.terminate() }
        client = try server.client()
        let result = try client.call("job.result", ["jobId": id, "waitMs": 10_000])
        #expect(result["state"] == "succeeded", "\(result["error"] ?? .null)")
        #expect(result["result"]?.nestingDepth(upTo: 10_000) == 2 * 150 + 300, "the result as it was")
        #expect(try client.call("job.list", ["limit": 3])["jobs"]?.arrayValue?.count == 1)
        let watcher = try server.client()
        _ = try watcher.call("events.subscribe", ["jobId": id, "fromSeq": 0])
        var names: [String] = []
        // Up to the root's final event (deep events are slow to replay under the sanitizers).
        while names.last != "job.succeeded@", let note = try watcher.nextNotification(timeout: .seconds(30)) {
            let name = note["method"] == "hydra.dropped" ? "hydra.dropped" : note["params"]?["event"]?.stringValue ?? "?"
            names.append(name == "job.succeeded" && note["params"]?["stepPath"] == "" ? "job.succeeded@" : name)
            if name == "hydra.dropped" { break }
        }
        #expect(!names.contains("hydra.dropped") && names.filter { $0 == "group.done" }.count == 150, "\(names.suffix(5))")
    }

    /// A job whose spec no longer checks at the restart (the server its named
    /// job calls was taken out of the configuration meanwhile) is finished as
    /// failed, kind `invalid`, and its events end with its `job.failed`: it
    /// ended without a final event.
    @Test func aJobThatCannotResumeEndsWithItsFinalEvent() throws {
        let state = NSTemporaryDirectory() + "hydra-server-\(UUID().uuidString)"
        let jobs = state + "-jobs"
        try FileManager.default.createDirectory(atPath: jobs, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: jobs) }
        try #"{"type": "remote", "server": "slowsvr", "endpoint": "/delay/30000"}"#.write(toFile: jobs + "/slow.json", atomically: true, encoding: .utf8)
        var server = try ServerProcess(config: #""jobs": {"path": "\#(jobs)"}, "servers": {"testsvr": "\#(TestServer.base)", "slowsvr": "\#(TestServer.base)"}"#,
                                       state: state)
        var client = try server.client()
        let job = try client.call("job.submit", ["job": ["type": "job", "name": "slow"]])["jobId"]!
        try waitUntilBlocking(timeout: .seconds(10)) { (try? client.call("job.status", ["jobId": job]))?["state"] == "running" }
        _ = try client.call("job.list", ["limit": 1])  // every write queued so far is committed
        server.kill9()

        server = try ServerProcess(config: #""jobs": {"path": "\#(jobs)"}"#, state: state)
        defer { server.terminate() }
        client = try server.client()
        let result = try client.call("job.result", ["jobId": job, "waitMs": 10_000])
        #expect(result["state"] == "failed" && result["error"]?["kind"] == "invalid", "\(result)")
        #expect(result["error"]?["message"]?.stringValue?.hasPrefix("cannot resume after a restart") == true, "\(result)")
        let watcher = try server.client()
        _ = try watcher.call("events.subscribe", ["jobId": job, "fromSeq": 0])
        var names: [String] = []
        while names.last != "job.failed", let note = try watcher.nextNotification(timeout: .seconds(10)) {
            names.append(note["params"]?["event"]?.stringValue ?? "?")
        }
        #expect(names == ["job.queued", "job.started", "job.failed"], "\(names)")
    }

    /// A job runs the named jobs it loaded when it was accepted: a restart
    /// resumes that graph, and `job.status` counts it, whatever the jobs folder
    /// holds by then (a file changed from a group to one step made the resumed
    /// job graft its old steps onto the new graph, and a debug build stop on an
    /// assertion at every start; a finished job's counts followed the folder).
    @Test func aRestartResumesTheNamedJobsAsSubmitted() throws {
        let state = NSTemporaryDirectory() + "hydra-server-\(UUID().uuidString)"
        let jobs = state + "-jobs"
        try FileManager.default.createDirectory(atPath: jobs, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: jobs) }
        let config = #""jobs": {"path": "\#(jobs)"}"#
        try #"{"type": "serial", "steps": [{"type": "local", "name": "echo", "input": "a"}, {"type": "local", "name": "delay", "input": {"ms": 1500}}, {"type": "local", "name": "echo", "input": "b"}]}"#
            .write(toFile: jobs + "/g.json", atomically: true, encoding: .utf8)
        try #"{"type": "job", "name": "g"}"#.write(toFile: jobs + "/outer.json", atomically: true, encoding: .utf8)
        var server = try ServerProcess(config: config, state: state)
        var client = try server.client()
        let job = try client.call("job.submit", ["job": ["type": "concurrent", "steps": [["type": "job", "name": "outer"]]]])["jobId"]!
        try waitUntilBlocking(timeout: .seconds(10)) { (try? client.call("job.status", ["jobId": job]))?["steps"]?["done"] == 1 }
        _ = try client.call("job.list", ["limit": 1])  // every write queued so far is committed
        server.kill9()
        try #"{"type": "local", "name": "echo", "input": "new"}"#.write(toFile: jobs + "/g.json", atomically: true, encoding: .utf8)

        server = try ServerProcess(config: config, state: state)
        client = try server.client()
        let result = try client.call("job.result", ["jobId": job, "waitMs": 10_000])
        #expect(result["state"] == "succeeded", "\(result)")
        let steps = result["result"]?["results"]?[0]?["results"]
        #expect(steps?[0] == "a" && steps?[2] == "b" && steps?.arrayValue?.count == 3, "\(result)")
        #expect(try client.call("job.status", ["jobId": job])["steps"] == ["done": 3, "total": 3])
        _ = server.terminate()

        // Finished, then the files gone: its status is still the graph it ran.
        try FileManager.default.removeItem(atPath: jobs + "/g.json")
        try FileManager.default.removeItem(atPath: jobs + "/outer.json")
        server = try ServerProcess(config: config, state: state)
        defer { server.terminate() }
        client = try server.client()
        #expect(try client.call("job.status", ["jobId": job])["steps"] == ["done": 3, "total": 3])
    }

    /// A nested group that ended before the crash (here: timed out, its steps
    /// cancelled) is not run again after the restart: it ends as it ended,
    /// not as its recorded steps would make it end (cancelled, not timeout).
    @Test func aGroupThatEndedBeforeTheCrashKeepsItsEnding() throws {
        let state = NSTemporaryDirectory() + "hydra-server-\(UUID().uuidString)"
        var server = try ServerProcess(state: state)
        var client = try server.client()
        let job = try client.call("job.submit", ["job": ["type": "serial", "stopWhenFailed": false, "steps": [
            ["type": "concurrent", "timeoutMs": 300, "steps": [
                ["type": "local", "name": "delay", "input": ["ms": 5000]],
                ["type": "local", "name": "delay", "input": ["ms": 5000]]]],
            ["type": "local", "name": "delay", "input": ["ms": 1500]],
            ["type": "local", "name": "echo", "input": 1]]]])["jobId"]!
        try waitUntilBlocking(timeout: .seconds(10)) {
            (try? client.call("job.status", ["jobId": job]))?["steps"]?["done"] == 2
        }
        _ = try client.call("job.list", ["limit": 1])  // every write queued so far is committed
        server.kill9()

        server = try ServerProcess(state: state)
        defer { server.terminate() }
        client = try server.client()
        let result = try client.call("job.result", ["jobId": job, "waitMs": 10_000])
        #expect(result["state"] == "failed", "\(result)")
        #expect(result["error"]?["kind"] == "timeout", "\(result)")
        #expect(result["error"]?["stepPath"] == "0", "\(result)")
        #expect(result["result"]?["errors"]?[0]?["kind"] == "timeout", "\(result)")
        // The group's own (partial) result is kept in the root's, as before the crash.
        #expect(result["result"]?["results"]?[0]?["errors"]?.arrayValue?.count == 2, "\(result)")
        #expect(result["result"]?["results"]?[1] == ["ms": 1500] && result["result"]?["results"]?[2] == 1, "\(result)")
        // The group's two cancelled steps ran before the crash.
        #expect(try client.call("job.status", ["jobId": job])["steps"] == ["done": 4, "total": 4])
        // `job.resumed` counted them as `job.status` did before the crash: leaf steps (the
        // failed group's own record made it 3).
        let watcher = try server.client()
        _ = try watcher.call("events.subscribe", ["jobId": job, "events": ["job.resumed"], "fromSeq": 0])
        let resumed = try #require(try watcher.nextNotification(timeout: .seconds(10)))
        #expect(resumed["params"]?["stepsDone"] == 2, "\(resumed)")
    }

    /// A final state `job.result` or `job.status` reported is in the store: a
    /// `kill -9` right after the answer does not run the job again (it was
    /// answered from memory while its finish waited in the writer's queue:
    /// the job ran again after the restart, and ended otherwise). Every commit
    /// waits 30 ms (a fault injected for the test) to widen that window.
    @Test func aFinalStateAnsweredSurvivesKill9() throws {
        for way in ["result-wait", "result", "status"] {
            let state = NSTemporaryDirectory() + "hydra-server-\(UUID().uuidString)"
            let key = "final-\(way)-\(UUID().uuidString.prefix(8))"
            var server = try ServerProcess(state: state, environment: ["HYDRA_FAULT_COMMIT_DELAY_MS": "30"])
            var client = try server.client()
            let job = try client.call("job.submit", ["job": ["type": "remote", "url": .string(TestServer.url("/hits/\(key)"))]])["jobId"]!
            var answered: JSONValue = .null
            try waitUntilBlocking(timeout: .seconds(10)) {
                switch way {
                case "result-wait": answered = (try? client.call("job.result", ["jobId": job, "waitMs": 10_000])) ?? .null
                case "result": answered = (try? client.call("job.result", ["jobId": job])) ?? .null
                default: answered = (try? client.call("job.status", ["jobId": job])) ?? .null
                }
                return answered["state"] == "succeeded"
            }
            server.kill9()

            server = try ServerProcess(state: state)
            defer { server.terminate() }
            client = try server.client()
            let after = try client.call("job.result", ["jobId": job, "waitMs": 10_000])
            #expect(after["state"] == "succeeded", "\(way): \(after)")
            #expect(after["result"]?["body"] == ["hits": 1], "\(way): the job ran again: \(after)")
            #expect(try Self.requestsSeen(key, through: client) == 1, "\(way): requests sent")
        }
    }

    /// A `job.cancel` answered `{"cancelled": true}` is in the store: a `kill -9`
    /// right after the answer does not resume the job (it did, 9 times in 10,
    /// in a crash soak: the answer left before the cancelled finish was committed).
    @Test func aCancelAnsweredSurvivesKill9() throws {
        let state = NSTemporaryDirectory() + "hydra-server-\(UUID().uuidString)"
        let key = "cancel-\(UUID().uuidString.prefix(8))"
        var server = try ServerProcess(state: state, environment: ["HYDRA_FAULT_COMMIT_DELAY_MS": "30"])
        var client = try server.client()
        let job = try client.call("job.submit", ["job": ["type": "serial", "steps": [
            ["type": "local", "name": "delay", "input": ["ms": 1500]],
            ["type": "remote", "url": .string(TestServer.url("/hits/\(key)"))]]]])["jobId"]!
        #expect(try client.call("job.cancel", ["jobId": job]) == ["cancelled": true])
        server.kill9()

        server = try ServerProcess(state: state)
        defer { server.terminate() }
        client = try server.client()
        let after = try client.call("job.result", ["jobId": job, "waitMs": 5_000])
        #expect(after["state"] == "cancelled", "the cancel was lost: \(after)")
        #expect(try Self.requestsSeen(key, through: client) == 0)
    }

    /// An event a subscriber saw live is in the store: after `kill -9` a
    /// replay from before it finds it (protocol §6: seq is durable, a client
    /// that reconnects misses nothing). Killed right after an event arrives,
    /// every commit waiting 30 ms (a fault injected for the test: a server
    /// that sent events before storing them would lose the last ones).
    @Test func eventsSeenLiveAreReplayedAfterKill9() throws {
        let state = NSTemporaryDirectory() + "hydra-server-\(UUID().uuidString)"
        var server = try ServerProcess(state: state, environment: ["HYDRA_FAULT_COMMIT_DELAY_MS": "30"])
        let watcher = try server.client()
        let from = try watcher.call("events.subscribe", [:])["seq"]?.intValue ?? 0
        let client = try server.client()
        let steps: [JSONValue] = (0..<40).map { _ in ["type": "local", "name": "delay", "input": ["ms": 20]] }
        _ = try client.call("job.submit", ["job": ["type": "serial", "steps": .array(steps)]])
        var seen: [Int] = []
        while let note = try watcher.nextNotification(timeout: .seconds(10)) {
            guard let seq = note["params"]?["seq"]?.intValue else { continue }
            seen.append(seq)
            if note["params"]?["event"] == "job.succeeded" && note["params"]?["stepPath"] == "10" { break }
        }
        server.kill9()

        server = try ServerProcess(state: state)
        defer { server.terminate() }
        let replay = try server.client()
        _ = try replay.call("events.subscribe", ["fromSeq": .int(from)])
        var replayed: Set<Int> = []
        while let note = try replay.nextNotification(timeout: .milliseconds(1500)) {
            if let seq = note["params"]?["seq"]?.intValue { replayed.insert(seq) }
        }
        #expect(seen.count > 30)
        let missing = seen.filter { !replayed.contains($0) }
        #expect(missing.isEmpty, "\(missing.count) events seen live are not in the replay: \(missing)")
    }

    @Test func downloadsACrashInterruptedLeaveNothingBehind() throws {
        let state = NSTemporaryDirectory() + "hydra-server-\(UUID().uuidString)"
        let folder = state + "/downloads/deep"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try Data("partial".utf8).write(to: URL(fileURLWithPath: folder + "/.hydra-download-1f2e3d"))
        try Data("kept".utf8).write(to: URL(fileURLWithPath: folder + "/file.bin"))
        let server = try ServerProcess(state: state)
        #expect(!FileManager.default.fileExists(atPath: folder + "/.hydra-download-1f2e3d"))
        #expect(FileManager.default.contents(atPath: folder + "/file.bin") == Data("kept".utf8))
        // The startup says what it removed.
        #expect(server.terminate().stderr.contains("removed 1 partial download(s)"))
    }

    /// A file-size limit reached under the server (`ulimit -f`, here lowered on
    /// the running process) refuses the submits that cannot be stored and keeps
    /// the server up; once lifted, submits are taken again, and after a
    /// `kill -9` every submit that was acknowledged finishes. Twice: a limit at
    /// the WAL's end (the next commit's write starts past it: `EFBIG`; the
    /// SIGXFSZ it raises stays pending, blocked on every thread but the main
    /// one, which writes no file), then one 256 KiB further (the commit's
    /// gathered frames cross it: a short write, `SQLITE_FULL`). These are the
    /// real write failures of the WAL's gathered writes (`CSQLiteWAL`).
    @Test func aFileSizeLimitRefusesSubmitsNotTheServer() throws {
        let state = NSTemporaryDirectory() + "hydra-server-\(UUID().uuidString)"
        var server = try ServerProcess(state: state)
        var client = try server.client()
        let pid = server.process.processIdentifier
        let padding = JSONValue.string(String(repeating: "x", count: 2000))
        func submit(_ i: Int) throws(RPCClientError) -> JSONValue? {
            try client.call("job.submit", ["job": ["type": "local", "name": "echo", "input": ["i": .int(i), "pad": padding]]])["jobId"]
        }
        var acknowledged: [JSONValue] = []
        var next = 0
        for _ in 0..<20 {
            acknowledged.append(try #require(try submit(next)))
            next += 1
        }
        for margin in [0, 256 * 1024] {
            // A fresh server's WAL only grows (no checkpoint has run yet): its size is where the next commit writes.
            let wal = try #require(try FileManager.default.attributesOfItem(atPath: state + "/hydra.db-wal")[.size] as? Int)
            try #require(Self.limitFileSize(of: pid, to: UInt64(wal + margin)))
            var refused: RPCClientError?
            while refused == nil && next < 5_000 {
                do throws(RPCClientError) {
                    if let job = try submit(next) { acknowledged.append(job) }
                } catch {
                    refused = error
                }
                next += 1
            }
            #expect(refused?.code == -32603, "margin \(margin): \(String(describing: refused))")
            #expect(kill(pid, 0) == 0, "margin \(margin): the server died")
            #expect(try client.call("hydra.ping")["version"] != nil)
            try #require(Self.limitFileSize(of: pid, to: .max))  // back to the hard limit
            // The writer tries again after a pause: submits are taken again.
            var again: JSONValue?
            try waitUntilBlocking(timeout: .seconds(10)) {
                again = try? submit(next)
                return again != nil
            }
            acknowledged.append(try #require(again))
            next += 1
        }
        server.kill9()

        server = try ServerProcess(state: state)
        defer { server.terminate() }
        client = try server.client()
        for job in acknowledged {
            let result = try client.call("job.result", ["jobId": job, "waitMs": 10_000])
            #expect(result["state"] == "succeeded", "\(job): \(result)")
        }
    }

    /// Sets the soft file-size limit (`RLIMIT_FSIZE`) of process `pid`, keeping its hard limit.
    private static func limitFileSize(of pid: pid_t, to bytes: UInt64) -> Bool {
        hydra_test_limit_file_size(pid, bytes) == 0
    }

    /// How many requests the test server's origin saw for `key` (`/hits/KEY`,
    /// `/count-status/KEY/…`), asked through a remote job on `client`'s server.
    /// Submits a serial job of one `step`, waits until its `event` carries
    /// `field` = `value` (live events are sent once stored: that one is in the
    /// store), kills the server with `kill -9` and starts it again on the same
    /// state. Returns the new server (the caller terminates it), a client of
    /// it and the job's id.
    private static func killed(after event: String, with field: String, reaching value: Int,
                               of step: JSONValue) throws -> (ServerProcess, RPCClient, JSONValue) {
        let state = NSTemporaryDirectory() + "hydra-server-\(UUID().uuidString)"
        let first = try ServerProcess(state: state)
        let job = try first.client().call("job.submit", ["job": ["type": "serial", "steps": [step]]])["jobId"]!
        let watcher = try first.client()
        _ = try watcher.call("events.subscribe", ["jobId": job, "events": [.string(event)], "fromSeq": 0])
        var seen: JSONValue = .null
        while seen[field] != .int(value), let note = try watcher.nextNotification(timeout: .seconds(10)) {
            seen = note["params"] ?? .null
        }
        #expect(seen[field] == .int(value), "\(seen)")
        first.kill9()
        let server = try ServerProcess(state: state)
        return (server, try server.client(), job)
    }

    private static func requestsSeen(_ key: String, through client: RPCClient) throws -> JSONValue? {
        let id = try client.call("job.submit", ["job": ["type": "remote", "url": .string(TestServer.url("/count/\(key)"))]])["jobId"]!
        return try client.call("job.result", ["jobId": id, "waitMs": 10_000])["result"]?["body"]?["count"]
    }
}
