import HydraCore
import OrderedCollections

/// Answers requests from configured dummy responses and Swift handlers,
/// without the network. Config entries match by server, endpoint pattern
/// (`:name` matches one segment, a trailing `*` the rest) and method.
struct DummyResponder: Sendable {
    let enabled: Bool
    let responses: [Configuration.DummyResponse]
    let handlers: [DummyHandler]

    func reply(to request: DummyRequest) -> DummyReply? {
        for handler in handlers {
            if let reply = handler(request) { return reply }
        }
        guard enabled else { return nil }
        for response in responses {
            if let server = response.server, server != request.server { continue }
            if let method = response.method, method != request.method { continue }
            if DummyResponder.matches(pattern: response.endpoint, path: request.path) {
                return DummyReply(status: response.status, headers: response.headers, body: response.body,
                                  delayMs: response.delayMs)
            }
        }
        return nil
    }

    static func matches(pattern: String, path: String) -> Bool {
        let path = path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? path
        let p = pattern.split(separator: "/", omittingEmptySubsequences: true)
        let s = path.split(separator: "/", omittingEmptySubsequences: true)
        for (i, part) in p.enumerated() {
            if part == "*" && i == p.count - 1 { return true }
            guard i < s.count else { return false }
            if part.hasPrefix(":") { continue }
            if part != s[i] { return false }
        }
        return p.count == s.count
    }
}
