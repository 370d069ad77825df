import Foundation
import Testing

@testable import Hydra

/// Runs the README's example (RESTReadmeExample.swift) against the test server.
@Suite(.ownThreads) struct RESTReadmeExampleTests {
    @Test func theReadmeExampleRuns() async throws {
        let key = UUID().uuidString
        let state = NSTemporaryDirectory() + "hydra-readme-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: state + "/uploads", withIntermediateDirectories: true)
        try "day,total\n2026-11-24,42\n".write(toFile: state + "/uploads/report.csv", atomically: true, encoding: .utf8)
        let engine = try makeEngine("""
            , "auth": {"user": {"type": "oauth2-password", "tokenUrl": "\(TestServer.base)/oauth/token?key=\(key)", "clientId": "app"}},
              "apis": {"reports": {"server": "testsvr", "endpoint": "/upload", "method": "POST", "auth": "user"},
                       "reportStatus": {"server": "testsvr", "endpoint": "/hits/\(key)"}}
            """, state: state)
        defer { engine.shutdown() }
        let (uploaded, status) = try await uploadReport(engine: engine, password: "wonderland")
        #expect(uploaded["md5ok"] == true)
        #expect(uploaded["parts"]?[1]?["text"] == "day,total\n2026-11-24,42\n")
        #expect(uploaded["parts"]?[1]?["contentType"] == "text/csv")
        #expect(status["hits"] == 3)
    }

    /// The README's embedding hooks compile with `import Hydra` alone and do what they say.
    @Test func theReadmeHooksRun() async throws {
        let engine = try makeEngine(#", "apis": {"orders": {"server": "testsvr", "endpoint": "/echo/orders"}}"#)
        defer { engine.shutdown() }
        try installReadmeHooks(on: engine)
        let done = try await engine.run(spec(#"{"type":"remote","api":"orders"}"#))
        #expect(done.result?["body"]?["headers"]?["x-signature"] == "signed-1", "\(done.json)")
    }
}
