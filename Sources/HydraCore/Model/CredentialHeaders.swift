import OrderedCollections

/// Which request headers carry credentials, so that what Hydra reports about
/// a job shows them as `***` (rest.md §1: "`job.queued` summaries and every
/// event show `Authorization`, `Proxy-Authorization`, `Cookie` and api-key
/// header values as `"***"`").
///
/// A header is a credential when its name (compared case-insensitively) is
/// one of the three fixed ones, one of the configuration's api-key headers,
/// or contains `api-key`, `apikey` or `token` (`X-Auth-Token`, `X-ApiKey`: a
/// job may send such a header itself, without an `auth` session).
public enum CredentialHeaders {
    /// The fixed credential headers, lowercased.
    public static let fixedNames = ["authorization", "proxy-authorization", "cookie"]

    /// Whether `name` names a credential header; `configured` holds the api-key
    /// header names of the `auth` section, lowercased.
    public static func isCredential(_ name: String, configured: Set<String>) -> Bool {
        let lowered = name.lowercased()
        return fixedNames.contains(lowered) || configured.contains(lowered) || hasCredentialPart(lowercased: lowered)
    }

    /// Whether the lowercased header name `name` holds `api-key`, `apikey` or
    /// `token`. Asked for every header of every request: one pass over the
    /// bytes, no substring search per part.
    public static func hasCredentialPart(lowercased name: String) -> Bool {
        var name = name
        return name.withUTF8 { bytes in
            func holds(_ part: StaticString, at i: Int) -> Bool {
                let count = part.utf8CodeUnitCount
                guard i + count <= bytes.count else { return false }
                let start = part.utf8Start
                for k in 0..<count where bytes[i + k] != start[k] { return false }
                return true
            }
            guard bytes.count >= 5 else { return false }
            for i in 0..<(bytes.count - 4) {
                switch bytes[i] {
                case UInt8(ascii: "t"): if holds("token", at: i) { return true }
                case UInt8(ascii: "a"): if holds("apikey", at: i) || holds("api-key", at: i) { return true }
                default: continue
                }
            }
            return false
        }
    }

    /// `headers` as they may be shown: credential values replaced by `***`,
    /// the others as given (a reference's text unresolved).
    public static func masked(_ headers: OrderedDictionary<String, JSONValue>, configured: Set<String>) -> JSONValue {
        var shown = headers
        for name in headers.keys where isCredential(name, configured: configured) {
            shown[name] = .string(SecretMask.replacement)
        }
        return .object(shown)
    }
}
