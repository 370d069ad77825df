import ArgumentParser
import Foundation
import Hydra
import HydraRPC

/// `hydra resource get|stat|cat|ls|rm|purge`: the resource repository of a
/// running server (resources.md). Exit codes as every client command: 0 ok,
/// 1 failed (a job that failed, a copy not found, an unreachable server),
/// 2 usage or invalid params.
struct ResourceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resource", abstract: "Fetch and manage the server's resource repository.",
        discussion: """
            Examples:
              hydra resource get https://example.com/logo.png    (its stat)
              hydra resource get https://example.com/a.json --as json --refresh
              hydra resource cat https://example.com/logo.png > logo.png
              hydra resource ls --prefix https://example.com/
              hydra resource purge --older-than 86400
            """,
        subcommands: [Get.self, Stat.self, Cat.self, List.self, Remove.self, Purge.self])

    /// Which copy: a URL argument or `--key`.
    struct Target: ParsableArguments {
        @Argument(help: "The resource's URL.") var url: String?
        @Option(help: "The resource's key instead of its URL.") var key: String?

        func validate() throws {
            // Both: which copy was meant? (`cat URL --key K > file` would write K's.)
            if url != nil, key != nil { throw ValidationError("give the resource's URL or --key, not both") }
        }

        var params: OrderedJSON {
            if let key { return ["key": .string(key)] }
            guard let url else { exitInvalid("give the resource's URL or --key") }
            return ["url": .string(url)]
        }
    }

    struct Get: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Fetch a resource through the repository (a resource job); print its result.",
            discussion: """
                With --as text, json or base64 prints the content itself; with --as path
                (the default) the job's result object. Exit 1 when the job fails.

                Example: hydra resource get https://example.com/a.json --as json --refresh
                """)
        @Argument(help: "The resource's URL.") var url: String
        @Option(name: .customLong("as"), help: "path, text, json or base64.") var presentation = "path"
        @Flag(help: "Go to the network (conditionally) even for a fresh copy.") var refresh = false
        @Option(parsing: .unconditional, help: "Give up waiting after this many milliseconds (at most 3600000).") var wait = 60_000
        @OptionGroup var connection: ConnectOptions
        func validate() throws { try validateWait(wait) }
        func run() throws {
            let client = connection.client()
            var job: OrderedJSON = ["type": "resource", "url": .string(url), "as": .string(presentation)]
            if refresh { job["mode"] = "refresh" }
            let submitted = call(client, "job.submit", ["job": .object(job)], options: ["job.as": "--as", "job.url": "URL"])
            let reply = call(client, "job.result", ["jobId": submitted["jobId"] ?? .null, "waitMs": .int(wait)],
                             timeout: .milliseconds(wait) + connection.callTimeout)
            guard reply["state"] == "succeeded", let result = reply["result"] else {
                // The job's error as the other commands say theirs (`kind: message`); still running: its state.
                let message: String
                if let error = reply["error"], let text = error["message"]?.stringValue {
                    message = (error["kind"]?.stringValue.map { "\($0): " } ?? "") + text
                } else {
                    message = "job \(submitted["jobId"]?.stringValue ?? "?") is \(reply["state"]?.stringValue ?? "unknown") after --wait \(wait) ms"
                }
                FileHandle.standardError.write(Data("hydra: \(TerminalText.safe(message))\n".utf8))
                throw ExitCode(1)
            }
            switch presentation {
            case "text", "base64": writeLine(result["content"]?.stringValue ?? "")
            case "json": writeLine(JSONWriter.string(result["content"] ?? .null))
            default: writeLine(JSONWriter.string(result))
            }
        }
    }

    struct Stat: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print what the repository knows of a copy.",
            discussion: """
                Examples:
                  hydra resource stat https://example.com/logo.png
                  hydra resource stat --key KEY --pretty
                """)
        @OptionGroup var target: Target
        @Flag(help: "Indented JSON, for people rather than scripts.") var pretty = false
        @OptionGroup var connection: ConnectOptions
        func run() { writeJSON(call(connection.client(), "resource.stat", .object(target.params)), pretty: pretty) }
    }

    struct Cat: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a copy's bytes to stdout, from the repository only (never the network).",
            discussion: "Example: hydra resource cat https://example.com/logo.png > logo.png")
        @OptionGroup var target: Target
        @OptionGroup var connection: ConnectOptions
        func run() {
            let client = connection.client()
            var offset = 0
            while true {
                var params = target.params
                params["offset"] = .int(offset)
                params["length"] = .int(1 << 20)
                let reply = call(client, "resource.read", .object(params))
                let chunk = Data(base64Encoded: reply["content"]?.stringValue ?? "") ?? Data()
                StandardOutput.write([UInt8](chunk))
                offset += chunk.count
                if reply["eof"] != false || chunk.isEmpty { break }
            }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "ls", abstract: "List copies, newest first.",
            discussion: "Example: hydra resource ls --prefix https://example.com/ --limit 10 --pretty")
        @Option(help: "Only URLs starting with this.") var prefix: String?
        @Option(parsing: .unconditional, help: "At most this many (1...1000).") var limit = 100
        @Option(help: "The page after this key (a previous answer's next).") var after: String?
        @Flag(help: "Indented JSON, for people rather than scripts.") var pretty = false
        @OptionGroup var connection: ConnectOptions
        func validate() throws {
            // As the help says: 5000 was taken (the server gives at most 1,000) and 0 got the server's wording.
            guard (1...1000).contains(limit) else { throw ValidationError("--limit: expected 1 to 1000, got \(limit)") }
        }
        func run() {
            var params: OrderedJSON = ["limit": .int(limit)]
            if let prefix { params["prefix"] = .string(prefix) }
            if let after { params["after"] = .string(after) }
            writeJSON(call(connection.client(), "resource.list", .object(params)), pretty: pretty)
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm", abstract: "Remove copies by URL, key or URL prefix.",
            discussion: """
                Examples:
                  hydra resource rm https://example.com/logo.png
                  hydra resource rm --prefix https://example.com/img/
                """)
        @Argument(help: "The resource's URL.") var url: String?
        @Option(help: "The resource's key.") var key: String?
        @Option(help: "Every URL starting with this.") var prefix: String?
        @OptionGroup var connection: ConnectOptions
        func validate() throws {
            // An empty prefix (an unset shell variable) would remove every copy.
            try refuseEmpty(["URL": url, "--key": key, "--prefix": prefix])
            // Several selectors remove what each names: more than was meant, most likely a slip.
            let given = [url.map { _ in "a URL" }, key.map { _ in "--key" }, prefix.map { _ in "--prefix" }].compactMap { $0 }
            if given.count > 1 { throw ValidationError("give one of a URL, --key or --prefix, not \(given.joined(separator: " and "))") }
        }
        func run() {
            var params: OrderedJSON = [:]
            if let url { params["url"] = .string(url) }
            if let key { params["key"] = .string(key) }
            if let prefix { params["prefix"] = .string(prefix) }
            if params.isEmpty { exitInvalid("give a URL, --key or --prefix") }
            writeLine(JSONWriter.string(call(connection.client(), "resource.remove", .object(params))))
        }
    }

    struct Purge: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove copies unused for a while, then the least recently used past a size.",
            discussion: "Example: hydra resource purge --older-than 86400 --max-bytes 1000000000")
        @Option(parsing: .unconditional, help: "Copies unused for this many seconds go.") var olderThan: Int?
        @Option(parsing: .unconditional, help: "Then the least recently used go until the repository holds at most this many bytes.") var maxBytes: Int?
        @OptionGroup var connection: ConnectOptions
        func run() {
            var params: OrderedJSON = [:]
            if let olderThan { params["olderThanSec"] = .int(olderThan) }
            if let maxBytes { params["maxBytes"] = .int(maxBytes) }
            writeLine(JSONWriter.string(call(connection.client(), "resource.purge", .object(params),
                                             options: ["olderThanSec": "--older-than", "maxBytes": "--max-bytes"])))
        }
    }
}
