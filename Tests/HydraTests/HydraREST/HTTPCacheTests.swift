import Foundation
import Testing

@testable import Hydra
@testable import HydraREST
@testable import HydraServer
@testable import HydraStore

/// The HTTP cache (rest.md §3): lifetimes from the response, revalidation
/// with 304, offline answers from stale responses, `cache.get`. Against the
/// test server's `/cacheable` route, with the server's store-backed cache.
@Suite(.ownThreads) struct HTTPCacheTests {
    // Lifetimes are an hour where a test needs a response to stay fresh: under
    // TSan the whole suite once stalled for over a minute between two requests.
    /// A service (for its store-backed response cache) whose `c` api caches with `cacheTTL` `ttl`.
    func service(base: String = TestServer.base, ttl: String = #""http""#, staleIfError: Int? = nil) throws -> (HydraService, String) {
        let folder = NSTemporaryDirectory() + "hydra-cache-\(UUID().uuidString)"
        let store = try SQLiteStore(directory: folder)
        let stale = staleIfError.map { #", "staleIfErrorSec": \#($0)"# } ?? ""
        let config = try Configuration(json: try JSONParser.parse("""
            {"servers": {"s": "\(base)"}, "defaults": {"server": "s", "timeoutMs": 5000},
             "apis": {"c": {"server": "s", "endpoint": "/cacheable/:key", "cacheTTL": \(ttl)\(stale)},
                      "q": {"server": "s", "endpoint": "/cacheable/:key", "cacheTTL": \(ttl), "cacheIgnoreQuery": true}}}
            """))
        return (try HydraService(configuration: config, store: store, stateDirectory: folder), folder)
    }

    /// Runs a GET of the api; then waits for the store to commit what it cached
    /// (cache writes are fire and forget: a request right after may miss them).
    func get(_ service: HydraService, _ key: String, _ query: JSONValue, api: String = "c") async throws -> JobResult {
        let done = try await service.engine.run(JobSpec(json: ["type": "remote", "api": .string(api), "pathVars": ["key": .string(key)], "query": query]))
        service.store.flush()
        return done
    }

    func counter(_ service: HydraService, _ name: String) async throws -> Int {
        let done = try await service.engine.run(spec(#"{"type":"remote","url":"\#(TestServer.base)/count/\#(name)"}"#))
        return try #require(done.result?["body"]?["count"]?.intValue)
    }

    @Test func lifetimesComeFromTheResponse() async throws {
        let (service, _) = try service()
        defer { service.engine.shutdown() }
        let cases: [(JSONValue, Bool)] = [
            (["cc": "max-age=3600"], true), (["cc": "public, s-maxage=3600, max-age=0"], true), (["expires": 3600], true),
            (["cc": "no-store, max-age=3600"], false), (["cc": "private, max-age=3600"], false), ([:], false),
            // no-cache alone gives no lifetime: not stored (rest.md §3).
            (["cc": "no-cache"], false),
        ]
        for (query, cached) in cases {
            let key = UUID().uuidString
            let first = try await get(service, key, query)
            let second = try await get(service, key, query)
            #expect(first.result?["fromCache"] == false)
            #expect(second.result?["fromCache"] == .bool(cached), "\(query)")
            #expect(second.result?["body"]?["n"] == (cached ? 1 : 2), "\(query)")
            #expect(try await counter(service, "cacheable:\(key)") == (cached ? 1 : 2))
            // Not stored at all, not merely stale (cache.get looks without the network).
            let url = try #require(first.result?["url"]?.stringValue)
            let stored = await withCheckedContinuation { done in
                service.cachedResponse(url: url, key: nil) { done.resume(returning: (try? $0.get()) != nil) }
            }
            #expect(stored == cached, "\(query)")
        }
        // A fixed lifetime honours no-store too.
        let (fixed, _) = try self.service(ttl: "60")
        defer { fixed.engine.shutdown() }
        let key = UUID().uuidString
        _ = try await get(fixed, key, ["cc": "no-store"])
        #expect(try await get(fixed, key, ["cc": "no-store"]).result?["fromCache"] == false)
        _ = try await get(fixed, key + "b", [:])
        #expect(try await get(fixed, key + "b", [:]).result?["fromCache"] == true)
    }

    @Test func aStaleResponseIsRevalidatedWithItsValidators() async throws {
        let (service, _) = try service()
        defer { service.engine.shutdown() }
        let key = UUID().uuidString
        // max-age=0: stored, stale at once, and kept for revalidation by its ETag.
        let query: JSONValue = ["cc": "max-age=0", "etag": "\"v1\""]
        #expect(try await get(service, key, query).result?["fromCache"] == false)
        let again = try await get(service, key, query)
        #expect(again.state == .succeeded, "\(String(describing: again.error))")
        #expect(again.result?["fromCache"] == true && again.result?["revalidated"] == true)
        #expect(again.result?["body"]?["n"] == 1 && again.result?["status"] == 200)
        #expect(try await counter(service, "304:\(key)") == 1)
        // Last-Modified alone works too, and a 304 that gives a lifetime makes the copy fresh again.
        let other = UUID().uuidString
        let dated: JSONValue = ["cc": "max-age=0", "lm": "Tue, 24 Nov 2026 10:00:00 GMT"]
        _ = try await get(service, other, dated)
        #expect(try await get(service, other, dated).result?["revalidated"] == true)
        let renewed = UUID().uuidString
        // (The api `q` keys its cache without the query, so the server's next headers apply to the same copy.)
        _ = try await get(service, renewed, ["cc": "max-age=0", "etag": "\"r\""], api: "q")
        let revalidated = try await get(service, renewed, ["cc": "max-age=3600", "etag": "\"r\""], api: "q")
        #expect(revalidated.result?["revalidated"] == true)
        let fresh = try await get(service, renewed, ["cc": "max-age=3600", "etag": "\"r\""], api: "q")
        #expect(fresh.result?["fromCache"] == true && fresh.result?["revalidated"] == nil)
        #expect(try await counter(service, "cacheable:\(renewed)") == 2)
    }

    @Test func aServerThatGoesAwayIsAnsweredFromTheStaleCopy() async throws {
        let own = OwnTestServer()
        let (service, _) = try service(base: own.base, staleIfError: 3600)
        defer { service.engine.shutdown() }
        let log = EventLog()
        _ = service.engine.subscribe(sink: log)
        let key = UUID().uuidString
        let query: JSONValue = ["cc": "max-age=0", "etag": "\"v\""]
        _ = try await get(service, key, query)
        #expect(try await get(service, key, query).result?["revalidated"] == true)  // a 304, then it goes away
        own.stop()
        let offline = try await get(service, key, query)
        #expect(offline.state == .succeeded, "\(String(describing: offline.error))")
        #expect(offline.result?["fromCache"] == true && offline.result?["stale"] == true && offline.result?["body"]?["n"] == 1)
        let names = log.all.filter { $0.rootJobId == offline.jobId }.map(\.name)
        #expect(names.suffix(2) == ["job.skipped", "job.succeeded"])
        #expect(log.all.first { $0.rootJobId == offline.jobId && $0.name == "job.skipped" }?.fields["reason"] == "stale")
        // Nothing stored for a URL never fetched: the failure stands.
        let never = try await get(service, UUID().uuidString, query)
        #expect(never.state == .failed && never.error?.kind == .network)
    }

    @Test func aCopyTooFarPastItsLifetimeDoesNotAnswer() async throws {
        let own = OwnTestServer()
        let (service, _) = try service(base: own.base, staleIfError: 0)
        defer { service.engine.shutdown() }
        let key = UUID().uuidString
        _ = try await get(service, key, ["cc": "max-age=0", "etag": "\"v\""])
        own.stop()
        try await Task.sleep(for: .milliseconds(20))
        let offline = try await get(service, key, ["cc": "max-age=0", "etag": "\"v\""])
        #expect(offline.state == .failed && offline.error?.kind == .network)
    }

    /// rest.md §3 at job level: `"cache": {"ttlSec": "http"}` on a job without an
    /// api (so no `cacheTTL` applies) takes the lifetime from the response:
    /// `max-age=120` stores it for 120 s and the next job is answered from the
    /// cache; a response that gives no lifetime is not stored.
    /// Would catch: a job's `"http"` ignored or read as no lifetime (nothing
    /// stored: the second job would reach the server), a fixed lifetime used
    /// instead of the response's (`expiresAt` would not be 120 s after
    /// `storedAt`), and a response without a lifetime stored anyway.
    /// A `206` (part of a body: RFC 9111 §3.3) is never kept as the whole
    /// response, even with a fixed lifetime: the next job goes to the server.
    @Test func aPartialAnswerIsNeverCached() async throws {
        let (service, _) = try service()
        defer { service.engine.shutdown() }
        let key = "p206-" + UUID().uuidString.prefix(8)
        for _ in 0..<2 {
            let done = try await service.engine.run(JobSpec(json: [
                "type": "remote", "endpoint": .string("/count-status/\(key)/206"), "cache": ["ttlSec": 3600]]))
            service.store.flush()
            #expect(done.state == .succeeded && done.result?["status"] == 206 && done.result?["fromCache"] == false,
                    "\(String(describing: done.result))")
        }
        #expect(try await counter(service, key) == 2)
    }

    @Test func aJobsHTTPLifetimeComesFromTheResponse() async throws {
        let (service, _) = try service()
        defer { service.engine.shutdown() }
        func run(_ key: String, _ query: JSONValue) async throws -> JobResult {
            let done = try await service.engine.run(JobSpec(json: [
                "type": "remote", "endpoint": .string("/cacheable/\(key)"), "query": query, "cache": ["ttlSec": "http"],
            ]))
            service.store.flush()
            #expect(done.state == .succeeded, "\(String(describing: done.error))")
            return done
        }
        let key = UUID().uuidString
        let first = try await run(key, ["cc": "max-age=120"])
        let second = try await run(key, ["cc": "max-age=120"])
        #expect(first.result?["fromCache"] == false)
        #expect(second.result?["fromCache"] == true && second.result?["body"]?["n"] == 1, "\(String(describing: second.result))")
        #expect(try await counter(service, "cacheable:\(key)") == 1)
        let url = try #require(first.result?["url"]?.stringValue)
        let stored = try await withCheckedThrowingContinuation { done in
            service.cachedResponse(url: url, key: nil) { done.resume(with: $0.mapError { $0 as Error }) }
        }
        let storedAt = try #require(wireTime(stored["storedAt"]), "\(stored)")
        let expiresAt = try #require(wireTime(stored["expiresAt"]), "\(stored)")
        #expect(abs(expiresAt - storedAt - 120) < 1.5, "\(stored)")

        // No lifetime in the response: nothing stored, each job goes to the server.
        let bare = UUID().uuidString
        _ = try await run(bare, [:])
        #expect(try await run(bare, [:]).result?["fromCache"] == false)
        #expect(try await counter(service, "cacheable:\(bare)") == 2)
    }

    /// rest.md §3 at job level: `"cache": {"ttlSec": "http", "staleIfErrorSec": N}`
    /// on a job without an api: when the server fails (a 503), the stored
    /// response past its lifetime answers, `fromCache` and `stale`, after a
    /// `job.skipped` with reason `stale`; the same job without `staleIfErrorSec`
    /// fails with the 503.
    /// Would catch: a job's `staleIfErrorSec` ignored (only the api's read: the
    /// job would fail with the 503), the stale answer given without being asked
    /// for, and a stale answer without its marks or its `job.skipped` event.
    @Test func aJobsStaleIfErrorSecAnswersWhenTheServerFails() async throws {
        let (service, _) = try service()
        defer { service.engine.shutdown() }
        let log = EventLog()
        _ = service.engine.subscribe(sink: log)
        for staleIfErrorSec in [3600, nil] {
            let key = UUID().uuidString
            var cache: JSONValue = ["ttlSec": "http"]
            if let staleIfErrorSec { cache = ["ttlSec": "http", "staleIfErrorSec": .int(staleIfErrorSec)] }
            // max-age=0: stored, and stale at once; every request after the first answers 503.
            let job = try JobSpec(json: ["type": "remote", "endpoint": .string("/cacheable/\(key)"),
                                         "query": ["cc": "max-age=0", "fail": "503"], "cache": cache])
            let first = try await service.engine.run(job)
            service.store.flush()
            #expect(first.state == .succeeded && first.result?["fromCache"] == false, "\(String(describing: first.error))")
            let failing = try await service.engine.run(job)
            #expect(try await counter(service, "cacheable:\(key)") == 2)  // the second job did ask the server
            guard staleIfErrorSec != nil else {
                #expect(failing.state == .failed && failing.error?.kind == .http && failing.error?.status == 503,
                        "answered without staleIfErrorSec: \(String(describing: failing.result))")
                continue
            }
            #expect(failing.state == .succeeded, "\(String(describing: failing.error))")
            #expect(failing.result?["fromCache"] == true && failing.result?["stale"] == true && failing.result?["body"]?["n"] == 1,
                    "\(String(describing: failing.result))")
            let names = log.all.filter { $0.rootJobId == failing.jobId }.map(\.name)
            #expect(names.suffix(2) == ["job.skipped", "job.succeeded"], "\(names)")
            #expect(log.all.first { $0.rootJobId == failing.jobId && $0.name == "job.skipped" }?.fields["reason"] == "stale")
        }
        // An attempt that timed out counts as the server failing (rest.md §3: network, timeout, 5xx).
        let key = UUID().uuidString
        let slow = try JobSpec(json: ["type": "remote", "endpoint": .string("/cacheable/\(key)"), "timeoutMs": 300,
                                      "query": ["cc": "max-age=0", "slowAfter": "3000"],
                                      "cache": ["ttlSec": "http", "staleIfErrorSec": 3600]])
        #expect(try await service.engine.run(slow).state == .succeeded)
        service.store.flush()
        let timedOut = try await service.engine.run(slow)
        #expect(timedOut.state == .succeeded && timedOut.result?["stale"] == true && timedOut.result?["body"]?["n"] == 1,
                "\(String(describing: timedOut.error))")
    }

    /// `cache.get {url}` finds what requests of that URL stored under other
    /// keys: a session's variant (`GET URL session=NAME`), and an api's entry
    /// stored without the query (`cacheIgnoreQuery`); `cache.remove {url}`
    /// removes every variant.
    @Test func cacheGetAndRemoveFindEveryVariantOfAURL() throws {
        let key = UUID().uuidString
        let server = try ServerProcess(config: """
            "auth": {"svc": {"type": "oauth2-client-credentials", "tokenUrl": "\(TestServer.base)/oauth/token?key=\(key)",
                             "clientId": "app", "clientSecret": "s3cret"}},
            "apis": {"q": {"server": "testsvr", "endpoint": "/cacheable/:key", "cacheTTL": 3600, "cacheIgnoreQuery": true}}
            """)
        defer { server.terminate() }
        let client = try server.client()
        func run(_ job: JSONValue) throws {
            let id = try client.call("job.submit", ["job": job])["jobId"]!
            let done = try client.call("job.result", ["jobId": id, "waitMs": 10_000])
            #expect(done["state"] == "succeeded", "\(done)")
        }
        func notFound(_ url: String) -> Bool {
            do { _ = try client.call("cache.get", ["url": .string(url)]); return false } catch { return error.code == -32002 }
        }
        // A session's request: cached as `GET URL session=svc`.
        try run(["type": "remote", "endpoint": "/protected/x", "query": ["key": .string(key)], "auth": "svc", "cache": ["ttlSec": 3600]])
        let protected = "\(TestServer.base)/protected/x?key=\(key)"
        let variant = try client.call("cache.get", ["url": .string(protected)])
        #expect(variant["key"] == .string("GET \(protected) session=svc"), "\(variant)")
        #expect(variant["result"]?["body"]?["ok"] == true && wireTime(variant["storedAt"]) != nil)
        // The token never shows in what cache.get returns.
        #expect(!JSONWriter.string(variant).contains("tok-"))

        // An api that ignores the query: found from the URL as requested, query and all.
        try run(["type": "remote", "api": "q", "pathVars": ["key": .string(key)], "query": ["a": "1"]])
        let queryless = try client.call("cache.get", ["url": .string("\(TestServer.base)/cacheable/\(key)?a=1")])
        #expect(queryless["key"] == .string("GET \(TestServer.base)/cacheable/\(key)"), "\(queryless)")
        #expect(queryless["result"]?["body"]?["key"] == .string(key))

        // cache.remove {url} takes the session's variant too.
        let removed = try client.call("cache.remove", ["url": .string(protected)])
        #expect(removed["removed"] == 1, "\(removed)")
        #expect(notFound(protected))
        // An api the configuration lacks is a typo, not "nothing to remove"; a known one removes its entries.
        do {
            _ = try client.call("cache.remove", ["api": "qq"])
            Issue.record("cache.remove of an unknown api answered")
        } catch {
            #expect(error.code == -32002 && error.message.contains("unknown api 'qq'"), "\(error)")
        }
        #expect(try client.call("cache.remove", ["api": "q"])["removed"] == 1)
    }

    @Test func cacheGetReadsTheStoreAndNeverTheNetwork() throws {
        let key = UUID().uuidString
        let server = try ServerProcess(config: #""apis": {"c": {"server": "testsvr", "endpoint": "/cacheable/:key", "cacheTTL": "http"}}"#)
        defer { server.terminate() }
        let client = try server.client()
        let job: JSONValue = ["type": "remote", "api": "c", "pathVars": ["key": .string(key)], "query": ["cc": "max-age=60", "etag": "\"e1\""]]
        let id = try client.call("job.submit", ["job": job])["jobId"]!
        #expect(try client.call("job.result", ["jobId": id, "waitMs": 10_000])["state"] == "succeeded")
        let url = "\(TestServer.base)/cacheable/\(key)?cc=max-age%3D60&etag=%22e1%22"
        let entry = try client.call("cache.get", ["url": .string(url)])
        #expect(entry["key"] == .string("GET " + url) && entry["etag"] == "\"e1\"")
        #expect(entry["result"]?["body"]?["n"] == 1)
        // Times as every time on the wire: ISO-8601 UTC with milliseconds.
        let stored = try #require(wireTime(entry["storedAt"]), "\(entry)")
        let expires = try #require(wireTime(entry["expiresAt"]), "\(entry)")
        #expect(abs(expires - stored - 60) < 0.002)
        #expect(abs(stored - Date().timeIntervalSince1970) < 60)
        do {
            _ = try client.call("cache.get", ["url": "http://127.0.0.1:1/never"])
            Issue.record("expected -32002")
        } catch {
            #expect(error.code == -32002)
        }
        let cli = try RunCommandTests().hydra(["cache", "get", url, "--connect", "\(server.address!)"])
        #expect(cli.status == 0 && cli.out.contains(#""etag":"\"e1\"""#), "\(cli.err)")
        let missing = try RunCommandTests().hydra(["cache", "get", "http://127.0.0.1:1/never", "--connect", "\(server.address!)"])
        #expect(missing.status == 1 && missing.err.contains("nothing cached"))
        // A bare `cache rm` would empty the cache: refused (exit 2); `--all` does it.
        let bare = try RunCommandTests().hydra(["cache", "rm", "--connect", "\(server.address!)"])
        #expect(bare.status == 2 && bare.err.contains("--all"), "\(bare.err)")
        #expect(try client.call("cache.get", ["url": .string(url)])["key"] != nil)  // still there
        let all = try RunCommandTests().hydra(["cache", "rm", "--all", "--connect", "\(server.address!)"])
        #expect(all.status == 0 && all.out.contains(#""removed":"#), "\(all.err)")
    }

    /// A `saveAs` job's result names its own file: a stored response (another
    /// job's, with another file) is no answer for it, so every one is fetched and written.
    @Test func saveAsJobsAreNotAnsweredFromTheCache() async throws {
        let (service, folder) = try service(ttl: "60")
        defer { service.engine.shutdown() }
        let key = UUID().uuidString
        for name in ["a", "b"] {
            let done = try await service.engine.run(spec(#"{"type":"remote","api":"c","pathVars":{"key":"\#(key)"},"saveAs":"saved/\#(name).bin"}"#))
            service.store.flush()
            #expect(done.state == .succeeded, "\(String(describing: done.error))")
            #expect(done.result?["fromCache"] != true)
            #expect(FileManager.default.fileExists(atPath: folder + "/saved/\(name).bin"))
        }
        #expect(try await counter(service, "cacheable:\(key)") == 2)
    }

    /// A conditional request (a stale entry with an ETag) is not shared with a
    /// merged job that did not ask for it: the 304 is about the first job's
    /// stored response, and the second would fail with "HTTP 304".
    @Test func aRevalidatingRequestIsNotSharedWithAMergedJob() async throws {
        let folder = NSTemporaryDirectory() + "hydra-cache-\(UUID().uuidString)"
        let store = try SQLiteStore(directory: folder)
        let config = try Configuration(json: try JSONParser.parse("""
            {"servers": {"s": "\(TestServer.base)"}, "defaults": {"server": "s", "timeoutMs": 10000},
             "apis": {"c": {"server": "s", "endpoint": "/cacheable/:key", "cacheTTL": 1, "coalesce": true}}}
            """))
        let service = try HydraService(configuration: config, store: store, stateDirectory: folder)
        defer { service.engine.shutdown() }
        let key = UUID().uuidString
        let base = #""api":"c","pathVars":{"key":"\#(key)"},"query":{"etag":"\"v1\"","ms":"800"}"#
        let first = try await service.engine.run(spec("{\"type\":\"remote\",\(base)}"))
        #expect(first.state == .succeeded)
        service.store.flush()
        try await Task.sleep(for: .milliseconds(1200))  // the entry is stale now: the next GET revalidates
        async let leader = service.engine.run(spec("{\"type\":\"remote\",\(base)}"))
        try await Task.sleep(for: .milliseconds(300))
        async let follower = service.engine.run(spec("{\"type\":\"remote\",\(base),\"cache\":{\"mode\":\"refresh\"}}"))
        let (revalidated, refreshed) = try await (leader, follower)
        #expect(revalidated.state == .succeeded && revalidated.result?["revalidated"] == true, "\(String(describing: revalidated.error))")
        #expect(refreshed.state == .succeeded && refreshed.result?["status"] == 200, "\(String(describing: refreshed.error))")
    }

    /// A polling job judges every round's response: the api's cached response
    /// does not end it (rest.md §5: rounds go on until the condition holds).
    @Test func aPollingJobIsNotAnsweredFromTheCache() async throws {
        let (service, _) = try service(ttl: "60")
        defer { service.engine.shutdown() }
        let key = UUID().uuidString
        let plain = try await get(service, key, [:])
        #expect(plain.result?["body"]?["n"] == 1)
        let polled = try await service.engine.run(spec("""
            {"type":"remote","api":"c","pathVars":{"key":"\(key)"},
             "repeat":{"everyMs":1,"until":{"path":"body.n","equals":3},"maxTimes":5}}
            """))
        #expect(polled.state == .succeeded && polled.result?["body"]?["n"] == 3, "\(String(describing: polled.result))")
        #expect(polled.result?["fromCache"] != true)
    }

    /// rest.md §3: the stale answer is for when *every* attempt failed with
    /// kind network, timeout or a 5xx; a 429 among them rules it out.
    @Test func aStaleAnswerNeedsEveryAttemptToHaveFailedThatWay() async throws {
        let (service, _) = try service(staleIfError: 3600)
        defer { service.engine.shutdown() }
        for (failures, staleAnswer) in [("503,503", true), ("429,503", false)] {
            let key = UUID().uuidString
            let query: JSONValue = ["cc": "max-age=0", "fail": .string(failures)]
            _ = try await get(service, key, query)
            let done = try await service.engine.run(JobSpec(json: [
                "type": "remote", "api": "c", "pathVars": ["key": .string(key)], "query": query,
                "retry": ["maxAttempts": 2, "backoffMs": 1],
            ]))
            #expect((done.result?["stale"] == true) == staleAnswer, "\(failures): \(String(describing: done.result ?? done.error.map { JSONValue.string("\($0)") }))")
            if !staleAnswer { #expect(done.error?.kind == .http && done.error?.status == 503) }
        }
    }

    /// The cache key names the dogma a job decodes with when it is not the
    /// default one (the job's, else its api's): a response decoded as text for
    /// one api is no answer for another api's job that decodes JSON.
    @Test func anApisDogmaIsPartOfTheCacheKey() async throws {
        let folder = NSTemporaryDirectory() + "hydra-cache-\(UUID().uuidString)"
        let store = try SQLiteStore(directory: folder)
        let config = try Configuration(json: try JSONParser.parse("""
            {"servers": {"s": "\(TestServer.base)"}, "defaults": {"server": "s", "timeoutMs": 5000},
             "apis": {"t": {"server": "s", "endpoint": "/cacheable/:key", "cacheTTL": 3600, "dogma": "text"},
                      "j": {"server": "s", "endpoint": "/cacheable/:key", "cacheTTL": 3600}}}
            """))
        let service = try HydraService(configuration: config, store: store, stateDirectory: folder)
        defer { service.engine.shutdown() }
        let key = UUID().uuidString
        let asText = try await service.engine.run(JobSpec(json: ["type": "remote", "api": "t", "pathVars": ["key": .string(key)]]))
        service.store.flush()
        #expect(asText.result?["body"]?.stringValue != nil, "\(String(describing: asText.result))")
        let asJSON = try await service.engine.run(JobSpec(json: ["type": "remote", "api": "j", "pathVars": ["key": .string(key)]]))
        #expect(asJSON.result?["fromCache"] != true && asJSON.result?["body"]?["n"] != nil, "\(String(describing: asJSON.result))")
        service.store.flush()
        // Each api's own entry answers its own next job.
        let textAgain = try await service.engine.run(JobSpec(json: ["type": "remote", "api": "t", "pathVars": ["key": .string(key)]]))
        #expect(textAgain.result?["fromCache"] == true && textAgain.result?["body"]?.stringValue != nil)
    }

    /// A URL's `user:password` is a credential: curl sends it as Basic, and
    /// neither it nor that header's value comes back in a result, an error, an
    /// event or a cache key (which still tells two users apart).
    @Test func aURLsUserAndPasswordNeverShow() async throws {
        let (service, _) = try service()
        defer { service.engine.shutdown() }
        let log = EventLog()
        _ = service.engine.subscribe(sink: log)
        let host = TestServer.base.dropFirst("http://".count)
        func url(_ user: String) -> String { "http://\(user):url-Secret%2Dpw@\(host)/echo/u" }
        let ok = try await service.engine.run(spec(#"{"type":"remote","url":"\#(url("usr"))","cache":{"ttlSec":60}}"#))
        #expect(ok.state == .succeeded)
        #expect(ok.result?["url"] == .string("http://***@\(host)/echo/u"))
        #expect(ok.result?["body"]?["headers"]?["authorization"] == "Basic ***")
        let other = try await service.engine.run(spec(#"{"type":"remote","url":"\#(url("bob"))","cache":{"ttlSec":60}}"#))
        #expect(other.result?["fromCache"] == false, "another user's credentials were answered from the cache")
        let failed = try await service.engine.run(spec(#"{"type":"remote","url":"\#(url("usr"))","expect":[201]}"#))
        #expect(failed.state == .failed && failed.error?.body != nil)
        service.store.flush()
        let keys = log.all.filter { $0.name == "cache.updated" }.map { JSONWriter.string($0.json) }
        #expect(keys.count == 2)
        let text = [ok.json, other.json, failed.json].map { JSONWriter.string($0) }.joined()
            + log.all.map { JSONWriter.string($0.json) }.joined()
        for secret in ["url-Secret", "Secret-pw", Data("usr:url-Secret-pw".utf8).base64EncodedString()] {
            #expect(!text.contains(secret), "\(secret) came back")
        }
        // A URL from a reference is checked once resolved: its refusal names the scheme, not the password.
        let refused = try await service.engine.run(spec(#"{"type":"serial","steps":[{"type":"local","name":"echo","input":{"u":"ftp://usr:url-Secret-pw@\#(host)/x"}},{"type":"remote","url":"${prev.u}"}]}"#))
        #expect(refused.state == .failed && refused.error?.kind == .invalid)
        #expect(refused.error?.message.contains("got \"ftp://\"") == true, "\(String(describing: refused.error))")
        let noScheme = try await service.engine.run(spec(#"{"type":"serial","steps":[{"type":"local","name":"echo","input":{"u":"usr:url-Secret-pw@\#(host)/x"}},{"type":"remote","url":"${prev.u}"}]}"#))
        #expect(noScheme.error?.message.contains("got no scheme") == true, "\(String(describing: noScheme.error))")
        // (The echo step's own result holds the URL it was given: only the remote step's failure is checked.)
        let failures = log.all.filter { $0.name == "job.failed" && $0.stepPath == "1" && [refused.jobId, noScheme.jobId].contains($0.rootJobId) }
        #expect(failures.count == 2)
        for failure in [refused.error?.message ?? "", noScheme.error?.message ?? ""] + failures.map({ JSONWriter.string($0.json) }) {
            #expect(!failure.contains("Secret"), "\(failure)")
        }
        // cache.get and cache.remove find a user's entry by its URL, credentials and all, and only that user's.
        let got = try await withCheckedThrowingContinuation { done in
            service.cachedResponse(url: url("usr"), key: nil) { done.resume(with: $0.mapError { $0 as Error }) }
        }
        #expect(got["result"]?["url"] == ok.result?["url"] && got["key"]?.stringValue?.contains("url-Secret") == false)
        let removed = try await withCheckedThrowingContinuation { done in
            service.removeCached(api: nil, url: url("bob"), prefix: nil) { done.resume(with: $0.mapError { $0 as Error }) }
        }
        #expect(removed == 1)

        // A password that is also a common word is no reason to rewrite the response's own text.
        let plainWord = try await service.engine.run(spec(#"{"type":"remote","url":"http://u:json@\#(host)/echo/w"}"#))
        #expect(plainWord.result?["headers"]?["content-type"]?.stringValue?.hasPrefix("application/json") == true, "\(plainWord.json)")
        #expect(plainWord.result?["body"]?["headers"]?["authorization"] == "Basic ***", "\(plainWord.json)")
    }

    /// Every credential header tells callers apart in a cache key, a short
    /// value too (masking starts at 4 characters; the key must not).
    @Test func shortCredentialValuesStillSeparateCallers() {
        let url = "http://h/x"
        let a = CacheKey.make(url: url, headers: [HTTPHeader("X-Api-Key", "abc")], keyedBy: Array(repeating: 7, count: 32))
        let b = CacheKey.make(url: url, headers: [HTTPHeader("X-Api-Key", "xyz")], keyedBy: Array(repeating: 7, count: 32))
        let none = CacheKey.make(url: url, keyedBy: Array(repeating: 7, count: 32))
        #expect(a != b && a.hasPrefix("GET \(url) auth=") && none == "GET \(url)")
    }
    /// A lifetime is what the response says, however long (rest.md §3), up
    /// to RFC 9111's 2^31 seconds, which larger or overflowing values become;
    /// a malformed age is stale.
    @Test func longLifetimesAreKeptAsGiven() {
        func lifetime(_ headers: JSONValue) -> Double? { HTTPCachePolicy.lifetime(headers, now: 1_000_000) }
        let tenYears = 315_360_000.0
        #expect(lifetime(["cache-control": "max-age=315360000"]) == tenYears)
        #expect(lifetime(["cache-control": "s-maxage=315360000, max-age=5"]) == tenYears)
        #expect(lifetime(["cache-control": "max-age=99999999999999999999999"]) == 2_147_483_648)
        #expect(lifetime(["cache-control": "max-age=3000000000"]) == 2_147_483_648)
        #expect(lifetime(["cache-control": "max-age=-1"]) == 0)
        #expect(lifetime(["cache-control": "max-age=1e3"]) == 0)
        #expect(lifetime(["cache-control": "max-age="]) == 0)
        #expect(lifetime(["cache-control": "max-age=\"120\""]) == 120)
        // Expires counts from the response's Date: ten years (with three leap days) ahead.
        #expect(lifetime(["expires": "Thu, 01 Jan 2037 00:00:00 GMT", "date": "Fri, 01 Jan 2027 00:00:00 GMT"]) == 315_619_200)
        #expect(lifetime(["expires": "Mon, 01 Jan 2227 00:00:00 GMT", "date": "Fri, 01 Jan 2027 00:00:00 GMT"]) == 2_147_483_648)
        #expect(lifetime(["expires": "Fri, 01 Jan 2027 00:00:00 GMT", "date": "Fri, 01 Jan 2027 01:00:00 GMT"]) == 0)
    }
}
