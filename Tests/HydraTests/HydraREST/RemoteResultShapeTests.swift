import Foundation
import Testing

@testable import Hydra
@testable import HydraCore
@testable import HydraHTTP
@testable import HydraREST

/// What a remote job's result holds (protocol §4): the dogma a body gets
/// when none is named, and the effective `url`.
@Suite(.ownThreads) struct RemoteResultShapeTests {
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

    /// The journal's copy of a remote result is encoded without building it;
    /// it must be the built result's JSON, byte for byte: repeated and odd
    /// header fields, escapes, a saved file, a fractional time.
    @Test func theJournalsEncodingIsTheBuiltResultsJSON() throws {
        let headers = HTTPHeaderBlock([
            HTTPHeader("Content-Type", "application/json"), HTTPHeader("Set-Cookie", "a=1"),
            HTTPHeader("X-Quote", #"say "hi"\ \u{01}"#), HTTPHeader("set-cookie", "b=2"), HTTPHeader("X-Ünï", "ç"),
        ])
        // Plain ASCII without a repeated field: written straight from the block's bytes.
        let plain = HTTPHeaderBlock([
            HTTPHeader("Content-Type", "application/json"), HTTPHeader("X-Quote", #"say "hi"\ \u{01}\t"#),
            HTTPHeader("ETag", "\"abc\""), HTTPHeader("x-empty", ""),
        ])
        // Fields of the same length that differ; a non-ASCII value only at the
        // end (what was written before it is dropped); a repeat only at the end.
        let lateNonASCII = HTTPHeaderBlock([
            HTTPHeader("Date", "Wed, 25 Nov 2026 18:08:32 GMT"), HTTPHeader("ETag", "\"6b07\""),
            HTTPHeader("Server", "nginx"), HTTPHeader("X-Name", "José"),
        ])
        let lateRepeat = HTTPHeaderBlock([
            HTTPHeader("Date", "d"), HTTPHeader("ETag", "e"), HTTPHeader("Server", "nginx"), HTTPHeader("DATE", "again"),
        ])
        let value: JSONValue = ["text": "line\nnext \"q\" \u{7f} ✓", "n": 1.25, "list": [1, nil, true]]
        // A body parsed, and one kept as its bytes (see `JSONBody`).
        let kept = try JSONBody(reading: Array(#"{"text":"line\nnext \"q\" ✓","n":1.25,"list":[1,null,true]}"#.utf8))
        #expect(kept.keptText != nil, "a compact body was parsed, not kept")
        for body in [JSONBody(value), kept] {
        for headers in [headers, plain, lateNonASCII, lateRepeat, HTTPHeaderBlock()] {
        for file in [nil, (path: "/var/hydra/a \"b\".bin", bytes: 12)] as [(path: String, bytes: Int)?] {
            let result = RemoteResult(status: 203, headers: headers, body: body, file: file, attempts: 2,
                                      elapsedMs: 12.345678, url: "http://h/p?q=\"x\"&u=ü")
            var encoded: [UInt8] = []
            result.encode(into: &encoded)
            #expect(String(decoding: encoded, as: UTF8.self) == JSONWriter.string(result.build()))
            let job = JobResult(jobId: "j1", deferred: result)
            #expect(job.encodedJSON() == JSONWriter.bytes(job.json))
            #expect(result.encodedSize(limit: .max).map { $0 >= encoded.count } == true)
        }
        }
        }
        let failed = JobResult(jobId: "j2", state: .failed, result: ["partial": 1],
                               error: JobError(.http, "HTTP 500", stepPath: "0"))
        #expect(failed.encodedJSON() == JSONWriter.bytes(failed.json))
        let cancelled = JobResult(jobId: "j3", state: .cancelled, result: nil, error: JobError(.cancelled, "cancelled"))
        #expect(cancelled.encodedJSON() == JSONWriter.bytes(cancelled.json))
    }

    /// Generated header blocks (names in any case, repeated or not; values
    /// with quotes, backslashes, control bytes, DEL and now and then a
    /// non-ASCII letter): the encoding written from the block's bytes is the
    /// built result's JSON, byte for byte, whichever way each block goes.
    @Test func generatedHeaderBlocksEncodeAsTheBuiltResult() {
        var random = SeededRandom(seed: 0x4865_6164_6572_7321)
        let names = ["Content-Type", "ETag", "date", "X-Trace", "SERVER", "x-a", "Set-Cookie", "Q"]
        let pieces = ["a", "Z", "0", " ", "\"", "\\", "\t", "\u{01}", "\u{1F}", "\u{7F}", "/", ";", "=", "é", "abcdefghij"]
        var fast = 0
        for _ in 0..<600 {
            var fields: [HTTPHeader] = []
            for _ in 0..<Int.random(in: 0...10, using: &random) {
                var name = names.randomElement(using: &random)!
                if Bool.random(using: &random) { name = Bool.random(using: &random) ? name.uppercased() : name.lowercased() }
                // Non-ASCII now and then, not in every other block.
                let allowed = Int.random(in: 0..<4, using: &random) == 0 ? pieces : pieces.filter { $0 != "é" }
                let value = (0..<Int.random(in: 0...12, using: &random)).map { _ in allowed.randomElement(using: &random)! }.joined()
                fields.append(HTTPHeader(name, value))
            }
            let result = RemoteResult(status: 200, headers: HTTPHeaderBlock(fields), body: JSONBody(.null), file: nil,
                                      attempts: 1, elapsedMs: 1, url: "http://h/")
            var encoded: [UInt8] = []
            result.encode(into: &encoded)
            let expected = JSONWriter.string(result.build())
            #expect(String(decoding: encoded, as: UTF8.self) == expected, "\(fields)")
            let block = result.headers.bytes
            if !block.contains(where: { $0 >= 0x80 }), Set(fields.map { $0.name.lowercased() }).count == fields.count { fast += 1 }
        }
        // Both ways were taken, many times each.
        #expect(fast > 100 && fast < 500, "\(fast) of 600 blocks could be written from their bytes")
    }

    /// The path a full URL's dummy responses are matched on.
    @Test func thePathOfAURL() {
        let cases: [(String, String)] = [
            ("http://h/a/b?q=1", "/a/b?q=1"), ("http://h", "/"), ("https://h:8080/", "/"), ("x", "x"),
            ("a:/b://c/d", "/d"), ("http://ü.example/é", "/é"), ("http:/h/a", "http:/h/a"),
        ]
        for (url, path) in cases { #expect(RouteResolver.pathOf(url: url) == path, "\(url)") }
    }

    @Test func textualMediaTypes() {
        for type in ["text/plain", "text/html; charset=utf-8", "application/xml", "application/atom+xml",
                     "application/javascript", "application/x-www-form-urlencoded", " TEXT/CSV ",
                     "\tApplication/Atom+XML ; charset=x", "multipart/form-data; boundary=b", "", " ; x=1"] {
            #expect(DogmaResponse.isTextual(contentType: type), "\(type)")
        }
        for type in ["application/octet-stream", "image/png", "application/pdf", "application/xmlish", "textual/plain",
                     "application/javascript2", "xml"] {
            #expect(!DogmaResponse.isTextual(contentType: type), "\(type)")
        }
    }
}
