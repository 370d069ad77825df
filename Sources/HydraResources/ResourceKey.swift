import Crypto
import HydraCore

/// The key of a resource (resources.md §1): the SHA-256 (hex) of its canonical
/// request — the method, the resolved URL with its query parameters sorted,
/// and the remaker's name with its options — so the same file asked with the
/// query in another order is one copy.
enum ResourceKey {
    static func make(url: String, remaker: String?, options: JSONValue?) -> String {
        var text = "GET " + canonicalURL(url)
        if let remaker {
            text += "\nremaker " + remaker
            // No options and `{}` are one request (the remaker gets `{}` either way).
            if let options, options != .object([:]) { text += " " + JSONWriter.string(options.sortedKeys) }
        }
        return Hex.string(SHA256.hash(data: Array(text.utf8)))
    }

    /// `url` with its query parameters sorted (the fragment dropped: never sent).
    static func canonicalURL(_ url: String) -> String {
        var base = url
        if let hash = base.firstIndex(of: "#") { base = String(base[..<hash]) }
        guard let q = base.firstIndex(of: "?") else { return base }
        let query = base[base.index(after: q)...].split(separator: "&", omittingEmptySubsequences: true).sorted()
        return String(base[..<q]) + (query.isEmpty ? "" : "?" + query.joined(separator: "&"))
    }

    static func sha256(_ bytes: [UInt8]) -> String { Hex.string(SHA256.hash(data: bytes)) }
}

extension JSONValue {
    /// The value with every object's members in key order (for canonical text).
    var sortedKeys: JSONValue {
        switch self {
        case .object(let o):
            var sorted = o
            sorted.sort { $0.key < $1.key }
            for (k, v) in sorted { sorted[k] = v.sortedKeys }
            return .object(sorted)
        case .array(let items): return .array(items.map(\.sortedKeys))
        default: return self
        }
    }
}
