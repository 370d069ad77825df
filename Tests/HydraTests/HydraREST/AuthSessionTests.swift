import Foundation
import Testing
import HydraLoop

@testable import Hydra
@testable import HydraRPC

/// Auth sessions (rest.md §1) against the test server's OAuth2 token
/// endpoint (`/oauth/token`) and its bearer-protected `/protected` routes.
/// Each test keys its tokens and counters apart (`?key=`), so tests run side by side.
@Suite(.ownThreads) struct AuthSessionTests {
    /// An engine whose `svc` session (client credentials) guards the api `guarded`.
    func engine(_ key: String, tokenQuery: String = "", type: String = "oauth2-client-credentials",
                secret: String? = "s3cret", extraAuth: String = "") throws -> HydraEngine {
        let secretMember = secret.map { #", "clientSecret": "\#($0)""# } ?? ""
        return try makeEngine("""
            , "auth": {"svc": {"type": "\(type)", "tokenUrl": "\(TestServer.base)/oauth/token?key=\(key)\(tokenQuery)",
                               "clientId": "app"\(secretMember), "scope": "read write"}\(extraAuth)}
            """)
    }

    func guarded(_ key: String, auth: String = "svc") throws -> JobSpec {
        try spec(guardedStep(key, auth: auth))
    }

    /// `count` guarded requests at once: a concurrent group of them.
    func guardedFan(_ key: String, count: Int) throws -> JobSpec {
        let steps = Array(repeating: guardedStep(key, auth: "svc"), count: count).joined(separator: ",")
        return try spec(#"{"type":"concurrent","steps":[\#(steps)]}"#)
    }

    private func guardedStep(_ key: String, auth: String) -> String {
        #"{"type":"remote","endpoint":"/protected/x","query":{"key":"\#(key)"},"auth":"\#(auth)"}"#
    }

    func counter(_ engine: HydraEngine, _ name: String) async throws -> Int {
        let done = try await engine.run(spec(#"{"type":"remote","endpoint":"/count/\#(name)"}"#))
        return try #require(done.result?["body"]?["count"]?.intValue)
    }

    /// A server in object form opts its requests in (rest.md §1); an api's or
    /// a job's own `auth` wins over it.
    @Test func aServersAuthIsSentAndAJobsOwnWins() async throws {
        let key = UUID().uuidString
        let engine = try makeEngine("""
            , "auth": {"svc": {"type": "oauth2-client-credentials", "tokenUrl": "\(TestServer.base)/oauth/token?key=\(key)",
                               "clientId": "app", "clientSecret": "s3cret"},
                       "fixed": {"type": "bearer", "token": "not-a-live-token"}},
              "servers": {"testsvr": "\(TestServer.base)", "guarded": {"url": "\(TestServer.base)", "auth": "svc"}},
              "apis": {"viaFixed": {"server": "guarded", "endpoint": "/protected/x", "auth": "fixed"}}
            """)
        defer { engine.shutdown() }
        let viaServer = try await engine.run(spec(#"{"type":"remote","server":"guarded","endpoint":"/protected/x","query":{"key":"\#(key)"}}"#))
        #expect(viaServer.state == .succeeded && viaServer.result?["body"]?["authorization"] == "Bearer ***",
                "\(String(describing: viaServer.error))")
        // The api's session and then the job's own win over the server's: a token the endpoint refuses.
        let viaApi = try await engine.run(spec(#"{"type":"remote","api":"viaFixed","query":{"key":"\#(key)"}}"#))
        #expect(viaApi.state == .failed && viaApi.error?.status == 401)
        let viaJob = try await engine.run(spec(#"{"type":"remote","server":"guarded","endpoint":"/protected/x","query":{"key":"\#(key)"},"auth":"fixed"}"#))
        #expect(viaJob.state == .failed && viaJob.error?.status == 401)
        #expect(try await counter(engine, "token:\(key)") == 1)
    }

    /// rest.md §1: client credentials in HTTP Basic — for a public client (no
    /// `clientSecret`, as the spec's `user` session) too: its id with an empty
    /// secret, and `client_id` in the body for endpoints that look there.
    @Test func aPublicClientSendsItsIdInHTTPBasic() async throws {
        let key = UUID().uuidString
        let engine = try engine(key, secret: nil)
        defer { engine.shutdown() }
        let done = try await engine.run(guarded(key))
        #expect(done.state == .succeeded, "\(String(describing: done.error))")
        #expect(try await counter(engine, "token:\(key)") == 1)
        #expect(try await counter(engine, "token:\(key):public-basic") == 1)
    }

    @Test func manyJobsWaitForOneTokenRequestAndTheTokenNeverShows() async throws {
        let key = UUID().uuidString
        // An hour's token: the run takes 50 s under ThreadSanitizer, near the default minute.
        let engine = try engine(key, tokenQuery: "&delayMs=300&ttl=3600")
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let fan = try await engine.run(guardedFan(key, count: 50))
        #expect(fan.state == .succeeded, "\(String(describing: fan.error))")
        #expect(try await counter(engine, "token:\(key)") == 1)
        #expect(try await counter(engine, "protected:\(key)") == 50)
        // The server echoes the Authorization header: the result shows it masked.
        let first = try #require(fan.result?["results"]?[0])
        #expect(first["body"]?["authorization"] == "Bearer ***")
        let status = try engine.authStatus("svc")
        #expect(status.state == "valid" && status.tokenRequests == 1 && status.expiresAt != nil)
        #expect(!JSONWriter.string(status.json).contains("tok-"))
        let text = log.all.map { JSONWriter.string($0.json) }.joined()
        #expect(!text.contains("tok-") && !text.contains("s3cret"))
        // A client-credentials session takes no user or password: refused, not ignored.
        let typo = await #expect(throws: JobError.self) { try await engine.login(auth: "svc", username: "bob", password: "zzz") }
        #expect(typo?.kind == .invalid && typo?.message.hasPrefix("username:") == true, "\(String(describing: typo))")
    }

    /// An `expires_in` below zero is a broken answer (it read as a token that
    /// never expires): the login fails with kind `auth`, and so does a job.
    @Test func aNegativeLifetimeIsABrokenTokenAnswer() async throws {
        let key = UUID().uuidString
        let engine = try engine(key, tokenQuery: "&ttl=-1")
        defer { engine.shutdown() }
        do {
            _ = try await engine.login(auth: "svc")
            Issue.record("logged in with expires_in -1")
        } catch {
            #expect(error.kind == .auth && error.message.contains("expires_in"), "\(error)")
        }
        let job = try await engine.run(guarded(key))
        #expect(job.state == .failed && job.error?.kind == .auth, "\(String(describing: job.error))")
    }

    @Test func aTokenIsRefreshed30SecondsBeforeItRunsOut() async throws {
        let key = UUID().uuidString
        // A 35 s token is due 5 s after it was issued (30 s before it runs out), not halfway (17.5 s).
        let engine = try engine(key, tokenQuery: "&ttl=35")
        defer { engine.shutdown() }
        let start = Date()
        #expect(try await engine.run(guarded(key)).state == .succeeded)
        let issued = Date()  // the token came before this
        #expect(try await engine.run(guarded(key)).state == .succeeded)
        if Date().timeIntervalSince(start) < 4 {
            #expect(try await counter(engine, "token:\(key)") == 1)  // still fresh: reused
        }
        try await Task.sleep(for: .seconds(5.3 - Date().timeIntervalSince(issued)))
        let later = try await engine.run(guarded(key))
        #expect(later.state == .succeeded, "\(String(describing: later.error))")
        // Renewed with the refresh token, never by starting over, and never sent once it had run out.
        #expect(try await counter(engine, "token:\(key):refresh_token") >= 1)
        #expect(try await counter(engine, "token:\(key):client_credentials") == 1)
        #expect(try await counter(engine, "protected-401:\(key)") == 0)
    }

    @Test func aTokenOf30SecondsOrLessIsDueAtOnceButServesTheRequestsThatWaitedForIt() async throws {
        let key = UUID().uuidString
        let engine = try engine(key, tokenQuery: "&ttl=20&delayMs=200")
        defer { engine.shutdown() }
        // Five requests wait for one token request and use what it returned: no loop of fetches.
        let fan = try await engine.run(guardedFan(key, count: 5))
        #expect(fan.state == .succeeded, "\(String(describing: fan.error))")
        #expect(try await counter(engine, "token:\(key)") == 1)
        // The next request finds it due (20 s ≤ 30 s) and renews it first.
        #expect(try await engine.run(guarded(key)).state == .succeeded)
        #expect(try await counter(engine, "token:\(key):refresh_token") == 1)
        #expect(try await counter(engine, "token:\(key):client_credentials") == 1)
    }

    @Test func a401GetsANewTokenAndSendsOnceMore() async throws {
        let key = UUID().uuidString
        // An hour's token: a stalled machine (the whole suite under TSan) must not
        // reach the refresh 30 s before expiry, which would renew it without a 401.
        let engine = try engine(key, tokenQuery: "&ttl=3600")
        defer { engine.shutdown() }
        #expect(try await engine.run(guarded(key)).state == .succeeded)
        // The provider revokes the token Hydra holds: the next request gets a 401, then a new token.
        _ = try await engine.run(spec(#"{"type":"remote","endpoint":"/oauth/revoke","query":{"key":"\#(key)"}}"#))
        let again = try await engine.run(guarded(key))
        #expect(again.state == .succeeded, "\(String(describing: again.error))")
        #expect(again.result?["attempts"] == 1)
        #expect(try await counter(engine, "protected-401:\(key)") == 1)
        #expect(try await counter(engine, "token:\(key)") == 2)

        // Tokens that are dead on arrival: one new token, then the second 401 fails with kind http.
        let deadKey = UUID().uuidString
        let dead = try self.engine(deadKey, tokenQuery: "&ttl=0")
        defer { dead.shutdown() }
        let refused = try await dead.run(guarded(deadKey))
        #expect(refused.state == .failed)
        #expect(refused.error?.kind == .http && refused.error?.status == 401)
        #expect(try await counter(dead, "protected-401:\(deadKey)") == 2)
    }

    /// A job's `timeoutMs` bounds each attempt, the wait for its session's
    /// token included: a slow token endpoint times the attempt out (kind
    /// `timeout`, retried like any timeout), and the one token request goes on.
    @Test func theWaitForATokenCountsAgainstTheJobsTimeout() async throws {
        let key = UUID().uuidString
        // An hour's token: under TSan the suite can stall past a one-minute token's refresh point.
        let engine = try engine(key, tokenQuery: "&delayMs=1500&ttl=3600")
        defer { engine.shutdown() }
        // (The message says the attempt ended while it waited: no clock is read here, the suite runs loaded.)
        let slow = try await engine.run(spec(
            #"{"type":"remote","endpoint":"/protected/x","query":{"key":"\#(key)"},"auth":"svc","timeoutMs":300}"#))
        #expect(slow.error?.kind == .timeout && slow.error?.message == "timed out after 300 ms waiting for the token of auth 'svc'",
                "\(String(describing: slow.error))")
        // A retry waits again (the token request still under way), then goes through with it.
        let retried = try await engine.run(spec(
            #"{"type":"remote","endpoint":"/protected/x","query":{"key":"\#(key)"},"auth":"svc","timeoutMs":1000,"retry":{"maxAttempts":8,"backoffMs":10}}"#))
        #expect(retried.state == .succeeded, "\(String(describing: retried.error))")
        #expect(try await counter(engine, "token:\(key)") == 1)
    }

    @Test func aTokenEndpointThatFailsFailsTheWaitingJobsWithKindAuth() async throws {
        let key = UUID().uuidString
        let wrong = try engine(key, secret: "not-the-secret")
        defer { wrong.shutdown() }
        let refused = try await wrong.run(guardedFan(key, count: 5))
        #expect(refused.state == .failed)
        #expect(refused.error?.kind == .auth)
        #expect(refused.error?.message.contains("HTTP 401 (invalid_client)") == true)
        #expect(refused.error?.message.contains("not-the-secret") == false)
        #expect(try await counter(wrong, "token:\(key)") == 1)
        #expect(try wrong.authStatus("svc").state == "failed")

        // A token endpoint that answers a web page.
        let html = try makeEngine("""
            , "auth": {"svc": {"type": "oauth2-client-credentials", "tokenUrl": "\(TestServer.base)/oauth/html", "clientId": "app"}}
            """)
        defer { html.shutdown() }
        let garbage = try await html.run(guarded(key))
        #expect(garbage.error?.kind == .auth)
        #expect(garbage.error?.message.contains("not a JSON token response (Content-Type text/html)") == true)

        // One that cannot be reached.
        let closed = try makeEngine("""
            , "auth": {"svc": {"type": "oauth2-client-credentials", "tokenUrl": "http://127.0.0.1:\(TestServer.closedPort)/t", "clientId": "app"}}
            """)
        defer { closed.shutdown() }
        let unreachable = try await closed.run(guarded(key))
        #expect(unreachable.error?.kind == .auth)
        #expect(unreachable.error?.message.contains("the token request failed") == true)
    }

    @Test func aPasswordSessionLogsInRefreshesAndLogsOut() async throws {
        let key = UUID().uuidString
        let engine = try engine(key, tokenQuery: "&ttl=3", type: "oauth2-password")
        defer { engine.shutdown() }
        let before = try await engine.run(guarded(key))
        #expect(before.error?.kind == .auth && before.error?.message.contains("not logged in") == true)
        #expect(try engine.authStatus("svc").state == "none")

        await #expect(throws: JobError.self) { try await engine.login(auth: "svc", username: "alice", password: "guess") }
        do {
            try await engine.login(auth: "svc", username: "alice", password: "guess")
        } catch {
            #expect(error.kind == .auth && error.message.contains("invalid_grant") && !error.message.contains("guess"))
        }
        // An empty password is refused here, never sent: the token endpoint saw two requests so far.
        let empty = await #expect(throws: JobError.self) { try await engine.login(auth: "svc", username: "alice", password: "") }
        #expect(empty?.kind == .invalid && empty?.message.hasPrefix("password:") == true)
        let expiresAt = try await engine.login(auth: "svc", username: "alice", password: "wonderland")
        #expect(expiresAt.map { $0 > Date().timeIntervalSince1970 } == true)
        #expect(try engine.authStatus("svc").state == "valid")
        #expect(try await engine.run(guarded(key)).state == .succeeded)
        // The refresh token renews it without the password.
        try await Task.sleep(for: .milliseconds(1_700))
        #expect(try await engine.run(guarded(key)).state == .succeeded)
        #expect(try await counter(engine, "token:\(key):refresh_token") >= 1)
        #expect(try await counter(engine, "token:\(key):password") == 3)

        try engine.logout(auth: "svc")
        #expect(try engine.authStatus("svc").state == "none")
        #expect(try await engine.run(guarded(key)).error?.kind == .auth)
        #expect(throws: JobError.self) { try engine.logout(auth: "nobody") }
    }

    /// A password session without a refresh token cannot renew by itself: a
    /// 401 fails that request with kind `http` (the 401), and the session reads
    /// `failed` until the next login.
    @Test func a401OnAPasswordSessionWithoutARefreshTokenFailsWithKindHTTP() async throws {
        let key = UUID().uuidString
        // An hour's token: what ends it is the revocation below (under ThreadSanitizer
        // this test once ran past the default minute's refresh point before its first request).
        let engine = try engine(key, tokenQuery: "&refresh=0&ttl=3600", type: "oauth2-password")
        defer { engine.shutdown() }
        try await engine.login(auth: "svc", username: "alice", password: "wonderland")
        #expect(try await engine.run(guarded(key)).state == .succeeded)
        _ = try await engine.run(spec(#"{"type":"remote","endpoint":"/oauth/revoke","query":{"key":"\#(key)"}}"#))
        let refused = try await engine.run(guarded(key))
        #expect(refused.state == .failed)
        #expect(refused.error?.kind == .http && refused.error?.status == 401, "\(String(describing: refused.error))")
        #expect(try await counter(engine, "protected-401:\(key)") == 1)
        let status = try engine.authStatus("svc")
        #expect(status.state == "failed" && status.expiresAt == nil)
        // It needs a login now; after one it works again.
        let before = try await engine.run(guarded(key))
        #expect(before.error?.kind == .auth && before.error?.message.contains("not logged in") == true)
        try await engine.login(auth: "svc", username: "alice", password: "wonderland")
        #expect(try await engine.run(guarded(key)).state == .succeeded)
        #expect(try await counter(engine, "token:\(key):password") == 2)
    }

    /// `auth.logout` while the token request of `auth.login` is out: the login
    /// keeps nothing, so it must not report success.
    @Test func aLogoutDuringALoginFailsTheLogin() throws {
        let key = UUID().uuidString
        let engine = try engine(key, tokenQuery: "&delayMs=1500", type: "oauth2-password")
        defer { engine.shutdown() }
        // Synchronous, polling with usleep: a Swift task's sleep may resume late while other tests
        // hold the cooperative pool, and the window is the token endpoint's 1.5 s delay.
        let outcome = Locked<Result<Double?, JobError>?>(nil)
        engine.rest.login("svc", username: "alice", password: "wonderland") { result in outcome.withLock { $0 = result } }
        let deadline = Date().addingTimeInterval(10)
        while try engine.authStatus("svc").state != "refreshing" && outcome.withLock({ $0 }) == nil && Date() < deadline {
            usleep(1_000)
        }
        #expect(try engine.authStatus("svc").state == "refreshing")
        try engine.logout(auth: "svc")
        while outcome.withLock({ $0 }) == nil && Date() < deadline { usleep(5_000) }
        guard case .failure(let error)? = outcome.withLock({ $0 }) else {
            Issue.record("the login did not fail although the logout came first: \(String(describing: outcome.withLock { $0 }))")
            return
        }
        #expect(error.kind == .auth && error.message.contains("logged out while logging in"), "\(error)")
        #expect(try engine.authStatus("svc").state == "none")
        // Nothing was kept: a request of the session is not logged in.
        let result = Locked<JobResult?>(nil)
        _ = try engine.submit(try guarded(key)) { done in result.withLock { $0 = done } }
        while result.withLock({ $0 }) == nil && Date() < deadline { usleep(5_000) }
        #expect(result.withLock { $0 }?.error?.kind == .auth)
    }

    /// Credentials go only to the origin they were sent to: a redirect to
    /// another origin (here `localhost` for `127.0.0.1`) leaves an api key
    /// behind, as curl does for `Authorization`; one on the same origin keeps
    /// it; method and body follow curl's rules; no redirect leaves http(s).
    @Test func credentialsStayWithTheirOriginAcrossRedirects() async throws {
        let engine = try makeEngine("""
            , "auth": {"key": {"type": "api-key", "header": "X-Api-Key", "value": "key-value-77"},
                       "ci": {"type": "bearer", "token": "ci-token-123"}}
            """)
        defer { engine.shutdown() }
        func redirect(to target: String, status: Int = 302) -> String {
            let to = target.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? target
            return TestServer.url("/redirect-to?status=\(status)&to=\(to)")
        }
        let away = "http://localhost:\(TestServer.port)/echo/away"
        func run(_ url: String, _ extra: String = "") async throws -> JobResult {
            try await engine.run(spec(#"{"type":"remote","url":"\#(url)","auth":"key"\#(extra)}"#))
        }
        let crossed = try await run(redirect(to: away))
        #expect(crossed.result?["body"]?["path"] == "/echo/away", "\(String(describing: crossed.error))")
        #expect(crossed.result?["body"]?["headers"]?["x-api-key"] == nil, "the key went to another origin")
        #expect(crossed.result?["url"] == .string(away))
        let stayed = try await run(redirect(to: TestServer.url("/echo/here")))
        #expect(stayed.result?["body"]?["headers"]?["x-api-key"] == "***")  // sent (and masked in the result)
        // 307 keeps the method and the body (across origins too); 303 makes a GET of a POST.
        let kept = try await run(redirect(to: away, status: 307), #","method":"POST","body":{"a":1}"#)
        #expect(kept.result?["body"]?["method"] == "POST" && kept.result?["body"]?["json"] == ["a": 1])
        #expect(kept.result?["body"]?["headers"]?["x-api-key"] == nil)
        let seeOther = try await run(redirect(to: TestServer.url("/echo/other"), status: 303), #","method":"POST","body":{"a":1}"#)
        #expect(seeOther.result?["body"]?["method"] == "GET" && seeOther.result?["body"]?["body"] == "")
        #expect(seeOther.result?["body"]?["headers"]?["content-type"] == nil)
        // A chain longer than maxRedirects ends as curl ends it (kind network), even when a status is expected.
        for extra in ["", #","expect":[200,302]"#] {
            let long = try await run(TestServer.url("/redirect/8"), extra)
            #expect(long.state == .failed && long.error?.kind == .network && long.error?.message.contains("Maximum (5) redirects") == true,
                    "\(extra): \(String(describing: long.error))")
        }
        // A bearer token: curl keeps it back from another origin itself.
        let bearer = try await engine.run(spec(#"{"type":"remote","url":"\#(redirect(to: away))","auth":"ci"}"#))
        #expect(bearer.state == .succeeded && bearer.result?["body"]?["headers"]?["authorization"] == nil)
        // Only http and https, whoever follows the redirect.
        for extra in [#","auth":"key""#, ""] {
            let ftp = try await engine.run(spec(#"{"type":"remote","url":"\#(redirect(to: "ftp://127.0.0.1:1/x"))"\#(extra)}"#))
            // Refused before connecting (port 1 would refuse the connection: another message).
            let message = ftp.error?.message ?? ""
            #expect(ftp.state == .failed && (message.contains("not http") || message.contains("disabled")), "\(extra): \(message)")
        }
    }

    /// A job's own headers whose names say they hold a credential (`X-Api-Key`,
    /// `X-Auth-Token`: what `job.queued` summaries mask) are masked in what
    /// comes back too, and kept from another origin a redirect names.
    @Test func aJobsOwnTokenHeadersAreMaskedAndStayWithTheirOrigin() async throws {
        let engine = try makeEngine(#", "defaults": {"server": "testsvr", "timeoutMs": 10000, "headers": {"X-ApiKey": "default-key-31"}}"#)
        defer { engine.shutdown() }
        let headers = #""headers":{"X-Api-Key":"job-key-41","X-Auth-Token":"job-token-42","X-Plain":"visible-43"}"#
        let echoed = try await engine.run(spec(#"{"type":"remote","url":"\#(TestServer.url("/echo/own"))",\#(headers)}"#))
        let seen = try #require(echoed.result?["body"]?["headers"])
        #expect(seen["x-api-key"] == "***" && seen["x-auth-token"] == "***" && seen["x-apikey"] == "***", "\(seen)")
        #expect(seen["x-plain"] == "visible-43")
        let text = JSONWriter.string(echoed.result ?? .null)
        for secret in ["job-key-41", "job-token-42", "default-key-31"] { #expect(!text.contains(secret)) }
        let away = "http://localhost:\(TestServer.port)/echo/away"
        let redirect = TestServer.url("/redirect-to?to=" + (away.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? away))
        let crossed = try await engine.run(spec(#"{"type":"remote","url":"\#(redirect)",\#(headers)}"#))
        let there = try #require(crossed.result?["body"]?["headers"])
        #expect(there["x-api-key"] == nil && there["x-auth-token"] == nil && there["x-plain"] == "visible-43", "\(there)")
    }

    /// A resource job's content is masked like a remote job's body: an origin
    /// that echoes the api key does not put it in the result (or its event).
    /// A resource job is routed as a remote job (resources.md §1), its OAuth2
    /// session included (rest.md §1): each attempt carries the session's token,
    /// a 401 gets a new one and the request once more, and the token never
    /// shows in the content a result carries. (It was sent without any.)
    @Test func aResourceJobCarriesItsSessionsTokenAndRenewsItOnA401() async throws {
        let key = UUID().uuidString
        let engine = try engine(key, tokenQuery: "&ttl=3600")
        defer { engine.shutdown() }
        func fetch(_ path: String) throws -> JobSpec {
            try spec(#"{"type":"resource","endpoint":"/protected/\#(path)","query":{"key":"\#(key)"},"auth":"svc","as":"json"}"#)
        }
        let first = try await engine.run(fetch("a"))
        #expect(first.state == .succeeded, "\(String(describing: first.error))")
        #expect(first.result?["content"]?["ok"] == true)
        #expect(first.result?["content"]?["authorization"] == "Bearer ***")
        #expect(try await counter(engine, "token:\(key)") == 1)
        #expect(try await counter(engine, "protected:\(key)") == 1)
        // The provider revokes the token: a 401, a new token, the same request again.
        _ = try await engine.run(spec(#"{"type":"remote","endpoint":"/oauth/revoke","query":{"key":"\#(key)"}}"#))
        let again = try await engine.run(fetch("b"))
        #expect(again.state == .succeeded, "\(String(describing: again.error))")
        #expect(try await counter(engine, "protected-401:\(key)") == 1)
        #expect(try await counter(engine, "token:\(key)") == 2)
        #expect(try await counter(engine, "protected:\(key)") == 2)

        // Tokens dead on arrival: one new token, then the second 401 fails the job with kind http.
        let deadKey = UUID().uuidString
        let dead = try self.engine(deadKey, tokenQuery: "&ttl=0")
        defer { dead.shutdown() }
        let refused = try await dead.run(spec(
            #"{"type":"resource","endpoint":"/protected/c","query":{"key":"\#(deadKey)"},"auth":"svc"}"#))
        #expect(refused.error?.kind == .http && refused.error?.status == 401, "\(String(describing: refused.error))")
        #expect(try await counter(dead, "protected-401:\(deadKey)") == 2)
        #expect(try await dead.run(spec(
            #"{"type":"resource","endpoint":"/protected/c","query":{"key":"\#(deadKey)"},"auth":"svc","mode":"only"}"#)).error?.message
            == "not in repository")
    }

    /// The wait for the token counts against a resource job's `timeoutMs`,
    /// as a remote job's; a retry goes through with the one token requested.
    @Test func theWaitForATokenCountsAgainstAResourceJobsTimeout() async throws {
        let key = UUID().uuidString
        let engine = try engine(key, tokenQuery: "&delayMs=1500&ttl=3600")
        defer { engine.shutdown() }
        let slow = try await engine.run(spec(
            #"{"type":"resource","endpoint":"/protected/s","query":{"key":"\#(key)"},"auth":"svc","timeoutMs":300}"#))
        #expect(slow.error?.kind == .timeout && slow.error?.message == "timed out after 300 ms waiting for the token of auth 'svc'",
                "\(String(describing: slow.error))")
        let retried = try await engine.run(spec(
            #"{"type":"resource","endpoint":"/protected/s","query":{"key":"\#(key)"},"auth":"svc","timeoutMs":1000,"retry":{"maxAttempts":8,"backoffMs":10}}"#))
        #expect(retried.state == .succeeded, "\(String(describing: retried.error))")
        #expect(try await counter(engine, "token:\(key)") == 1)
    }

    @Test func aResourceResultNeverShowsTheRequestsCredentials() async throws {
        let state = NSTemporaryDirectory() + "hydra-resauth-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: state) }
        let engine = try makeEngine(#", "auth": {"key": {"type": "api-key", "header": "X-Api-Key", "value": "key-value-78"}}"#,
                                    state: state)
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        for shown in ["json", "text", "base64"] {
            let url = TestServer.url("/echo/res-\(shown)-\(UUID().uuidString.prefix(6))")
            let done = try await engine.run(spec(#"{"type":"resource","url":"\#(url)","auth":"key","as":"\#(shown)"}"#))
            #expect(done.state == .succeeded, "\(shown): \(String(describing: done.error))")
            let text = JSONWriter.string(done.result ?? .null)
            #expect(!text.contains("key-value-78") && !text.contains(Data("key-value-78".utf8).base64EncodedString()), "\(shown): \(text)")
            if shown == "json" { #expect(done.result?["content"]?["headers"]?["x-api-key"] == "***") }
            // Served again from memory: masked the same way.
            let again = try await engine.run(spec(#"{"type":"resource","url":"\#(url)","auth":"key","as":"\#(shown)"}"#))
            #expect(again.result?["source"] == "memory" && !JSONWriter.string(again.result ?? .null).contains("key-value-78"), "\(shown)")
        }
        #expect(!log.all.map { JSONWriter.string($0.json) }.joined().contains("key-value-78"))
    }

    @Test func fixedSchemesSendTheirHeaderAndNeverShowIt() async throws {
        let engine = try makeEngine("""
            , "auth": {"ci": {"type": "bearer", "token": "ci-token-123"},
                       "old": {"type": "basic", "username": "u", "password": "pw-secret-9"},
                       "key": {"type": "api-key", "header": "X-Api-Key", "value": "key-value-77"}}
            """)
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let bearer = try await engine.run(spec(#"{"type":"remote","endpoint":"/echo/c","auth":"ci"}"#))
        #expect(bearer.state == .succeeded && bearer.result?["body"]?["headers"]?["authorization"] == "Bearer ***")
        let basic = try await engine.run(spec(#"{"type":"remote","endpoint":"/echo/b","auth":"old"}"#))
        #expect(basic.result?["body"]?["headers"]?["authorization"] == "Basic ***")
        let apiKey = try await engine.run(spec(#"{"type":"remote","endpoint":"/echo/k","auth":"key"}"#))
        #expect(apiKey.result?["body"]?["headers"]?["x-api-key"] == "***")
        // Credentials a job sets itself are masked in what comes back too.
        let own = try await engine.run(spec(#"{"type":"remote","endpoint":"/echo/o","headers":{"Authorization":"Token own-secret-1","Cookie":"sid=own-cookie-2"}}"#))
        #expect(own.result?["body"]?["headers"]?["authorization"] == "***" && own.result?["body"]?["headers"]?["cookie"] == "***")
        let text = log.all.map { JSONWriter.string($0.json) }.joined()
        for secret in ["own-secret-1", "own-cookie-2", "ci-token-123", "pw-secret-9", "key-value-77", Data("u:pw-secret-9".utf8).base64EncodedString()] {
            #expect(!text.contains(secret), "\(secret) in an event")
        }
        #expect(try engine.authStatus("ci").state == "valid")
        #expect(throws: JobError.self) { try engine.authStatus("nobody") }
    }

    /// With no default headers a fixed scheme's headers are shared, not built
    /// per request: the scheme still wins over the job's own Authorization, and
    /// the job's other headers still go out.
    @Test func aFixedSchemeMergesWithTheJobsOwnHeaders() async throws {
        let text = """
            {"servers": {"testsvr": "\(TestServer.base)"}, "defaults": {"server": "testsvr", "headers": {}},
             "auth": {"ci": {"type": "bearer", "token": "ci-token-456"}}}
            """
        let engine = try HydraEngine(configuration: try Configuration(json: try JSONParser.parse(text), environment: [:]),
                                     stateDirectory: NSTemporaryDirectory() + "hydra-tests")
        defer { engine.shutdown() }
        let alone = try await engine.run(spec(#"{"type":"remote","endpoint":"/echo/a","auth":"ci"}"#))
        #expect(alone.result?["body"]?["headers"]?["authorization"] == "Bearer ***")
        let mixed = try await engine.run(spec(#"{"type":"remote","endpoint":"/echo/m","auth":"ci","headers":{"X-Trace":"t-1","Authorization":"Token job-own-3"}}"#))
        #expect(mixed.result?["body"]?["headers"]?["authorization"] == "Bearer ***")
        #expect(mixed.result?["body"]?["headers"]?["x-trace"] == "t-1")
        let again = try await engine.run(spec(#"{"type":"remote","endpoint":"/echo/b","auth":"ci"}"#))
        #expect(again.result?["body"]?["headers"]?["authorization"] == "Bearer ***" && again.result?["body"]?["headers"]?["x-trace"] == nil)
        let none = try await engine.run(spec(#"{"type":"remote","endpoint":"/echo/n"}"#))
        #expect(none.result?["body"]?["headers"]?["authorization"] == nil)
    }

    @Test func namesAndValuesAreCheckedWhereTheyAreWritten() async throws {
        let engine = try makeEngine(#", "auth": {"ci": {"type": "bearer", "token": "t"}}"#)
        defer { engine.shutdown() }
        #expect(throws: ValidationError.self) { _ = try engine.prepare(spec(#"{"type":"remote","endpoint":"/x","auth":"nobody"}"#)) }
        do {
            _ = try engine.prepare(spec(#"{"type":"remote","endpoint":"/x","auth":"nobody"}"#))
        } catch let error as ValidationError {
            #expect(error.path == "auth" && error.reason.contains("unknown auth 'nobody'"))
        }
        func configError(_ members: String) -> String {
            do {
                _ = try Configuration(json: try JSONParser.parse("{\(members)}"))
                return ""
            } catch {
                return "\(error)"
            }
        }
        #expect(configError(#""auth": {"a": {"type": "kerberos"}}"#).contains("auth.a.type"))
        #expect(configError(#""auth": {"a": {"type": "bearer"}}"#).contains("auth.a.token"))
        #expect(configError(#""auth": {"a": {"type": "oauth2-password", "tokenUrl": "ftp://x", "clientId": "c"}}"#)
            .contains("auth.a.tokenUrl"))
        let missing = configError(#""auth": {"a": {"type": "bearer", "token": "${env.HYDRA_TEST_NEVER_SET_42}"}}"#)
        #expect(missing.contains("auth.a.token") && missing.contains("HYDRA_TEST_NEVER_SET_42 is not set"))
        #expect(configError(#""servers": {"s": {"url": "http://h", "auth": "nope"}}"#).contains("servers.s.auth"))
        #expect(configError(#""servers": {"s": "http://h"}, "apis": {"a": {"server": "s", "endpoint": "/", "auth": "nope"}}"#)
            .contains("apis.a.auth"))
        // An env value is read, and an api that opts in uses it.
        let fromEnv = try makeEngine("""
            , "auth": {"ci": {"type": "bearer", "token": "${env.HYDRA_TEST_AUTH_TOKEN}"}},
              "apis": {"me": {"server": "testsvr", "endpoint": "/bearer/from-env-55", "auth": "ci"}}
            """, environment: ["HYDRA_TEST_AUTH_TOKEN": "from-env-55"])
        defer { fromEnv.shutdown() }
        #expect(try await fromEnv.run(spec(#"{"type":"remote","api":"me"}"#)).result?["body"] == ["authenticated": true])
    }

    /// Over the real server: `auth.login` always answers `expiresAt` (`null`
    /// when the token endpoint gave no `expires_in`), and `auth.status` tells
    /// it too, both as ISO-8601 UTC times like every time on the wire.
    @Test func loginAndStatusTellExpiryAsWireTimes() throws {
        let key = UUID().uuidString
        let token = "\(TestServer.base)/oauth/token?key=\(key)"
        let server = try ServerProcess(config: """
            "auth": {"user": {"type": "oauth2-password", "tokenUrl": "\(token)&ttl=600", "clientId": "app", "clientSecret": "s3cret"},
                     "open": {"type": "oauth2-password", "tokenUrl": "\(token)&expires=0", "clientId": "app", "clientSecret": "s3cret"}}
            """)
        defer { server.terminate() }
        let client = try server.client()
        let before = Date().timeIntervalSince1970
        let login = try client.call("auth.login", ["name": "user", "username": "alice", "password": "wonderland"])
        #expect(login["ok"] == true)
        let expiresAt = try #require(wireTime(login["expiresAt"]), "\(login)")
        #expect(expiresAt > before + 599 && expiresAt < Date().timeIntervalSince1970 + 601)
        let status = try client.call("auth.status", ["name": "user"])
        #expect(status["state"] == "valid" && wireTime(status["expiresAt"]) == expiresAt, "\(status)")

        let open = try client.call("auth.login", ["name": "open", "username": "alice", "password": "wonderland"])
        #expect(open["ok"] == true && open["expiresAt"] == .some(.null), "\(open)")
        #expect(open.objectValue?.keys.elements == ["ok", "expiresAt"])
        let openStatus = try client.call("auth.status", ["name": "open"])
        #expect(openStatus["state"] == "valid" && openStatus["expiresAt"] == nil)
    }

    /// rest.md §1: a `job.queued` summary shows a remote job's headers with
    /// credential values as `***` (the fixed names, the configuration's
    /// api-key headers, names with `token`), the others as given; no event
    /// carries the secrets.
    @Test func jobQueuedSummariesShowHeadersWithCredentialsMasked() throws {
        let server = try ServerProcess(config: #""auth": {"key": {"type": "api-key", "header": "X-Custom-Key", "value": "k"}}"#)
        defer { server.terminate() }
        let client = try server.client()
        let watcher = try server.client()
        _ = try watcher.call("events.subscribe", [:])
        let headers: JSONValue = ["Authorization": "Bearer s3cret", "X-Trace": "t1", "cookie": "sid=c00kie-9",
                                  "X-Custom-Key": "own-key-7", "X-Auth-Token": "tok-en-5", "Proxy-Authorization": "Basic pr0xy-pw"]
        let job = try client.call("job.submit", ["job": ["type": "serial", "steps": [
            ["type": "remote", "endpoint": "/echo/h", "headers": headers],
        ]]])["jobId"]!
        #expect(try client.call("job.result", ["jobId": job, "waitMs": 10_000])["state"] == "succeeded")
        var events: [JSONValue] = []
        while let note = try watcher.nextNotification(timeout: .milliseconds(500)) { events.append(note) }
        let queued = events.compactMap { $0["params"] }.filter { $0["event"] == "job.queued" && $0["stepPath"] == "0" }
        #expect(queued.count == 1)
        let shown = try #require(queued.first?["spec"]?["headers"], "\(queued)")
        #expect(shown == ["Authorization": "***", "X-Trace": "t1", "cookie": "***", "X-Custom-Key": "***", "X-Auth-Token": "***",
                          "Proxy-Authorization": "***"])
        let text = events.map { JSONWriter.string($0) }.joined()
        #expect(text.contains("job.succeeded"))
        // (The echoed X-Auth-Token comes back in the result: responses are masked for rest.md's names only.)
        for secret in ["s3cret", "c00kie-9", "own-key-7", "pr0xy-pw"] {
            #expect(!text.contains(secret), "\(secret) in an event")
        }
    }

    /// Over the real server: `auth.*` methods, the CLI, and tokens sealed at rest across a restart.
    @Test func theServerLogsInOverRPCAndKeepsTokensSealed() throws {
        let key = UUID().uuidString
        let auth = #""auth": {"user": {"type": "oauth2-password", "tokenUrl": "\#(TestServer.base)/oauth/token?key=\#(key)", "clientId": "app", "clientSecret": "s3cret"}, "ci": {"type": "bearer", "token": "fixed-t0ken"}}"#
        let sharedKey = "a passphrase of sixteen+ characters"
        let server = try ServerProcess(config: auth, environment: ["HYDRA_SHARED_KEY": sharedKey])
        let client = try server.client()
        func error(_ method: String, _ params: JSONValue) -> (Int?, String) {
            do { _ = try client.call(method, params); return (nil, "") } catch { return (error.code, error.message) }
        }
        #expect(try client.call("auth.status", ["name": "user"])["state"] == "none")
        let refused = error("auth.login", ["name": "user", "username": "alice", "password": "wrong-pw"])
        #expect(refused.0 == -32602 && refused.1.contains("invalid_grant") && !refused.1.contains("wrong-pw"))
        // An unknown session is "not found" (protocol §2), for each auth.* method.
        for (method, params) in [("auth.login", ["name": "nobody", "username": "a", "password": "b"] as JSONValue),
                                 ("auth.status", ["name": "nobody"]), ("auth.logout", ["name": "nobody"])] {
            let unknown = error(method, params)
            #expect(unknown.0 == -32002 && unknown.1 == "name: unknown auth 'nobody'", "\(method): \(unknown)")
        }
        #expect(error("auth.login", ["name": "user", "password": "b"]).1.contains("username"))
        #expect(error("auth.status", ["name": 3]).0 == -32602)

        // The CLI reads the password from stdin when it is not a terminal.
        let cli = RunCommandTests()
        let connect = ["--connect", "\(server.address!)"]
        let empty = try cli.hydra(["auth", "login", "user", "--user", "alice"] + connect, stdin: "")
        #expect(empty.status == 2 && empty.err.contains("the password is empty"), "\(empty.err)")
        // --user is checked against the session's type before any password is read.
        let notPassword = try cli.hydra(["auth", "login", "ci", "--user", "alice"] + connect, stdin: "")
        #expect(notPassword.status == 2 && notPassword.err.contains("--user is for oauth2-password sessions; ci is bearer"),
                "\(notPassword.err)")
        let unknown = try cli.hydra(["auth", "login", "nobody", "--user", "alice"] + connect, stdin: "")
        #expect(unknown.status == 1 && unknown.err.contains("unknown auth 'nobody'") && !unknown.err.contains("password"),
                "\(unknown.err)")
        // A password the identity provider refuses was asked rightly: 1, as any refused call (not 2).
        let wrong = try cli.hydra(["auth", "login", "user", "--user", "alice"] + connect, stdin: "wrong-pw\n")
        #expect(wrong.status == 1 && wrong.err.contains("invalid_grant") && !wrong.err.contains("wrong-pw"), "\(wrong)")
        let login = try cli.hydra(["auth", "login", "user", "--user", "alice"] + connect, stdin: "wonderland\n")
        #expect(login.status == 0, "\(login.err)")
        #expect(try JSONParser.parse(login.out.trimmingCharacters(in: .whitespacesAndNewlines))["ok"] == true)
        let shown = try cli.hydra(["auth", "status"] + connect)
        #expect(shown.out.contains(#""state":"valid""#) && !shown.out.contains("tok-"))

        let job: JSONValue = ["type": "remote", "endpoint": "/protected/x", "query": ["key": .string(key)], "auth": "user"]
        let id = try client.call("job.submit", ["job": job])["jobId"]!
        #expect(try client.call("job.result", ["jobId": id, "waitMs": 10_000])["state"] == "succeeded")

        // Restart with the same key: the sealed token is still there, and never in clear on disk.
        let stopped = server.terminate()
        #expect(stopped.status == 0)
        expectNoTokenOnDisk(in: server.stateDirectory)
        // Nor in the server's log (rest.md §1): no password, client secret, token or shared key.
        for secret in ["wonderland", "wrong-pw", "s3cret", "tok-", "ref-", sharedKey] {
            #expect(!stopped.stderr.contains(secret), "\(secret) in stderr")
        }
        let again = try ServerProcess(config: auth, state: server.stateDirectory, environment: ["HYDRA_SHARED_KEY": sharedKey])
        defer { again.terminate() }
        let client2 = try again.client()
        #expect(try client2.call("auth.status", ["name": "user"])["state"] == "valid")
        let id2 = try client2.call("job.submit", ["job": job])["jobId"]!
        #expect(try client2.call("job.result", ["jobId": id2, "waitMs": 10_000])["state"] == "succeeded")
        #expect(try client2.call("auth.logout", ["name": "user"])["ok"] == true)
        #expect(try client2.call("auth.status", ["name": "user"])["state"] == "none")
        let all = try client2.call("auth.status", [:])
        #expect(all["sessions"]?.arrayValue?.count == 2)
    }

    /// No access or refresh token of the test token endpoint (`tok-…`, `ref-…`)
    /// in the server's database or its write-ahead log, in clear.
    func expectNoTokenOnDisk(in stateDirectory: String) {
        for file in ["hydra.db", "hydra.db-wal"] {
            guard let bytes = FileManager.default.contents(atPath: stateDirectory + "/" + file) else { continue }
            #expect(bytes.range(of: Data("tok-".utf8)) == nil && bytes.range(of: Data("ref-".utf8)) == nil, "a token in \(file)")
        }
    }

    /// rest.md §1: without `HYDRA_SHARED_KEY` tokens live in memory only. The
    /// real server, logged in and then restarted on the same state folder, has
    /// forgotten the session: `auth.status` says `none`, a job of the session is
    /// "not logged in", and no token ever reached the disk.
    /// Would catch: tokens kept at rest without a key (in clear, or sealed under
    /// a key of the server's own making): the restarted server would say `valid`.
    @Test func withoutASharedKeyARestartedServerLogsInAgain() throws {
        let key = UUID().uuidString
        let auth = #""auth": {"user": {"type": "oauth2-password", "tokenUrl": "\#(TestServer.base)/oauth/token?key=\#(key)&ttl=3600", "clientId": "app", "clientSecret": "s3cret"}}"#
        // (ServerProcess takes HYDRA_SHARED_KEY out of the server's environment.)
        let server = try ServerProcess(config: auth)
        let client = try server.client()
        #expect(try client.call("auth.login", ["name": "user", "username": "alice", "password": "wonderland"])["ok"] == true)
        #expect(try client.call("auth.status", ["name": "user"])["state"] == "valid")
        let job: JSONValue = ["type": "remote", "endpoint": "/protected/x", "query": ["key": .string(key)], "auth": "user"]
        let id = try client.call("job.submit", ["job": job])["jobId"]!
        #expect(try client.call("job.result", ["jobId": id, "waitMs": 10_000])["state"] == "succeeded")
        #expect(server.terminate().status == 0)
        expectNoTokenOnDisk(in: server.stateDirectory)

        let again = try ServerProcess(config: auth, state: server.stateDirectory)
        defer { again.terminate() }
        let client2 = try again.client()
        let status = try client2.call("auth.status", ["name": "user"])
        #expect(status["state"] == "none" && status["expiresAt"] == nil, "\(status)")
        let id2 = try client2.call("job.submit", ["job": job])["jobId"]!
        let refused = try client2.call("job.result", ["jobId": id2, "waitMs": 10_000])
        #expect(refused["state"] == "failed" && refused["error"]?["kind"] == "auth", "\(refused)")
        #expect(refused["error"]?["message"]?.stringValue?.contains("not logged in") == true, "\(refused)")
        // The one password grant was the login: nothing logged in again by itself.
        let count = try client2.call("job.submit", ["job": ["type": "remote", "endpoint": .string("/count/token:\(key)")]])["jobId"]!
        #expect(try client2.call("job.result", ["jobId": count, "waitMs": 10_000])["result"]?["body"]?["count"] == 1)
    }

    /// rest.md §1: "one token request, never one per job", when the waiting
    /// jobs run on two remote workers (each with its own loop and connection
    /// pool): a slow token endpoint keeps them all waiting for the one request.
    /// Would catch: a token fetch per worker (or per job) while one is in flight:
    /// the token endpoint would count 2 (or more) requests.
    @Test func jobsOnTwoRemoteWorkersWaitForOneTokenRequest() async throws {
        let key = UUID().uuidString
        // An hour's token (the 300 ms delay keeps every job waiting for the first fetch).
        let engine = try makeEngine("""
            , "workers": [{"name": "local", "kind": "local"}, {"name": "rest", "kind": "remote"}, {"name": "rest2", "kind": "remote"}],
              "auth": {"svc": {"type": "oauth2-client-credentials", "tokenUrl": "\(TestServer.base)/oauth/token?key=\(key)&delayMs=300&ttl=3600",
                               "clientId": "app", "clientSecret": "s3cret"}}
            """)
        defer { engine.shutdown() }
        let log = EventLog()
        _ = engine.subscribe(sink: log)
        let steps = (0..<20).map { i in
            #"{"type":"remote","endpoint":"/protected/x","query":{"key":"\#(key)"},"auth":"svc","worker":"\#(i % 2 == 0 ? "rest" : "rest2")"}"#
        }
        let fan = try await engine.run(spec(#"{"type":"concurrent","steps":[\#(steps.joined(separator: ","))]}"#))
        #expect(fan.state == .succeeded, "\(String(describing: fan.error))")
        // Both workers ran jobs of the session.
        let started = log.all.filter { $0.rootJobId == fan.jobId && $0.name == "job.started" && !$0.stepPath.isEmpty }
        #expect(Set(started.compactMap { $0.fields["worker"]?.stringValue }) == ["rest", "rest2"], "\(started.map(\.fields))")
        #expect(try await counter(engine, "token:\(key)") == 1)
        #expect(try await counter(engine, "protected:\(key)") == 20)
        #expect(try engine.authStatus("svc").tokenRequests == 1)
    }

    /// Merged jobs of a session share a request only when they carry the same
    /// token: a job holding a newer token (the old one revoked meanwhile) that
    /// joined a request sent with the old one masked only its own, and the old
    /// token showed in its result when the server echoed it.
    @Test func mergedJobsWithAnotherTokenDoNotShareARequest() async throws {
        let key = UUID().uuidString
        let engine = try engine(key)
        defer { engine.shutdown() }
        let slow = #"{"type":"remote","endpoint":"/protected/x","query":{"key":"\#(key)","ms":"1500"},"auth":"svc","coalesce":true}"#
        async let leader = engine.run(spec(slow))
        try await Task.sleep(for: .milliseconds(500))
        _ = try await engine.run(spec(#"{"type":"remote","endpoint":"/oauth/revoke","query":{"key":"\#(key)"}}"#))
        // A 401 on the revoked token: the session gets a new one.
        let renewed = try await engine.run(spec(#"{"type":"remote","endpoint":"/protected/y","query":{"key":"\#(key)"},"auth":"svc"}"#))
        #expect(renewed.state == .succeeded, "\(String(describing: renewed.error))")
        async let follower = engine.run(spec(slow))
        let (first, second) = try await (leader, follower)
        for done in [first, second] {
            let shown = done.result.map { JSONWriter.string($0) } ?? ""
            #expect(!shown.contains("tok-"), "a token in a result: \(shown)")
        }
        #expect(second.state == .succeeded && second.result?["body"]?["authorization"] == "Bearer ***",
                "\(String(describing: second.result))")
    }
}
