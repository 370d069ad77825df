import Foundation
import Testing

@testable import Hydra
@testable import HydraHTTP

/// Transfers hand curl a URL parsed once (`CURLOPT_CURLU`) with its
/// normalized text: what curl then sends and reports must be what it made
/// of the text alone, when the reused easy handles change URLs, follow
/// redirects, and outlive the cache's entries.
@Suite(.ownThreads) struct ParsedURLTests {
    @Test func theNormalizedTextIsCurlsOwn() throws {
        #expect(ParsedURL("http://Example.COM:80/a/./b/../c?q=1#frag")?.normalized == "http://Example.COM:80/a/c?q=1#frag")
        #expect(ParsedURL("https://h/p")?.normalized == "https://h/p")
        // As curl reads `CURLOPT_URL`: a missing scheme is guessed, other schemes are parsed (and refused later).
        #expect(ParsedURL("h.example/x")?.normalized == "http://h.example/x")
        #expect(ParsedURL("ftp://h/x")?.normalized == "ftp://h/x")
        for refused in ["http://[::1", "http://h:99999/", "http://h/a b", "http://"] {
            #expect(ParsedURL(refused) == nil, "\(refused)")
        }
    }

    @Test func theCacheKeepsOneParsePerURLAndIsBounded() throws {
        let cache = ParsedURLCache()
        let first = try #require(cache.parsed("http://h/1"))
        #expect(cache.parsed("http://h/1") === first)
        #expect(cache.parsed("http://[::1") == nil)
        for n in 2...ParsedURLCache.capacity { _ = cache.parsed("http://h/\(n)") }
        // Full: the next new URL starts the cache again, and the evicted entry lives on where it is held.
        _ = cache.parsed("http://h/new")
        #expect(cache.parsed("http://h/1") !== first)
        #expect(first.normalized == "http://h/1")
        let long = "http://h/" + String(repeating: "x", count: ParsedURLCache.longestURL)
        let parsedLong = try #require(cache.parsed(long))
        #expect(cache.parsed(long) !== parsedLong)
    }

    /// Distinct URLs on four reused easy handles, each handle changing URL
    /// from one job to the next: each job gets its own path and query back.
    @Test func reusedHandlesFetchEachJobsOwnURL() async throws {
        let engine = try makeEngine(#""workers": [{"name": "rest", "kind": "remote", "maxConnections": 4, "maxHostConnections": 4, "maxActive": 4}]"#)
        defer { engine.shutdown() }
        let count = 150
        let results = try await withThrowingTaskGroup(of: (Int, JobResult).self) { group in
            for n in 0..<count {
                let job = #"{"type":"remote","url":"\#(TestServer.url("/echo/p\(n % 7)"))?n=\#(n)"}"#
                group.addTask { (n, try await engine.run(spec(job))) }
            }
            return try await group.reduce(into: [(Int, JobResult)]()) { $0.append($1) }
        }
        #expect(results.count == count)
        for (n, result) in results {
            #expect(result.state == .succeeded, "\(n): \(String(describing: result.error))")
            #expect(result.result?["body"]?["path"] == .string("/echo/p\(n % 7)") && result.result?["body"]?["query"]?["n"] == .string("\(n)"),
                    "\(n): \(String(describing: result.result?["body"]))")
        }
    }

    /// A handle that followed redirects (curl parses the new locations itself)
    /// goes back to the parsed URL of its next job; dot segments are removed
    /// as curl always did.
    @Test func afterRedirectsTheNextJobGoesToItsOwnURL() async throws {
        let engine = try makeEngine(#""workers": [{"name": "rest", "kind": "remote", "maxConnections": 1, "maxHostConnections": 1, "maxActive": 1}]"#)
        defer { engine.shutdown() }
        for round in 0..<3 {
            let redirected = try await engine.run(spec(#"{"type":"remote","endpoint":"/redirect/2"}"#))
            #expect(redirected.result?["body"]?["redirected"] == true, "\(round): \(String(describing: redirected.error))")
            let plain = try await engine.run(spec(#"{"type":"remote","url":"\#(TestServer.url("/echo/a/../b"))?round=\#(round)"}"#))
            #expect(plain.result?["body"]?["path"] == "/echo/b" && plain.result?["body"]?["query"]?["round"] == .string("\(round)"),
                    "\(round): \(String(describing: plain.result))")
        }
    }
}
