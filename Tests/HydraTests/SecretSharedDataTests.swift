import Foundation
import Testing

@testable import Hydra
@testable import HydraRPC

/// No byte of an aes-gcm shared value lands in clear in the database, its
/// WAL, an event or a log, whatever a job does with it; a key keeps its cipher.
@Suite struct SecretSharedDataTests {
    private static let plaintext = "pl41nt3xt-Of-A-Secret"

    @Test func aSecretNeverLandsInClearWhateverAJobDoesWithIt() throws {
        let server = try ServerProcess(environment: ["HYDRA_SHARED_KEY": "correct horse battery staple"])
        let client = try server.client()
        let watcher = try server.client()
        _ = try watcher.call("events.subscribe", [:])
        _ = try client.call("shared.set", ["key": "token", "value": .string(Self.plaintext), "cipher": "aes-gcm"])

        let job = try client.call("job.submit", ["job": ["type": "serial", "stopWhenFailed": false, "steps": [
            ["type": "local", "name": "shared.get", "input": ["key": "token"]],
            ["type": "local", "name": "echo", "input": "${shared.token}"],
            ["type": "local", "name": "echo", "input": ["nested": "Bearer ${shared.token}!"]],
            ["type": "remote", "method": "POST", "endpoint": "/echo/x", "headers": ["X-Secret": "${shared.token}"],
             "body": ["t": "${shared.token}"]],
            ["type": "remote", "endpoint": "/status/500", "query": ["t": "${shared.token}"], "expect": [200]],
        ]]])["jobId"]!
        let result = try client.call("job.result", ["jobId": job, "waitMs": 10_000])
        let results = result["result"]?["results"]
        #expect(results?[0] == "***")
        #expect(results?[1] == "***")
        #expect(results?[2] == ["nested": "Bearer ***!"])
        #expect(results?[3]?["body"]?["headers"]?["x-secret"] == "***")
        #expect(results?[3]?["body"]?["json"] == ["t": "***"])
        #expect(result["result"]?["errors"]?[4]?["kind"] == "http")
        // The secret still went where the step sent it: the server saw it (masked only in what came back).
        #expect(results?[3]?["body"]?["body"]?.stringValue?.contains("***") == true)

        // A later shared.set without a cipher keeps the key encrypted.
        _ = try client.call("shared.set", ["key": "token", "value": .string(Self.plaintext + "-2")])
        #expect(try client.call("shared.get", ["key": "token"])["value"] == .string(Self.plaintext + "-2"))
        // Changing the cipher takes an explicit flag.
        do {
            _ = try client.call("shared.set", ["key": "token", "value": "x", "cipher": "gzip"])
            Issue.record("the cipher changed without changeCipher")
        } catch {
            #expect(error.code == -32602)
            #expect(error.message.contains("changeCipher"))
        }
        _ = try client.call("shared.set", ["key": "other", "value": "v", "cipher": "gzip"])
        _ = try client.call("shared.set", ["key": "other", "value": "w", "cipher": "aes-gcm", "changeCipher": true])

        var events: [String] = []
        while let note = try watcher.nextNotification(timeout: .milliseconds(500)) { events.append(JSONWriter.string(note)) }
        #expect(!events.isEmpty)
        #expect(events.allSatisfy { !$0.contains(Self.plaintext) }, "an event carries the secret")

        // Killed, not stopped: the WAL is still there to search.
        let wal = server.stateDirectory + "/hydra.db-wal"
        server.kill9()
        for file in [server.stateDirectory + "/hydra.db", wal] {
            guard let bytes = FileManager.default.contents(atPath: file) else { continue }
            #expect(bytes.range(of: Data(Self.plaintext.utf8)) == nil, "\(file) holds the secret in clear")
        }
        #expect(FileManager.default.fileExists(atPath: wal))
    }
}
