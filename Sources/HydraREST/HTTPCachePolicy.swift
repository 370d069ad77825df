import Foundation
import HydraCore
import HydraHTTP

/// What a response's headers say about caching it (RFC 9111, as a shared
/// cache reads them; rest.md §3): whether it may be stored, for how long it
/// is fresh, and its validators. Works on a result's `headers` object
/// (names lowercased). Pure; any thread.
enum HTTPCachePolicy {
    /// The directives of `Cache-Control`, names lowercased, values unquoted.
    static func directives(_ headers: JSONValue?) -> [String: String] {
        guard let text = headers?["cache-control"]?.stringValue else { return [:] }
        var out: [String: String] = [:]
        for item in text.split(separator: ",") {
            let parts = item.split(separator: "=", maxSplits: 1)
            let name = parts[0].trimmingCharacters(in: .whitespaces).lowercased()
            guard !name.isEmpty else { continue }
            var value = parts.count > 1 ? parts[1].trimmingCharacters(in: .whitespaces) : ""
            if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 { value = String(value.dropFirst().dropLast()) }
            out[name] = value
        }
        return out
    }

    /// True when a shared cache must not keep the response (`no-store`, `private`).
    static func forbidsStoring(_ headers: JSONValue?) -> Bool {
        let d = directives(headers)
        return d["no-store"] != nil || d["private"] != nil
    }

    /// The freshness lifetime in seconds the response gives itself: `s-maxage`,
    /// else `max-age`, else `Expires` minus `Date` (or minus `now`); nil when
    /// it says nothing (then it is not stored, rest.md §3, `no-cache` alone
    /// included) or must not be stored. `no-cache` with a lifetime makes it 0:
    /// stored, but revalidated before each use.
    static func lifetime(_ headers: JSONValue?, now: Double) -> Double? {
        let d = directives(headers)
        if d["no-store"] != nil || d["private"] != nil { return nil }
        guard let given = givenLifetime(d, headers, now: now) else { return nil }
        return d["no-cache"] != nil ? 0 : given
    }

    /// The lifetime `Cache-Control` or `Expires` states, nil when neither does.
    private static func givenLifetime(_ d: [String: String], _ headers: JSONValue?, now: Double) -> Double? {
        for name in ["s-maxage", "max-age"] {
            if let text = d[name] {
                // A malformed age is stale (RFC 9111 §4.2.1); digits past what fits are 2^31 (§1.2.2).
                guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return 0 }
                return Double(min(Int(text) ?? Int.max, maxDeltaSeconds))
            }
        }
        if let expires = headers?["expires"]?.stringValue {
            guard let at = HTTPDate.parse(expires) else { return 0 }  // an invalid date means already expired
            let base = headers?["date"]?.stringValue.flatMap(HTTPDate.parse) ?? now
            return max(0, min(at - base, Double(maxDeltaSeconds)))
        }
        return nil
    }

    /// The longest lifetime a response can give itself: RFC 9111 §1.2.2's
    /// 2^31 seconds (68 years), which a larger or overflowing value becomes.
    static let maxDeltaSeconds = 2_147_483_648

    /// The validators of a stored response: its `ETag` and `Last-Modified`.
    static func validators(_ headers: JSONValue?) -> (etag: String?, lastModified: String?)? {
        let etag = headers?["etag"]?.stringValue
        let modified = headers?["last-modified"]?.stringValue
        guard etag != nil || modified != nil else { return nil }
        return (etag, modified)
    }
}
