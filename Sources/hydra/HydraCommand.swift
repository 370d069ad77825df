import ArgumentParser
import Foundation

/// `hydra`: the command-line tool.
@main
struct HydraCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hydra",
        abstract: "A worker-pool job scheduler for API work: remote and local jobs, serial and concurrent graphs.",
        discussion: """
            Examples:
              hydra run jobs/demo.json              run a spec here, print its result
              hydra run jobs/demo.json --events --pretty   ...and its events, readably
              echo '{"type":"local","name":"echo","input":42}' | hydra run -
              hydra serve                           start the server on 127.0.0.1:7400
              hydra submit jobs/demo.json --follow  submit to it and follow to the end
              hydra jobs --state failed             list failed jobs

            Exit status: 0 success, 1 a failed or cancelled job or a refused call,
            2 invalid input (spec, JSON, config, address, unknown option or command).
            """,
        version: HydraVersion.string,
        subcommands: [RunCommand.self, ServeCommand.self, SubmitCommand.self, StatusCommand.self, AuthCommand.self, CacheCommand.self,
                      ResultCommand.self, CancelCommand.self, JobsCommand.self, EventsCommand.self,
                      SharedCommand.self, ResourceCommand.self, WorkersCommand.self, EmitCommand.self,
                      DummyCommand.self, StatsCommand.self, PingCommand.self])

    /// ArgumentParser's `main()`, except that a usage error (an unknown command or
    /// option, a missing argument: ArgumentParser's exit 64) exits 2 like every other
    /// invalid input of hydra, as documented; the message and usage are the usual ones.
    /// `--help` and `--version` still exit 0.
    static func main() async {
        refuseArgumentsNotUTF8()
        refuseUnknownCommand()
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            if exitCode(for: error).rawValue == ExitCode.validationFailure.rawValue {
                let message = fullMessage(for: error)
                if !message.isEmpty { FileHandle.standardError.write(Data((message + "\n").utf8)) }
                Foundation.exit(2)
            }
            exit(withError: error)
        }
    }
}

import HydraCore

extension HydraCommand {
    /// Swift reads the command line as UTF-8, repairing what is not into
    /// U+FFFD: `--input $'"a\xffb"'` would become another value, and a key
    /// or path another name. Refused instead (exit 2), as invalid UTF-8 in a
    /// spec file is.
    static func refuseArgumentsNotUTF8() {
        for index in 1..<Int(CommandLine.argc) {
            guard let raw = CommandLine.unsafeArgv[index], String(validatingCString: raw) == nil else { continue }
            FileHandle.standardError.write(Data("hydra: argument \(index) is not valid UTF-8 (\(TerminalText.safe(String(cString: raw))))\n".utf8))
            Foundation.exit(2)
        }
    }
}

extension HydraCommand {
    /// `hydra frob` and `hydra help frob` say that there is no such command
    /// (exit 2), naming the one meant when it looks misspelt: ArgumentParser
    /// says "Unexpected argument" for the first and prints the top help with
    /// exit 0 for the second.
    static func refuseUnknownCommand() {
        let arguments = CommandLine.arguments.dropFirst()
        guard var word = arguments.first, !word.hasPrefix("-") else { return }
        let names = configuration.subcommands.map { $0._commandName }
        if word == "help" {
            guard let asked = arguments.dropFirst().first, !asked.hasPrefix("-") else { return }
            word = asked
        }
        guard !names.contains(word) else { return }
        let meant = names.first { FieldReader.looksMisspelt(word, for: $0) }.map { " (did you mean '\($0)'?)" } ?? ""
        FileHandle.standardError.write(Data(
            "hydra: unknown command '\(TerminalText.safe(word))'\(meant); hydra --help lists the commands\n".utf8))
        Foundation.exit(2)
    }
}
