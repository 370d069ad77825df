import Foundation
import HydraHTTP
import Testing

@testable import Hydra
@testable import HydraREST

/// What a peer (or a reference) supplies is read without trusting it (issue 11):
/// numbers never trap, bodies kept in memory stop at `defaults.maxBodyBytes`,
/// header fields never carry a line break to curl.
extension RemoteJobTests {
    // MARK: - Connections a server closes

    /// A server may close a kept-alive connection after a response without
    /// saying so (no `Connection: close`). The redirect's next request, sent on
    /// that connection, then meets a reset: libuv reports it as a poll error,
    /// which the worker handed curl as `CURL_CSELECT_ERR`, and curl failed the
    /// job ("select/poll returned error", 1 run in 4) instead of reading the
    /// reset and retrying on a new connection, as its own poll does.
    @Test func aRedirectOnAConnectionTheServerClosedSucceeds() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        for _ in 0..<40 {
            let done = try await engine.run(spec(#"{"type":"remote","endpoint":"/redirect-to?to=/text&close=1"}"#))
            #expect(done.state == .succeeded, "\(String(describing: done.error))")
            #expect(done.result?["body"] == "hello, hydra")
            if done.state != .succeeded { break }
        }
    }

    /// curl 7.88 counts, per easy handle and for the handle's life, the
    /// requests it sent again because their kept-alive connection was dead;
    /// past five it fails the next one at once ("Connection died, tried 5
    /// times before giving up"). The worker reuses handles for ever: its
    /// sixth such request, however far apart, failed. Each job here finds its
    /// connection dead (the server drops the request after the one before).
    @Test func requestsOnDeadKeptAliveConnectionsAreRetriedForEver() async throws {
        let engine = try makeEngine(#""workers": [{"name": "rest", "kind": "remote", "maxConnections": 1, "maxHostConnections": 1, "maxActive": 1}]"#)
        defer { engine.shutdown() }
        for i in 0..<12 {
            let done = try await engine.run(spec(#"{"type":"remote","endpoint":"/conn?dropNext=1"}"#))
            #expect(done.state == .succeeded, "job \(i): \(String(describing: done.error))")
            if done.state != .succeeded { break }
        }
    }

    // MARK: - URLs

    /// A URL that is not one is refused at submit naming the field (curl
    /// refused it only when the job ran); a NUL, which curl's C string would
    /// end the URL at, is refused at submit and, from a reference, when the
    /// job runs (the request went to the URL cut short, and succeeded).
    @Test func aMalformedURLIsRefusedNamingTheField() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        for (url, reason) in [("http://127.0.0.1:99999/x", "the port is not a number"), ("http://h:+80/x", "the port"),
                              ("http://host/x y", "contains a space"), ("http://[::1/x", "closing ]"),
                              ("http://", "no host"), ("http://user:pw@/x", "no host"), ("http://h/a\\u0000b", "NUL")] {
            let refused = engine.refusal(#"{"type":"serial","steps":[{"type":"remote","url":"\#(url)"}]}"#)
            #expect(refused?.0 == "steps[0].url" && refused?.1.contains(reason) == true, "\(url): \(String(describing: refused))")
            #expect(refused?.1.contains("pw") != true)
        }
        for url in ["http://127.0.0.1:8080/x?q=1#f", "https://[::1]:443/", "http://u:p@h/x", "http://h:/x"] {
            #expect(engine.refusal(#"{"type":"remote","url":"\#(url)"}"#) == nil, "\(url)")
        }
        let cut = try await engine.run(spec(#"{"type":"remote","url":"${input}"}"#), input: .string(TestServer.url("/echo\u{0}/x")))
        #expect(cut.state == .failed && cut.error?.kind == .invalid && cut.error?.message == "url: contains a NUL byte",
                "\(String(describing: cut.error))")
    }

    /// A download to a file keeps its disk's reserve free (`state.minFreeBytes`):
    /// 2 MB of gzip on the wire made a 2 GiB file, and a few such filled the
    /// disk. Here the reserve is more than any disk has: `saveAs` of a bomb and
    /// a resource that streams to disk stop after their first few megabytes,
    /// with kind `tooLarge`, and leave no file.
    @Test func aDownloadToAFileKeepsItsDisksReserveFree() async throws {
        let state = NSTemporaryDirectory() + "hydra-reserve-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: state) }
        let engine = try makeEngine(#""state": {"minFreeBytes": 4611686018427387904}"#, state: state)
        defer { engine.shutdown() }
        let saved = try await engine.run(spec(#"{"type":"remote","endpoint":"/gzip-bomb/64","saveAs":"downloads/zeros.bin"}"#))
        #expect(saved.error?.kind == .tooLarge && saved.error?.message.hasPrefix("the download stopped: its disk has ") == true,
                "\(String(describing: saved.error))")
        #expect(!FileManager.default.fileExists(atPath: state + "/downloads/zeros.bin"))
        let kept = try await engine.run(spec(#"{"type":"resource","url":"\#(TestServer.url("/large/30000000"))"}"#))
        #expect(kept.error?.kind == .tooLarge && kept.error?.message.contains("state.minFreeBytes") == true, "\(String(describing: kept.error))")
        let left = (FileManager.default.enumerator(atPath: state + "/resources")?.allObjects as? [String] ?? []).filter { $0.contains(".") }
        #expect(left.isEmpty, "\(left)")
        // Below the check's step (8 MiB), and with the reserve off, downloads go on.
        #expect(try await engine.run(spec(#"{"type":"remote","endpoint":"/gzip-bomb/4","saveAs":"downloads/small.bin"}"#)).state == .succeeded)
        let off = try makeEngine(#""state": {"minFreeBytes": 0}"#, state: state + "-off")
        defer { off.shutdown(); try? FileManager.default.removeItem(atPath: state + "-off") }
        #expect(try await off.run(spec(#"{"type":"remote","endpoint":"/gzip-bomb/16","saveAs":"downloads/z.bin"}"#)).state == .succeeded)
    }

    /// A `Content-Length` that is not a number of bytes (99999999999999999999999)
    /// was ignored, by curl as by the worker: the body ran to the close, and a
    /// cut one passed for whole (cached, kept as a resource). Such a response fails now.
    @Test func aContentLengthThatIsNoNumberFailsTheJob() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        for value in ["99999999999999999999999", "12abc"] {
            let done = try await engine.run(spec(#"{"type":"remote","endpoint":"/bad-length?value=\#(value)"}"#))
            #expect(done.state == .failed && done.error?.kind == .network
                    && done.error?.message == "the response's Content-Length is not a number of bytes", "\(String(describing: done.error))")
            let kept = try await engine.run(spec(#"{"type":"resource","url":"\#(TestServer.url("/bad-length?value=\(value)"))"}"#))
            #expect(kept.state == .failed && kept.error?.kind == .network, "\(String(describing: kept.result))")
        }
        #expect(try await engine.run(spec(#"{"type":"remote","endpoint":"/bad-length?value=2"}"#)).state == .succeeded)
    }

    // MARK: - Retry-After

    /// `Retry-After: 9999999999999999` overflowed `seconds * 1000` and killed the
    /// process, even with one attempt. Now it saturates at the 10-minute ceiling,
    /// whatever the policy's maxBackoffMs (protocol §4 honours `Retry-After`),
    /// and the job can still be cancelled while it waits.
    @Test func aHugeRetryAfterNeitherTrapsNorParksTheJob() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let once = try await engine.run(spec(#"{"type":"remote","endpoint":"/status/503?retryAfter=9999999999999999","retry":{"maxAttempts":1}}"#))
        #expect(once.state == .failed)
        #expect(once.error?.kind == .http && once.error?.status == 503)

        // Longer still: the wait is the ceiling, not an overflow, and a cancel ends it.
        let digits = String(repeating: "9", count: 400)
        for value in ["9999999999999999", digits] {
            let retrying = engine.events(EventFilter(events: ["job.retrying"]))
            let id = try engine.submit(spec(#"{"type":"remote","endpoint":"/status/503?retryAfter=\#(value)","retry":{"maxAttempts":2,"maxBackoffMs":300}}"#))
            let event = try await nextEvent(in: retrying) { $0.rootJobId == id }
            #expect(event.fields["delayMs"] == .int(RetryAfter.ceilingMs))
            #expect(await engine.cancel(id) == .cancelled)
            #expect(await engine.result(of: id)?.state == .cancelled)
        }
        // Nonsense is not a wait: the usual backoff applies and the engine keeps going.
        let nonsense = try await engine.run(spec(#"{"type":"remote","endpoint":"/status/503?retryAfter=-5","retry":{"maxAttempts":2,"backoffMs":10,"maxBackoffMs":10}}"#))
        #expect(nonsense.error?.status == 503)
        #expect(try await engine.run(spec(#"{"type":"remote","api":"items"}"#)).state == .succeeded)
    }

    /// Protocol §4: retries honour `Retry-After`. A server's wait longer than
    /// the policy's maxBackoffMs is waited in full (it used to be cut to
    /// maxBackoffMs, so the retry came back before the server was ready).
    @Test func retryAfterLongerThanMaxBackoffIsWaitedInFull() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let started = Date()
        let result = try await engine.run(spec(#"{"type":"remote","endpoint":"/flaky/\#(UUID().uuidString)/1?status=503&retryAfter=2","retry":{"maxAttempts":2,"backoffMs":10,"maxBackoffMs":100}}"#))
        #expect(result.state == .succeeded)
        #expect(result.result?["attempts"] == 2)
        #expect(log.all.first { $0.name == "job.retrying" && $0.rootJobId == result.jobId }?.fields["delayMs"] == 2000)
        #expect(Date().timeIntervalSince(started) >= 1.95)
    }

    /// `Retry-After` as an HTTP date: the wait is the time until then.
    @Test func retryAfterAsAnHTTPDate() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        let due = Date().addingTimeInterval(3)
        let date = formatter.string(from: due)
        let dueSecond = due.timeIntervalSince1970.rounded(.down)
        let query = try #require(date.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
        let key = UUID().uuidString
        let started = Date()
        let result = try await engine.run(spec(#"{"type":"remote","endpoint":"/flaky/\#(key)/1?retryAfter=\#(query)","retry":{"maxAttempts":2,"backoffMs":1}}"#))
        #expect(result.state == .succeeded)
        #expect(result.result?["attempts"] == 2)
        let decided = try #require(log.all.first { $0.name == "job.retrying" && $0.rootJobId == result.jobId })
        let delay = try #require(decided.fields["delayMs"]?.intValue)
        // The wait is the time from the answer to that date (whole seconds on
        // the wire, 2 to 3 s after the test began; the default maxBackoffMs is
        // 5 s), counted from about when the event says the retry was decided:
        // a loaded machine may take a while to get there.
        let untilDate = Int((dueSecond - decided.time) * 1000)
        #expect(delay > 0 && abs(delay - untilDate) <= 500, "delay \(delay) ms, \(untilDate) ms from the event to \(date)")
        #expect(Date().timeIntervalSince(started) >= Double(delay) / 1000 - 0.05)

        // A date in the past is no wait; a date far ahead waits the ceiling, not maxBackoffMs.
        let past = try await engine.run(spec(#"{"type":"remote","endpoint":"/flaky/\#(UUID().uuidString)/1?retryAfter=Sun%2C%2006%20Nov%201994%2008%3A49%3A37%20GMT","retry":{"maxAttempts":2,"backoffMs":5000}}"#))
        #expect(past.state == .succeeded)
        #expect(log.all.first { $0.name == "job.retrying" && $0.rootJobId == past.jobId }?.fields["delayMs"] == 0)
        let retrying = engine.events(EventFilter(events: ["job.retrying"]))
        let future = try engine.submit(spec(#"{"type":"remote","endpoint":"/flaky/\#(UUID().uuidString)/1?retryAfter=Fri%2C%2031%20Dec%209999%2023%3A59%3A59%20GMT","retry":{"maxAttempts":2,"maxBackoffMs":100}}"#))
        let event = try await nextEvent(in: retrying) { $0.rootJobId == future }
        #expect(event.fields["delayMs"] == .int(RetryAfter.ceilingMs))
        #expect(await engine.cancel(future) == .cancelled)
    }

    /// The three forms of HTTP-date, and values that are neither form.
    @Test func retryAfterValuesAreReadDefensively() {
        let epoch784111777 = 784_111_777.0  // Sun, 06 Nov 1994 08:49:37 GMT
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT") == epoch784111777)
        #expect(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT") == epoch784111777)
        #expect(HTTPDate.parse("Sun Nov  6 08:49:37 1994") == epoch784111777)
        #expect(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 PST") == nil)
        #expect(HTTPDate.parse("Sun, 99 Nov 1994 08:49:37 GMT") == nil)
        #expect(HTTPDate.parse("Sun, 06 Nov 99999999999999999999 08:49:37 GMT") == nil)
        #expect(HTTPDate.parse("") == nil)

        let now = epoch784111777 - 2
        #expect(RetryAfter.milliseconds("1", cap: 5000, now: now) == 1000)
        #expect(RetryAfter.milliseconds(" 2 ", cap: 5000, now: now) == 2000)
        #expect(RetryAfter.milliseconds("9999999999999999", cap: 5000, now: now) == 5000)
        #expect(RetryAfter.milliseconds(String(repeating: "9", count: 100), cap: Int.max, now: now) == Int.max)
        #expect(RetryAfter.milliseconds("9223372036854775807", cap: Int.max / 2, now: now) == Int.max / 2)
        #expect(RetryAfter.milliseconds("Sun, 06 Nov 1994 08:49:37 GMT", cap: 5000, now: now) == 2000)
        #expect(RetryAfter.milliseconds("Sun, 06 Nov 1994 08:49:37 GMT", cap: 5000, now: now + 60) == 0)
        #expect(RetryAfter.milliseconds("Fri, 31 Dec 9999 23:59:59 GMT", cap: 5000, now: now) == 5000)
        #expect(RetryAfter.milliseconds("-1", cap: 5000, now: now) == nil)
        #expect(RetryAfter.milliseconds("1.5", cap: 5000, now: now) == nil)
        #expect(RetryAfter.milliseconds("soon", cap: 5000, now: now) == nil)
        #expect(RetryAfter.milliseconds("5", cap: -1, now: now) == 0)
        // Without a cap: the peer's value up to the ceiling, never a policy's maxBackoffMs.
        #expect(RetryAfter.milliseconds("2", now: now) == 2000)
        #expect(RetryAfter.milliseconds("600", now: now) == 600_000)
        #expect(RetryAfter.milliseconds("601", now: now) == RetryAfter.ceilingMs)
        #expect(RetryAfter.milliseconds("9999999999999999", now: now) == RetryAfter.ceilingMs)
        #expect(RetryAfter.milliseconds("Fri, 31 Dec 9999 23:59:59 GMT", now: now) == RetryAfter.ceilingMs)
        #expect(RetryAfter.milliseconds("Sun, 06 Nov 1994 08:49:37 GMT", now: now) == 2000)
    }

    // MARK: - Body size

    /// Bodies kept in memory stop at `defaults.maxBodyBytes`, counted after
    /// decoding; a saveAs download is not bound by it.
    @Test func bodiesInMemoryStopAtMaxBodyBytes() async throws {
        let state = NSTemporaryDirectory() + "hydra-limit-\(UUID().uuidString)"
        let engine = try makeEngine(#", "defaults": {"server": "testsvr", "timeoutMs": 20000, "maxBodyBytes": 1048576}"#, state: state)
        defer { engine.shutdown(); try? FileManager.default.removeItem(atPath: state) }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        func isTooLarge(_ result: JobResult) -> Bool {
            result.state == .failed && result.error?.kind == .tooLarge
                && result.error?.message.contains("defaults.maxBodyBytes (1048576 bytes") == true
        }
        let exact = try await engine.run(spec(#"{"type":"remote","endpoint":"/large/1048576","dogma":"raw"}"#))
        #expect(exact.state == .succeeded)
        let plain = try await engine.run(spec(#"{"type":"remote","endpoint":"/large/1048577","dogma":"raw"}"#))
        #expect(isTooLarge(plain), "\(plain.error?.message ?? "succeeded")")
        // No Content-Length: counted as it arrives.
        let chunked = try await engine.run(spec(#"{"type":"remote","endpoint":"/chunked/2000"}"#))
        #expect(isTooLarge(chunked), "\(chunked.error?.message ?? "succeeded")")
        // A declared length above the limit is refused at once: this body would take 20 s to arrive.
        let started = Date()
        let slow = try await engine.run(spec(#"{"type":"remote","endpoint":"/slow-body/2000/10"}"#))
        #expect(isTooLarge(slow))
        #expect(Date().timeIntervalSince(started) < 3)
        // 64 MiB of zeros in 64 KiB of gzip: stops at the limit after decoding, however small on the wire.
        let bomb = try await engine.run(spec(#"{"type":"remote","endpoint":"/gzip-bomb/64","retry":{"maxAttempts":3,"backoffMs":1}}"#))
        #expect(isTooLarge(bomb), "\(bomb.error?.message ?? "succeeded")")
        #expect(!log.all.contains { $0.name == "job.retrying" && $0.rootJobId == bomb.jobId })  // never retried
        // An error body counts too.
        let error = try await engine.run(spec(#"{"type":"remote","endpoint":"/large/2000000","expect":[201]}"#))
        #expect(isTooLarge(error))
        // saveAs streams to disk: no limit.
        let saved = try await engine.run(spec(#"{"type":"remote","endpoint":"/gzip-bomb/4","saveAs":"downloads/zeros.bin"}"#))
        #expect(saved.state == .succeeded, "\(saved.error?.message ?? "")")
        #expect(saved.result?["bytes"] == .int(4 << 20))
        let attributes = try FileManager.default.attributesOfItem(atPath: state + "/downloads/zeros.bin")
        #expect(attributes[.size] as? Int == 4 << 20)
        // The worker carries on.
        #expect(try await engine.run(spec(#"{"type":"remote","api":"items"}"#)).state == .succeeded)
    }

    // MARK: - Header fields

    /// Every byte against RFC 9110's grammar (token names; values with no
    /// control character but tab), in text that is and is not stored contiguously.
    @Test func headerSyntaxMatchesTheGrammarForEveryByte() {
        let symbols = Set("!#$%&'*+-.^_`|~".utf8)
        for byte in UInt8.min...UInt8.max {
            let isToken = (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A)
                || (byte >= 0x61 && byte <= 0x7A) || symbols.contains(byte)
            let isValueByte = byte == 0x09 || (byte >= 0x20 && byte != 0x7F)
            guard byte < 0x80 else { continue }  // (a lone byte above 0x7F is not UTF-8)
            let one = String(decoding: [UInt8(ascii: "a"), byte, UInt8(ascii: "z")], as: UTF8.self)
            #expect(HeaderSyntax.isValidName(one) == isToken, "name byte \(byte)")
            #expect(HeaderSyntax.isValidValue(one) == isValueByte, "value byte \(byte)")
            // A bridged (non-native) string takes the slower path: same answers.
            let bridged = NSString(string: one) as String
            #expect(HeaderSyntax.isValidName(bridged) == isToken)
            #expect(HeaderSyntax.isValidValue(bridged) == isValueByte)
        }
        #expect(!HeaderSyntax.isValidName(""))
        #expect(HeaderSyntax.isValidValue("café, ünïcode"))
        #expect(!HeaderSyntax.isValidName("café"))
    }

    /// A CR or LF in a header field would reach curl as a line of its own.
    @Test func headerFieldsWithLineBreaksAreRefused() async throws {
        let engine = try makeEngine()
        defer { engine.shutdown() }
        #expect(throws: ValidationError(path: "headers.X-Foo", HeaderSyntax.valueProblem)) {
            try engine.submit(spec(#"{"type":"remote","endpoint":"/echo","headers":{"X-Foo":"a\r\nX-Injected: 1"}}"#))
        }
        #expect(throws: ValidationError(path: "steps[1].headers.X-Foo", HeaderSyntax.valueProblem)) {
            try engine.submit(spec(#"{"type":"serial","steps":[{"type":"local","name":"echo"},{"type":"remote","endpoint":"/echo","headers":{"X-Foo":"${input.a}\n"}}]}"#))
        }
        #expect(throws: ValidationError(path: "headers.X Foo", HeaderSyntax.nameProblem)) {
            try engine.submit(spec(#"{"type":"remote","endpoint":"/echo","headers":{"X Foo":"a"}}"#))
        }
        #expect(throws: ValidationError(path: "headers.X-Nul", HeaderSyntax.valueProblem)) {
            try engine.submit(spec(#"{"type":"remote","endpoint":"/echo","headers":{"X-Nul":"a\u0000b"}}"#))
        }
        // Tabs and non-ASCII text are fine.
        let fine = try await engine.run(spec(#"{"type":"remote","endpoint":"/echo","headers":{"X-Tab":"a\tb"}}"#))
        #expect(fine.result?["body"]?["headers"]?["x-tab"] == "a\tb")

        // From a reference: the step fails with kind invalid, and nothing is sent.
        let key = UUID().uuidString
        let injected = try await engine.run(spec(#"{"type":"remote","endpoint":"/hits/\#(key)","headers":{"X-Foo":"${input.v}"}}"#),
                                            input: ["v": "a\r\nX-Injected: 1"])
        #expect(injected.state == .failed)
        #expect(injected.error?.kind == .invalid)
        #expect(injected.error?.message.contains("headers.X-Foo") == true)
        #expect(try await engine.run(spec(#"{"type":"remote","endpoint":"/count/\#(key)"}"#)).result?["body"] == ["count": 0])

        // In the configuration: refused when it is read, naming the key.
        for (config, path) in [
            (#"{"defaults": {"headers": {"X-Bad": "a\nb"}}}"#, "defaults.headers.X-Bad"),
            (#"{"servers": {"s": {"url": "http://h", "headers": {"X-Bad": "a\rb"}}}}"#, "servers.s.headers.X-Bad"),
            (#"{"servers": {"s": "http://h"}, "apis": {"a": {"server": "s", "endpoint": "/", "headers": {"X-Bad": "\r\n"}}}}"#, "apis.a.headers.X-Bad"),
        ] {
            #expect(throws: ValidationError(path: path, HeaderSyntax.valueProblem)) {
                _ = try Configuration(json: try JSONParser.parse(config))
            }
        }
        #expect(throws: ValidationError(path: "defaults.headers.Bad:Name", HeaderSyntax.nameProblem)) {
            _ = try Configuration(json: try JSONParser.parse(#"{"defaults": {"headers": {"Bad:Name": "x"}}}"#))
        }
        // A configuration built in code gets the same check when the engine starts
        // (the transfer still refuses such a field itself, should one get past).
        var coded = try Configuration(json: try JSONParser.parse(#"{"servers": {"testsvr": "\#(TestServer.base)"}}"#))
        coded.defaults.headers["X-Coded"] = "a\r\nX-Injected: 1"
        #expect(throws: ValidationError(path: "defaults.headers.X-Coded", HeaderSyntax.valueProblem)) {
            _ = try HydraEngine(configuration: coded, stateDirectory: NSTemporaryDirectory() + "hydra-tests")
        }
        coded.defaults.headers = [:]
        coded.servers["testsvr"]?.headers["X-Coded"] = "a\nb"
        #expect(throws: ValidationError(path: "servers.testsvr.headers.X-Coded", HeaderSyntax.valueProblem)) {
            _ = try HydraEngine(configuration: coded, stateDirectory: NSTemporaryDirectory() + "hydra-tests")
        }
        #expect(try await engine.run(spec(#"{"type":"remote","endpoint":"/count/\#(key)"}"#)).result?["body"] == ["count": 0])
    }
}
