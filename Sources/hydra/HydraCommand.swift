import ArgumentParser

/// `hydra`: the command-line tool.
@main
struct HydraCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hydra",
        abstract: "A worker-pool job scheduler for API work: remote and local jobs, serial and concurrent graphs.",
        discussion: """
            Examples:
              hydra run jobs/demo.json                 run a job spec in-process and print its result
              hydra run spec.json --events             ...printing every event as a JSON line first
              echo '{"type":"local","name":"echo","input":42}' | hydra run -
              hydra serve --config config/hydra.json  start the server (JSON-RPC on 127.0.0.1:7400)
              hydra submit jobs/demo.json --follow     submit to the server and follow it to the end
              hydra jobs --state failed                list failed jobs
            """,
        version: HydraVersion.string,
        subcommands: [RunCommand.self, ServeCommand.self, SubmitCommand.self, StatusCommand.self,
                      ResultCommand.self, CancelCommand.self, JobsCommand.self, EventsCommand.self,
                      SharedCommand.self, WorkersCommand.self, PingCommand.self])
}

import HydraCore
