import Foundation
import HydraRPC
import Testing

@testable import Hydra

/// Issue 11 against the real binary: `saveAs` never reaches the server's own
/// files nor follows a link out of the state folder, a compression bomb stops
/// at `defaults.maxBodyBytes`, a header with a line break stops startup.
extension ServerTests {
    @Test func saveAsNeverReachesTheServersFilesNorFollowsALink() throws {
        let state = NSTemporaryDirectory() + "hydra-server-\(UUID().uuidString)"
        let socket = state + "/rpc.sock"
        let outside = NSTemporaryDirectory() + "hydra-outside-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: outside) }
        let server = try ServerProcess(state: state, arguments: ["--unix-socket", socket])
        let client = try server.client()
        func wait(_ submitted: JSONValue) throws -> JSONValue {
            try client.call("job.result", ["jobId": submitted["jobId"]!, "waitMs": 10_000])
        }
        let before = try client.call("job.submit", ["job": ["type": "remote", "api": "items"]])
        #expect(try wait(before)["state"] == "succeeded")

        func refusal(_ job: JSONValue, input: JSONValue = .null) -> RPCClientError? {
            do {
                _ = try client.call("job.submit", ["job": job, "input": input])
                return nil
            } catch {
                return error
            }
        }
        // The server's own files, by name: -32602 at submit, naming the field.
        for path in ["hydra.db", "hydra.db-wal", "hydra.db-shm", "hydra.db-journal", "HYDRA.DB", "./hydra.db",
                     "hydra.db.backup", "clean-shutdown", "resources/blob.bin", "rpc.sock", "/etc/hydra-test",
                     "../escape", "downloads/../../escape", "downloads/", ""] {
            let error = refusal(["type": "remote", "endpoint": "/large/10", "saveAs": .string(path)])
            #expect(error?.code == -32602, "\(path): \(String(describing: error))")
            #expect(error?.message.contains("job.saveAs") == true, "\(path): \(String(describing: error))")
        }
        let step = refusal(["type": "serial", "steps": [["type": "local", "name": "echo"],
                                                        ["type": "remote", "endpoint": "/large/10", "saveAs": "hydra.db-wal"]]])
        #expect(step?.code == -32602)
        #expect(step?.message.contains("job.steps[1].saveAs") == true, "\(String(describing: step))")

        // Links planted in the state folder, to a folder and to a file outside it.
        #expect(symlink(outside, state + "/out") == 0)
        #expect(symlink(outside + "/target.bin", state + "/link.bin") == 0)
        for path in ["out/file.bin", "out/deeper/file.bin", "link.bin"] {
            let error = refusal(["type": "remote", "endpoint": "/large/10", "saveAs": .string(path)])
            #expect(error?.code == -32602, "\(path): \(String(describing: error))")
            #expect(error?.message.contains("symbolic link") == true, "\(path): \(String(describing: error))")
        }

        // Built from a reference: checked when the step runs, kind invalid.
        for path in ["hydra.db", "hydra.db-wal", "clean-shutdown", "rpc.sock", "out/file.bin", "link.bin", "../escape"] {
            let submitted = try client.call("job.submit", ["job": ["type": "remote", "endpoint": "/large/10", "saveAs": "${input.p}"],
                                                           "input": ["p": .string(path)]])
            let result = try wait(submitted)
            #expect(result["state"] == "failed", "\(path): \(result)")
            #expect(result["error"]?["kind"] == "invalid", "\(path): \(result)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside).isEmpty)

        // A download still works; a failed one leaves nothing behind, not even a temporary file.
        let ok = try wait(try client.call("job.submit", ["job": ["type": "remote", "endpoint": "/large/1000", "saveAs": "downloads/ok.bin"]]))
        #expect(ok["state"] == "succeeded", "\(ok)")
        #expect(ok["result"]?["bytes"] == 1000)
        let failed = try wait(try client.call("job.submit", ["job": ["type": "remote", "endpoint": "/status/404", "saveAs": "downloads/failed.bin"]]))
        #expect(failed["error"]?["kind"] == "http")
        #expect(try FileManager.default.contentsOfDirectory(atPath: state + "/downloads") == ["ok.bin"])
        #expect(FileManager.default.contents(atPath: state + "/downloads/ok.bin")?.count == 1000)

        // The database is intact: the server answers, stops cleanly, and a restart finds the first job.
        #expect(try client.call("hydra.ping")["version"] != nil)
        #expect(server.terminate().status == 0)
        let restarted = try ServerProcess(state: state)
        defer { restarted.terminate() }
        let again = try restarted.client().call("job.result", ["jobId": before["jobId"]!])
        #expect(again["state"] == "succeeded")
        #expect(again["result"]?["body"]?["count"] == 3)
    }

    /// 512 MiB of zeros in half a MiB of gzip, with `defaults.maxBodyBytes` 1 MiB:
    /// the job fails with kind tooLarge and the server's peak memory stays far
    /// below the inflated size (before, the whole body was inflated in memory).
    /// The peak resident memory of process `pid` (`VmHWM`, KiB).
    static func peakMemory(of pid: pid_t) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") } ?? ""
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "0") ?? 0
    }

    /// A line of `job.result`s of one large result (3,000 in a 260 KB request)
    /// made the server hold every answer, gigabytes, only to
    /// replace them by errors once all were in. The batch's budget now holds
    /// as the answers come: the same answer, and memory stays near the limit.
    @Test func aBatchOfLargeAnswersKeepsItsBudgetAsTheyCome() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        let client = try server.client()
        let big = String(repeating: "A", count: 900_000)
        let job = try client.call("job.submit", ["job": ["type": "local", "name": "echo", "input": .string(big)]])["jobId"]!
        #expect(try client.call("job.result", ["jobId": job, "waitMs": 10_000])["state"] == "succeeded")
        let before = Self.peakMemory(of: server.process.processIdentifier)
        let replies = try client.callBatch(Array(repeating: (method: "job.result", params: ["jobId": job] as JSONValue), count: 300),
                                           timeout: .seconds(120))
        let after = Self.peakMemory(of: server.process.processIdentifier)
        #expect(replies.count == 300)
        var kept = 0
        for reply in replies {
            switch reply {
            case .success(let value): kept += 1; #expect(value["result"]?.stringValue?.count == 900_000)
            case .failure(let error): #expect(error.code == -32600 && error.message.contains("too large for a batch answer"), "\(error)")
            }
        }
        #expect(kept >= 1 && kept <= 9, "rpc.maxOutboundBytes (8 MiB) holds at most nine: \(kept)")
        // AddressSanitizer keeps freed memory in quarantine (256 MiB) before reusing it: the
        // answers replaced as they came still count there (249 MB measured; the old way: 270 MB more).
        let bound = BuiltProducts.sanitized ? 400_000 : 100_000
        #expect(after - before < bound, "the peak memory grew by \(after - before) KiB (all 300 answers: 270 MB)")
    }

    /// One client's thousand `job.list`s (here pipelined) no longer stand in
    /// the store's one reader ahead of another client's: each connection has
    /// at most two such reads under way.
    @Test func oneClientsListsDoNotHoldUpAnothers() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        let client = try server.client()
        _ = try client.callBatch(Array(repeating: (method: "job.submit", params: ["job": ["type": "local", "name": "echo", "input": 1]] as JSONValue),
                                       count: 2_000))
        let flood = try server.raw()
        let line = Array(#"{"jsonrpc":"2.0","id":1,"method":"job.list","params":{"limit":2000}}"#.utf8) + [10]
        try flood.send(raw: Array([[UInt8]](repeating: line, count: 1_500).joined()))
        usleep(200_000)  // the flood is under way
        let other = try server.client()
        let start = ContinuousClock.now
        #expect(try other.call("job.list", ["limit": 1])["jobs"]?[0] != nil)
        let waited = ContinuousClock.now - start
        #expect(waited < .seconds(3), "another client's job.list waited \(waited)")
        flood.close()
    }

    /// With a secret, a connection that never authenticates is closed after
    /// `rpc.firstMessageTimeoutMs` however busy it keeps with `hydra.ping`:
    /// such connections held every slot of rpc.maxConnections for ever.
    @Test func anUnauthenticatedConnectionIsClosedEvenWhileItPings() throws {
        let server = try ServerProcess(config: #""rpc": {"secret": "s3cret-for-tests", "firstMessageTimeoutMs": 600}"#)
        defer { server.terminate() }
        let idle = try server.raw()
        var closedWith: JSONValue?
        for _ in 0..<20 {
            try? idle.send(Array(#"{"jsonrpc":"2.0","id":1,"method":"hydra.ping"}"#.utf8))
            while let line = try? idle.readLine(timeout: .milliseconds(100)) {
                let message = try JSONParser.parse(line)
                if message["id"] == .null { closedWith = message }
            }
            if closedWith != nil { break }
        }
        #expect(closedWith?["error"]?["message"]?.stringValue?.contains("not authenticated (rpc.auth) within 600 ms") == true,
                "\(String(describing: closedWith))")
        // One that authenticates stays, pings or not.
        let client = try server.client(secret: "s3cret-for-tests")
        usleep(900_000)
        #expect(try client.call("hydra.ping")["version"] != nil)
    }

    @Test func aGzipBombStopsAtMaxBodyBytes() throws {
        let server = try ServerProcess(config: #""defaults": {"server": "testsvr", "timeoutMs": 60000, "maxBodyBytes": 1048576}"#)
        defer { server.terminate() }
        let client = try server.client()
        let submitted = try client.call("job.submit", ["job": ["type": "remote", "endpoint": "/gzip-bomb/512"]])
        let result = try client.call("job.result", ["jobId": submitted["jobId"]!, "waitMs": 60_000])
        #expect(result["state"] == "failed")
        #expect(result["error"]?["kind"] == "tooLarge", "\(result)")
        #expect(result["error"]?["message"]?.stringValue?.contains("1048576") == true)
        let peak = try peakResidentBytes(of: server.process.processIdentifier)
        #expect(peak < 160 << 20, "the server's peak RSS was \(peak >> 20) MiB")
        #expect(try client.call("hydra.ping")["version"] != nil)
    }

    /// A header value with a line break in the configuration stops startup, naming the key.
    @Test func aConfiguredHeaderWithALineBreakStopsStartup() throws {
        let servers = #""servers": {"testsvr": "\#(TestServer.base)", "#
        for (config, key) in [(#""defaults": {"headers": {"X-Bad": "a\r\nX-Injected: 1"}}"#, "defaults.headers.X-Bad"),
                              (servers + #""s": {"url": "http://h", "headers": {"X-Bad": "a\nb"}}}"#, "servers.s.headers.X-Bad"),
                              (#""apis": {"a": {"server": "testsvr", "endpoint": "/", "headers": {"X Bad": "x"}}}"#, "apis.a.headers.X Bad")] {
            do {
                let started = try ServerProcess(config: config)
                started.terminate()
                Issue.record("started with \(config)")
            } catch let failure as ServerStartFailure {
                #expect(failure.status == 2)
                #expect(failure.stderr.contains("config.json: \(key)"), "\(failure.stderr)")
                #expect(failure.stderr.split(separator: "\n").count == 1)
            }
        }
        // Submitted ones are -32602 naming the field.
        let server = try ServerProcess()
        defer { server.terminate() }
        let client = try server.client()
        do {
            _ = try client.call("job.submit", ["job": ["type": "remote", "endpoint": "/echo", "headers": ["X-Foo": "a\r\nX-Injected: 1"]]])
            Issue.record("a header value with CR LF was accepted")
        } catch {
            #expect(error.code == -32602)
            #expect(error.message.contains("job.headers.X-Foo"), "\(error)")
        }
    }
}

/// The peak resident set size (`VmHWM`) of process `pid`, in bytes.
func peakResidentBytes(of pid: Int32) throws -> Int {
    let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
    guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
          let kib = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first.flatMap({ Int($0) })
    else { throw WaitTimeout() }
    return kib << 10
}
