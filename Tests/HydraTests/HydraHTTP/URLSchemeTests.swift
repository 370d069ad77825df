import Testing

@testable import HydraHTTP

/// The byte test behind every request's scheme check (routing refuses other
/// schemes; the transfer waits for multiplexing on https).
@Suite(.ownThreads) struct URLSchemeTests {
    @Test func httpAndHTTPSOnlyWithTheirSlashes() {
        #expect(URLScheme(of: "http://h/p") == .http)
        #expect(URLScheme(of: "https://h") == .https)
        #expect(URLScheme(of: "http://") == .http)
        for other in ["", "http", "http:/h", "https:h", "httpx://h", "ftp://h", "HTTP://h", " http://h", "https:/", "htt://h"] {
            #expect(URLScheme(of: other) == nil, "\(other)")
        }
        #expect(URLScheme(of: "https://hôte.example/é") == .https)
    }
}
