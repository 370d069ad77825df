import ArgumentParser
import Foundation
import Hydra
import HydraLoop
import HydraRPC
import OrderedCollections

/// A JSON object being built.
typealias OrderedJSON = OrderedDictionary<String, JSONValue>

/// Where client commands connect: `--connect HOST:PORT` or `unix:PATH`; the
/// secret comes from `HYDRA_RPC_SECRET`.
struct ConnectOptions: ParsableArguments {
    /// Where `hydra serve` listens by default (config.md `rpc.listen`).
    static let defaultAddress = "127.0.0.1:7400"

    @Option(help: "Server address: HOST:PORT or unix:PATH.")
    var connect = ConnectOptions.defaultAddress

    @Option(parsing: .unconditional, help: "Seconds to wait for each answer (1 to 86400; a wait the command asks for, as result --wait, comes on top).")
    var timeout: Double = 60

    func validate() throws {
        guard timeout.isFinite, (1...86_400).contains(timeout) else {
            throw ValidationError("--timeout: expected seconds from 1 to 86400, got \(timeout)")
        }
    }

    /// ``timeout`` as a duration.
    var callTimeout: Duration { .milliseconds(Int(timeout * 1000)) }

    /// Connects (and authenticates); exits 2 for a malformed address, 1 when the server cannot be reached.
    func client() -> RPCClient {
        switch connection() {
        case .success(let client): return client
        case .failure(let error): exitWith(error)
        }
    }

    /// A new connection, with `events.subscribe(params)` made on it, after the
    /// one a stream came on ended: tried until `deadline` (a restarted server
    /// comes back on its port after a moment; one being killed may reset the
    /// first connections). Exits 1 with the last failure when the server is not
    /// back by then, or with its answer when it refuses (through `fail`).
    func resubscribe(_ params: JSONValue, until deadline: Date,
                     fail: (RPCClientError) -> Never = exitWith) -> RPCClient {
        var pause = 0.05
        while true {
            let failure: RPCClientError
            switch connection() {
            case .success(let client):
                do {
                    _ = try client.call("events.subscribe", params)
                    return client
                } catch {
                    if error.code != nil || error.isTimeout { fail(error) }
                    failure = error
                }
            case .failure(let error):
                // A refused secret is the answer.
                if error.code != nil { fail(error) }
                failure = error
            }
            if Date().addingTimeInterval(pause) > deadline { fail(failure) }
            Thread.sleep(forTimeInterval: pause)
            pause = min(pause * 2, 1)
        }
    }

    /// One attempt to connect (and authenticate); exits 2 for a malformed address.
    private func connection() -> Result<RPCClient, RPCClientError> {
        guard let parsed = SocketAddress(parsing: connect) else {
            exitInvalid("--connect: \"\(connect)\" is not HOST:PORT or unix:PATH")
        }
        // As a malformed address: a socket's path holds at most 107 bytes (no server can listen there).
        if case .unix(let path) = parsed, path.utf8.count > Configuration.maxUnixSocketPath {
            exitInvalid("--connect: a Unix socket's path holds at most \(Configuration.maxUnixSocketPath) bytes, got \(path.utf8.count)")
        }
        let addresses: [SocketAddress]
        do { addresses = try parsed.resolvingHostName() } catch { exitInvalid("--connect: \(error)") }
        let secret = ProcessInfo.processInfo.environment["HYDRA_RPC_SECRET"].flatMap { $0.isEmpty ? nil : $0 }
        // A name's addresses in turn (`localhost` may be ::1 first, the server on 127.0.0.1).
        var failure: RPCClientError?
        for address in addresses {
            do {
                // A peer that takes the connection and never answers (not a hydra server) ends the command.
                return .success(try RPCClient(address: address, secret: secret, callTimeout: callTimeout))
            } catch {
                // A refused secret is the answer; an address that does not answer is not.
                if error.code != nil { return .failure(error) }
                failure = error
            }
        }
        return .failure(failure!)
    }
}

/// Prints an RPC failure and exits: 2 for invalid params or a malformed
/// request, 1 for everything else (not found, conflict, unreachable server).
func exitWith(_ error: RPCClientError) -> Never {
    // -32001 speaks of rpc.auth, the protocol's word; from here the secret is HYDRA_RPC_SECRET.
    let hint = error.code == -32001 ? " (the CLI sends HYDRA_RPC_SECRET: set it to the server's secret)" : ""
    FileHandle.standardError.write(Data("hydra: \(TerminalText.safe("\(error)"))\(hint)\n".utf8))
    // 2 for what was asked wrongly; a -32602 carrying a job error's `kind` (a token
    // request that failed for `auth login`) was asked rightly and refused elsewhere: 1.
    let invalid = (error.code == -32602 && error.data?["kind"] == nil) || error.code == -32600 || error.code == -32700
    Foundation.exit(invalid ? 2 : 1)
}

/// Calls one method and returns its result, exiting on failure. Without a
/// `timeout`, the client's own (`--timeout`). `options`: for a command whose
/// options become params of other names, a `-32602` naming such a param
/// names the option instead (`--older-than: must be …`, not `olderThanSec: …`).
func call(_ client: RPCClient, _ method: String, _ params: JSONValue = .object([:]),
          options: [String: String] = [:], timeout: Duration? = nil) -> JSONValue {
    do {
        return try client.call(method, params, timeout: timeout)
    } catch {
        if error.code == -32602, let field = error.data?["field"]?.stringValue, let option = options[field],
           let reason = error.data?["reason"]?.stringValue {
            exitWith(RPCClientError(code: error.code, message: "\(option): \(reason)", data: error.data))
        }
        exitWith(error)
    }
}

/// Reads a JSON document from a file or `-` (stdin); exits 2 naming the file
/// (and the line and column of a syntax error) when it is not JSON.
func readJSONFile(_ path: String) -> JSONValue {
    do { return try JSONInput.read(path: path) } catch { exitInvalid(error) }
}

/// Parses a JSON option value; exits 2 naming the option.
func parseJSONOption(_ text: String, name: String) -> JSONValue {
    do { return try JSONInput.parse(text, source: name) } catch {
        // A bare word is the usual slip: a JSON string needs its quotes, and the shell eats one pair.
        let looksLikeAWord = !text.isEmpty && text.first.map { $0.isLetter } == true
            && !["true", "false", "null"].contains(text) && !text.contains("\"")
        if looksLikeAWord {
            exitInvalid("\(error) (a string is JSON with quotes: '\"\(String(text.prefix(40)))\"')")
        }
        exitInvalid(error)
    }
}

struct PingCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ping", abstract: "Check that the server answers; prints its version and uptime.",
        discussion: """
            Examples:
              hydra ping                             (127.0.0.1:7400)
              hydra ping --connect unix:/run/hydra.sock   (a Unix socket)
            """)
    @OptionGroup var connection: ConnectOptions

    func run() {
        // Whether the server answers: one that does not within 10 s does not (exit 1).
        writeLine(JSONWriter.string(call(connection.client(), "hydra.ping", timeout: min(.seconds(10), connection.callTimeout))))
    }
}

struct StatsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Print the server's counters (hydra.stats): jobs, steps, requests, cache, resources, events.",
        discussion: "Example: hydra stats --pretty")
    @OptionGroup var connection: ConnectOptions
    @Flag(help: "Indented JSON, for people.") var pretty = false

    func run() {
        let stats = call(connection.client(), "hydra.stats")
        writeJSON(stats, pretty: pretty)
    }
}

struct SubmitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "submit",
        abstract: "Submit a job spec to the server.",
        discussion: """
            Prints {"jobId": "..."} once the server has recorded the job durably.

            With --follow, first names the job on stderr ("hydra: job ID ...", so
            you can re-attach with hydra events --job ID --from 0), then waits for
            the end: on a terminal a live progress line on stderr (steps done/total,
            in flight, failed, retries); otherwise every event as one JSON line on
            stdout. The last line of stdout is then the job's result, and the exit
            status is 0 succeeded, 1 failed or cancelled, 2 invalid spec.

            Examples:
              hydra submit jobs/demo.json --follow
              hydra submit jobs/fan-out.json --input '{"name":"pip"}' --follow
              echo '{"type":"local","name":"echo","input":1}' | hydra submit - --follow
            """)
    @Argument(help: "The job spec file (JSON), or - for standard input.") var spec: String
    @Option(help: "The job's input as JSON.") var input: String?
    @Option(parsing: .unconditional, help: "Priority: higher goes ahead of waiting jobs.") var priority: Int?
    @Option(help: "Idempotency key: a repeated submit returns the first job's id.") var idempotencyKey: String?
    @Flag(help: "Wait for the end and show progress or events.") var follow = false
    @OptionGroup var connection: ConnectOptions

    func validate() throws {
        // An unset shell variable ("$KEY") would make every submit the same job.
        if idempotencyKey?.isEmpty == true { throw ValidationError("--idempotency-key: must not be empty") }
    }

    func run() throws {
        var params: OrderedJSON = ["job": readJSONFile(spec)]
        if let input { params["input"] = parseJSONOption(input, name: "--input") }
        if let priority { params["priority"] = .int(priority) }
        if let idempotencyKey { params["idempotencyKey"] = .string(idempotencyKey) }
        var client = connection.client()
        let before = call(client, "hydra.stats")["events"]?["lastSeq"]?.intValue ?? 0
        let submitted = call(client, "job.submit", .object(params))
        guard follow, let jobId = submitted["jobId"]?.stringValue else {
            writeLine(JSONWriter.string(submitted))
            return
        }
        // The id first, on stderr whether or not it is a terminal (stdout stays pure
        // NDJSON for scripts): a user whose follow ends early can re-attach.
        let connect = connection.connect == ConnectOptions.defaultAddress ? "" : " --connect \(connection.connect)"
        FileHandle.standardError.write(Data(
            "hydra: job \(jobId) (follow it again with: hydra events --job \(jobId) --from 0\(connect))\n".utf8))
        // The progress line only when both are terminals: stdout piped (to jq, to a
        // file) gets the events as NDJSON, as a script would.
        let terminal = isatty(STDERR_FILENO) != 0 && isatty(STDOUT_FILENO) != 0
        var tracker = ProgressTracker(total: call(client, "job.status", ["jobId": .string(jobId)])["steps"]?["total"]?.intValue)
        var lineOpen = false
        /// Ends the progress line before an error message, so the message starts a line of its own.
        func fail(_ error: RPCClientError) -> Never {
            if lineOpen { FileHandle.standardError.write(Data("\n".utf8)) }
            exitWith(error)
        }
        func request(_ method: String, _ params: JSONValue) -> JSONValue {
            do { return try client.call(method, params) } catch { fail(error) }
        }
        // Told when the replay is done: a repeated idempotency key names a job that may
        // have ended before `before`, whose final event is not coming.
        func subscription(after seq: Int) -> JSONValue { ["jobId": .string(jobId), "fromSeq": .int(seq), "caughtUp": true] }
        _ = request("events.subscribe", subscription(after: before))
        if terminal {
            // Ctrl-C ends the progress line and says the job goes on (as it does).
            let signals = TerminationSignals(upkeepEvery: 86_400) {}
            let again = "hydra events --job \(jobId) --from 0\(connect)"
            Task {
                let name = await signals.wait()
                FileHandle.standardError.write(Data(
                    "\nhydra: \(name): stopped following; the job goes on on the server (follow it again with: \(again))\n".utf8))
                Foundation.exit(130)
            }
        }
        var lastDraw = Date.distantPast
        var lastSeq = before
        var window = ReconnectWindow()
        var end = FollowedJobEnd()
        while true {
            let note: JSONValue?
            do {
                note = try client.nextNotification(timeout: .milliseconds(200))
            } catch where error.code == nil && !error.isTimeout && window.allows(at: lastSeq) {
                // The connection ended: followed on a new one after the last event seen, as `hydra events` does.
                if lineOpen { FileHandle.standardError.write(Data("\n".utf8)) }
                lineOpen = false
                FileHandle.standardError.write(Data("hydra: \(TerminalText.safe(error.message)); reconnecting to follow the job on a new connection\n".utf8))
                client = connection.resubscribe(subscription(after: lastSeq), until: window.deadline, fail: fail)
                continue
            } catch {
                fail(error)
            }
            if let note, note["method"] == "hydra.dropped" {
                // The server dropped the subscription (this side read too slowly):
                // take it up again after the last event seen, so nothing is missed.
                _ = request("events.subscribe", subscription(after: lastSeq))
                continue
            }
            if let note, end.observe(note, status: { request("job.status", ["jobId": .string(jobId)]) }) { continue }
            if note == nil, end.isOver { break }  // it had ended: its result is printed below
            if let note, note["method"] == "hydra.event", let event = note["params"] {
                if let seq = event["seq"]?.intValue { lastSeq = max(lastSeq, seq) }
                if terminal {
                    tracker.observe(json: event)
                } else {
                    writeLine(JSONWriter.string(event))
                }
                if event["jobId"]?.stringValue == jobId, event["stepPath"] == "",
                   let name = event["event"]?.stringValue,
                   EventName.finals.contains(name) {
                    break
                }
            }
            if terminal, Date().timeIntervalSince(lastDraw) > 0.1 {
                lastDraw = Date()
                lineOpen = true
                FileHandle.standardError.write(Data("\r\u{1B}[K\(tracker.line)".utf8))
            }
        }
        if terminal { FileHandle.standardError.write(Data("\r\u{1B}[K\(tracker.line)\n".utf8)) }
        lineOpen = false
        let result: JSONValue
        do {
            result = try client.call("job.result", ["jobId": .string(jobId), "waitMs": 60_000],
                                     timeout: .seconds(60) + connection.callTimeout)
        } catch {
            fail(error)
        }
        writeLine(JSONWriter.string(result))
        if result["state"] != "succeeded" { throw ExitCode(1) }
    }
}

struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "Show a job's state and step counts.",
        discussion: "Example: hydra status JOB_ID   (the id hydra submit printed)")
    @Argument(help: "The job id.") var jobId: String
    @Flag(help: "Indented JSON, for people rather than scripts.") var pretty = false
    @OptionGroup var connection: ConnectOptions
    func run() { writeJSON(call(connection.client(), "job.status", ["jobId": .string(jobId)]), pretty: pretty) }
}

struct ResultCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "result", abstract: "Print a job's result (exit 0 succeeded, 1 otherwise).",
        discussion: """
            Examples:
              hydra result JOB_ID                    (as it is now)
              hydra result JOB_ID --wait 30000 --pretty   (waits up to 30 s)
            """)
    @Argument(help: "The job id.") var jobId: String
    @Option(parsing: .unconditional, help: "Wait up to this many milliseconds for the job to finish (at most 3600000).") var wait = 0
    @Flag(help: "Indented JSON, for people rather than scripts.") var pretty = false
    @OptionGroup var connection: ConnectOptions
    func validate() throws { try validateWait(wait) }
    func run() throws {
        let result = call(connection.client(), "job.result", ["jobId": .string(jobId), "waitMs": .int(wait)],
                          timeout: .milliseconds(wait) + connection.callTimeout)
        writeJSON(result, pretty: pretty)
        if result["state"] != "succeeded" { throw ExitCode(1) }
    }
}

struct CancelCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel", abstract: "Cancel a job and its running steps.",
        discussion: "Example: hydra cancel JOB_ID   (exit 1 when the job had already ended)")
    @Argument(help: "The job id.") var jobId: String
    @OptionGroup var connection: ConnectOptions
    func run() { writeLine(JSONWriter.string(call(connection.client(), "job.cancel", ["jobId": .string(jobId)]))) }
}

struct JobsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "jobs", abstract: "List jobs, newest first (one JSON status per line).",
        discussion: "Example: hydra jobs --state failed --limit 20 --pretty")
    @Option(help: "Only jobs in this state: queued, running, succeeded, failed, cancelled.") var state: String?
    @Option(parsing: .unconditional, help: "How many jobs (all pages are fetched up to this many).") var limit = 100
    @Flag(help: "Each status as indented JSON, for people rather than scripts.") var pretty = false
    @OptionGroup var connection: ConnectOptions
    func validate() throws {
        guard limit >= 1 else { throw ValidationError("--limit: expected 1 or more, got \(limit)") }
    }
    func run() {
        let client = connection.client()
        var after: String?
        var printed = 0
        repeat {
            var params: OrderedJSON = ["limit": .int(min(1000, limit - printed))]
            if let state { params["state"] = .string(state) }
            if let after { params["after"] = .string(after) }
            let page = call(client, "job.list", .object(params))
            for job in page["jobs"]?.arrayValue ?? [] {
                writeJSON(job, pretty: pretty)
                printed += 1
            }
            after = page["next"]?.stringValue
        } while after != nil && printed < limit
    }
}

struct EventsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events", abstract: "Stream events as JSON lines until interrupted (with --job: until the job ends).",
        discussion: """
            With --job, the stream ends (exit 0) after that job's final event
            (job.succeeded, job.failed or job.cancelled), replayed or live: no
            event of the job comes after it. A subscription the server drops
            (this side read too slowly) is taken up again after the last event
            seen, so none is missed.

            Examples:
              hydra events                    everything from now on
              hydra events --job j1 --from 0  its retained events, then live, to its end
              hydra events --event job.failed --pretty
            """)
    @Option(help: "Only this job and its steps.") var job: String?
    @Option(parsing: .unconditional, help: "Replay retained events after this seq first.") var from: Int?
    @Option(help: "Only events with this name (repeatable).") var event: [String] = []
    @Flag(help: "One readable line per event (time, event, job and step, what happened), for people.")
    var pretty = false
    @OptionGroup var connection: ConnectOptions
    func validate() throws {
        if job?.isEmpty == true { throw ValidationError("--job: must not be empty (a job id)") }
        if let from, from < 0 { throw ValidationError("--from: expected a seq of 0 or more, got \(from)") }
    }

    func run() {
        var client = connection.client()
        var params: OrderedJSON = [:]
        // A job the server does not know is refused by the subscribe (-32002), not waited on for ever.
        if let job { params["jobId"] = .string(job) }
        if let from { params["fromSeq"] = .int(from) }
        if !event.isEmpty {
            // Following a job, its final events are asked for too: the stream ends on them.
            let asked = job == nil ? Set(event) : Set(event).union(EventName.finals)
            params["events"] = .array(asked.sorted().map { .string($0) })
        }
        // Following a job: told when the replay is done, to end if the job had ended before it.
        if job != nil { params["caughtUp"] = true }
        let subscribed = call(client, "events.subscribe", .object(params))
        // Where a dropped subscription resumes: after the last event seen (or where it began).
        var lastSeq = from ?? subscribed["seq"]?.intValue ?? 0
        var seqAtLastDrop = -1
        var window = ReconnectWindow()
        var end = FollowedJobEnd()
        while true {
            do {
                let note: JSONValue?
                do {
                    note = try client.nextNotification(timeout: end.readTimeout)
                } catch where error.code == nil && !error.isTimeout && window.allows(at: lastSeq) {
                    // The connection ended (closed by the server, or a restart): the stream is taken
                    // up on a new one after the last event seen.
                    FileHandle.standardError.write(Data(
                        "hydra: \(TerminalText.safe(error.message)); reconnecting to take the stream up again after seq \(lastSeq)\n".utf8))
                    params["fromSeq"] = .int(lastSeq)
                    client = connection.resubscribe(.object(params), until: window.deadline)
                    continue
                }
                guard let note else {
                    if let job, let state = end.endedState, end.isOver {
                        let when = from.map { " at or before seq \($0)" } ?? ""
                        FileHandle.standardError.write(Data(
                            "hydra: job \(TerminalText.safe(job)) had ended (\(state))\(when): no event of it is coming (its events: hydra events --job \(TerminalText.safe(job)) --from 0)\n".utf8))
                        return
                    }
                    continue
                }
                if let job, end.observe(note, status: { call(client, "job.status", ["jobId": .string(job)]) }) { continue }
                if note["method"] == "hydra.event", let event = note["params"] {
                    if let seq = event["seq"]?.intValue { lastSeq = max(lastSeq, seq) }
                    let name = event["event"]?.stringValue ?? ""
                    if self.event.isEmpty || self.event.contains(name) {
                        writeLine(pretty ? EventLine.string(event) : JSONWriter.string(event))
                    }
                    if let job, event["jobId"]?.stringValue == job, event["stepPath"] == "", EventName.finals.contains(name) {
                        return
                    }
                } else if note["method"] == "hydra.dropped" {
                    let reason = note["params"]?["reason"]?.stringValue ?? "no reason given"
                    // Dropped again before any new event came: taking it up once more would loop.
                    if lastSeq == seqAtLastDrop {
                        FileHandle.standardError.write(Data("hydra: the server dropped the subscription again (\(TerminalText.safe(reason)))\n".utf8))
                        Foundation.exit(1)
                    }
                    seqAtLastDrop = lastSeq
                    FileHandle.standardError.write(Data("hydra: the server dropped the subscription (this side read too slowly); taken up again after seq \(lastSeq)\n".utf8))
                    params["fromSeq"] = .int(lastSeq)
                    _ = call(client, "events.subscribe", .object(params))
                }
            } catch {
                exitWith(error)
            }
        }
    }
}

struct SharedCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "shared", abstract: "Read and write shared data.",
        discussion: """
            Examples:
              hydra shared set region '"eu-west"'     (a JSON value)
              hydra shared set token '"s3cr3t"' --cipher aes-gcm
                  (encrypted at rest: the server needs HYDRA_SHARED_KEY)
              hydra shared get region
              hydra shared rm region
            """,
        subcommands: [Get.self, Set.self, Remove.self])

    struct Get: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print a shared value.", discussion: "Example: hydra shared get region")
        @Argument var key: String
        @Flag(help: "Indented JSON, for people rather than scripts.") var pretty = false
        @OptionGroup var connection: ConnectOptions
        func run() {
            let reply = call(connection.client(), "shared.get", ["key": .string(key)])
            writeJSON(reply["value"] ?? .null, pretty: pretty)
        }
    }

    struct Set: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Store a shared value (JSON).",
            discussion: "Example: hydra shared set token '\"abc\"' --cipher aes-gcm")
        @Argument var key: String
        @Argument(help: "The value as JSON.") var value: String
        @Option(help: "aes-gcm (needs HYDRA_SHARED_KEY on the server), gzip, or none (in clear). Without it a new key is in clear and an existing one keeps its cipher.") var cipher: String?
        @OptionGroup var connection: ConnectOptions
        func run() {
            var params: OrderedJSON = ["key": .string(key), "value": parseJSONOption(value, name: "VALUE")]
            if let cipher { params["cipher"] = .string(cipher) }
            writeLine(JSONWriter.string(call(connection.client(), "shared.set", .object(params))))
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "rm", abstract: "Remove a shared value.", discussion: "Example: hydra shared rm region")
        @Argument var key: String
        @OptionGroup var connection: ConnectOptions
        func run() { writeLine(JSONWriter.string(call(connection.client(), "shared.remove", ["key": .string(key)]))) }
    }
}

struct WorkersCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "workers", abstract: "List workers, pause/resume one, or change its limits.",
        discussion: """
            Examples:
              hydra workers --pretty
              hydra workers pause rest
              hydra workers resume rest
              hydra workers configure rest --max-active 16 --max-connections 32
            """)
    @Argument(help: "pause, resume or configure (omit to list).") var action: String?
    @Argument(help: "The worker's name.") var name: String?
    @Option(parsing: .unconditional, help: "configure: tasks running at once.") var maxActive: Int?
    @Option(parsing: .unconditional, help: "configure: connections of a remote worker's pool.") var maxConnections: Int?
    @Option(parsing: .unconditional, help: "configure: connections per host.") var maxHostConnections: Int?
    @Flag(help: "Indented JSON, for people rather than scripts.") var pretty = false
    @OptionGroup var connection: ConnectOptions
    func run() {
        // A limit given with another action would be ignored: refused instead (a typo is not silently dropped).
        if action != "configure", maxActive != nil || maxConnections != nil || maxHostConnections != nil {
            exitInvalid("workers \(action ?? "(list)"): --max-active, --max-connections and --max-host-connections go with configure")
        }
        switch action {
        case nil:
            let client = connection.client()
            for worker in call(client, "worker.list")["workers"]?.arrayValue ?? [] { writeJSON(worker, pretty: pretty) }
        case "pause", "resume":
            guard let name else { exitInvalid("workers \(action!): the worker's name is missing") }
            writeJSON(call(connection.client(), "worker.\(action!)", ["name": .string(name)]), pretty: pretty)
        case "configure":
            guard let name else { exitInvalid("workers configure: the worker's name is missing") }
            var params: OrderedJSON = ["name": .string(name)]
            if let maxActive { params["maxActive"] = .int(maxActive) }
            if let maxConnections { params["maxConnections"] = .int(maxConnections) }
            if let maxHostConnections { params["maxHostConnections"] = .int(maxHostConnections) }
            guard params.count > 1 else {
                exitInvalid("workers configure: give --max-active, --max-connections or --max-host-connections")
            }
            writeJSON(call(connection.client(), "worker.configure", .object(params), options: [
                "maxActive": "--max-active", "maxConnections": "--max-connections", "maxHostConnections": "--max-host-connections",
            ]), pretty: pretty)
        case let other?:
            exitInvalid("workers: unknown action \"\(other)\" (expected pause, resume or configure)")
        }
    }
}

struct EmitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "emit", abstract: "Send a custom event (custom.NAME) to the server's subscribers.",
        discussion: """
            Prints {"seq"}. Example: hydra emit custom.deploy --fields '{"version": "1.2"}'
            """)
    @Argument(help: "The event's name: custom.NAME.") var event: String
    @Option(help: "The event's fields, a JSON object.") var fields: String?
    @OptionGroup var connection: ConnectOptions
    func run() {
        var params: OrderedJSON = ["event": .string(event)]
        if let fields { params["fields"] = parseJSONOption(fields, name: "--fields") }
        writeLine(JSONWriter.string(call(connection.client(), "events.emit", .object(params),
                                         options: ["fields": "--fields", "event": "EVENT"])))
    }
}

struct DummyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dummy", abstract: "Turn dummy responses on or off, or replace the runtime list.",
        discussion: """
            Examples:
              hydra dummy set dummies.json   (a JSON array in the config's dummy.responses format)
              hydra dummy enable
              hydra dummy disable
            """,
        subcommands: [Set.self, Enable.self, Disable.self])

    struct Set: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Replace the runtime dummy responses (asked before the config's).",
            discussion: "Example: hydra dummy set dummies.json")
        @Argument(help: "A JSON file (or - for stdin): an array of dummy responses, or {\"responses\": [...]}.")
        var file: String
        @OptionGroup var connection: ConnectOptions
        func run() {
            let document = readJSONFile(file)
            let responses = document["responses"] ?? document
            guard case .array = responses else { exitInvalid("\(file): expected an array of dummy responses") }
            writeLine(JSONWriter.string(call(connection.client(), "dummy.set", ["responses": responses])))
        }
    }

    struct Enable: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Answer matching requests with dummy responses.", discussion: "Example: hydra dummy enable")
        @OptionGroup var connection: ConnectOptions
        func run() { writeLine(JSONWriter.string(call(connection.client(), "dummy.enable", ["enabled": true]))) }
    }

    struct Disable: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Send every request to the network again.", discussion: "Example: hydra dummy disable")
        @OptionGroup var connection: ConnectOptions
        func run() { writeLine(JSONWriter.string(call(connection.client(), "dummy.enable", ["enabled": false]))) }
    }
}

struct CacheCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cache", abstract: "Look into the server's response cache (never asks the network).",
        discussion: """
            Examples:
              hydra cache get http://api.example/v1/items     (prints {"key", "storedAt", "expiresAt", "etag"?, "result"})
              hydra cache rm --url http://api.example/v1/items
            Nothing cached under the URL: -32002, exit status 1.
            """,
        subcommands: [Get.self, Remove.self])

    struct Get: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the cached response of a GET URL, fresh or stale.",
            discussion: "Example: hydra cache get http://api.example/v1/items --pretty")
        @Argument(help: "The URL, exactly as requested (query included).") var url: String
        @Flag(help: "Indented JSON, for people rather than scripts.") var pretty = false
        @OptionGroup var connection: ConnectOptions
        func run() { writeJSON(call(connection.client(), "cache.get", ["url": .string(url)]), pretty: pretty) }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm", abstract: "Remove cached responses by api, URL or URL prefix (or --all).",
            discussion: """
                Several of --api, --url and --prefix remove the responses that all of
                them name (--api items --prefix URL: that api's under URL).

                Examples:
                  hydra cache rm --url http://api.example/v1/items
                  hydra cache rm --api items
                """)
        @Option(help: "Every response of this api.") var api: String?
        @Option(help: "The response of this URL (and its credential variants).") var url: String?
        @Option(help: "Every response whose URL starts with this.") var prefix: String?
        @Flag(help: "Every cached response (what a bare `rm` would do by a slip).") var all = false
        @OptionGroup var connection: ConnectOptions
        func validate() throws {
            // A bare `rm` would empty the whole cache: asked for by name, never by a slip.
            if !all && api == nil && url == nil && prefix == nil {
                throw ArgumentParser.ValidationError("give --api, --url or --prefix, or --all to remove every cached response")
            }
            if all && (api != nil || url != nil || prefix != nil) {
                throw ArgumentParser.ValidationError("--all removes every cached response: give it alone")
            }
            // An empty value (an unset shell variable) would match every response, or none.
            try refuseEmpty(["--api": api, "--url": url, "--prefix": prefix])
        }
        func run() {
            var params: OrderedJSON = [:]
            if let api { params["api"] = .string(api) }
            if let url { params["url"] = .string(url) }
            if let prefix { params["prefix"] = .string(prefix) }
            writeLine(JSONWriter.string(call(connection.client(), "cache.remove", .object(params))))
        }
    }
}
