import Foundation
import Testing

@testable import Hydra

/// `hydra run` as users run it: the real binary, its stdout, stderr and exit status.
@Suite(.ownThreads) struct RunCommandTests {

    /// Runs the binary to its end; `environment` adds to this process's, `directory`
    /// replaces the package root as the working directory, `stdout` (a `Pipe` or
    /// a `FileHandle`) replaces the pipe its output is read from (`out` is then empty).
    func hydra(_ arguments: [String], stdin: String? = nil, environment: [String: String] = [:],
               directory: String? = nil, stdout: Any? = nil) throws -> (status: Int32, out: String, err: String) {
        let process = ChildProcess()
        process.executableURL = BuiltProducts.url("hydra")
        process.arguments = arguments
        process.currentDirectoryURL = directory.map { URL(fileURLWithPath: $0) } ?? PackageRoot.url
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let out = Pipe(), err = Pipe(), input = Pipe()
        process.standardOutput = stdout ?? out
        process.standardError = err
        process.standardInput = input
        try process.run()
        if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
        try input.fileHandleForWriting.close()
        let outData = stdout == nil ? out.fileHandleForReading.readDataToEndOfFile() : Data()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: outData, as: UTF8.self), String(decoding: errData, as: UTF8.self))
    }

    /// An argument that is not UTF-8 is refused, not repaired into U+FFFD (as
    /// invalid UTF-8 in a spec file is refused); a configuration file that
    /// cannot be read says why.
    @Test func unreadableArgumentsAndConfigurationsSayWhy() throws {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        // (Foundation hands a child only valid UTF-8: the byte comes from printf.)
        process.arguments = ["-c", #"exec "$0" run - --input "$(printf '"a\377b"')""#, BuiltProducts.url("hydra").path]
        let err = Pipe(), input = Pipe()
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = input
        try process.run()
        input.fileHandleForWriting.write(Data(#"{"type":"local","name":"echo","input":"${input}"}"#.utf8))
        try input.fileHandleForWriting.close()
        let said = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 2 && said.contains("argument 4 is not valid UTF-8"), "\(said)")

        let missing = try hydra(["run", "jobs/demo.json", "--config", "/nonexistent/hydra.json"])
        #expect(missing.status == 2 && missing.err.contains("cannot read the file: No such file or directory"), "\(missing)")
        let folder = try hydra(["run", "jobs/demo.json", "--config", "jobs"])
        #expect(folder.status == 2 && folder.err.contains("cannot read the file: it is a folder"), "\(folder)")
    }

    /// A command that does not exist is said to be unknown (exit 2), with the
    /// one meant when it looks misspelt, also after `help`.
    @Test func anUnknownCommandIsNamed() throws {
        let typo = try hydra(["statuss", "j1"])
        #expect(typo.status == 2 && typo.err == "hydra: unknown command 'statuss' (did you mean 'status'?); hydra --help lists the commands\n", "\(typo)")
        let help = try hydra(["help", "frob"])
        #expect(help.status == 2 && help.err.hasPrefix("hydra: unknown command 'frob';") && help.out.isEmpty, "\(help)")
        let known = try hydra(["help", "status"])
        #expect(known.status == 0 && known.out.contains("USAGE: hydra status"), "\(known)")
    }

    /// Output that cannot be written ends the run cleanly: a reader that went
    /// away as SIGPIPE would (141, nothing said), a full disk with one line
    /// (exit 1); never a crash report (Foundation's write stopped it with one).
    @Test func anOutputThatCannotBeWrittenEndsTheRunCleanly() throws {
        func run(stdout: Any) throws -> (status: Int32, err: String) {
            let run = try hydra(["run", "-", "--events"], stdin: #"{"type":"local","name":"echo","input":1}"#, stdout: stdout)
            return (run.status, run.err)
        }
        let full = try run(stdout: try #require(FileHandle(forWritingAtPath: "/dev/full")))
        #expect(full.status == 1 && full.err.contains("cannot write to standard output"), "\(full)")
        #expect(!full.err.contains("Fatal error") && !full.err.contains("crashed"))
        let closed = Pipe()
        try closed.fileHandleForReading.close()  // nobody reads: the first write fails with EPIPE
        let gone = try run(stdout: closed)
        // Ended by SIGPIPE itself before `run` ignores it, else as SIGPIPE would.
        #expect((gone.status == 141 || gone.status == SIGPIPE) && !gone.err.contains("crashed"), "status \(gone.status): \(gone.err)")
    }

    /// The progress line on a terminal is live: a step that runs shows as in
    /// flight while it runs (the line was drawn only when an event came, so a
    /// lone step's start, right after its queueing, was never shown), and
    /// Ctrl-C's note starts a line of its own.
    @Test func theProgressLineShowsWhatRunsWhileItRuns() throws {
        let terminal = try TerminalCapture()
        let process = ChildProcess()
        process.executableURL = BuiltProducts.url("hydra")
        process.arguments = ["run", "-"]
        process.currentDirectoryURL = PackageRoot.url
        let input = Pipe()
        process.standardInput = input
        process.standardError = terminal.terminal
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        try terminal.terminal.close()
        input.fileHandleForWriting.write(Data(#"{"type":"local","name":"delay","input":{"ms":20000}}"#.utf8))
        try input.fileHandleForWriting.close()
        #expect(terminal.wait { $0.contains("1 in flight") }, "\(terminal.text)")
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
        terminal.waitForEnd()
        #expect(process.terminationStatus == 1, "\(terminal.text)")
        #expect(terminal.text.contains("\r\u{1B}[Khydra: SIGINT: cancelling the job"), "\(terminal.text)")
    }

    /// Ctrl-C at `hydra auth login`'s password prompt puts the terminal back
    /// as it was (it was left without echo).
    @Test func anInterruptedPasswordPromptPutsTheTerminalBack() throws {
        // A server with the password session: the CLI asks it the session's type before the prompt.
        let server = try ServerProcess(config: #""auth": {"user": {"type": "oauth2-password", "tokenUrl": "\#(TestServer.base)/oauth/token", "clientId": "app"}}"#)
        defer { server.terminate() }
        let terminal = try TerminalCapture()
        let process = ChildProcess()
        process.executableURL = BuiltProducts.url("hydra")
        process.arguments = ["auth", "login", "user", "--user", "alice", "--connect", "\(server.address!)"]
        process.standardInput = terminal.terminal
        process.standardError = terminal.terminal
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        #expect(terminal.wait(timeout: .seconds(30)) { $0.contains("password for alice") }, "\(terminal.text)")
        #expect(echoes(terminal.terminal.fileDescriptor) == false, "\(terminal.text)")
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
        #expect(process.terminationStatus == SIGINT)
        #expect(echoes(terminal.terminal.fileDescriptor) == true, "echo left off")
    }

    /// Whether the terminal `fd` echoes (nil: not a terminal). The settings are
    /// read into a roomy buffer: glibc writes 60 bytes, a Swift `termios` has 57.
    private func echoes(_ fd: Int32) -> Bool? {
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: 128, alignment: 16)
        defer { buffer.deallocate() }
        let settings = buffer.bindMemory(to: termios.self, capacity: 1)
        guard tcgetattr(fd, settings) == 0 else { return nil }
        return settings.pointee.c_lflag & tcflag_t(ECHO) != 0
    }

    /// Ctrl-C cancels the job: its cancelled result is the last line (exit 1),
    /// and the download it was writing leaves no temporary file.
    @Test func aSignalCancelsTheJobAndCleansUp() throws {
        let state = NSTemporaryDirectory() + "hydra-run-int-\(UUID().uuidString)"
        let specFile = state + "/slow.json"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        try #"{"type":"remote","url":"\#(TestServer.url("/slow-body/100/100"))","saveAs":"dl/x.bin"}"#
            .write(toFile: specFile, atomically: true, encoding: .utf8)
        let process = ChildProcess()
        process.executableURL = BuiltProducts.url("hydra")
        process.arguments = ["run", specFile, "--state", state]
        process.currentDirectoryURL = PackageRoot.url
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        func partial() -> Bool {
            ((try? FileManager.default.contentsOfDirectory(atPath: state + "/dl")) ?? []).contains { $0.hasPrefix(".hydra-download-") }
        }
        try waitUntilBlocking(timeout: .seconds(10)) { partial() }
        kill(process.processIdentifier, SIGINT)
        let output = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let errors = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 1, "\(errors)")
        let last = try JSONParser.parse(try #require(output.split(separator: "\n").last.map(String.init)))
        #expect(last["state"] == "cancelled", "\(output)")
        #expect(errors.contains("SIGINT: cancelling the job"))
        #expect(!partial())
    }

    @Test func runsTheDemoOfflineAndPrintsTheResultLast() throws {
        let (status, out, err) = try hydra(["run", "jobs/demo.json", "--events"])
        #expect(status == 0, "\(err)")
        let lines = out.split(separator: "\n").map(String.init)
        let last = try JSONParser.parse(try #require(lines.last))
        #expect(last["state"] == "succeeded")
        #expect(last["result"]?["results"]?[1] == "debugPlayer")
        let events = try lines.dropLast().map { try JSONParser.parse($0) }
        #expect(events.first?["event"] == "job.queued")
        #expect(events.contains { $0["event"] == "job.skipped" && $0["reason"] == "dummy" })
        #expect(err == "hydra: config config/hydra.json\n")  // stderr is not a terminal: no progress line
    }

    /// What `hydra run` creates is its owner's alone, as what `hydra serve`
    /// creates is: the state folder was 0755 and a download 0644, and a server
    /// started on that folder later kept them so. (A run keeps no database.)
    @Test func whatARunCreatesIsItsOwnersAlone() throws {
        let state = NSTemporaryDirectory() + "hydra-run-umask-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: state) }
        let job = #"{"type":"remote","url":"\#(TestServer.url("/text"))","saveAs":"d/h.txt"}"#
        let run = try hydra(["run", "-", "--state", state], stdin: job)
        #expect(run.status == 0, "\(run.err)")
        func mode(_ path: String) -> mode_t {
            var info = stat()
            return stat(path, &info) == 0 ? info.st_mode & 0o777 : 0
        }
        #expect(mode(state) == 0o700 && mode(state + "/d") == 0o700)
        #expect(mode(state + "/d/h.txt") == 0o600 && mode(state + "/hydra.lock") == 0o600)
    }

    @Test func theShippedJobsRun() throws {
        // fan-out: offline, answered by the shipped configuration's dummy responses.
        let fanOut = try hydra(["run", "jobs/fan-out.json", "--input", #"{"name":"pippin"}"#])
        #expect(fanOut.status == 0, "\(fanOut.err)")
        let fanned = try JSONParser.parse(try #require(fanOut.out.split(separator: "\n").last.map(String.init)))
        #expect(fanned["result"]?["results"]?.arrayValue?.count == 3)
        // login-and-fetch: against the test server as servers.apisvr.
        let config = NSTemporaryDirectory() + "hydra-login-\(UUID().uuidString).json"
        try #"{"servers": {"apisvr": "\#(TestServer.base)"}, "defaults": {"server": "apisvr"}}"#
            .write(toFile: config, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: config) }
        let login = try hydra(["run", "jobs/login-and-fetch.json", "--config", config,
                               "--input", #"{"user":"gandalf","password":"secret"}"#])
        #expect(login.status == 0, "\(login.err)")
        let fetched = try JSONParser.parse(try #require(login.out.split(separator: "\n").last.map(String.init)))
        #expect(fetched["result"]?["results"]?[1]?["body"] == ["user": "gandalf"])
        let refused = try hydra(["run", "jobs/login-and-fetch.json", "--config", config,
                                 "--input", #"{"user":"gandalf","password":"wrong"}"#])
        #expect(refused.status == 1)
    }

    @Test func failedJobExitsOneAndInvalidSpecExitsTwo() throws {
        let failed = try hydra(["run", "-"], stdin: #"{"type":"local","name":"fail","input":{"message":"nope"}}"#)
        #expect(failed.status == 1)
        #expect(try JSONParser.parse(failed.out.trimmingCharacters(in: .whitespacesAndNewlines))["error"]?["message"] == "nope")

        let invalid = try hydra(["run", "-"], stdin: #"{"type":"serial","steps":[{"type":"local","name":"echo"},{"type":"remote","url":3}]}"#)
        #expect(invalid.status == 2)
        #expect(invalid.err.contains("steps[1].url: expected string"))
        // In a spec run in-process, an unknown worker is an invalid spec, like an unknown named job.
        let noWorker = try hydra(["run", "-"], stdin: #"{"type":"local","name":"echo","worker":"nope"}"#)
        #expect(noWorker.status == 2)
        #expect(noWorker.err.contains("worker: unknown worker 'nope'"), "\(noWorker.err)")

        let badInput = try hydra(["run", "jobs/demo.json", "--input", "{oops"])
        #expect(badInput.status == 2)
        #expect(badInput.err.contains("--input"))

        let badConfig = try hydra(["run", "jobs/demo.json", "--config", "/nonexistent.json"])
        #expect(badConfig.status == 2)
        #expect(badConfig.err.contains("/nonexistent.json"))
    }

    @Test func usageErrorsExitTwoAndHelpExitsZero() throws {
        for arguments in [["run"], ["run", "jobs/demo.json", "--bogus"], ["submit"],
                          ["result", "j1", "--wait", "soon"]] {
            let usage = try hydra(arguments)
            #expect(usage.status == 2, "\(arguments): \(usage.err)")
            #expect(usage.err.contains("Error:") && usage.err.contains("Usage: hydra"), "\(arguments): \(usage.err)")
        }
        // A Unix socket path no server can listen on is a malformed address (it was "unreachable", exit 1).
        let longPath = try hydra(["ping", "--connect", "unix:/tmp/" + String(repeating: "a", count: 200)])
        #expect(longPath.status == 2 && longPath.err.contains("--connect: a Unix socket's path holds at most 107 bytes"), "\(longPath.err)")
        // An unknown command is named as one (see anUnknownCommandIsNamed), with the same exit.
        let unknown = try hydra(["frobnicate"])
        #expect(unknown.status == 2 && unknown.err.contains("unknown command 'frobnicate'"), "\(unknown.err)")
        for arguments in [["--help"], ["run", "--help"], ["serve", "--help"], ["help", "submit"], ["--version"]] {
            let help = try hydra(arguments)
            #expect(help.status == 0, "\(arguments): \(help.err)")
            #expect(!help.out.isEmpty && help.err.isEmpty)
        }
    }

    /// At 80 columns the help's discussion keeps its own lines: an example line is
    /// never broken (its continuation would start at column 0), and a prose line is
    /// not broken into a long and a short fragment in mid-paragraph.
    @Test func helpIsNotRewrappedAtEightyColumns() throws {
        for command in [[], ["run"], ["serve"], ["submit"], ["events"], ["jobs"], ["workers"]] {
            let help = try hydra(command + ["--help"], environment: ["COLUMNS": "80"])
            #expect(help.status == 0)
            let discussion = help.out.components(separatedBy: "\nUSAGE:")[0]
                .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            for (i, line) in discussion.enumerated() where i > 0 {
                let previous = discussion[i - 1]
                #expect(line.count <= 80)
                // Lines after an indented example are indented or blank.
                if previous.hasPrefix("  ") {
                    #expect(line.isEmpty || line.hasPrefix("  "), "\(command): \"\(previous)\" then \"\(line)\"")
                }
                // A short prose line ends its paragraph (or introduces a block).
                if !previous.hasPrefix(" "), !previous.isEmpty, previous.count < 40, !previous.hasSuffix(":") {
                    #expect(line.isEmpty, "\(command): ragged \"\(previous)\" then \"\(line)\"")
                }
            }
        }
    }

    @Test func theConfigurationInUseIsNamed() throws {
        // From the package root: the shipped config/hydra.json.
        let shipped = try hydra(["run", "-"], stdin: #"{"type":"local","name":"echo","input":1}"#)
        #expect(shipped.status == 0)
        #expect(shipped.err.hasPrefix("hydra: config config/hydra.json\n"))
        // Named explicitly.
        let config = NSTemporaryDirectory() + "hydra-config-\(UUID().uuidString).json"
        try "{}".write(toFile: config, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: config) }
        let named = try hydra(["run", "-", "--config", config], stdin: #"{"type":"local","name":"echo","input":1}"#)
        #expect(named.err.hasPrefix("hydra: config \(config)\n"))
        // From a folder without one: the defaults, and where it looked.
        let none = try hydra(["run", "-"], stdin: #"{"type":"local","name":"echo","input":1}"#,
                             directory: NSTemporaryDirectory())
        #expect(none.status == 0, "\(none.err)")
        #expect(none.err.hasPrefix("hydra: no config file found (looked for config/hydra.json); using defaults\n"))
        // hydra serve names it too (stderr; stdout keeps its two banner lines).
        let server = try ServerProcess()
        let stopped = server.terminate()
        #expect(stopped.stderr.split(separator: "\n").contains("hydra: config \(server.configPath)"), "\(stopped.stderr)")
        // And what startup found in the resource repository (resources.md §4: a line says how many).
        #expect(stopped.stderr.contains("hydra: resources: removed 0 file(s) without an index entry and 0 entry(ies) without a file\n"))
    }

    /// A config/hydra.json that is there but cannot be read (a link to a volume
    /// not mounted) stops the command: the defaults would start a server
    /// without its secret, apis and limits.
    @Test func aDanglingDefaultConfigurationStops() throws {
        let folder = NSTemporaryDirectory() + "hydra-dangling-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder + "/config", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try FileManager.default.createSymbolicLink(atPath: folder + "/config/hydra.json", withDestinationPath: folder + "/nowhere.json")
        let run = try hydra(["run", "-"], stdin: #"{"type":"local","name":"echo","input":1}"#, directory: folder)
        #expect(run.status == 2 && run.err.contains("config/hydra.json"), "\(run.err)")
        let serve = try hydra(["serve", "--listen", "127.0.0.1:0", "--state", folder + "/state"], directory: folder)
        #expect(serve.status == 2 && serve.err.contains("config/hydra.json"), "\(serve.err)")
    }

    /// `hydra serve --check-config` (http.md §6): the checks of a start, a
    /// summary, an exit; nothing started, no address bound, no file made.
    @Test func serveCheckConfigChecksAndExits() throws {
        let folder = NSTemporaryDirectory() + "hydra-checkconfig-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let good = folder + "/good.json", state = folder + "/state"
        try #"{"servers": {"s": "http://127.0.0.1:9"}, "apis": {"a": {"server": "s", "endpoint": "/x"}}, "state": {"path": "\#(state)"}}"#
            .write(toFile: good, atomically: true, encoding: .utf8)
        // A port another socket holds: a start would fail on it, the check does not bind it.
        let (holder, port) = localSocket(listening: true)
        defer { close(holder) }
        let ok = try hydra(["serve", "--config", good, "--listen", "127.0.0.1:\(port)", "--check-config"])
        #expect(ok.status == 0 && ok.out.hasPrefix(good + ": OK") && ok.out.contains("1 server, 1 api"), "\(ok)")
        #expect(ok.out.contains("listen: 127.0.0.1:\(port)"), "\(ok.out)")
        #expect(!FileManager.default.fileExists(atPath: state), "the check made the state folder")
        // What a start refuses, it refuses.
        let bad = folder + "/bad.json"
        try #"{"servers": {"s": "http://h/?q"}}"#.write(toFile: bad, atomically: true, encoding: .utf8)
        let refused = try hydra(["serve", "--config", bad, "--check-config"])
        #expect(refused.status == 2 && refused.err.contains("servers.s") && refused.out.isEmpty, "\(refused)")
        let open = try hydra(["serve", "--config", good, "--listen", "0.0.0.0:7400", "--check-config"])
        #expect(open.status == 2 && open.err.contains("not a loopback address"), "\(open)")
        let key = try hydra(["serve", "--config", good, "--check-config"], environment: ["HYDRA_SHARED_KEY": "short"])
        #expect(key.status == 2 && key.err.contains("HYDRA_SHARED_KEY"), "\(key)")
        try "x".write(toFile: state, atomically: true, encoding: .utf8)
        let file = try hydra(["serve", "--config", good, "--check-config"])
        #expect(file.status == 2 && file.err.contains("not a folder"), "\(file)")
    }

    /// Input that cannot be read is said, with why (stdin a folder or closed
    /// trapped with a crash report; every file error read "cannot read the
    /// file"); a fifo or a process substitution is read like a pipe. Flags get
    /// the checks of the keys they stand for, under their own names.
    @Test func inputThatCannotBeReadIsSaidAndFlagsAreChecked() throws {
        let folder = NSTemporaryDirectory() + "hydra-input-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        func run(stdin: FileHandle, _ arguments: [String]) throws -> (status: Int32, err: String) {
            let process = ChildProcess()
            process.executableURL = BuiltProducts.url("hydra")
            process.arguments = arguments
            process.currentDirectoryURL = URL(fileURLWithPath: folder)
            let err = Pipe()
            process.standardInput = stdin
            process.standardOutput = FileHandle.nullDevice
            process.standardError = err
            try process.run()
            let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            return (process.terminationStatus, text)
        }
        let fromFolder = try run(stdin: try #require(FileHandle(forReadingAtPath: folder)), ["run", "-"])
        #expect(fromFolder.status == 2 && fromFolder.err == "hydra: stdin: cannot read: it is a folder\n", "\(fromFolder)")
        let missing = try hydra(["run", folder + "/nowhere.json"])
        #expect(missing.status == 2 && missing.err.contains("nowhere.json: cannot read: No such file or directory"), "\(missing.err)")
        // A fifo, written by another thread.
        let fifo = folder + "/spec.fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        let writer = Thread {
            if let handle = FileHandle(forWritingAtPath: fifo) {
                handle.write(Data(#"{"type":"local","name":"echo","input":7}"#.utf8))
                try? handle.close()
            }
        }
        writer.start()
        let fromFifo = try hydra(["run", fifo])
        #expect(fromFifo.status == 0 && fromFifo.out.contains(#""result":7"#), "\(fromFifo)")

        // --state: checked as state.path is, named as the flag; a relative one gives absolute paths.
        let control = try hydra(["run", "-", "--state", "st\u{1}x"], stdin: #"{"type":"local","name":"echo","input":1}"#, directory: folder)
        #expect(control.status == 2 && control.err.hasPrefix("hydra: --state: must not contain control characters"), "\(control.err)")
        let saved = try hydra(["run", "-", "--state", "rel"], stdin: #"{"type":"remote","url":"\#(TestServer.url("/items"))","saveAs":"d/items.json"}"#,
                              directory: folder)
        let file = try #require(try JSONParser.parse(String(saved.out.split(separator: "\n").last ?? ""))["result"]?["file"]?.stringValue,
                                "\(saved)")
        #expect(file.hasPrefix("/") && file.hasSuffix("/rel/d/items.json") && FileManager.default.fileExists(atPath: file), "\(file)")
        let socketPath = "/tmp/" + String(repeating: "s", count: 120)
        let longSocket = try hydra(["serve", "--unix-socket", socketPath, "--state", folder + "/state", "--check-config"])
        #expect(longSocket.status == 2 && longSocket.err.hasPrefix("hydra: --unix-socket: "), "\(longSocket.err)")
        // An empty one: the flag is left out for none ("null" is the config file's word).
        let emptySocket = try hydra(["serve", "--unix-socket", "", "--state", folder + "/state", "--check-config"])
        #expect(emptySocket.status == 2 && emptySocket.err.contains("hydra: --unix-socket: must not be empty (a socket path; leave the option out for none)"),
                "\(emptySocket.err)")

        // A peer that takes the connection and never answers ends the command (it waited for ever).
        let silent = localSocket(listening: true)
        defer { close(silent.descriptor) }
        let started = ContinuousClock.now
        let waited = try hydra(["status", "j1", "--connect", "127.0.0.1:\(silent.port)", "--timeout", "1"])
        #expect(waited.status == 1 && waited.err.contains("timed out"), "\(waited.err)")
        #expect(ContinuousClock.now - started < .seconds(30))
        let badTimeout = try hydra(["status", "j1", "--timeout", "-1"])
        #expect(badTimeout.status == 2 && badTimeout.err.contains("--timeout"), "\(badTimeout.err)")
    }

    /// One server per database, not only per folder's lock file: with
    /// `hydra.lock` removed under a running server, or from another folder
    /// whose `hydra.db` links to the first one's, a second server ran the
    /// first one's unfinished jobs again. It stops at startup now.
    @Test func aSecondServerOnTheSameDatabaseStops() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        try FileManager.default.removeItem(atPath: server.stateDirectory + "/hydra.lock")
        let again = try hydra(["serve", "--listen", "127.0.0.1:0", "--state", server.stateDirectory])
        #expect(again.status == 2 && again.err.contains("hydra.db is in use by another hydra process"), "\(again.err)")
        let other = NSTemporaryDirectory() + "hydra-linkdb-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: other) }
        try FileManager.default.createSymbolicLink(atPath: other + "/hydra.db", withDestinationPath: server.stateDirectory + "/hydra.db")
        let linked = try hydra(["serve", "--listen", "127.0.0.1:0", "--state", other])
        #expect(linked.status == 2 && linked.err.contains("hydra.db is in use by another hydra process"), "\(linked.err)")
        #expect(try server.client().call("hydra.ping")["version"] != nil)
    }

    /// A `hydra.lock` that is a symbolic link is not followed: the server wrote
    /// its pid over whatever the link pointed at (as root, any file).
    @Test func aLockFileThatIsALinkIsNotFollowed() throws {
        let folder = NSTemporaryDirectory() + "hydra-locklink-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder + "/state", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try "precious\n".write(toFile: folder + "/victim.txt", atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: folder + "/state/hydra.lock", withDestinationPath: folder + "/victim.txt")
        let serve = try hydra(["serve", "--listen", "127.0.0.1:0", "--state", folder + "/state"], directory: folder)
        #expect(serve.status == 2 && serve.err.contains("hydra.lock"), "\(serve.err)")
        #expect(try String(contentsOfFile: folder + "/victim.txt", encoding: .utf8) == "precious\n")
    }

    /// Options that would overflow, or widen a removal to everything, are refused before anything is sent.
    @Test func clientOptionsThatCannotMeanWhatTheySayAreRefused() throws {
        for arguments in [["result", "j1", "--wait", "9223372036854775807"], ["result", "j1", "--wait", "3600001"],
                          ["resource", "get", "http://127.0.0.1:1/x", "--wait", "9223372036854775807"]] {
            let refused = try hydra(arguments + ["--connect", "127.0.0.1:1"])
            #expect(refused.status == 2 && refused.err.contains("--wait: expected milliseconds from 0 to 3600000"), "\(arguments): \(refused.err)")
            #expect(!refused.err.contains("Fatal error") && !refused.err.contains("arithmetic overflow"), "\(refused.err)")
        }
        // An unset shell variable (`--prefix "$URL"`) must not empty the cache or the repository.
        for arguments in [["cache", "rm", "--prefix", ""], ["cache", "rm", "--api", ""], ["cache", "rm", "--url", ""],
                          ["resource", "rm", "--prefix", ""], ["resource", "rm", ""], ["resource", "rm", "--key", ""]] {
            let refused = try hydra(arguments + ["--connect", "127.0.0.1:1"])
            #expect(refused.status == 2 && refused.err.contains("must not be empty"), "\(arguments): \(refused.err)")
        }
        let emptyState = try hydra(["run", "-", "--state", ""], stdin: #"{"type":"local","name":"echo","input":1}"#)
        #expect(emptyState.status == 2 && emptyState.err.contains("--state: must not be empty"), "\(emptyState.err)")
    }

    @Test func jsonSyntaxErrorsNameLineAndColumn() throws {
        let folder = NSTemporaryDirectory() + "hydra-syntax-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let spec = folder + "/spec.json"
        try "{\n  \"type\": \"local\",\n  \"name\": \"echo\" \"input\": 1\n}\n".write(toFile: spec, atomically: true, encoding: .utf8)
        let badSpec = try hydra(["run", spec])
        #expect(badSpec.status == 2)
        #expect(badSpec.err.contains("hydra: \(spec):3:18: not JSON: expected ',' or '}'"), "\(badSpec.err)")

        let badInput = try hydra(["run", "jobs/demo.json", "--input", #"{"a": [1, 2,]}"#])
        #expect(badInput.status == 2)
        #expect(badInput.err.contains("hydra: --input:1:13: not JSON: unexpected character ']'"), "\(badInput.err)")
        // A bare word where JSON is expected: the hint says how a string is written.
        let word = try hydra(["shared", "set", "region", "eu-west", "--connect", "127.0.0.1:1"])
        #expect(word.status == 2 && word.err.contains(#"hydra: VALUE:1:1: not JSON: unexpected character 'e' (a string is JSON with quotes: '"eu-west"')"#),
                "\(word.err)")
        let broken = try hydra(["shared", "set", "region", "{bad", "--connect", "127.0.0.1:1"])
        #expect(broken.status == 2 && !broken.err.contains("with quotes"), "\(broken.err)")

        let stdin = try hydra(["run", "-"], stdin: "[1,\n\n  \"é\" x]")
        #expect(stdin.err.contains("hydra: stdin:3:7: not JSON: expected ',' or ']'"), "\(stdin.err)")  // columns count characters

        let config = folder + "/hydra.json"
        try "{\"rpc\": {\n  \"listen\": 127.0.0.1:7400}}".write(toFile: config, atomically: true, encoding: .utf8)
        let badConfig = try hydra(["run", "jobs/demo.json", "--config", config])
        #expect(badConfig.status == 2)
        #expect(badConfig.err.contains("hydra: \(config):2:18: not JSON: expected ',' or '}'"), "\(badConfig.err)")
    }

    @Test func prettyOutputIsForPeople() throws {
        let pretty = try hydra(["run", "jobs/demo.json", "--events", "--pretty"])
        #expect(pretty.status == 0, "\(pretty.err)")
        let lines = pretty.out.split(separator: "\n").map(String.init)
        let resultStart = try #require(lines.firstIndex(of: "{"))
        // Events: one readable line each, `HH:MM:SS.mmm  name  job [step path]  detail`.
        let events = lines[..<resultStart]
        #expect(events.count > 10)
        #expect(events.allSatisfy { $0.range(of: #"^\d\d:\d\d:\d\d\.\d{3}  [a-z]+\.[a-z]+ +j\w+"#, options: .regularExpression) != nil })
        #expect(events.contains { $0.range(of: #"job\.succeeded +j\w+ step 0  status 200 \d+\.\dms$"#, options: .regularExpression) != nil })
        #expect(events.contains { $0.range(of: #"job\.skipped +j\w+ step 0  dummy$"#, options: .regularExpression) != nil })
        // The result: indented JSON that parses to the same thing as the default line.
        let result = lines[resultStart...].joined(separator: "\n")
        #expect(result.contains("\n  \"state\": \"succeeded\",\n"))
        #expect(try JSONParser.parse(result)["result"]?["results"]?[1] == "debugPlayer")
    }
}
