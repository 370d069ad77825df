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

    /// Name parts that make a header a credential wherever they appear.
    static let nameParts = ["api-key", "apikey", "token"]

    /// Whether `name` names a credential header; `configured` holds the api-key
    /// header names of the `auth` section, lowercased.
    public static func isCredential(_ name: String, configured: Set<String>) -> Bool {
        let lowered = name.lowercased()
        return fixedNames.contains(lowered) || configured.contains(lowered) || hasCredentialPart(lowercased: lowered)
    }

    /// Whether the lowercased header name `name` holds `api-key`, `apikey` or `token`.
    public static func hasCredentialPart(lowercased name: String) -> Bool {
        nameParts.contains { name.contains($0) }
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
