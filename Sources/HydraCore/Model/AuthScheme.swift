import Foundation

/// One entry of the configuration's `auth` section (rest.md §1): how the
/// requests of an api, a server or a job that opt in with `"auth": NAME`
/// prove who they are. Values written `${env.NAME}` were read from the
/// environment when the configuration was loaded; none of them is ever
/// written back out (``description`` names the type only).
public enum AuthScheme: Sendable, CustomStringConvertible {
    /// OAuth2 client credentials grant (RFC 6749 §4.4).
    case clientCredentials(OAuth2)
    /// OAuth2 resource owner password grant (RFC 6749 §4.3): needs `auth.login`.
    case password(OAuth2)
    /// A fixed bearer token.
    case bearer(token: String)
    /// HTTP Basic.
    case basic(username: String, password: String)
    /// A fixed header carrying a key.
    case apiKey(header: String, value: String)

    /// Where and how an OAuth2 session gets its tokens.
    public struct OAuth2: Sendable {
        public var tokenURL: String
        public var clientID: String
        public var clientSecret: String?
        public var scope: String?
        public init(tokenURL: String, clientID: String, clientSecret: String? = nil, scope: String? = nil) {
            self.tokenURL = tokenURL
            self.clientID = clientID
            self.clientSecret = clientSecret
            self.scope = scope
        }
    }

    /// The `type` as the configuration spells it.
    public var type: String {
        switch self {
        case .clientCredentials: "oauth2-client-credentials"
        case .password: "oauth2-password"
        case .bearer: "bearer"
        case .basic: "basic"
        case .apiKey: "api-key"
        }
    }

    public var description: String { "auth(\(type))" }

    /// The OAuth2 settings of an OAuth2 scheme; nil for the fixed ones.
    public var oauth2: OAuth2? {
        switch self {
        case .clientCredentials(let o), .password(let o): o
        default: nil
        }
    }

    /// The header name an `api-key` scheme sends its key in (lowercased), for masking.
    public var secretHeader: String? {
        if case .apiKey(let header, _) = self { return header.lowercased() }
        return nil
    }

    /// Reads one entry; `${env.NAME}` values come from `environment`.
    /// Errors name the field under `path`; a missing variable is named, its value never.
    public init(json: JSONValue, path: String, environment: [String: String]) throws(ValidationError) {
        var r = try FieldReader(json, path: path)
        func text(_ key: String, required: Bool) throws(ValidationError) -> String? {
            guard let raw = required ? try r.requiredString(key) : try r.string(key) else { return nil }
            return try AuthScheme.expand(raw, path: r.path(key), environment: environment)
        }
        let type = try r.requiredString("type")
        switch type {
        case "oauth2-client-credentials", "oauth2-password":
            let tokenURL = try text("tokenUrl", required: true)!
            guard tokenURL.hasPrefix("http://") || tokenURL.hasPrefix("https://"),
                  let host = URLComponents(string: tokenURL)?.host, !host.isEmpty else {
                throw ValidationError(path: r.path("tokenUrl"), "expected an http:// or https:// URL with a host")
            }
            let settings = OAuth2(tokenURL: tokenURL, clientID: try text("clientId", required: true)!,
                                  clientSecret: try text("clientSecret", required: false),
                                  scope: try text("scope", required: false))
            self = type == "oauth2-password" ? .password(settings) : .clientCredentials(settings)
        case "bearer":
            self = .bearer(token: try text("token", required: true)!)
        case "basic":
            self = .basic(username: try text("username", required: true)!, password: try text("password", required: true)!)
        case "api-key":
            let header = try text("header", required: true)!
            guard HeaderSyntax.isValidName(header) else { throw ValidationError(path: r.path("header"), HeaderSyntax.nameProblem) }
            self = .apiKey(header: header, value: try text("value", required: true)!)
        default:
            throw ValidationError(path: r.path("type"),
                                  "expected one of oauth2-client-credentials, oauth2-password, bearer, basic, api-key")
        }
        try r.rejectUnknownKeys()
        for (key, value) in fixedHeaders where !HeaderSyntax.isValidValue(value) {
            throw ValidationError(path: path, "the \(key) value would contain CR, LF or NUL")
        }
    }

    /// The header a fixed scheme adds to every request (name, value); empty for OAuth2.
    public var fixedHeaders: [(String, String)] {
        switch self {
        case .bearer(let token): [("Authorization", "Bearer " + token)]
        case .basic(let user, let password): [("Authorization", "Basic " + Data("\(user):\(password)".utf8).base64EncodedString())]
        case .apiKey(let header, let value): [(header, value)]
        case .clientCredentials, .password: []
        }
    }

    /// The texts a fixed scheme's requests carry that must never come back
    /// out in a result or an event (masked as `***` wherever a server echoes them).
    public var secretTexts: [String] {
        switch self {
        case .bearer(let token): [token]
        case .basic(let user, let password):
            [Data("\(user):\(password)".utf8).base64EncodedString(), password].filter { $0.count >= 4 }
        case .apiKey(_, let value): [value]
        case .clientCredentials, .password: []
        }
    }

    /// `text` with every `${env.NAME}` replaced by that variable's value. Any
    /// other reference (`${input.x}`) is refused: this section is read once, at
    /// startup, and such text would have been sent as it is. (A value that
    /// really holds `${` comes from the environment, which is not read again.)
    static func expand(_ text: String, path: String, environment: [String: String]) throws(ValidationError) -> String {
        func literal(_ part: Substring) throws(ValidationError) -> Substring {
            guard !part.contains("${") else {
                throw ValidationError(path: path, "only ${env.NAME} references are read here (at startup); put such a value in an environment variable")
            }
            return part
        }
        guard text.contains("${") else { return text }
        var out = ""
        var rest = Substring(text)
        while let start = rest.range(of: "${env.") {
            out += try literal(rest[..<start.lowerBound])
            guard let end = rest[start.upperBound...].firstIndex(of: "}") else {
                throw ValidationError(path: path, "unterminated ${env.…}")
            }
            let name = String(rest[start.upperBound..<end])
            guard let value = environment[name] else {
                throw ValidationError(path: path, "the environment variable \(name) is not set")
            }
            out += value
            rest = rest[rest.index(after: end)...]
        }
        return out + (try literal(rest))
    }
}
