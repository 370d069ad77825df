import Foundation
import HydraAtRest
import HydraCore
import HydraHTTP
import HydraLoop

/// The configuration's auth sessions (rest.md §1), by name: an
/// ``OAuth2Session`` for each OAuth2 entry; the fixed schemes (bearer, basic,
/// api-key) need no state and are applied when a request is routed.
///
/// Tokens are kept at rest only when there is both a state store and a
/// `HYDRA_SHARED_KEY` key: sealed (AES-GCM) by ``AtRestKey``, never in clear.
/// Otherwise they live in memory and a restart logs in again. Thread-safe.
final class AuthSessions: Sendable {
    private let oauth2: [String: OAuth2Session]

    init(configuration: Configuration, resolver: RouteResolver, store: (any AuthTokenStore)?, key: AtRestKey?) {
        let keeper = key.flatMap { key in store.map { (key, $0) } }
        var restored: [String: OAuth2Tokens] = [:]
        if let (key, store) = keeper, let sealed = try? store.authTokens() {
            for (name, bytes) in sealed {
                // Sealed with another key (HYDRA_SHARED_KEY changed): dropped, the session logs in again.
                if let clear = try? key.open(bytes), let tokens = OAuth2Tokens(encoded: clear) { restored[name] = tokens }
            }
        }
        var sessions: [String: OAuth2Session] = [:]
        for (name, scheme) in configuration.auth {
            guard let settings = scheme.oauth2 else { continue }
            sessions[name] = OAuth2Session(
                name: name, scheme: scheme, restored: restored[name],
                makeRequest: { form throws(JobError) in try AuthSessions.tokenRequest(settings, form: form, resolver: resolver) },
                persist: { tokens in
                    guard let (key, store) = keeper else { return }
                    guard let tokens else {
                        store.storeAuthTokens(name, sealed: nil)
                        return
                    }
                    if let sealed = try? key.seal(tokens.encoded) { store.storeAuthTokens(name, sealed: sealed) }
                })
        }
        oauth2 = sessions
    }

    func session(_ name: String) -> OAuth2Session? { oauth2[name] }

    /// The POST of a token request (RFC 6749 §4.3, §4.4, §6): form-encoded,
    /// client credentials in HTTP Basic when there is a secret, routed like any
    /// request to `tokenUrl` (a configured server's TLS options and headers apply).
    static func tokenRequest(_ settings: AuthScheme.OAuth2, form: [(String, String)],
                             resolver: RouteResolver) throws(JobError) -> HTTPRequest {
        var spec = RemoteSpec(method: "POST", url: settings.tokenURL)
        var fields: [(String, JSONValue)] = []
        for (name, value) in form { fields.append((name, .string(value))) }
        spec.body = .object(.init(fields, uniquingKeysWith: { a, _ in a }))
        spec.bodyEncoding = .form
        spec.headers["Accept"] = "application/json"
        // Client credentials in HTTP Basic (rest.md §1), an empty secret for a public
        // client; RFC 6749 §2.3.1: both parts form-encoded before joining.
        let pair = RouteResolver.percentEncode(settings.clientID) + ":" + RouteResolver.percentEncode(settings.clientSecret ?? "")
        spec.headers["Authorization"] = .string("Basic " + Data(pair.utf8).base64EncodedString())
        var prepared = try resolver.prepare(spec, timeoutMs: nil, applyAuth: false)
        prepared.http.maxBodyBytes = 1 << 20
        prepared.http.maxRedirects = 0
        prepared.http.reportsProgress = false
        return prepared.http
    }
}
