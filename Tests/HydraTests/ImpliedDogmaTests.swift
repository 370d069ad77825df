import Foundation
import Testing

@testable import Hydra
@testable import HydraREST

/// The dogma a response gets when none is named (protocol §4 Dogmas).
@Suite struct ImpliedDogmaTests {
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
