import Crypto
import HydraCore
import HydraHTTP

/// The response cache's keys: `GET URL`, plus ` auth=DIGEST` when the request
/// carries credentials (headers, or the URL's `user:password`), then the
/// variants the REST executor adds (` session=`, ` dogma=`). A key is shown
/// (`cache.updated`, `cache.get`), so it names no secret: a URL's
/// credentials read `***` in it, and the digest tells callers apart.
public enum CacheKey {
    /// The key of a GET of `url` with `headers`; `secrets`: texts whose headers
    /// count as credentials too.
    /// `keyedBy`: the cache's ``ResponseCache/keySecret``.
    static func make(url: String, headers: [HTTPHeader] = [], secrets: [String] = [], keyedBy secret: [UInt8] = []) -> String {
        let userinfo = RemoteSpec.credentials(in: url).map(String.init)
        var key = "GET " + (userinfo == nil ? url : RemoteSpec.redactingCredentials(url))
        if let digest = credentialDigest(headers, secrets: secrets, userinfo: userinfo, keyedBy: secret) { key += " auth=" + digest }
        return key
    }

    /// The key `cache.get` and `cache.remove` look for when given a URL (a
    /// request with no credential header of its own; `user:password` in the
    /// URL digested with `secret`, the cache's ``HydraCore/ResponseCache/keySecret``).
    public static func forURL(_ url: String, keyedBy secret: [UInt8]) -> String { make(url: url, keyedBy: secret) }

    /// The headers that tell callers apart, by lowercased name.
    private static let credentialHeaders = Set(RouteResolver.credentialHeaderNames)

    /// A digest (24 hex digits) of a request's credential headers and its
    /// URL's `user:password`, or nil without any: an HMAC-SHA-256 keyed by
    /// `secret` (the store's, never shown: the digest, which is, then checks
    /// no guessed password), a plain SHA-256 without one. A URL cannot contain
    /// the space before it, so `GET URL` and its variants never collide.
    static func credentialDigest(_ headers: [HTTPHeader], secrets: [String] = [], userinfo: String? = nil,
                                 keyedBy secret: [UInt8] = []) -> String? {
        var text: [UInt8] = []
        if let userinfo { text += Array("userinfo:\(userinfo)\n".utf8) }
        for header in headers {
            let name = header.name.lowercased()
            // Every credential header, a short value too (the masks' `secrets` start at 4 characters).
            guard credentialHeaders.contains(name) || CredentialHeaders.hasCredentialPart(lowercased: name)
                    || secrets.contains(header.value) else { continue }
            text += Array("\(name):\(header.value)\n".utf8)
        }
        guard !text.isEmpty else { return nil }
        let digest: [UInt8] = secret.isEmpty ? Array(SHA256.hash(data: text))
            : Array(HMAC<SHA256>.authenticationCode(for: text, using: SymmetricKey(data: secret)))
        return Hex.string(digest.prefix(12))
    }
}
