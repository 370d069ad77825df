import Foundation
import Testing

@testable import Hydra

/// The fluent typed request builder, and the README's example program.
@Suite(.ownThreads) struct RESTRequestTests {
    struct Item: Codable, Sendable, Equatable {
        let id: Int
        let name: String
    }
    struct Items: Decodable, Sendable {
        let items: [Item]
        let count: Int
    }
    struct Login: Codable, Sendable {
        let user: String
        let password: String
    }
    struct Token: Decodable, Sendable {
        let token: String
    }
    struct Echo: Decodable, Sendable {
        let method: String
        let path: String
        let query: [String: String]
        let headers: [String: String]
    }

    @Test func typedGetAndPostWithCodableModels() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let items = try await engine.request().api("items").decoding(Items.self).send()
        #expect(items.status == 200)
        #expect(items.model.items.last == Item(id: 3, name: "three"))
        #expect(items.headers["content-type"] == "application/json")

        let token = try await engine.request("POST").endpoint("/login")
            .body(Login(user: "gandalf", password: "secret")).decoding(Token.self).send()
        #expect(token.model.token == "tok-gandalf")

        let echo = try await engine.request().server("testsvr").endpoint("/echo/:who").pathVar("who", "frodo")
            .query("q", "a b").header("X-Trace", "t9").decoding(Echo.self).send()
        #expect(echo.model.path == "/echo/frodo")
        #expect(echo.model.query["q"] == "a b")
        #expect(echo.model.headers["x-trace"] == "t9")
    }

    @Test func failuresThrowJobErrorsAndResumeCallsBack() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        await #expect(throws: JobError.self) {
            _ = try await engine.request().endpoint("/status/503").send()
        }
        let notFound = await #expect(throws: JobError.self) {
            _ = try await engine.request().endpoint("/status/404").send()
        }
        #expect(notFound?.kind == .http && notFound?.status == 404)
        await #expect(throws: DecodingError.self) {
            _ = try await engine.request().api("items").decoding(Token.self).send()
        }
        let status = await withCheckedContinuation { continuation in
            engine.request().api("items").resume { result in
                continuation.resume(returning: (try? result.get())?.status ?? -1)
            }
        }
        #expect(status == 200)
    }

    /// A spec built in code skips JSON parsing: submit still refuses a header with a line break.
    @Test func aHeaderWithALineBreakIsRefusedAtSubmit() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        await #expect(throws: ValidationError(path: "headers.X-Foo", HeaderSyntax.valueProblem)) {
            _ = try await engine.request().endpoint("/echo").header("X-Foo", "a\r\nX-Injected: 1").send()
        }
        await #expect(throws: ValidationError(path: "headers.X:Foo", HeaderSyntax.nameProblem)) {
            _ = try await engine.request().endpoint("/echo").header("X:Foo", "a").send()
        }
    }

    @Test func readmeShowsTheQuickStartProgramAndItRuns() throws {
        let root = PackageRoot.url
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let program = try String(contentsOf: root.appendingPathComponent("Examples/QuickStart/main.swift"), encoding: .utf8)
        #expect(readme.contains("```swift\n" + program + "```"))

        let process = ChildProcess()
        process.executableURL = BuiltProducts.url("hydra-quickstart")
        process.currentDirectoryURL = root
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let output = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(output == "status 200: hello from a dummy response\nsucceeded \"DEBUGPLAYER\"\n")
    }
}
