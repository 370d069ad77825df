import ArgumentParser
import Foundation
import HydraCore

/// `hydra auth login|status|logout`: the auth sessions of a running server (rest.md §1).
struct AuthCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "auth", abstract: "Log auth sessions in and out, and show their state.",
        discussion: """
            Examples:
              hydra auth login user --user alice     (asks for the password without echo; or pipe it on stdin)
              hydra auth login svc                   (client credentials: fetch a token now)
              hydra auth status                      (every session; never a token)
              hydra auth logout user
            """,
        subcommands: [Login.self, Status.self, Logout.self])

    struct Login: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Log a session in: the password grant for oauth2-password, a token now for client credentials.",
            discussion: """
                Examples:
                  hydra auth login user --user alice    (asks for the password without echo)
                  echo "$PASSWORD" | hydra auth login user --user alice
                  hydra auth login svc
                """)
        @Argument(help: "The session's name in the server's auth section.") var name: String
        @Option(name: [.customLong("user"), .customShort("u")], help: "The user name (oauth2-password).") var user: String?
        @OptionGroup var connection: ConnectOptions
        func run() {
            var params: OrderedJSON = ["name": .string(name)]
            let client = connection.client()
            if let user {
                // Asked before the password prompt: --user only means something to a password
                // grant (a typo'd or client-credentials session would say "the password is empty").
                let type = call(client, "auth.status", ["name": .string(name)])["type"]?.stringValue
                if let type, type != "oauth2-password" {
                    exitInvalid("auth login \(name): --user is for oauth2-password sessions; \(name) is \(type)"
                                + (type == "oauth2-client-credentials" ? " (log it in with: hydra auth login \(name))" : " (it needs no login)"))
                }
                params["username"] = .string(user)
                let password = PasswordPrompt.read("password for \(user): ")
                // Checked here too: an empty stdin is no password to send to the token endpoint.
                if password.isEmpty { exitInvalid("auth login: the password is empty (typed or read from stdin)") }
                params["password"] = .string(password)
            }
            // The identity provider may take its time (its timeout and retries are the server's).
            writeLine(JSONWriter.string(call(client, "auth.login", .object(params),
                                             timeout: .seconds(240) + connection.callTimeout)))
        }
    }

    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show a session's state (or every session's).",
            discussion: """
                Examples:
                  hydra auth status
                  hydra auth status user
                """)
        @Argument(help: "The session's name; all when left out.") var name: String?
        @OptionGroup var connection: ConnectOptions
        func run() {
            let params: JSONValue = name.map { ["name": .string($0)] } ?? [:]
            writeLine(JSONWriter.string(call(connection.client(), "auth.status", params)))
        }
    }

    struct Logout: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Forget a session's tokens, in memory and at rest.", discussion: "Example: hydra auth logout user")
        @Argument(help: "The session's name.") var name: String
        @OptionGroup var connection: ConnectOptions
        func run() { writeLine(JSONWriter.string(call(connection.client(), "auth.logout", ["name": .string(name)]))) }
    }
}
