import ArgumentParser
import Foundation
import Hydra

/// `hydra run SPEC|-`: runs one job spec in-process (no server) and prints the
/// final `{"jobId", "state", "result" | "error"}` as the last line of stdout.
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run one job spec in-process and print its result.",
        discussion: """
            The last line of stdout is the final {"jobId", "state", "result" |
            "error"} object. With --events, each event is printed as one JSON line
            before it. On a terminal a live progress line is drawn on stderr.
            --pretty is for people: the result as indented JSON, events as readable
            lines. The configuration in use is named on stderr.

            Exit status: 0 succeeded, 1 failed or cancelled, 2 invalid spec, input
            or config.

            Examples:
              hydra run jobs/demo.json
              hydra run jobs/demo.json --events --pretty
              hydra run jobs/fan-out.json --input '{"name":"pip"}' --events
              hydra run spec.json --input '{"user": "gandalf"}'
            """)

    @Argument(help: "The job spec file (JSON), or - for standard input.")
    var spec: String

    @Option(help: "Configuration file (default: config/hydra.json when it exists).")
    var config: String?

    @Option(help: "The job's input as JSON (what ${input.…} references see).")
    var input: String?

    @Flag(help: "Print each event as a JSON line before the result.")
    var events = false

    @Flag(help: "For people, not scripts: the result as indented JSON, events as readable lines.")
    var pretty = false

    @Option(help: "State folder (downloads); overrides state.path.")
    var state: String?

    func run() async throws {
        // As `hydra serve`: what the run writes (the state folder and its lock, downloads,
        // resource copies) is its owner's alone, and stays so for a server started there later.
        umask(0o077)
        var configuration: Configuration
        let specJSON: JSONValue
        var inputJSON = JSONValue.null
        do {
            configuration = try loadConfiguration(config)
            specJSON = try JSONInput.read(path: spec)
            if let input { inputJSON = try JSONInput.parse(input, source: "--input") }
        } catch {
            exitInvalid(error)
        }

        if let state {
            if state.isEmpty { exitInvalid("--state: must not be empty (a folder; \".\" for the current one)") }
            do { try Configuration.checkPlainText(state, path: "--state") } catch { exitInvalid(error) }
            configuration.state.path = state
        }
        // Absolute, as the server's: a result's `file` is the file's absolute path (README).
        if !configuration.state.path.isEmpty { configuration.state.path = absolutePath(configuration.state.path) }
        let engine: HydraEngine
        do {
            engine = try HydraEngine(configuration: configuration)
        } catch where state != nil && error.path == "state.path" {
            exitInvalid("--state: \(error.fullReason)")
        } catch {
            exitInvalid(error)
        }
        do { try engine.rest.checkConfiguredDogmas() } catch { exitInvalid("\(configurationSource(config)): \(error)") }
        defer { engine.shutdown() }
        // Named once the configuration is known good: a bad one stays a one-line error naming the file.
        announceConfiguration(config)

        // Events are built only while someone listens: without --events or a
        // terminal to draw progress on, nobody does (a 50,000-step graph then
        // costs a third less on the coordinator).
        let progress = isatty(STDERR_FILENO) != 0
        let printer = events || progress
            ? EventPrinter(style: events ? (pretty ? .pretty : .json) : .none, progress: progress,
                           totalSteps: ProgressTracker.leafCount(of: specJSON))
            : nil
        let subscription = printer.map { engine.subscribe(sink: $0) }
        // Ctrl-C (or SIGTERM) cancels the job: its result is printed as for any
        // other end (exit 1), and what it was writing is cleaned up (a `saveAs`
        // download's temporary file). A second signal stops at once. Taken over
        // before the job starts: a signal in between is remembered, not fatal.
        let signals = TerminationSignals(upkeepEvery: 86_400) {}
        signals.onRepeat { _ in Foundation.exit(130) }
        let jobId: String
        do {
            let spec = try JobSpec(json: specJSON)
            jobId = try engine.submit(spec, input: inputJSON)
        } catch {
            if let subscription { engine.unsubscribe(subscription) }
            exitInvalid(error)
        }
        Task {
            let name = await signals.wait()
            // On a line of its own, not after the progress line's text.
            let clear = progress ? "\r\u{1B}[K" : ""
            FileHandle.standardError.write(Data("\(clear)hydra: \(name): cancelling the job (signal again to stop now)\n".utf8))
            await engine.cancel(jobId)
        }
        guard let result = await engine.result(of: jobId) else {
            if let subscription { engine.unsubscribe(subscription) }
            FileHandle.standardError.write(Data("hydra: the job \(jobId) ended without a result\n".utf8))
            Foundation.exit(1)
        }
        if let subscription { engine.unsubscribe(subscription) }
        await printer?.finish()
        if pretty {
            writeLine(PrettyJSON.string(result.json))
        } else {
            // Written as encoded: a large graph's result is not built into a String first.
            var line = result.encodedJSON()
            line.append(UInt8(ascii: "\n"))
            StandardOutput.write(line)
        }
        // Ended here rather than by returning: what the run holds (a 50,000-step
        // graph's spec and results, ~200,000 objects) is not freed one by one on
        // the way out. The spec's JSON is kept to here for the same reason: freed
        // after its last use, it cost the start of the run ~15 ms.
        engine.shutdown()
        withExtendedLifetime(specJSON) { Foundation.exit(result.state == .succeeded ? 0 : 1) }
    }
}

/// A usage problem reported as one line.
struct UsageError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
