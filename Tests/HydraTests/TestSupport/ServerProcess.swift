import Foundation
import HydraLoop
import HydraRPC
import Testing

@testable import Hydra

/// The real `hydra serve` binary, started on a free port with its own state
/// folder, for tests that speak the protocol over real sockets.
final class ServerProcess: @unchecked Sendable {
    let process = ChildProcess()
    let stateDirectory: String
    let configPath: String
    private(set) var address: SocketAddress!
    private let stdout = Pipe()
    private let stderr = Pipe()
    /// Lines printed at startup.
    private(set) var banner: [String] = []

    /// Writes `config` (a JSON object's members, merged into a test default)
    /// and starts the server. `state` reuses a folder (restarts).
    init(config: String = "", state: String? = nil, environment: [String: String] = [:],
         arguments: [String] = []) throws {
        stateDirectory = state ?? NSTemporaryDirectory() + "hydra-server-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: stateDirectory, withIntermediateDirectories: true)
        configPath = stateDirectory + "/config.json"
        let text = JSONWriter.string(try mergedConfiguration("""
            {"rpc": {"listen": "127.0.0.1:0"},
             "servers": {"testsvr": "\(TestServer.base)"},
             "apis": {"items": {"server": "testsvr", "endpoint": "/items"}},
             "defaults": {"server": "testsvr", "timeoutMs": 10000}}
            """, config))
        try text.write(toFile: configPath, atomically: true, encoding: .utf8)
        process.executableURL = BuiltProducts.url("hydra")
        process.arguments = ["serve", "--config", configPath, "--state", stateDirectory] + arguments
        process.currentDirectoryURL = PackageRoot.url
        var env = ProcessInfo.processInfo.environment
        env["HYDRA_RPC_SECRET"] = nil
        env["HYDRA_SHARED_KEY"] = nil
        for (key, value) in environment { env[key] = value }
        process.environment = env
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = FileHandle.nullDevice
        try process.run()
        var buffer = Data()
        while banner.count < 2 {
            let chunk = stdout.fileHandleForReading.availableData
            if chunk.isEmpty {
                process.waitUntilExit()
                let err = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                throw ServerStartFailure(status: process.terminationStatus, stderr: err)
            }
            buffer.append(chunk)
            banner = String(decoding: buffer, as: UTF8.self).split(separator: "\n").map(String.init)
        }
        // "hydra VERSION serving on 127.0.0.1:PORT [and unix:PATH]"
        let words = banner[0].split(separator: " ")
        guard let i = words.firstIndex(of: "on"), let parsed = SocketAddress(parsing: String(words[i + 1])) else {
            throw ServerStartFailure(status: -1, stderr: "unexpected banner: \(banner[0])")
        }
        address = parsed
    }

    /// A connected client (authenticated when `secret` is given).
    func client(secret: String? = nil, address: SocketAddress? = nil) throws -> RPCClient {
        try RPCClient(address: address ?? self.address, secret: secret)
    }

    /// A raw line connection, for malformed input.
    func raw() throws -> LineClient { try LineClient(connectingTo: address) }

    /// Sends SIGTERM and waits; returns the exit status and stderr.
    @discardableResult
    func terminate() -> (status: Int32, stderr: String) {
        process.terminate()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
    }

    /// Waits for the server to exit on its own (after a signal the test sent); the exit status and stderr.
    func waitForExit() -> (status: Int32, stderr: String) {
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
    }

    /// Sends SIGTERM and waits at most `limit`; nil (after a kill -9) when the server did not exit in time.
    func terminate(within limit: Duration) -> Int32? {
        process.terminate()
        let deadline = ContinuousClock.now + limit
        while process.isRunning && ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.01) }
        guard !process.isRunning else {
            kill9()
            return nil
        }
        return process.terminationStatus
    }

    /// kill -9: no chance to flush or clean up.
    func kill9() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit {
        if process.isRunning { kill9() }
    }
}

struct ServerStartFailure: Error, CustomStringConvertible {
    var status: Int32
    var stderr: String
    var description: String { "hydra serve exited with \(status): \(stderr)" }
}

/// Sends one raw line and reads one line back, parsed.
func rawCall(_ client: LineClient, _ line: String) throws -> JSONValue {
    try client.send(Array(line.utf8))
    guard let reply = try client.readLine(timeout: .seconds(5)) else { throw WaitTimeout() }
    return try JSONParser.parse(reply)
}
