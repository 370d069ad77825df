import HydraCore
import OrderedCollections

/// Answers requests from configured dummy responses and Swift handlers,
/// without the network. Config entries match by server, endpoint pattern
/// (`:name` matches one segment, `:name=default` one or none, a trailing
/// `*` the rest) and method.
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

    /// Whether `path` (its query aside) fits `pattern`. A segment with a
    /// default (`:id=me`, rest.md §8) may be absent: a request built from the
    /// pattern leaves it out when its value is `""`. Linear in pattern ×
    /// path (the set of path positions each pattern segment can start at).
    static func matches(pattern: String, path: String) -> Bool {
        let path = path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? path
        let p = pattern.split(separator: "/", omittingEmptySubsequences: true)
        let s = path.split(separator: "/", omittingEmptySubsequences: true)
        var starts: Set<Int> = [0]
        for (i, part) in p.enumerated() {
            if part == "*" && i == p.count - 1 { return true }
            let variable = part.hasPrefix(":")
            let removable = variable && part.contains("=")
            var next: Set<Int> = []
            for j in starts {
                if removable { next.insert(j) }
                if j < s.count && (variable || part == s[j]) { next.insert(j + 1) }
            }
            guard !next.isEmpty else { return false }
            starts = next
        }
        return starts.contains(s.count)
    }
}
