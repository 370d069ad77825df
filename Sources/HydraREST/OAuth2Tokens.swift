import Foundation
import HydraCore
import HydraHTTP

/// The tokens of one OAuth2 session, as a token endpoint issued them
/// (RFC 6749 §5.1), with the times Hydra derives from `expires_in`.
struct OAuth2Tokens: Sendable, Equatable {
    var access: String
    var refresh: String?
    /// When the access token runs out (seconds since 1970); nil: never said.
    var expiresAt: Double?

    /// How long before `expiresAt` a token is renewed (rest.md §1: "30 s
    /// before `expires_in` runs out"), taken literally: a token whose
    /// lifetime is 30 s or less is due at once.
    static let refreshMargin: Double = 30

    /// When to get a new one before it runs out: `refreshMargin` before
    /// `expiresAt`. Derived, not stored, so tokens kept at rest by an earlier
    /// version follow the same rule once restored.
    var refreshAt: Double? { expiresAt.map { $0 - Self.refreshMargin } }

    init(access: String, refresh: String?, expiresIn: Double?, now: Double) {
        self.access = access
        self.refresh = refresh
        if let expiresIn { expiresAt = now + expiresIn }
    }

    /// Usable as it is at `now` (not yet in its refresh window).
    func isFresh(at now: Double) -> Bool { refreshAt.map { now < $0 } ?? true }

    /// Still accepted by its issuer at `now`, refresh window or not.
    func isUnexpired(at now: Double) -> Bool { expiresAt.map { now < $0 } ?? true }

    /// A token endpoint's successful answer, or why it is not one. The
    /// message never quotes the body (an identity provider's page may echo
    /// what was sent); only the OAuth2 `error` code, which is a fixed word.
    static func parse(_ response: HTTPResponse, now: Double) -> Result<OAuth2Tokens, JobError> {
        let json = try? JSONParser.parse(response.body)
        guard (200...299).contains(response.status) else {
            var message = "the token endpoint answered HTTP \(response.status)"
            if let code = json?["error"]?.stringValue, code.utf8.count <= 64,
               code.utf8.allSatisfy({ $0 == UInt8(ascii: "_") || ($0 >= 0x61 && $0 <= 0x7A) }) {
                message += " (\(code))"
            }
            return .failure(JobError(.auth, message))
        }
        guard let json, case .object = json else {
            let type = response.header("content-type").map { " (Content-Type \($0.prefix(64)))" } ?? ""
            return .failure(JobError(.auth, "the token endpoint's answer is not a JSON token response\(type)"))
        }
        guard let access = json["access_token"]?.stringValue, !access.isEmpty, HeaderSyntax.isValidValue(access) else {
            return .failure(JobError(.auth, "the token endpoint's answer has no usable access_token"))
        }
        if let type = json["token_type"]?.stringValue, type.lowercased() != "bearer" {
            return .failure(JobError(.auth, "the token endpoint issued a token of type '\(type.prefix(32))'; only bearer tokens are supported"))
        }
        var expiresIn: Double?
        switch json["expires_in"] {
        case .int(let n)?: expiresIn = Double(n)
        case .double(let d)?: expiresIn = d
        case .string(let s)?: expiresIn = Double(s)  // some providers send it quoted
        default: break
        }
        // A lifetime below zero (or not a number) is a broken answer, not "never expires".
        if let value = expiresIn, !(value.isFinite && value >= 0) {
            return .failure(JobError(.auth, "the token endpoint's answer has an expires_in that is not a number of seconds from now"))
        }
        if let value = expiresIn { expiresIn = min(value, 10 * 365 * 86_400) }
        let refresh = json["refresh_token"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 }
        return .success(OAuth2Tokens(access: access, refresh: refresh, expiresIn: expiresIn, now: now))
    }

    // MARK: - At rest

    /// The tokens as JSON, to be sealed before they are stored.
    var encoded: [UInt8] {
        var o: [String: JSONValue] = ["access": .string(access)]
        if let refresh { o["refresh"] = .string(refresh) }
        if let expiresAt { o["expiresAt"] = .double(expiresAt) }
        return JSONWriter.bytes(.object(.init(uniqueKeysWithValues: o.sorted { $0.key < $1.key })))
    }

    init?(encoded bytes: [UInt8]) {
        guard let json = try? JSONParser.parse(bytes), let access = json["access"]?.stringValue else { return nil }
        self.access = access
        refresh = json["refresh"]?.stringValue
        expiresAt = json["expiresAt"]?.doubleValue  // an older `refreshAt` member is ignored: derived now
    }
}
