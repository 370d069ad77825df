import Foundation
import Synchronization
import Testing

@testable import Hydra
@testable import HydraREST

/// Remote jobs against the real local test server, through the real engine.
@Suite(.ownThreads) struct RemoteJobTests {
    /// libcurl 7.88 keeps the receive buffer of a handle taken off the multi
    /// while it waited for a connection slot, and then refuses the 64 KiB
    /// buffer a download to a file asks for: the next `saveAs` on that handle
    /// failed at once ("request option rejected: A libcurl function was given
    /// a bad argument"; 31 jobs in a crash soak).
    @Test func aDownloadAfterAJobCancelledWaitingForAConnectionSucceeds() async throws {
        let engine = try makeEngine(#", "workers": [{"name": "rest", "kind": "remote", "maxHostConnections": 1}, {"name": "local", "kind": "local"}]"#)
        defer { engine.shutdown() }
        let holding = try engine.submit(spec(#"{"type":"remote","endpoint":"/delay/1500"}"#))
        try await waitUntil { engine.scheduler.runningJobs == 1 }
        // Waits for the one connection, and is cancelled while it waits.
        let waiting = try engine.submit(spec(#"{"type":"remote","endpoint":"/delay/10"}"#))
        try await waitUntil { engine.scheduler.runningJobs == 2 }
        try await Task.sleep(for: .milliseconds(100))  // in curl's queue for the connection
        #expect(await engine.cancel(waiting) == .cancelled)
        #expect(await engine.result(of: waiting)?.state == .cancelled)
        // The next transfer takes that handle (the last one freed) and writes to a file.
        let saved = try await engine.run(spec(#"{"type":"remote","endpoint":"/large/200000","saveAs":"downloads/after-pending.bin"}"#))
        #expect(saved.state == .succeeded, "\(saved.error.map { "\($0)" } ?? "")")
        #expect(await engine.result(of: holding)?.state == .succeeded)
    }

    /// The submit-time reference scan tells the coordinator which root leaves
    /// it may send as they are (`plainLeaf`); in a batch, each job keeps its own
    /// answer: the plain one is sent untouched, the one with a reference resolved.
    @Test func aBatchOfPlainAndReferencingJobsResolvesOnlyWhatReferences() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let plain = try spec(#"{"type":"remote","endpoint":"/echo","headers":{"X-Plain":"$"}}"#)
        let referencing = try spec(#"{"type":"remote","endpoint":"/echo","headers":{"X-N":"${input.n}"}}"#)
        let results = Mutex<[String: JobResult]>([:])
        let ids = try engine.submit(batch: [plain, referencing, plain], input: ["n": 7]) { result in
            results.withLock { $0[result.jobId] = result }
        }
        try await waitUntil { results.withLock { $0.count } == 3 }
        let byId = results.withLock { $0 }
        let first = try #require(byId[ids[0]]?.result?["body"]?["headers"])
        let second = try #require(byId[ids[1]]?.result?["body"]?["headers"])
        #expect(first["x-plain"] == "$")
        #expect(first["x-n"] == nil)
        #expect(second["x-n"] == "7")
        #expect(byId[ids[2]]?.state == .succeeded)
    }

    /// Protocol §6: `job.succeeded` leaves a remote result's body out above
    /// 64 KiB, not at it: a text body by its bytes, whatever its JSON escaping
    /// (65,535 bytes were left out, their quotes counted; 60,000 quotes, 120 KB
    /// once escaped, too). `job.result` always has the whole body.
    @Test func anEventLeavesOutOnlyABodyAbove64KiB() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        for (query, kept) in [("bytes=65535", true), ("bytes=65536", true), ("bytes=65537", false),
                              ("bytes=60000&fill=%22", true), ("bytes=70000&fill=%0A", false)] {
            let done = try await engine.run(spec(#"{"type":"remote","endpoint":"/text?\#(query)"}"#))
            let size = done.result?["body"]?.stringValue?.utf8.count
            #expect(done.state == .succeeded && size == Int(query.dropFirst(6).prefix { $0.isNumber }), "\(query)")
            let event = try #require(log.all.last { $0.rootJobId == done.jobId && $0.name == "job.succeeded" })
            let result = try #require(event.fields["result"])
            #expect((result["body"] != nil) == kept && (result["bodyOmitted"] == true) == !kept, "\(query)")
            #expect(result["status"] == 200)
        }
    }

    @Test func getDecodesJSONAndReportsResultShape() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let result = try await engine.run(spec(#"{"type":"remote","api":"items"}"#))
        #expect(result.state == .succeeded)
        let r = try #require(result.result)
        #expect(r["status"] == 200)
        #expect(r["body"]?.value(atPath: "items.1.name") == "two")
        #expect(r["headers"]?["content-type"] == "application/json")
        #expect(r["fromCache"] == false)
        #expect(r["attempts"] == 1)
        #expect(r["elapsedMs"]?.doubleValue != nil)
    }

    @Test func addressQueryHeadersAndJSONBody() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let result = try await engine.run(spec("""
            {"type":"remote","api":"echo","pathVars":{"name":"a b/c"},"query":{"q":"x&y","n":3},
             "headers":{"X-Trace":"t1"},"body":{"k":[1,2]}}
            """))
        let body = try #require(result.result?["body"])
        #expect(body["method"] == "POST")
        #expect(body["path"] == "/echo/a%20b%2Fc")
        #expect(body["query"]?["q"] == "x&y")
        #expect(body["query"]?["n"] == "3")
        #expect(body["headers"]?["x-trace"] == "t1")
        #expect(body["headers"]?["x-api"] == "echo")
        #expect(body["headers"]?["user-agent"] == .string("hydra/\(HydraVersion.string)"))
        #expect(body["headers"]?["content-type"] == "application/json")
        #expect(body["json"] == ["k": [1, 2]])
    }

    @Test func formTextAndBase64Bodies() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let form = try await engine.run(spec(#"{"type":"remote","method":"PUT","endpoint":"/echo","body":{"a":"1 2","b":"é"},"bodyEncoding":"form"}"#))
        #expect(form.result?["body"]?["form"] == ["a": "1 2", "b": "é"])
        let text = try await engine.run(spec(#"{"type":"remote","method":"POST","endpoint":"/echo","body":"plain","bodyEncoding":"text"}"#))
        #expect(text.result?["body"]?["body"] == "plain")
        let b64 = try await engine.run(spec(#"{"type":"remote","method":"POST","endpoint":"/echo","body":"aGk=","bodyEncoding":"base64"}"#))
        #expect(b64.result?["body"]?["body"] == "hi")
        // The method may be a reference too: checked once resolved.
        let method = try spec(#"{"type":"remote","method":"${input.m}","endpoint":"/echo"}"#)
        #expect(try await engine.run(method, input: ["m": "patch"]).result?["body"]?["method"] == "PATCH")
        let bad = try await engine.run(method, input: ["m": "GE T"])
        #expect(bad.state == .failed && bad.error?.kind == .invalid && bad.error?.message.contains("method") == true)
    }

    @Test func dogmas() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let text = try await engine.run(spec(#"{"type":"remote","endpoint":"/text"}"#))
        #expect(text.result?["body"] == "hello, hydra")
        let raw = try await engine.run(spec(#"{"type":"remote","endpoint":"/text","dogma":"raw"}"#))
        #expect(raw.result?["body"] == .string(Data("hello, hydra".utf8).base64EncodedString()))
        struct Upper: Dogma {
            let name = "upper"
            func decode(_ response: DogmaResponse) throws -> JSONValue {
                .string(String(decoding: response.body, as: UTF8.self).uppercased())
            }
        }
        engine.register(dogma: Upper())
        let custom = try await engine.run(spec(#"{"type":"remote","endpoint":"/text","dogma":"upper"}"#))
        #expect(custom.result?["body"] == "HELLO, HYDRA")

        // A dogma that encodes request bodies: its bytes and content type go on the wire.
        struct Pipes: Dogma {
            let name = "pipes"
            func encode(body: JSONValue) throws -> (bytes: [UInt8], contentType: String)? {
                guard case .array(let items) = body else { throw DecodeError("pipes encodes arrays") }
                return (Array(items.map { Template.text(of: $0) }.joined(separator: "|").utf8), "text/x-pipes")
            }
            func decode(_ response: DogmaResponse) throws -> JSONValue { try JSONDogma().decode(response) }
        }
        engine.register(dogma: Pipes())
        let encoded = try await engine.run(spec(#"{"type":"remote","method":"POST","endpoint":"/echo","dogma":"pipes","body":["a",1,true]}"#))
        #expect(encoded.result?["body"]?["body"] == "a|1|true")
        #expect(encoded.result?["body"]?["headers"]?["content-type"] == "text/x-pipes")
        let refused = try await engine.run(spec(#"{"type":"remote","method":"POST","endpoint":"/echo","dogma":"pipes","body":{"k":1}}"#))
        #expect(refused.state == .failed)
        #expect(refused.error?.kind == .invalid)
        #expect(refused.error?.message.contains("pipes") == true)
    }

    @Test func failureKinds() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let network = try await engine.run(spec(#"{"type":"remote","url":"http://127.0.0.1:\#(TestServer.closedPort)/x"}"#))
        #expect(network.state == .failed)
        #expect(network.error?.kind == .network)

        let timeout = try await engine.run(spec(#"{"type":"remote","endpoint":"/delay/2000","timeoutMs":200}"#))
        #expect(timeout.error?.kind == .timeout)

        let http = try await engine.run(spec(#"{"type":"remote","endpoint":"/status/404"}"#))
        #expect(http.error?.kind == .http)
        #expect(http.error?.status == 404)
        #expect(http.error?.body == ["status": 404])

        let decode = try await engine.run(spec(#"{"type":"remote","endpoint":"/bad-json"}"#))
        #expect(decode.error?.kind == .decode)

        let invalid = try await engine.run(spec(#"{"type":"remote","url":"http://127.0.0.1:1/${input.missing}"}"#))
        #expect(invalid.error?.kind == .invalid)

        let expected = try await engine.run(spec(#"{"type":"remote","endpoint":"/status/404","expect":[404]}"#))
        #expect(expected.state == .succeeded)
        let unexpected = try await engine.run(spec(#"{"type":"remote","endpoint":"/items","expect":[201]}"#))
        #expect(unexpected.error?.kind == .http)

        // A connection closed inside the response's headers is no answer (curl 7.88
        // calls it a 200 with nothing): a network failure, retried like one.
        let cut = try await engine.run(spec(#"{"type":"remote","endpoint":"/cut-headers"}"#))
        #expect(cut.error?.kind == .network, "\(String(describing: cut.result))")
    }

    @Test func retriesFlakyServerWithBackoffAndCountsAttempts() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let key = UUID().uuidString
        let result = try await engine.run(spec(#"{"type":"remote","endpoint":"/flaky/\#(key)/2","retry":{"maxAttempts":3,"backoffMs":20,"maxBackoffMs":100}}"#))
        #expect(result.state == .succeeded)
        #expect(result.result?["attempts"] == 3)
        let retrying = log.all.filter { $0.name == "job.retrying" && $0.rootJobId == result.jobId }
        #expect(retrying.map { $0.fields["attempt"] } == [2, 3])
        #expect(retrying.first?.fields["error"]?["status"] == 503)

        let key2 = UUID().uuidString
        let exhausted = try await engine.run(spec(#"{"type":"remote","endpoint":"/flaky/\#(key2)/5","retry":{"maxAttempts":2,"backoffMs":10}}"#))
        #expect(exhausted.error?.kind == .http)
        #expect(exhausted.error?.status == 503)
    }

    @Test func workerLocalNameAndDogmaMayBeReferences() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let local = try await engine.run(spec(#"{"type":"local","name":"${input.job}","worker":"${input.worker}","input":5}"#),
                                         input: ["job": "echo", "worker": "local"])
        #expect(local.result == 5)
        let text = try await engine.run(spec(#"{"type":"remote","endpoint":"/echo","dogma":"${input.d}"}"#), input: ["d": "text"])
        #expect(text.result?["body"]?.stringValue?.contains("\"path\"") == true)
        // Unknown once resolved: the step fails, kind invalid, and nothing is sent.
        let key = UUID().uuidString
        let noDogma = try await engine.run(spec(#"{"type":"remote","endpoint":"/hits/\#(key)","dogma":"${input.d}"}"#), input: ["d": "zzz"])
        #expect(noDogma.error?.kind == .invalid && noDogma.error?.message.contains("zzz") == true)
        #expect(try await engine.run(spec(#"{"type":"remote","endpoint":"/count/\#(key)"}"#)).result?["body"] == ["count": 0])
        let noJob = try await engine.run(spec(#"{"type":"local","name":"${input.job}"}"#), input: ["job": "nope"])
        #expect(noJob.error?.kind == .invalid && noJob.error?.message.contains("nope") == true)
        let noWorker = try await engine.run(spec(#"{"type":"local","name":"echo","worker":"${input.w}"}"#), input: ["w": "rest"])
        #expect(noWorker.error?.kind == .invalid && noWorker.error?.message.contains("rest") == true)
    }

    @Test func aPartialRetryKeepsTheApisOtherFields() async throws {
        // The api allows 3 attempts; the job only shortens the backoff: still 3 attempts.
        let engine = try makeEngine(#", "apis": {"flaky": {"server": "testsvr", "endpoint": "/flaky/:k/2", "retry": {"maxAttempts": 3, "backoffMs": 5}}}"#)
        defer { engine.shutdown() }
        let result = try await engine.run(spec(#"{"type":"remote","api":"flaky","pathVars":{"k":"\#(UUID().uuidString)"},"retry":{"backoffMs":1}}"#))
        #expect(result.state == .succeeded)
        #expect(result.result?["attempts"] == 3)
    }

    @Test func neverRetriesOtherClientErrors() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let key = UUID().uuidString
        let result = try await engine.run(spec(#"{"type":"remote","endpoint":"/count-status/\#(key)/404","retry":{"maxAttempts":4,"backoffMs":10}}"#))
        #expect(result.error?.status == 404)
        let count = try await engine.run(spec(#"{"type":"remote","endpoint":"/count/\#(key)"}"#))
        #expect(count.result?["body"]?["count"] == 1)
    }

    @Test func honoursRetryAfterOn429() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let key = UUID().uuidString
        let started = Date()
        let result = try await engine.run(spec(#"{"type":"remote","endpoint":"/flaky/\#(key)/1?status=429&retryAfter=1","retry":{"maxAttempts":2,"backoffMs":1}}"#))
        #expect(result.state == .succeeded)
        #expect(Date().timeIntervalSince(started) >= 0.9)
        #expect(log.all.first { $0.name == "job.retrying" }?.fields["delayMs"] == 1000)
    }

    /// Hydra asks for gzip and deflate in one header line (given to curl as a
    /// header, not built by it per request) and curl still decodes both; a
    /// job's own `Accept-Encoding` replaces it rather than joining it.
    @Test func acceptEncodingIsSentOnceAndAJobsOwnReplacesIt() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let plain = try await engine.run(spec(#"{"type":"remote","endpoint":"/echo"}"#))
        #expect(plain.result?["body"]?["headers"]?["accept-encoding"] == "gzip, deflate")
        let own = try await engine.run(spec(#"{"type":"remote","endpoint":"/echo","headers":{"accept-encoding":"identity"}}"#))
        #expect(own.result?["body"]?["headers"]?["accept-encoding"] == "identity")
        let deflated = try await engine.run(spec(#"{"type":"remote","endpoint":"/deflate"}"#))
        #expect(deflated.result?["body"]?["compressed"] == true)
        #expect(deflated.result?["headers"]?["content-encoding"] == "deflate")
    }

    @Test func gzipRedirectsAndBearerAuth() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let gzip = try await engine.run(spec(#"{"type":"remote","endpoint":"/gzip"}"#))
        #expect(gzip.result?["body"]?["compressed"] == true)
        #expect(gzip.result?["headers"]?["content-encoding"] == "gzip")
        let redirected = try await engine.run(spec(#"{"type":"remote","endpoint":"/redirect/3"}"#))
        #expect(redirected.result?["body"] == ["redirected": true])
        let tooMany = try await engine.run(spec(#"{"type":"remote","endpoint":"/redirect/8"}"#))
        #expect(tooMany.error?.kind == .network)
        let denied = try await engine.run(spec(#"{"type":"remote","endpoint":"/bearer/s3cret"}"#))
        #expect(denied.error?.status == 401)
        let allowed = try await engine.run(spec(#"{"type":"remote","endpoint":"/bearer/s3cret","headers":{"Authorization":"Bearer ${input.token}"}}"#),
                                           input: ["token": "s3cret"])
        #expect(allowed.result?["body"] == ["authenticated": true])
    }

    @Test func saveAsStreamsToFileWithProgress() async throws {
        let state = NSTemporaryDirectory() + "hydra-save-\(UUID().uuidString)"
        let engine = try makeEngine(state: state)
        defer { engine.shutdown(); try? FileManager.default.removeItem(atPath: state) }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let result = try await engine.run(spec(#"{"type":"remote","endpoint":"/slow-body/40/5","saveAs":"downloads/big.bin"}"#))
        #expect(result.state == .succeeded)
        #expect(result.result?["bytes"] == .int(40 * 1024))
        let data = try #require(FileManager.default.contents(atPath: state + "/downloads/big.bin"))
        #expect(data.count == 40 * 1024)
        let progress = log.all.filter { $0.name == "job.progress" }
        #expect(!progress.isEmpty)
        #expect(progress.last?.fields["bytes"] == .int(40 * 1024))
        #expect(throws: ValidationError.self) {
            try engine.submit(spec(#"{"type":"remote","endpoint":"/x","saveAs":"../escape"}"#))
        }
        // The name of the server's temporary download files (removed at every start) is refused, at any depth.
        for name in [".hydra-download-x", "dl/.Hydra-Download-x"] {
            let refused = #expect(throws: ValidationError.self) {
                try engine.submit(spec(#"{"type":"remote","endpoint":"/x","saveAs":"\#(name)"}"#))
            }
            #expect(refused?.path == "saveAs" && refused?.reason.contains("temporary download files") == true, "\(String(describing: refused))")
        }
        #expect(throws: ValidationError(path: "cache", "only GET responses are cached (the method is POST)")) {
            try engine.submit(spec(#"{"type":"remote","method":"POST","endpoint":"/x","cache":{"mode":"only"}}"#))
        }
    }

    /// An answer a `saveAs` job does not expect keeps its body in `error.body`,
    /// decoded as any error body is (protocol §4): it was `null`, the body being
    /// in the discarded file. One past 1 MiB is left out; no file is left either way.
    @Test func anUnexpectedSaveAsAnswerKeepsItsBodyInTheError() async throws {
        let state = NSTemporaryDirectory() + "hydra-save-\(UUID().uuidString)"
        let engine = try makeEngine(state: state)
        defer { engine.shutdown(); try? FileManager.default.removeItem(atPath: state) }
        let missing = try await engine.run(spec(#"{"type":"remote","endpoint":"/status/404","saveAs":"downloads/nf.bin"}"#))
        #expect(missing.state == .failed && missing.error?.kind == .http && missing.error?.status == 404)
        #expect(missing.error?.body == ["status": 404], "\(String(describing: missing.error))")
        let text = try await engine.run(spec(#"{"type":"remote","endpoint":"/text?status=503&body=down","saveAs":"downloads/t.bin"}"#))
        #expect(text.error?.body == "down", "\(String(describing: text.error))")
        let big = try await engine.run(spec(#"{"type":"remote","endpoint":"/text?status=500&bytes=1048577","saveAs":"downloads/b.bin"}"#))
        #expect(big.error?.status == 500 && (big.error?.body ?? .null) == .null, "\(String(describing: big.error?.body).prefix(100))")
        // A body that echoes the job's credentials is kept, masked (it was left out: masking shortened it).
        let echoed = try await engine.run(spec(#"{"type":"remote","endpoint":"/echo/x","expect":[201],"headers":{"Authorization":"Bearer s3cr3t-tok"},"saveAs":"downloads/e.bin"}"#))
        let body = try #require(echoed.error?.body, "\(String(describing: echoed.error))")
        #expect(body["method"] == "GET" && !JSONWriter.string(body).contains("s3cr3t-tok"), "\(body)")
        let left = (try? FileManager.default.contentsOfDirectory(atPath: state + "/downloads")) ?? []
        #expect(left.isEmpty, "\(left)")

        // defaults.maxBodyBytes bounds what is read back too.
        let small = try makeEngine(#""defaults": {"server": "testsvr", "timeoutMs": 10000, "maxBodyBytes": 1000}"#, state: state)
        defer { small.shutdown() }
        let over = try await small.run(spec(#"{"type":"remote","endpoint":"/text?status=500&bytes=1001","saveAs":"downloads/o.bin"}"#))
        #expect(over.error?.status == 500 && (over.error?.body ?? .null) == .null)
        let within = try await small.run(spec(#"{"type":"remote","endpoint":"/text?status=500&bytes=1000","saveAs":"downloads/w.bin"}"#))
        #expect(within.error?.body?.stringValue?.utf8.count == 1000)
    }

    /// `text/json` (the older name) is JSON to the implied dogma, as
    /// `application/json` and `…+json` are; it was decoded as text.
    @Test func textJSONIsDecodedAsJSON() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let result = try await engine.run(spec(#"{"type":"remote","endpoint":"/text?type=text/json;%20charset=utf-8&body=%7B%22a%22:1%7D"}"#))
        #expect(result.result?["body"] == ["a": 1], "\(String(describing: result.result?["body"]))")
        let plain = try await engine.run(spec(#"{"type":"remote","endpoint":"/text?type=text/plain&body=%7B%22a%22:1%7D"}"#))
        #expect(plain.result?["body"] == #"{"a":1}"#)
    }

    /// Headers of one's own in `defaults.headers` keep Hydra's `User-Agent`
    /// (config.md shows it among the defaults); naming it replaces it, and `""` sends none.
    @Test func defaultHeadersKeepTheUserAgentUnlessTheyNameIt() async throws {
        let cases: [(String, JSONValue?)] = [(#"{"X-Def": "d"}"#, .string("hydra/\(HydraVersion.string)")),
                                             (#"{"user-agent": "mine/VERSION"}"#, .string("mine/\(HydraVersion.string)")),
                                             (#"{"User-Agent": ""}"#, nil)]
        for (headers, agent) in cases {
            let engine = try makeEngine(#""defaults": {"server": "testsvr", "headers": \#(headers)}"#)
            defer { engine.shutdown() }
            let sent = try await engine.run(spec(#"{"type":"remote","endpoint":"/echo"}"#)).result?["body"]?["headers"]
            #expect(sent?["user-agent"] == agent, "\(headers): \(String(describing: sent))")
            if headers.contains("X-Def") { #expect(sent?["x-def"] == "d") }
        }
    }

    @Test func aURLBelongsOnlyToTheServerItReallyStartsWith() async throws {
        // The same host with the port cut short is a textual prefix of the URL, not its server:
        // that server's headers must not go along.
        let decoy = String(TestServer.base.dropLast())
        let config = try Configuration(json: try JSONParser.parse("""
            {"servers": {"decoy": {"url": "\(decoy)", "headers": {"X-Decoy": "secret"}},
                         "real": {"url": "\(TestServer.base)", "headers": {"X-Real": "yes"}}}}
            """))
        let engine = try HydraEngine(configuration: config, stateDirectory: NSTemporaryDirectory() + "hydra-tests")
        defer { engine.shutdown() }
        let result = try await engine.run(spec(#"{"type":"remote","url":"\#(TestServer.base)/echo"}"#))
        #expect(result.result?["body"]?["headers"]?["x-decoy"] == nil)
        #expect(result.result?["body"]?["headers"]?["x-real"] == "yes")
    }

    @Test func largeUploadsAndDownloadsReportProgressSmallOnesDoNot() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let body = String(repeating: "x", count: 200_000)
        let upload = try await engine.run(spec(#"{"type":"remote","method":"POST","endpoint":"/echo","body":"\#(body)","bodyEncoding":"text"}"#))
        #expect(upload.state == .succeeded)
        let sent = log.all.filter { $0.name == "job.progress" && $0.jobId == upload.jobId && $0.fields["upload"] == true }
        #expect(sent.last?.fields["bytes"] == 200_000 && sent.last?.fields["totalBytes"] == 200_000)
        let download = try await engine.run(spec(#"{"type":"remote","endpoint":"/large/300000","dogma":"raw"}"#))
        #expect(download.state == .succeeded)
        let received = log.all.filter { $0.name == "job.progress" && $0.jobId == download.jobId }
        #expect(received.last?.fields["bytes"] == 300_000 && received.last?.fields["upload"] == nil)
        let small = try await engine.run(spec(#"{"type":"remote","endpoint":"/large/1000","dogma":"raw"}"#))
        #expect(small.state == .succeeded)
        #expect(!log.all.contains { $0.name == "job.progress" && $0.jobId == small.jobId })
    }

    @Test func cancelsATransferMidFlight() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let progress = engine.events(EventFilter(events: ["job.progress"]))
        // 100 s of body: mid-flight when its first progress comes, with room for a
        // stalled machine (the whole suite under TSan stalled for 40 s) to send the
        // cancel. The cancel ends it at once, so a normal run takes no longer.
        let id = try engine.submit(spec(#"{"type":"remote","endpoint":"/slow-body/400/250","timeoutMs":300000}"#))
        // Mid-flight: bytes have arrived, more are coming.
        try await nextEvent(in: progress) { $0.jobId == id }
        #expect(await engine.cancel(id) == .cancelled)
        let result = await engine.result(of: id)
        #expect(result?.state == .cancelled)
        #expect(result?.error?.kind == .cancelled)
        #expect(await engine.cancel(id) == .alreadyFinal)
        // The worker's slot frees once curl has really dropped the transfer.
        try await waitUntil { engine.workerStats().first { $0.name == "rest" }?.active == 0 }
    }

    @Test func dummyResponsesFromConfigAndHandlers() async throws {
        let engine = try makeEngine(#", "dummy": {"enabled": true, "responses": [{"server":"testsvr","endpoint":"/v1/hello/:name","method":"GET","status":200,"body":{"name":"debugPlayer"},"delayMs":50}]}"#)
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let result = try await engine.run(spec(#"{"type":"remote","endpoint":"/v1/hello/:name","pathVars":{"name":"x"}}"#))
        #expect(result.result?["body"] == ["name": "debugPlayer"])
        #expect(log.all.contains { $0.name == "job.skipped" && $0.fields["reason"] == "dummy" && $0.rootJobId == result.jobId })
        // Skipped inside `start`, finished after the dummy's delay: `job.skipped` follows `job.started`.
        #expect(log.names(job: result.jobId) == ["job.queued@", "job.started@", "job.skipped@", "job.succeeded@"])
        // A dummy slower than the job's timeout times out, as the network would.
        let late = try await engine.run(spec(#"{"type":"remote","endpoint":"/v1/hello/:name","pathVars":{"name":"x"},"timeoutMs":10}"#))
        #expect(late.error?.kind == .timeout)

        engine.register(dummy: { request in
            request.path == "/never-on-network" ? DummyReply(status: 201, body: ["seen": .string(request.method)]) : nil
        })
        let handled = try await engine.run(spec(#"{"type":"remote","method":"DELETE","endpoint":"/never-on-network"}"#))
        #expect(handled.result?["status"] == 201)
        #expect(handled.result?["body"] == ["seen": "DELETE"])
        // Unmatched requests still reach the network.
        let real = try await engine.run(spec(#"{"type":"remote","api":"items"}"#))
        #expect(real.result?["body"]?["count"] == 3)
    }

    /// A dummy for an endpoint with defaults (rest.md §8) answers the
    /// requests built from it, a removed segment included: they went to the
    /// network when a segment was left out.
    @Test func aDummyMatchesItsEndpointWithSegmentsRemoved() async throws {
        let engine = try makeEngine(#", "dummy": {"enabled": true, "responses": [{"server":"testsvr","endpoint":"/v1/users/:id=me/items/:page=","body":"dd"}]}, "apis": {"route": {"server":"testsvr","endpoint":"/v1/users/:id=me/items/:page="}}"#)
        defer { engine.shutdown() }
        for vars in [#"{}"#, #"{"id":"","page":"2"}"#, #"{"page":"2"}"#, #"{"id":"x","page":""}"#, #"{"id":"","page":""}"#] {
            let result = try await engine.run(spec(#"{"type":"remote","api":"route","pathVars":\#(vars)}"#))
            #expect(result.result?["body"] == "dd", "pathVars \(vars): \(result)")
        }
        #expect(DummyResponder.matches(pattern: "/a/:x=1/b", path: "/a/b"))
        #expect(DummyResponder.matches(pattern: "/a/:x=1/b", path: "/a/z/b?q=1"))
        #expect(!DummyResponder.matches(pattern: "/a/:x=1/b", path: "/a/z/y/b"))
        #expect(!DummyResponder.matches(pattern: "/a/:x/b", path: "/a/b"))
        #expect(DummyResponder.matches(pattern: "/a/*", path: "/a/b/c"))
        #expect(!DummyResponder.matches(pattern: "/a/b", path: "/a"))
        // Many removable segments against a long path that fits none: quick, not 2^n.
        let many = "/" + Array(repeating: ":v=", count: 40).joined(separator: "/") + "/end"
        #expect(!DummyResponder.matches(pattern: many, path: "/" + Array(repeating: "x", count: 60).joined(separator: "/")))
        #expect(DummyResponder.matches(pattern: many, path: "/x/x/end"))
    }

    /// A path variable of `..` sent `/v1/users/../items`, which the origin
    /// read as `/v1/items`; path variables nobody uses (a typo, or any on a
    /// `url`) were ignored.
    @Test func pathVarsThatWouldChangeTheRouteAreRefused() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        for value in [".", ".."] {
            let refused = #expect(throws: ValidationError.self) {
                try engine.submit(spec(#"{"type":"remote","api":"echo","pathVars":{"name":"\#(value)"}}"#))
            }
            #expect(refused?.path == "pathVars.name" && refused?.reason.contains("dot segment") == true, "\(String(describing: refused))")
        }
        // From a reference: refused when the step runs, before anything is sent.
        let late = try await engine.run(spec(#"{"type":"remote","api":"echo","pathVars":{"name":"${input.name}"}}"#),
                                        input: ["name": ".."])
        #expect(late.error?.kind == .invalid && late.error?.message.contains("pathVars.name") == true, "\(late)")
        // Dots inside a value are only text.
        let dots = try await engine.run(spec(#"{"type":"remote","api":"echo","pathVars":{"name":"..a"}}"#))
        #expect(dots.state == .succeeded, "\(dots)")
        let typo = #expect(throws: ValidationError.self) {
            try engine.submit(spec(#"{"type":"remote","api":"echo","pathVars":{"name":"a","nmae":"b"}}"#))
        }
        #expect(typo?.path == "pathVars.nmae", "\(String(describing: typo))")
        let onURL = #expect(throws: ValidationError.self) {
            try engine.submit(spec(#"{"type":"remote","url":"\#(TestServer.url("/v/:a"))","pathVars":{"a":"1"}}"#))
        }
        #expect(onURL?.path == "pathVars", "\(String(describing: onURL))")
    }

    /// A POST without a body went out labelled as a form (curl's default);
    /// a header given `""` drops the one a lower level set; an endpoint that is
    /// a URL of its own was appended to the server's.
    @Test func requestEdgesAreWhatTheSpecSays() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let bare = try await engine.run(spec(#"{"type":"remote","api":"echo","pathVars":{"name":"n"}}"#))
        let headers = try #require(bare.result?["body"]?["headers"], "\(bare)")
        #expect(bare.result?["body"]?["method"] == "POST")
        #expect(headers["content-type"] == nil, "\(headers)")
        #expect(headers["x-api"] == "echo")
        let dropped = try await engine.run(spec(#"{"type":"remote","api":"echo","pathVars":{"name":"n"},"headers":{"X-Api":""}}"#))
        #expect(dropped.result?["body"]?["headers"]?["x-api"] == nil, "\(dropped)")
        let typed = try await engine.run(spec(#"{"type":"remote","api":"echo","pathVars":{"name":"n"},"headers":{"Content-Type":"text/plain"}}"#))
        #expect(typed.result?["body"]?["headers"]?["content-type"] == "text/plain", "\(typed)")
        let absolute = #expect(throws: ValidationError.self) {
            try engine.submit(spec(#"{"type":"remote","server":"testsvr","endpoint":"http://other/x"}"#))
        }
        #expect(absolute?.path == "endpoint", "\(String(describing: absolute))")
        let late = try await engine.run(spec(#"{"type":"remote","server":"testsvr","endpoint":"${input.e}"}"#), input: ["e": "http://other/x"])
        #expect(late.error?.kind == .invalid, "\(late)")
    }

    @Test func submitTimeValidationNamesFields() throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        #expect(throws: ValidationError(path: "steps[0].pathVars.name", "required by endpoint /echo/:name")) {
            try engine.submit(spec(#"{"type":"serial","steps":[{"type":"remote","api":"echo"}]}"#))
        }
        #expect(throws: ValidationError(path: "api", "unknown api 'nope'")) {
            try engine.submit(spec(#"{"type":"remote","api":"nope"}"#))
        }
        // Not found (-32002 on the wire), like an unknown named job.
        #expect(throws: ValidationError(path: "worker", "unknown worker 'w9'", notFound: true)) {
            try engine.submit(spec(#"{"type":"remote","api":"items","worker":"w9"}"#))
        }
        #expect(throws: ValidationError(path: "name", "unknown local job 'nope'")) {
            try engine.submit(spec(#"{"type":"local","name":"nope"}"#))
        }
        // A large group is decoded and checked in parts at once (the first part and the
        // last fail here): the error is still the first step's in order.
        var steps = Array(repeating: #"{"type":"remote","api":"items"}"#, count: 12_000)
        steps[11_000] = #"{"type":"remote","api":"items","worker":"w8"}"#
        steps[1_000] = #"{"type":"remote","api":"items","worker":"w7"}"#
        steps[9_000] = #"{"type":"remote","api":"nope"}"#
        #expect(throws: ValidationError(path: "steps[1].steps[1000].worker", "unknown worker 'w7'", notFound: true)) {
            try engine.submit(spec(#"{"type":"serial","steps":[{"type":"local","name":"echo"},{"type":"concurrent","steps":[\#(steps.joined(separator: ","))]}]}"#))
        }
        steps[1_000] = #"{"type":"remote","url":3}"#
        steps[11_500] = #"{"type":"remote","url":4}"#
        #expect(throws: ValidationError(path: "steps[1000].url", expected: "string", got: .int(3))) {
            try spec(#"{"type":"concurrent","steps":[\#(steps.joined(separator: ","))]}"#)
        }
    }

    /// Connections outlive transfers: a kept-alive connection is reused, one the
    /// server closes (at once or later, while idle) is replaced, and an idle
    /// socket the server closes never makes the worker's loop spin.
    @Test func keptAliveConnectionsAreReusedAndServerClosesAreSurvived() async throws {
        let engine = try makeEngine(#", "workers": [{"name":"sockets","kind":"remote"},{"name":"local","kind":"local"}]"#)
        defer { engine.shutdown() }
        func port(_ query: String = "") async throws -> Int {
            let result = try await engine.run(spec(#"{"type":"remote","endpoint":"/conn\#(query)"}"#))
            #expect(result.state == .succeeded, "\(result.error?.message ?? "")")
            return try #require(result.result?["body"]?["port"]?.intValue)
        }
        // Sequential requests share one connection.
        let first = try await port()
        #expect(try await port() == first)
        #expect(try await port() == first)

        // Connection: close, many times over: every request still succeeds, each on a new connection
        // (closed descriptors come back as new sockets with the same number).
        var previous = first
        for _ in 0..<20 {
            let closed = try await port("?close=1")
            let next = try await port()
            #expect(next != closed)
            previous = next
        }

        // The server closes an idle kept-alive connection: the loop does not spin
        // on the dead socket, and the next request gets a new connection.
        let lingering = try await port("?linger=50")
        #expect(lingering == previous)
        let before = threadCPUNanoseconds(named: "hydra-sockets")
        try await Task.sleep(for: .milliseconds(500))
        let spent = threadCPUNanoseconds(named: "hydra-sockets") - before
        #expect(spent < 100_000_000, "the worker's loop used \(spent / 1_000_000) ms of CPU while idle")
        #expect(try await port() != lingering)
    }
}

/// CPU time so far of this process's threads called `name` (Linux `schedstat`), in nanoseconds.
func threadCPUNanoseconds(named name: String) -> UInt64 {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    var total: UInt64 = 0
    for task in tasks {
        guard let comm = try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8),
              comm.trimmingCharacters(in: .whitespacesAndNewlines) == name,
              let stat = try? String(contentsOfFile: "/proc/self/task/\(task)/schedstat", encoding: .utf8),
              let ns = stat.split(separator: " ").first.flatMap({ UInt64($0) }) else { continue }
        total += ns
    }
    return total
}
