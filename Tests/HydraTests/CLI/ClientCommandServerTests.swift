import Foundation
import HydraRPC
import Testing

@testable import Hydra

/// The client commands against a real `hydra serve`, as a person meets them:
/// `submit --follow` on a terminal and off one, `--pretty`, a server that dies.
@Suite(.ownThreads) struct ClientCommandServerTests {
    let cli = RunCommandTests()

    /// Starts the binary with `stdin` written and closed; stdout is a pipe (or
    /// `stdout`, a terminal), stderr `stderr`.
    func start(_ arguments: [String], stdin: String = "", stderr: FileHandle,
               stdout: FileHandle? = nil) throws -> (process: ChildProcess, out: Pipe) {
        let process = ChildProcess()
        process.executableURL = BuiltProducts.url("hydra")
        process.arguments = arguments
        process.currentDirectoryURL = PackageRoot.url
        let out = Pipe(), input = Pipe()
        process.standardOutput = stdout ?? out
        process.standardError = stderr
        process.standardInput = input
        try process.run()
        input.fileHandleForWriting.write(Data(stdin.utf8))
        try input.fileHandleForWriting.close()
        return (process, out)
    }

    @Test func followNamesTheJobAndPrettyPrints() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        let connect = ["--connect", server.address.description]
        let follow = try cli.hydra(["submit", "-", "--follow"] + connect,
                                   stdin: #"{"type":"serial","steps":[{"type":"local","name":"echo","input":1},{"type":"local","name":"fail","input":{"message":"nope"}}]}"#)
        #expect(follow.status == 1)
        // Off a terminal stdout stays NDJSON (events, then the result); the id is on stderr, first.
        let lines = follow.out.split(separator: "\n").map(String.init)
        let parsed = try lines.map { try JSONParser.parse($0) }
        let jobId = try #require(parsed.last?["jobId"]?.stringValue)
        // (With the address it was given: pasted as it is, the hint reaches the same server.)
        #expect(follow.err.hasPrefix("hydra: job \(jobId) (follow it again with: hydra events --job \(jobId) --from 0 --connect \(server.address.description))\n"),
                "\(follow.err)")

        // result --pretty: indented JSON; the default stays one line.
        let pretty = try cli.hydra(["result", jobId, "--pretty"] + connect)
        #expect(pretty.status == 1)
        #expect(pretty.out.contains("{\n  \"jobId\": \"\(jobId)\",\n  \"state\": \"failed\",\n"), "\(pretty.out)")
        #expect(try JSONParser.parse(pretty.out)["error"]?["message"] == "nope")
        let compact = try cli.hydra(["result", jobId] + connect)
        #expect(compact.out.split(separator: "\n").count == 1)
        let status = try cli.hydra(["status", jobId, "--pretty"] + connect)
        #expect(status.out.hasPrefix("{\n  \"jobId\": \"\(jobId)\",\n  \"state\": \"failed\",\n"), "\(status.out)")
        // jobs, workers and resource ls take --pretty too (each item indented); without it, one line per item.
        let jobs = try cli.hydra(["jobs", "--limit", "1", "--pretty"] + connect)
        #expect(jobs.status == 0 && jobs.out.hasPrefix("{\n  \"jobId\": \"\(jobId)\",\n"), "\(jobs.out)")
        let workers = try cli.hydra(["workers", "--pretty"] + connect)
        #expect(workers.status == 0 && workers.out.hasPrefix("{\n  \"name\": "), "\(workers.out)")
        let plainWorkers = try cli.hydra(["workers"] + connect)
        #expect(plainWorkers.out.split(separator: "\n").allSatisfy { $0.hasPrefix("{\"name\":") }, "\(plainWorkers.out)")
        let copies = try cli.hydra(["resource", "ls", "--pretty"] + connect)
        #expect(copies.status == 0 && copies.out.hasPrefix("{\n  \""), "\(copies.out)")
        #expect(try JSONParser.parse(copies.out)["resources"] != nil, "\(copies.out)")

        // events --pretty: one readable line per event (it streams until interrupted).
        let errors = Pipe()
        let events = try start(["events", "--job", jobId, "--from", "0", "--pretty"] + connect,
                               stderr: errors.fileHandleForWriting)
        var text = ""
        let deadline = ContinuousClock.now + .seconds(10)
        while !text.contains("group.done"), ContinuousClock.now < deadline {
            text += String(decoding: events.out.fileHandleForReading.availableData, as: UTF8.self)
        }
        // SIGKILL: the test process may hand its children SIGTERM blocked.
        kill(events.process.processIdentifier, SIGKILL)
        events.process.waitUntilExit()
        let eventLines = text.split(separator: "\n").map(String.init)
        #expect(eventLines.first?.range(of: #"^\d\d:\d\d:\d\d\.\d{3}  job\.queued +\#(jobId)  serial 2 steps$"#,
                                        options: .regularExpression) != nil, "\(text)")
        #expect(eventLines.contains { $0.hasSuffix("job.succeeded   \(jobId) step 0  1") }, "\(text)")
        #expect(eventLines.contains { $0.hasSuffix("job.failed      \(jobId) step 1  internal: nope") }, "\(text)")
    }

    @Test func followOnATerminalShowsTotalAndRetries() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        let key = "follow-\(UUID().uuidString)"
        // Both stdout and stderr a terminal, as a person's (stdout piped gets the events as JSON lines).
        let terminal = try TerminalCapture()
        let follow = try start(["submit", "-", "--follow", "--connect", server.address.description],
                               stdin: #"{"type":"serial","steps":[{"type":"remote","endpoint":"/flaky/\#(key)/1","retry":{"maxAttempts":3,"backoffMs":10}},{"type":"local","name":"echo","input":2}]}"#,
                               stderr: terminal.terminal, stdout: terminal.terminal)
        try terminal.terminal.close()
        follow.process.waitUntilExit()
        terminal.waitForEnd()
        #expect(follow.process.terminationStatus == 0, "\(terminal.text)")
        let text = terminal.text
        #expect(text.hasPrefix("hydra: job j"), "\(text)")
        // The final progress line on a line of its own, both leaves of two done, the one retry
        // counted; then the result, the only line on stdout.
        let lines = text.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        #expect(lines.count == 3, "\(text)")
        let last = try #require(lines.dropLast().last?.components(separatedBy: "\u{1B}[K").last)
        #expect(last.hasPrefix("hydra: steps 2/2 done · 0 in flight · 0 failed · 1 retry · "), "\(last)")
        #expect(try JSONParser.parse(try #require(lines.last))["state"] == "succeeded", "\(text)")
    }

    /// A job that had ended before the stream began: `events --job` ends once
    /// the replay is done, saying so (it waited for ever), `--event` chooses
    /// what is printed, not when the stream ends, and `submit --follow` of a
    /// repeated idempotency key prints the earlier job's result.
    @Test func followingAJobThatHadEndedEnds() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        let connect = ["--connect", server.address.description]
        let client = try server.client()
        let echo: JSONValue = ["type": "local", "name": "echo", "input": 1]
        let job = try #require(client.call("job.submit", ["job": echo, "idempotencyKey": "ended"])["jobId"]?.stringValue)
        _ = try client.call("job.result", ["jobId": .string(job), "waitMs": 10_000])
        let last = try #require(client.call("hydra.stats")["events"]?["lastSeq"]?.intValue)

        let live = try cli.hydra(["events", "--job", job] + connect)
        #expect(live.status == 0 && live.out.isEmpty && live.err.contains("job \(job) had ended (succeeded)"), "\(live)")
        let past = try cli.hydra(["events", "--job", job, "--from", String(last)] + connect)
        #expect(past.status == 0 && past.out.isEmpty && past.err.contains("at or before seq \(last)"), "\(past)")
        let all = try cli.hydra(["events", "--job", job, "--from", "0"] + connect)
        let names = try all.out.split(separator: "\n").map { try JSONParser.parse(String($0))["event"]?.stringValue ?? "" }
        #expect(all.status == 0 && names == ["job.queued", "job.started", "job.succeeded"] && all.err.isEmpty, "\(all)")
        let started = try cli.hydra(["events", "--job", job, "--from", "0", "--event", "job.started"] + connect)
        #expect(started.status == 0 && started.out.split(separator: "\n").count == 1 && started.out.contains("job.started"), "\(started)")

        let again = try cli.hydra(["submit", "-", "--follow", "--idempotency-key", "ended"] + connect, stdin: JSONWriter.string(echo))
        let result = try JSONParser.parse(try #require(again.out.split(separator: "\n").last.map(String.init)))
        #expect(again.status == 0 && result["jobId"] == .string(job) && result["state"] == "succeeded", "\(again)")

        // A running job followed for its starts only: the stream still ends with the job.
        let slow = try #require(client.call("job.submit", ["job": ["type": "local", "name": "delay", "input": ["ms": 300]]])["jobId"]?.stringValue)
        let watched = try cli.hydra(["events", "--job", slow, "--from", "0", "--event", "job.started"] + connect)
        #expect(watched.status == 0 && watched.out.split(separator: "\n").count == 1, "\(watched)")
    }

    /// Options the server checks under another name are named as given, and
    /// what cannot be meant is refused before any call.
    @Test func errorsNameTheOptionsAsGiven() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        let connect = ["--connect", server.address.description]
        let purge = try cli.hydra(["resource", "purge", "--older-than", "-1"] + connect)
        #expect(purge.status == 2 && purge.err.contains("--older-than: "), "\(purge)")
        let limits = try cli.hydra(["workers", "configure", "rest", "--max-active", "0"] + connect)
        #expect(limits.status == 2 && limits.err.contains("--max-active: "), "\(limits)")
        let emit = try cli.hydra(["emit", "custom.x", "--fields", "[1]"] + connect)
        #expect(emit.status == 2 && emit.err.contains("--fields: "), "\(emit)")
        let presentation = try cli.hydra(["resource", "get", "http://127.0.0.1:9/x", "--as", "xml"] + connect)
        #expect(presentation.status == 2 && presentation.err.contains("--as: "), "\(presentation)")
        let both = try cli.hydra(["resource", "stat", "http://127.0.0.1:9/x", "--key", "abc"] + connect)
        #expect(both.status == 2 && both.err.contains("not both"), "\(both)")
    }

    /// (It waits out ``ReconnectWindow``'s 10 seconds for the server to come back.)
    @Test func aLostConnectionEndsTheProgressLineFirst() throws {
        let server = try ServerProcess()
        defer { if server.process.isRunning { server.terminate() } }
        let terminal = try TerminalCapture()
        let follow = try start(["submit", "-", "--follow", "--connect", server.address.description],
                               stdin: #"{"type":"local","name":"delay","input":{"ms":30000}}"#,
                               stderr: terminal.terminal, stdout: terminal.terminal)
        try terminal.terminal.close()
        #expect(terminal.wait { $0.contains("1 in flight") }, "\(terminal.text)")
        kill(server.process.processIdentifier, SIGKILL)
        server.process.waitUntilExit()
        follow.process.waitUntilExit()
        terminal.waitForEnd()
        #expect(follow.process.terminationStatus == 1)
        // The note has a line of its own after the progress line (the terminal shows "\n" as "\r\n"),
        // then, the server not back within the window, the error.
        let lines = terminal.text.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        let last = try #require(lines.last)
        #expect(last.hasPrefix("hydra: ") && !last.contains("steps"), "\(terminal.text)")
        #expect(lines.dropLast().last?.hasSuffix("reconnecting to follow the job on a new connection") == true, "\(terminal.text)")
        #expect(lines.dropLast(2).last?.contains("hydra: steps 0/1 done · 1 in flight") == true, "\(terminal.text)")
    }

    /// `events --job` ends with the job (it streamed on after the job's end
    /// until interrupted, though `submit --follow` offers it to follow a job
    /// again); what a server sends to show is escaped and cut: an escape
    /// sequence in an idempotency key reached the terminal raw, and a key of
    /// 100,000 bytes came back whole.
    @Test func eventsOfAJobEndWithItAndServerTextIsMadeSafe() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        let connect = ["--connect", server.address.description]
        let submitted = try cli.hydra(["submit", "-", "--priority", "-5"] + connect,
                                      stdin: #"{"type":"serial","steps":[{"type":"local","name":"echo","input":1},{"type":"local","name":"echo","input":2}]}"#)
        #expect(submitted.status == 0, "\(submitted.err)")
        let jobId = try #require(try JSONParser.parse(submitted.out)["jobId"]?.stringValue)
        #expect(try cli.hydra(["result", jobId, "--wait", "10000"] + connect).status == 0)
        let events = try cli.hydra(["events", "--job", jobId, "--from", "0"] + connect)
        #expect(events.status == 0, "\(events.err)")
        // A job the server does not know is said at once (it was waited on for ever).
        let unknown = try cli.hydra(["events", "--job", "jnope", "--from", "0"] + connect)
        #expect(unknown.status == 1 && unknown.err.contains("jnope"), "\(unknown.err)")
        let names = try events.out.split(separator: "\n").map { try JSONParser.parse(String($0)) }
            .map { "\($0["event"]?.stringValue ?? "?")@\($0["stepPath"]?.stringValue ?? "?")" }
        #expect(names.last == "job.succeeded@" && names.contains("group.done@") && names.filter { $0 == "job.succeeded@0" }.count == 1,
                "\(names)")

        let key = "k\u{1B}[2J" + String(repeating: "x", count: 5_000)
        #expect(try cli.hydra(["submit", "-", "--idempotency-key", key] + connect, stdin: #"{"type":"local","name":"echo","input":1}"#).status == 0)
        let conflict = try cli.hydra(["submit", "-", "--idempotency-key", key] + connect, stdin: #"{"type":"local","name":"echo","input":2}"#)
        #expect(conflict.status == 1 && conflict.err.contains("k\\u{1B}[2J"), "\(conflict.err.prefix(300))")
        #expect(!conflict.err.utf8.contains(0x1B) && conflict.err.utf8.count < 500, "\(conflict.err.prefix(300))")
        let empty = try cli.hydra(["submit", "-", "--idempotency-key", ""] + connect, stdin: #"{"type":"local","name":"echo","input":1}"#)
        #expect(empty.status == 2 && empty.err.contains("--idempotency-key"), "\(empty.err)")

        // A resource job that fails says so as the other commands do, not as raw JSON.
        let missing = try cli.hydra(["resource", "get", TestServer.url("/resource/gone?status=404")] + connect)
        #expect(missing.status == 1 && missing.err.hasPrefix("hydra: http: HTTP 404"), "\(missing.err)")
    }

    /// `hydra events` whose connection ends (here: the server killed and
    /// started again) takes the stream up on a new connection after the last
    /// event seen, once the server is back, missing nothing; it exited with
    /// "the server closed the connection".
    @Test func eventsTakesTheStreamUpOnANewConnection() throws {
        var server = try ServerProcess()
        let state = server.stateDirectory
        guard case .tcp(_, let port) = server.address! else { Issue.record("not TCP"); return }
        let client = try server.client()
        let events = try EventsRun(self, server: server, client: client)
        defer { _ = events.stop() }
        let first = try client.call("job.submit", ["job": ["type": "local", "name": "echo", "input": 1]])["jobId"]!
        _ = try client.call("job.result", ["jobId": first, "waitMs": 10_000])
        var lines = try events.read(for: .seconds(20)) { $0.count == 1 }
        #expect(lines.first?["jobId"] == first)

        // The server goes away and comes back on the same port (the command waits for it); a job ends meanwhile.
        server.kill9()
        server = try ServerProcess(config: #""rpc": {"listen": "127.0.0.1:\#(port)"}"#, state: state)
        defer { server.terminate() }
        let again = try server.client()
        let second = try again.call("job.submit", ["job": ["type": "local", "name": "echo", "input": 2]])["jobId"]!
        _ = try again.call("job.result", ["jobId": second, "waitMs": 10_000])
        lines += try events.read(for: .seconds(20)) { $0.count == 1 }
        let said = events.stop()
        #expect(lines.map { $0["jobId"] } == [first, second], "\(lines); stderr: \(said)")
        #expect(said.contains("reconnecting to take the stream up again after seq"), "\(said)")
    }

    /// A subscription the server drops (`hydra events` read too slowly: its
    /// stdout was not read) is taken up again after the last event seen: the
    /// command sat silent for ever, with the raw `hydra.dropped` on stdout.
    @Test func eventsTakesADroppedSubscriptionUpAgain() throws {
        let server = try ServerProcess(config: #""rpc": {"listen": "127.0.0.1:0", "maxOutboundBytes": 65536}"#)
        defer { server.terminate() }
        let client = try server.client()
        let events = try EventsRun(self, server: server, client: client)
        defer { _ = events.stop() }
        let step: JSONValue = ["type": "local", "name": "echo", "input": .string(String(repeating: "z", count: 3_000))]
        var ids: Set<String> = []
        for _ in 0..<30 {
            let job = try client.call("job.submit", ["job": ["type": "concurrent", "steps": .array(Array(repeating: step, count: 25))]])
            ids.insert(try #require(job["jobId"]?.stringValue))
        }
        for id in ids { _ = try client.call("job.result", ["jobId": .string(id), "waitMs": 20_000]) }
        // Only now is stdout read: 30 × 26 job.succeeded events, none missing, none twice.
        func seqs(_ lines: [JSONValue]) -> [Int] {
            lines.compactMap { event in
                event["jobId"]?.stringValue.flatMap { ids.contains($0) ? event["seq"]?.intValue : nil }
            }
        }
        let seen = seqs(try events.read(for: .seconds(30)) { seqs($0).count >= 30 * 26 })
        #expect(seen.count == 30 * 26 && Set(seen).count == seen.count && seen == seen.sorted(), "\(seen.count) events")
        let said = events.stop()
        #expect(said.contains("taken up again after seq"), "the subscription was never dropped: the test proved nothing (\(said))")
    }

    /// `hydra events --event job.succeeded` against a server, subscribed once
    /// made; its stdout read as JSON lines with a deadline (`availableData`
    /// alone blocks: a missing event hung a whole run once, instead of failing).
    final class EventsRun {
        let process: ChildProcess
        private let out: Pipe
        private let errors = Pipe()
        private var buffer = Data()

        init(_ tests: ClientCommandServerTests, server: ServerProcess, client: RPCClient) throws {
            (process, out) = try tests.start(["events", "--event", "job.succeeded", "--connect", server.address.description],
                                             stderr: errors.fileHandleForWriting)
            // Subscribed (a fixed wait lost the race to a CLI started late on a loaded machine).
            try waitUntilBlocking(timeout: .seconds(30)) { (try? client.call("hydra.stats"))?["subscriptions"] == 1 }
        }

        /// The lines that come within `limit`, until `enough` says so or the command ends.
        func read(for limit: Duration, until enough: ([JSONValue]) -> Bool) throws -> [JSONValue] {
            var lines: [JSONValue] = []
            let deadline = ContinuousClock.now + limit
            let output = out.fileHandleForReading
            while !enough(lines), ContinuousClock.now < deadline {
                var ready = pollfd(fd: output.fileDescriptor, events: Int16(POLLIN), revents: 0)
                guard poll(&ready, 1, 200) > 0 else { continue }
                let chunk = output.availableData
                if chunk.isEmpty { break }  // the command ended
                buffer += chunk
                while let newline = buffer.firstIndex(of: 0x0A) {
                    lines.append(try JSONParser.parse(Array(buffer[buffer.startIndex..<newline])))
                    buffer = Data(buffer[buffer.index(after: newline)...])
                }
            }
            return lines
        }

        /// Ends the command (idempotent); what it said on stderr.
        func stop() -> String {
            guard process.isRunning else { return "" }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            try? errors.fileHandleForWriting.close()
            return String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        }
    }
}
