import Crypto
import Foundation
import Testing

@testable import Hydra

/// Uploads (rest.md §2): multipart forms and raw bodies streamed from files
/// under the state folder, parsed on the server side by Python's `email`
/// parser (`/upload`), with `Content-MD5` and gzip checked there.
@Suite(.ownThreads) struct UploadTests {
    /// A state folder with `uploads/a.bin` (`size` random bytes); returns the folder and the file's SHA-256.
    func stateWithFile(size: Int) throws -> (String, String) {
        let folder = NSTemporaryDirectory() + "hydra-upload-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder + "/uploads", withIntermediateDirectories: true)
        var bytes = [UInt8](repeating: 0, count: size)
        for i in bytes.indices { bytes[i] = UInt8.random(in: 0...255) }
        try Data(bytes).write(to: URL(fileURLWithPath: folder + "/uploads/a.bin"))
        return (folder, SHA256.hash(data: bytes).map { String(format: "%02x", $0) }.joined())
    }

    @Test func aMultipartFormStreamsItsFilePartsWithContentMD5() async throws {
        let (state, sha) = try stateWithFile(size: 300_000)
        let engine = try makeEngine(state: state)
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let done = try await engine.run(spec("""
            {"type": "remote", "method": "POST", "endpoint": "/upload", "bodyEncoding": "multipart", "contentMD5": true,
             "body": {"parts": [{"name": "meta", "value": {"a": 1}},
                                {"name": "note", "value": "plain text"},
                                {"name": "file", "file": "uploads/a.bin", "filename": "a.bin", "contentType": "application/octet-stream"},
                                {"name": "again", "file": "uploads/a.bin"}]}}
            """))
        #expect(done.state == .succeeded, "\(String(describing: done.error))")
        let body = try #require(done.result?["body"])
        #expect(body["md5ok"] == true)
        #expect(body["contentType"]?.stringValue?.hasPrefix("multipart/form-data; boundary=") == true)
        let parts = try #require(body["parts"]?.arrayValue)
        #expect(parts.count == 4)
        #expect(parts[0]["name"] == "meta" && parts[0]["text"] == #"{"a":1}"# && parts[0]["contentType"] == "application/json")
        #expect(parts[1]["name"] == "note" && parts[1]["text"] == "plain text" && parts[1]["filename"] == .null)
        #expect(parts[2]["filename"] == "a.bin" && parts[2]["bytes"] == 300_000 && parts[2]["sha256"] == .string(sha))
        #expect(parts[3]["filename"] == "a.bin" && parts[3]["sha256"] == .string(sha))
        // 64 KiB and more: upload progress.
        let progress = log.all.filter { $0.rootJobId == done.jobId && $0.name == "job.progress" && $0.fields["upload"] == true }
        #expect(!progress.isEmpty)
    }

    @Test func aRawBodyFileIsStreamedGzippedAndDigested() async throws {
        let (state, sha) = try stateWithFile(size: 1_000_000)
        let engine = try makeEngine(state: state)
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        /// The last upload progress of a job: (bytes, totalBytes).
        func lastUpload(_ job: JobResult) -> (JSONValue?, JSONValue?) {
            let last = log.all.last { $0.rootJobId == job.jobId && $0.name == "job.progress" && $0.fields["upload"] == true }
            return (last?.fields["bytes"], last?.fields["totalBytes"])
        }
        let plain = try await engine.run(spec(#"{"type":"remote","method":"PUT","endpoint":"/upload","bodyFile":"uploads/a.bin"}"#))
        #expect(lastUpload(plain) == (1_000_000, 1_000_000))
        #expect(plain.result?["body"]?["sha256"] == .string(sha) && plain.result?["body"]?["method"] == "PUT")
        // Through a 307 the body is sent again from its first byte, whoever follows the
        // redirect (a credential header makes Hydra's client follow it, not curl).
        let upload = (TestServer.url("/upload").addingPercentEncoding(withAllowedCharacters: .alphanumerics))!
        for headers in [#"{}"#, #"{"X-Api-Key":"key-value-79"}"#] {
            let redirected = try await engine.run(spec(#"{"type":"remote","method":"PUT","url":"\#(TestServer.url("/redirect-to?status=307&to=\(upload)"))","bodyFile":"uploads/a.bin","headers":\#(headers)}"#))
            #expect(redirected.result?["body"]?["sha256"] == .string(sha) && redirected.result?["body"]?["method"] == "PUT",
                    "\(headers): \(String(describing: redirected.error))")
        }
        #expect(plain.result?["body"]?["contentType"] == "application/octet-stream")
        #expect(plain.result?["body"]?["md5ok"] == .null)
        let packed = try await engine.run(spec("""
            {"type":"remote","method":"POST","endpoint":"/upload","bodyFile":"uploads/a.bin","gzipBody":true,"contentMD5":true,
             "headers":{"Content-Type":"application/x-test"}}
            """))
        let body = try #require(packed.result?["body"])
        #expect(body["contentEncoding"] == "gzip" && body["md5ok"] == true && body["sha256"] == .string(sha))
        #expect(body["contentType"] == "application/x-test")
        // Compressed on the way out, its size unknown beforehand: the last report still says all of it went.
        #expect(lastUpload(packed).0 == body["bytes"] && lastUpload(packed).1 == body["bytes"], "\(lastUpload(packed)) \(String(describing: body["bytes"]))")
        // A JSON body too: gzip and Content-MD5 of what is sent.
        let small = try await engine.run(spec(#"{"type":"remote","method":"POST","endpoint":"/upload","body":{"x":1},"gzipBody":true,"contentMD5":true}"#))
        #expect(small.result?["body"]?["md5ok"] == true && small.result?["body"]?["contentEncoding"] == "gzip")
        let expected = SHA256.hash(data: Array(#"{"x":1}"#.utf8)).map { String(format: "%02x", $0) }.joined()
        #expect(small.result?["body"]?["sha256"] == .string(expected))
        // Retried attempts send the whole file again.
        let key = UUID().uuidString
        let retried = try await engine.run(spec("""
            {"type":"remote","method":"POST","endpoint":"/flaky/\(key)/1","bodyFile":"uploads/a.bin",
             "retry":{"maxAttempts":2,"backoffMs":1}}
            """))
        #expect(retried.state == .succeeded && retried.result?["attempts"] == 2)
    }

    /// rest.md §1 and §2: a streamed body (`bodyFile`, and a multipart form with
    /// a file part) that gets a 401 is sent again whole with the new token. The
    /// provider revokes the session's token before each upload, so the first
    /// request (its body read in full by the server) gets a 401; the session gets
    /// a new token and the same request goes again, from the body's first byte.
    /// Would catch: a re-send after the 401 that carries no body, or the rest of a
    /// body already read (the digests would not match the file), files closed
    /// after the first request (the job would fail), and the re-send counted as
    /// an attempt.
    @Test func aStreamedBodyIsSentAgainWholeAfterA401() async throws {
        let (state, sha) = try stateWithFile(size: 300_000)
        let key = UUID().uuidString
        // An hour's token: what ends each one is the revocation.
        let engine = try makeEngine("""
            , "auth": {"svc": {"type": "oauth2-client-credentials", "tokenUrl": "\(TestServer.base)/oauth/token?key=\(key)&ttl=3600",
                               "clientId": "app", "clientSecret": "s3cret"}}
            """, state: state)
        defer { engine.shutdown() }
        func count(_ name: String) async throws -> JSONValue? {
            try await engine.run(spec(#"{"type":"remote","endpoint":"/count/\#(name)"}"#)).result?["body"]?["count"]
        }
        let primed = try await engine.run(spec(#"{"type":"remote","endpoint":"/protected/x","query":{"key":"\#(key)"},"auth":"svc"}"#))
        #expect(primed.state == .succeeded, "\(String(describing: primed.error))")
        let bodies = [
            #""bodyFile":"uploads/a.bin""#,
            #""bodyEncoding":"multipart","body":{"parts":[{"name":"meta","value":{"a":1}},{"name":"file","file":"uploads/a.bin"}]}"#,
        ]
        for (i, body) in bodies.enumerated() {
            _ = try await engine.run(spec(#"{"type":"remote","endpoint":"/oauth/revoke","query":{"key":"\#(key)"}}"#))
            let sent = try await engine.run(spec(
                #"{"type":"remote","method":"POST","endpoint":"/upload","query":{"auth":"\#(key)"},"auth":"svc",\#(body)}"#))
            #expect(sent.state == .succeeded, "\(body): \(String(describing: sent.error))")
            #expect(sent.result?["attempts"] == 1, "\(body)")
            #expect(try await count("upload-401:\(key)") == .int(i + 1), "\(body): no 401 came first")
            let answer = try #require(sent.result?["body"], "\(body)")
            if i == 0 {
                #expect(answer["bytes"] == 300_000 && answer["sha256"] == .string(sha), "\(answer)")
            } else {
                let parts = try #require(answer["parts"]?.arrayValue, "\(answer)")
                #expect(parts.count == 2 && parts[0]["text"] == #"{"a":1}"#, "\(parts)")
                #expect(parts.last?["bytes"] == 300_000 && parts.last?["sha256"] == .string(sha), "\(parts)")
            }
        }
        #expect(try await count("upload:\(key)") == 2)
        #expect(try await count("token:\(key)") == 3)  // the first token, then one per 401
    }

    @Test func uploadPathsStayInsideTheStateFolder() async throws {
        let (state, _) = try stateWithFile(size: 10)
        try FileManager.default.createSymbolicLink(atPath: state + "/uploads/passwd", withDestinationPath: "/etc/passwd")
        try FileManager.default.createSymbolicLink(atPath: state + "/outside", withDestinationPath: "/etc")
        try Data("db".utf8).write(to: URL(fileURLWithPath: state + "/hydra.db"))
        let engine = try makeEngine(state: state)
        defer { engine.shutdown() }
        func refusal(_ json: String) -> (String, String)? { engine.refusal(json) }
        let cases: [(String, String, String)] = [
            (#""bodyFile":"../etc/passwd""#, "bodyFile", "no '..'"),
            (#""bodyFile":"/etc/passwd""#, "bodyFile", "relative"),
            (#""bodyFile":"uploads/missing.bin""#, "bodyFile", "no file"),
            (#""bodyFile":"uploads/passwd""#, "bodyFile", "symbolic link"),
            (#""bodyFile":"outside/passwd""#, "bodyFile", "links are never followed"),
            (#""bodyFile":"hydra.db""#, "bodyFile", "server owns"),
            (#""bodyFile":"uploads""#, "bodyFile", "not a regular file"),
            (#""bodyEncoding":"multipart","body":{"parts":[{"name":"f","file":"../x"}]}"#, "body.parts[0].file", "no '..'"),
            (#""bodyEncoding":"multipart","body":{"parts":[{"name":"f","file":"a","value":1}]}"#, "body.parts[0].value", "exactly one"),
            (#""bodyEncoding":"multipart","body":{"parts":[]}"#, "body.parts", "must not be empty"),
            (#""bodyEncoding":"multipart","body":{"files":[]}"#, "body.parts", "required"),
            (#""bodyFile":"uploads/a.bin","body":"x""#, "bodyFile", "not both"),
            // Each part on its own: a reference in another part (or in a value) does not defer a literal file.
            (#""bodyEncoding":"multipart","body":{"parts":[{"name":"m","value":"${input.meta}"},{"name":"f","file":"uploads/missing.bin"}]}"#,
             "body.parts[1].file", "no file"),
            (#""bodyEncoding":"multipart","body":{"parts":["${input.part}",{"name":"f","file":"../x","filename":"${input.n}"}]}"#,
             "body.parts[1].file", "no '..'"),
            (#""bodyEncoding":"multipart","body":{"parts":[{"name":"${input.n}"},{"name":"f","file":"uploads/a.bin"}]}"#,
             "body.parts[0].value", "exactly one"),
        ]
        for (members, path, reason) in cases {
            let found = refusal(#"{"type":"remote","method":"POST","endpoint":"/upload",\#(members)}"#)
            #expect(found?.0 == path && found?.1.contains(reason) == true, "\(members): \(String(describing: found))")
        }
        // From a reference: checked as the job runs, kind invalid.
        let referenced = try await engine.run(spec("""
            {"type":"serial","steps":[{"type":"local","name":"echo","input":"uploads/passwd"},
              {"type":"remote","method":"POST","endpoint":"/upload","bodyFile":"${prev}"}]}
            """))
        #expect(referenced.state == .failed && referenced.error?.kind == .invalid)
        #expect(referenced.error?.message.contains("bodyFile") == true && referenced.error?.message.contains("symbolic link") == true, "\(String(describing: referenced.error))")
        // A part's file from a reference: accepted at submit, kind invalid naming the part when it runs.
        let part = try await engine.run(spec("""
            {"type":"serial","steps":[{"type":"local","name":"echo","input":"uploads/missing.bin"},
              {"type":"remote","method":"POST","endpoint":"/upload","bodyEncoding":"multipart",
               "body":{"parts":[{"name":"m","value":"x"},{"name":"f","file":"${prev}"}]}}]}
            """))
        #expect(part.state == .failed && part.error?.kind == .invalid, "\(String(describing: part.error))")
        #expect(part.error?.message.contains("body.parts[1].file") == true, "\(String(describing: part.error))")
    }

    @Test func aBigUploadReachesASinkWhole() async throws {
        let (state, sha) = try stateWithFile(size: 8 << 20)
        let engine = try makeEngine(state: state)
        defer { engine.shutdown() }
        let done = try await engine.run(spec(#"{"type":"remote","method":"POST","endpoint":"/sink","bodyFile":"uploads/a.bin"}"#))
        #expect(done.result?["body"]?["bytes"] == .int(8 << 20) && done.result?["body"]?["sha256"] == .string(sha))
        // Gzipped on the way, sent chunked: the sink sees the compressed bytes.
        let packed = try await engine.run(spec(#"{"type":"remote","method":"POST","endpoint":"/sink","bodyFile":"uploads/a.bin","gzipBody":true}"#))
        #expect(packed.state == .succeeded)
        #expect((packed.result?["body"]?["bytes"]?.intValue ?? 0) > 8 << 20)  // random bytes grow a little
    }
}
