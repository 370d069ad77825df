import Foundation
import Testing

@testable import Hydra
@testable import HydraRPC

/// No byte of an aes-gcm shared value lands in clear in the database, its
/// WAL, an event or a log, whatever a job does with it; a key keeps its cipher
/// unless `shared.set` names another.
@Suite(.ownThreads) struct SecretSharedDataTests {
    private static let plaintext = "pl41nt3xt-Of-A-Secret"

    /// A step that reads a secret hands it on to the next in clear (`${prev…}`,
    /// `${steps.ID…}`): masked in what is stored and sent, not in what a later
    /// step uses. And a secret sent percent-encoded (a query, a form) is masked
    /// in that form too where the request's URL comes back.
    @Test func aSecretPassesBetweenStepsAndIsMaskedInEveryForm() throws {
        let server = try ServerProcess(environment: ["HYDRA_SHARED_KEY": "correct horse battery staple"])
        defer { server.terminate() }
        let client = try server.client()
        let watcher = try server.client()
        _ = try watcher.call("events.subscribe", [:])
        let word = "S3cr3t\(UInt32.random(in: 0...UInt32.max))"
        _ = try client.call("shared.set", ["key": "word", "value": .string(word), "cipher": "aes-gcm"])
        let spaced = "SEC RET/+é-\(UInt32.random(in: 0...UInt32.max))"
        _ = try client.call("shared.set", ["key": "spaced", "value": .string(spaced), "cipher": "aes-gcm"])

        let job = try client.call("job.submit", ["job": ["type": "serial", "steps": [
            ["type": "local", "id": "read", "name": "echo", "input": ["v": "${shared.word}"]],
            ["type": "remote", "endpoint": "/hits/${prev.v}"],
            ["type": "remote", "endpoint": "/hits/${steps.read.v}-again"],
            ["type": "local", "name": "echo", "input": "${steps.read.v}"],
            ["type": "remote", "endpoint": "/echo/q", "query": ["t": "${shared.spaced}"]],
        ]]])["jobId"]!
        let result = try client.call("job.result", ["jobId": job, "waitMs": 10_000])
        #expect(result["state"] == "succeeded", "\(result)")
        var events = ""  // this job's (the counts asked below name the value themselves)
        while let note = try watcher.nextNotification(timeout: .milliseconds(300)) { events += "\(note)" }
        // The server got the value itself, not `***`, from both kinds of reference.
        func hits(_ key: String) throws -> JSONValue? {
            let id = try client.call("job.submit", ["job": ["type": "remote", "endpoint": .string("/count/" + key)]])["jobId"]!
            return try client.call("job.result", ["jobId": id, "waitMs": 10_000])["result"]?["body"]?["count"]
        }
        #expect(try hits(word) == 1 && hits(word + "-again") == 1)
        // What came back is masked, in clear and percent-encoded.
        let text = "\(result)"
        #expect(!text.contains(word), "\(text)")
        #expect(result["result"]?["results"]?[3] == "***")
        let encoded = PercentEncoding.encode(spaced)
        #expect(encoded != spaced && !text.contains(encoded) && !text.contains(spaced), "\(text)")
        #expect(!events.contains(word) && !events.contains(encoded) && !events.contains(spaced))
    }

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
        // A named cipher replaces the key's value and cipher (protocol §5: shared.set {key, value, cipher?}).
        _ = try client.call("shared.set", ["key": "other", "value": "v", "cipher": "gzip"])
        _ = try client.call("shared.set", ["key": "other", "value": .string(Self.plaintext + "-other"), "cipher": "aes-gcm"])
        #expect(try client.call("shared.get", ["key": "other"])["value"] == .string(Self.plaintext + "-other"))
        let masked = try client.call("job.submit", ["job": ["type": "local", "name": "echo", "input": "${shared.other}"]])["jobId"]!
        #expect(try client.call("job.result", ["jobId": masked, "waitMs": 10_000])["result"] == "***")  // a secret now
        _ = try client.call("shared.set", ["key": "token", "value": "x", "cipher": "gzip"])
        #expect(try client.call("shared.get", ["key": "token"])["value"] == "x")
        let clear = try client.call("job.submit", ["job": ["type": "local", "name": "echo", "input": "${shared.token}"]])["jobId"]!
        #expect(try client.call("job.result", ["jobId": clear, "waitMs": 10_000])["result"] == "x")  // no longer one
        // The local job alike: the secret back in clear, stored with gzip.
        let local = try client.call("job.submit", ["job": ["type": "local", "name": "shared.set",
                                                           "input": ["key": "other", "value": "z", "cipher": "gzip"]]])["jobId"]!
        #expect(try client.call("job.result", ["jobId": local, "waitMs": 10_000])["state"] == "succeeded")
        #expect(try client.call("shared.get", ["key": "other"])["value"] == "z")
        // The flag that changing a cipher used to need is no param of shared.set.
        do {
            _ = try client.call("shared.set", ["key": "token", "value": "y", "cipher": "none", "changeCipher": true])
            Issue.record("changeCipher was accepted")
        } catch {
            #expect(error.code == -32602)
            #expect(error.message == "changeCipher: unknown key")
        }

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

    /// Three ways a secret came back in clear (an audit, with sqlite3 on the
    /// files): an object or array of secrets read whole (only a whole text was
    /// masked), the `emit` local job's fields, and the `shared.set` local job
    /// copying a secret to a key kept in clear. Now the leaves are masked, the
    /// fields are, and the copy is encrypted (or refused when a clear cipher is named).
    @Test func aStructuredSecretAnEmittedOneAndACopiedOneStaySecret() throws {
        let server = try ServerProcess(environment: ["HYDRA_SHARED_KEY": "correct horse battery staple"])
        let client = try server.client()
        let watcher = try server.client()
        _ = try watcher.call("events.subscribe", [:])
        let word = "SHSECRET55-" + UUID().uuidString.prefix(6), number = 987_654_321
        _ = try client.call("shared.set", ["key": "obj", "value": ["a": .string(word), "n": .int(number), "id": "ab"],
                                           "cipher": "aes-gcm"])
        _ = try client.call("shared.set", ["key": "tok", "value": .string(Self.plaintext), "cipher": "aes-gcm"])
        func run(_ job: JSONValue) throws -> JSONValue {
            let id = try client.call("job.submit", ["job": job])["jobId"]!
            return try client.call("job.result", ["jobId": id, "waitMs": 10_000])
        }
        // A key is a name: empty or with a control character (a NUL was taken) is refused.
        for key in ["", "a\u{0}b", "a\nb"] {
            do {
                _ = try client.call("shared.set", ["key": .string(key), "value": 1])
                Issue.record("the key \(key.debugDescription) was accepted")
            } catch {
                #expect(error.code == -32602 && error.message.hasPrefix("key: must not"), "\(error)")
            }
        }
        let whole = try run(["type": "local", "name": "echo", "input": "${shared.obj}"])
        #expect(whole["result"] == ["a": "***", "n": "***", "id": "ab"], "\(whole)")  // a short leaf is no secret alone
        let inArray = try run(["type": "local", "name": "echo", "input": ["${shared.obj}"]])
        #expect(inArray["result"]?[0]?["a"] == "***", "\(inArray)")
        let picked = try run(["type": "local", "name": "pick", "input": ["from": "${shared.obj}", "path": "a"]])
        #expect(picked["result"] == "***", "\(picked)")
        let emitted = try run(["type": "local", "name": "emit", "input": ["event": "custom.leak", "fields": ["v": "${shared.tok}"]]])
        #expect(emitted["state"] == "succeeded", "\(emitted)")
        let copied = try run(["type": "local", "name": "shared.set", "input": ["key": "copy", "value": "${shared.tok}"]])
        #expect(copied["state"] == "succeeded", "\(copied)")
        #expect(try client.call("shared.get", ["key": "copy"])["value"] == .string(Self.plaintext))  // kept, encrypted
        let clear = try run(["type": "local", "name": "shared.set", "input": ["key": "copy2", "value": "${shared.tok}", "cipher": "none"]])
        #expect(clear["error"]?["kind"] == "invalid" && clear["error"]?["message"]?.stringValue?.contains("cipher aes-gcm") == true,
                "\(clear)")
        let readBack = try run(["type": "local", "name": "echo", "input": "${shared.copy}"])
        #expect(readBack["result"] == "***")

        var events: [String] = []
        while let note = try watcher.nextNotification(timeout: .milliseconds(500)) { events.append(JSONWriter.string(note)) }
        #expect(events.contains { $0.contains("custom.leak") })
        #expect(events.allSatisfy { !$0.contains(Self.plaintext) && !$0.contains(word) && !$0.contains(String(number)) },
                "an event carries a secret")
        server.kill9()
        for file in [server.stateDirectory + "/hydra.db", server.stateDirectory + "/hydra.db-wal"] {
            guard let bytes = FileManager.default.contents(atPath: file) else { continue }
            for secret in [Self.plaintext, word, String(number)] {
                #expect(bytes.range(of: Data(secret.utf8)) == nil, "\(file) holds \(secret) in clear")
            }
        }
    }

    /// After a restart without `HYDRA_SHARED_KEY` (or with another one), an encrypted key cannot be
    /// read: `-32602` naming the key and the variable (the caller's setup, not
    /// a bug of the server); `shared.removed` says the value is gone (`null`),
    /// except for an encrypted key, whose events never have a value.
    @Test func anEncryptedKeyWithoutTheKeyIsRefusedAndRemovalsSayTheValueIsGone() throws {
        let first = try ServerProcess(environment: ["HYDRA_SHARED_KEY": "correct horse battery staple"])
        _ = try first.client().call("shared.set", ["key": "sealed", "value": "v", "cipher": "aes-gcm"])
        _ = try first.client().call("shared.set", ["key": "plain", "value": 42])
        first.terminate()
        // With another passphrase: the same refusal (it was -32603, an internal error).
        let other = try ServerProcess(state: first.stateDirectory, environment: ["HYDRA_SHARED_KEY": "another passphrase"])
        let otherClient = try other.client()
        do {
            _ = try otherClient.call("shared.get", ["key": "sealed"])
            Issue.record("an encrypted key was read with another key")
        } catch {
            #expect(error.code == -32602 && error.message.hasPrefix("key: ") && error.message.contains("differs"), "\(error)")
        }
        other.terminate()
        let server = try ServerProcess(state: first.stateDirectory)
        defer { server.terminate() }
        let client = try server.client()
        let watcher = try server.client()
        _ = try watcher.call("events.subscribe", ["events": ["shared.removed"]])
        do {
            _ = try client.call("shared.get", ["key": "sealed"])
            Issue.record("an encrypted key was read without the key")
        } catch {
            #expect(error.code == -32602 && error.message.hasPrefix("key: ") && error.message.contains("HYDRA_SHARED_KEY"),
                    "\(error)")
        }
        // A reference to it fails its step saying why (not "no shared value").
        let read = try client.call("job.submit", ["job": ["type": "local", "name": "echo", "input": "${shared.sealed}"]])["jobId"]!
        let failed = try client.call("job.result", ["jobId": read, "waitMs": 10_000])
        #expect(failed["error"]?["message"]?.stringValue?.contains("encrypted (aes-gcm) and cannot be read without HYDRA_SHARED_KEY") == true,
                "\(failed)")
        #expect(try client.call("shared.remove", ["key": "plain"])["removed"] == true)
        #expect(try client.call("shared.remove", ["key": "sealed"])["removed"] == true)
        let plain = try #require(try watcher.nextNotification(timeout: .seconds(5))?["params"])
        #expect(plain["key"] == "plain" && plain.objectValue?["value"] == .null, "\(plain)")
        let sealed = try #require(try watcher.nextNotification(timeout: .seconds(5))?["params"])
        #expect(sealed["key"] == "sealed" && sealed.objectValue?["value"] == nil, "\(sealed)")
    }

    /// A secret that a field changes before it is refused (a method upper-cased,
    /// a digest lower-cased, an object's member named in the error) shows in no
    /// error: the case variants are masked, and a step that read a secret gives
    /// no detail of a refusal made once its references were resolved.
    @Test func aSecretChangedByAFieldShowsInNoError() throws {
        let server = try ServerProcess(environment: ["HYDRA_SHARED_KEY": "correct horse battery staple"])
        defer { server.terminate() }
        let client = try server.client()
        _ = try client.call("shared.set", ["key": "m", "value": "zq9secretvalue77", "cipher": "aes-gcm"])
        _ = try client.call("shared.set", ["key": "sha", "value": .string(String(repeating: "CD", count: 32)), "cipher": "aes-gcm"])
        _ = try client.call("shared.set", ["key": "obj", "value": ["Zq9SECRETkey": 1], "cipher": "aes-gcm"])
        func failure(_ job: JSONValue) throws -> String {
            let id = try client.call("job.submit", ["job": job])["jobId"]!
            let result = try client.call("job.result", ["jobId": id, "waitMs": 10_000])
            #expect(result["state"] == "failed", "\(result)")
            return JSONWriter.string(result)
        }
        let method = try failure(["type": "remote", "endpoint": "/echo/m", "method": "${shared.m}"])
        #expect(!method.lowercased().contains("zq9secretvalue77"), "\(method)")
        let digest = try failure(["type": "resource", "url": .string(TestServer.url("/resource/shasecret")), "sha256": "${shared.sha}"])
        #expect(!digest.lowercased().contains(String(repeating: "cd", count: 32)), "\(digest)")
        let member = try failure(["type": "remote", "endpoint": "/echo/o", "retry": "${shared.obj}"])
        #expect(!member.lowercased().contains("zq9secretkey") && member.contains("retry: refused once its references were resolved"),
                "\(member)")
    }
}
