import Foundation
import Testing

@testable import Hydra

/// `hydra run` as users run it: the real binary, its stdout, stderr and exit status.
@Suite struct RunCommandTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    func hydra(_ arguments: [String], stdin: String? = nil) throws -> (status: Int32, out: String, err: String) {
        let process = Process()
        process.executableURL = BuiltProducts.url("hydra")
        process.arguments = arguments
        process.currentDirectoryURL = RunCommandTests.root
        let out = Pipe(), err = Pipe(), input = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input
        try process.run()
        if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
        try input.fileHandleForWriting.close()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        let errData = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: outData, as: UTF8.self), String(decoding: errData, as: UTF8.self))
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
        #expect(err.isEmpty)  // stderr is not a terminal: no progress line
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

        let badInput = try hydra(["run", "jobs/demo.json", "--input", "{oops"])
        #expect(badInput.status == 2)
        #expect(badInput.err.contains("--input"))

        let badConfig = try hydra(["run", "jobs/demo.json", "--config", "/nonexistent.json"])
        #expect(badConfig.status == 2)
        #expect(badConfig.err.contains("/nonexistent.json"))
    }
}
