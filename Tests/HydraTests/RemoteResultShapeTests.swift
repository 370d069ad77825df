import Foundation
import Testing

@testable import Hydra
@testable import HydraREST

/// What a remote job's result holds (protocol §4): the dogma a body gets
/// when none is named, and the effective `url`.
@Suite struct RemoteResultShapeTests {
    @Test func theResultSaysWhereTheBodyCameFrom() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let direct = try await engine.run(spec(#"{"type":"remote","endpoint":"/items"}"#))
        #expect(direct.result?["url"] == .string(TestServer.base + "/items"))
        let redirected = try await engine.run(spec(#"{"type":"remote","endpoint":"/redirect/2"}"#))
        #expect(redirected.result?["url"] == .string(TestServer.base + "/redirect/0"))
        #expect(redirected.result?["body"] == ["redirected": true])
    }

    @Test func aBinaryBodyIsRawTextIsTextJSONIsJSON() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let binary = try await engine.run(spec(#"{"type":"remote","endpoint":"/large/300"}"#))
        #expect(binary.state == .succeeded, "\(String(describing: binary.error))")
        let base64 = try #require(binary.result?["body"]?.stringValue)
        #expect(Data(base64Encoded: base64)?.count == 300)
        let text = try await engine.run(spec(#"{"type":"remote","endpoint":"/text"}"#))
        #expect(text.result?["body"]?.stringValue != nil)
        let json = try await engine.run(spec(#"{"type":"remote","api":"items"}"#))
        #expect(json.result?["body"]?["count"] == 3)
        // defaults.dogma wins over the Content-Type.
        let configured = try makeEngine(#", "defaults": {"server": "testsvr", "dogma": "text"}"#)
        defer { configured.shutdown() }
        let asText = try await configured.run(spec(#"{"type":"remote","api":"items"}"#))
        #expect(asText.result?["body"]?.stringValue?.contains("\"count\"") == true)
    }

    @Test func textualMediaTypes() {
        for type in ["text/plain", "text/html; charset=utf-8", "application/xml", "application/atom+xml",
                     "application/javascript", "application/x-www-form-urlencoded", " TEXT/CSV "] {
            #expect(DogmaResponse.isTextual(contentType: type), "\(type)")
        }
        for type in ["application/octet-stream", "image/png", "application/pdf"] {
            #expect(!DogmaResponse.isTextual(contentType: type), "\(type)")
        }
    }
}
