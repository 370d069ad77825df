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
    static func make(url: String, headers: [HTTPHeader] = [], secrets: [String] = []) -> String {
        let userinfo = RemoteSpec.credentials(in: url).map(String.init)
        var key = "GET " + (userinfo == nil ? url : RemoteSpec.redactingCredentials(url))
        if let digest = credentialDigest(headers, secrets: secrets, userinfo: userinfo) { key += " auth=" + digest }
        return key
    }

    /// The key `cache.get` and `cache.remove` look for when given a URL (a
    /// request with no credential header of its own).
    public static func forURL(_ url: String) -> String { make(url: url) }

    /// The headers that tell callers apart, by lowercased name.
    private static let credentialHeaders = Set(RouteResolver.credentialHeaderNames)

    /// A digest (SHA-256, 24 hex digits) of a request's credential headers and
    /// its URL's `user:password`, or nil without any. A URL cannot contain the
    /// space before it, so `GET URL` and its variants never collide.
    static func credentialDigest(_ headers: [HTTPHeader], secrets: [String] = [], userinfo: String? = nil) -> String? {
        var hash = SHA256()
        var found = false
        if let userinfo {
            hash.update(data: Array("userinfo:\(userinfo)\n".utf8))
            found = true
        }
        for header in headers where credentialHeaders.contains(header.name.lowercased()) || secrets.contains(header.value) {
            hash.update(data: Array("\(header.name.lowercased()):\(header.value)\n".utf8))
            found = true
        }
        guard found else { return nil }
        return hash.finalize().prefix(12).map { String(format: "%02x", $0) }.joined()
    }
}
