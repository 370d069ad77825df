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
            """,
        version: HydraVersion.string,
        subcommands: [RunCommand.self])
}

import HydraCore
