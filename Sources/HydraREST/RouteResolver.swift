import Crypto
import Foundation
import HydraCore
import HydraHTTP
import OrderedCollections

/// A remote spec turned into a concrete request, with what the executor needs
/// to judge the response.
struct PreparedRequest: Sendable {
    var http: HTTPRequest
    var serverKey: String?
    /// The request path after the server's base URL, for dummy matching;
    /// for a full `url` outside every server, found when first asked (only
    /// dummy responses ask).
    var path: String {
        if let explicitPath { return explicitPath }
        return RouteResolver.pathOf(url: givenURL ?? http.url)
    }
    /// The path when it is known at once: an endpoint's, or the part of a `url` after its server.
    var explicitPath: String?
    /// The `url` as given (before the query was added), when `explicitPath` is nil.
    var givenURL: String?
    var dogma: String?
    var expect: [Int]?
    var retry: RetryPolicy
    var api: String?
    /// Where the body is saved (`saveAs`, checked by its letters), and that
    /// file's path as the result shows it; the file is opened per call (``DownloadFile``).
    var saveAs: SaveAsPath?
    var savedFile: String?
    /// For a `saveAs` request: the largest body of an answer it does not expect
    /// that is read back from the file into `error.body` (1 MiB, at most `defaults.maxBodyBytes`).
    var errorBodyLimit = 0
    /// The OAuth2 session whose token the request carries (added per attempt by the executor).
    var authSession: String?
    /// A body streamed from files (`bodyFile`, a multipart form), opened when the call starts.
    var upload: UploadPlan?
    /// `contentMD5` of a streamed body: digested before it is sent.
    var digestUpload = false
    /// `gzipBody` of a streamed body: compressed as it is read.
    var gzipUpload = false
    /// Credential texts the request carries (a fixed scheme's token, key or
    /// password), masked in whatever the server sends back.
    var secrets: [String] = []
}

/// A request body that is read from files while it is sent (rest.md §2).
enum UploadPlan: Sendable {
    /// `bodyFile`: the file's bytes, as they are.
    case file(String)
    /// `bodyEncoding: multipart`: the parts between `boundary` lines.
    case multipart(boundary: String, parts: [MultipartPart])
}

/// Turns a remote spec (references already resolved) into an HTTP request:
/// the address (`url` | `server`+`endpoint` | `api` | `endpoint` + `defaults.server`),
/// path variables, query, headers (defaults < server < api < job), body, and
/// the transport options of the server. Immutable; thread-safe. A class: every
/// remote request goes through it, and copying the configuration it holds cost
/// about 1% of the remote worker's instructions per request.
final class RouteResolver: Sendable {
    let configuration: Configuration
    let stateDirectory: String
    /// Paths in the state folder `saveAs` may not name, nor anything under
    /// them, beyond the fixed ones (see ``SaveAsPath``): the Unix socket, when
    /// it lives there, and the resource repository's folder (`resources.path`). Lowercased.
    let reservedPaths: Set<String>

    init(configuration: Configuration, stateDirectory: String) {
        self.configuration = configuration
        self.stateDirectory = stateDirectory
        reservedPaths = SaveAsPath.reservedSocket(configuration.rpc.unixSocket, stateDirectory: stateDirectory)
            .union([configuration.resources.path.lowercased()])
        var fixed: [String: FixedAuth] = [:]
        for (name, scheme) in configuration.auth where scheme.oauth2 == nil {
            fixed[name] = FixedAuth(headers: scheme.fixedHeaders, secrets: scheme.secretTexts)
        }
        fixedAuth = fixed
        defaultHeaders = FixedAuth.keyed(configuration.defaults.headers.map { ($0.key, $0.value) })
        credentialHeaders = RouteResolver.credentialHeaderNames + configuration.apiKeyHeaders
    }

    /// A fixed auth scheme's headers and secret texts, worked out once (not per
    /// request): the headers keyed by lowercased name, as ``prepare`` merges them,
    /// so a request with no other header shares them instead of building its own.
    struct FixedAuth: Sendable {
        let headers: OrderedDictionary<String, HTTPHeader>
        let secrets: [String]

        init(headers: [(String, String)], secrets: [String]) {
            self.headers = FixedAuth.keyed(headers)
            self.secrets = secrets
        }

        static func keyed(_ headers: [(String, String)]) -> OrderedDictionary<String, HTTPHeader> {
            var keyed = OrderedDictionary<String, HTTPHeader>()
            for (name, value) in headers { keyed[name.lowercased()] = HTTPHeader(name, value) }
            return keyed
        }
    }
    private let fixedAuth: [String: FixedAuth]
    /// `defaults.headers`, keyed the same way: where every request's headers start.
    private let defaultHeaders: OrderedDictionary<String, HTTPHeader>
    /// Request headers whose values are credentials (masked in what comes back):
    /// these, and the header names of the `api-key` schemes.
    private let credentialHeaders: [String]

    /// Whether the (lowercased) header `name` carries a credential: one of
    /// ``credentialHeaders`` or a name holding `api-key`, `apikey` or `token`
    /// (``CredentialHeaders``: what `job.queued` summaries mask too).
    private func isCredential(_ name: String) -> Bool {
        credentialHeaders.contains(name) || CredentialHeaders.hasCredentialPart(lowercased: name)
    }
    /// The standard credential headers, lowercased (the response cache's key tells callers apart by them too).
    static let credentialHeaderNames = CredentialHeaders.fixedNames

    /// The request `spec` makes: its URL, headers (defaults < server < api <
    /// job), auth, body and transport options, resolved against the configuration.
    /// - Parameters:
    ///   - applyAuth: false for the token requests of auth sessions themselves.
    ///   - encodeWithDogma: encodes a body with the named dogma; nil when that
    ///     dogma leaves encoding to `bodyEncoding`.
    func prepare(_ spec: RemoteSpec, timeoutMs: Int?, applyAuth: Bool = true,
                 encodeWithDogma: (String, JSONValue) throws -> (bytes: [UInt8], contentType: String)? = { _, _ in nil })
        throws(JobError) -> PreparedRequest {
        let api = spec.api.map { configuration.apis[$0] } ?? nil
        if let name = spec.api, api == nil { throw JobError(.invalid, "unknown api '\(name)'") }

        // Address.
        var serverKey: String?
        var url: String
        var path: String?
        if let given = spec.url {
            url = given
            serverKey = configuration.servers.isEmpty ? nil : RouteResolver.server(of: given, in: configuration.servers)
            path = serverKey.map { String(given.dropFirst(configuration.servers[$0]!.url.count)) }
        } else {
            serverKey = spec.server ?? api?.server ?? configuration.defaults.server
            guard let key = serverKey else { throw JobError(.invalid, "no server: give url, server or api, or set defaults.server") }
            guard let server = configuration.servers[key] else { throw JobError(.invalid, "unknown server '\(key)'") }
            guard let endpoint = spec.endpoint ?? api?.endpoint else { throw JobError(.invalid, "no endpoint") }
            do throws(ValidationError) {
                try Configuration.checkEndpoint(endpoint, path: "endpoint")  // one from a reference
            } catch {
                throw JobError(.invalid, error.description)
            }
            let filled = try RouteResolver.fill(endpoint: endpoint, with: spec.pathVars)
            path = filled
            url = RouteResolver.join(server.url, filled)
        }
        guard URLScheme(of: url) != nil else {
            // Named by its scheme only: the rest may hold a user and password
            // (a URL from a reference is checked here, not at submit).
            throw JobError(.invalid, "url: expected an http:// or https:// URL, got \(RouteResolver.schemeForError(url))")
        }
        if !spec.query.isEmpty {
            let query = RouteResolver.encodeQuery(spec.query)
            if !query.isEmpty { url += (url.utf8.contains(UInt8(ascii: "?")) ? "&" : "?") + query }
        }
        let server = serverKey.flatMap { configuration.servers[$0] }

        // Headers: defaults < server < api < job, names compared case-insensitively.
        var headers = defaultHeaders
        func add(_ name: String, _ value: String) { headers[name.lowercased()] = HTTPHeader(name, value) }
        for (name, value) in server?.headers ?? [:] { add(name, value) }
        for (name, value) in api?.headers ?? [:] { add(name, value) }
        for (name, value) in spec.headers {
            let text = Template.text(of: value)
            // Literal values were checked at submit; one built from a reference is checked here.
            if !HeaderSyntax.isValidValue(text) {
                throw JobError(.invalid, "headers.\(name): \(HeaderSyntax.valueProblem)")
            }
            add(name, text)
        }

        // Credentials set by the job, its api, its server or the defaults (rest.md §1:
        // Authorization, Proxy-Authorization, Cookie and api-key headers are never
        // shown): masked in what comes back, too.
        var secrets: [String] = []
        for (name, header) in headers where isCredential(name) {
            // (A scan of a few names, no hashing: every request passes here.)
            if header.value.utf8.count >= 4, !secrets.contains(header.value) { secrets.append(header.value) }
        }

        if let userinfo = RemoteSpec.credentials(in: url) {
            // `user:password@` in the URL: curl sends them as Basic credentials. Neither
            // they nor that header's value may come back in a result, an error or an event.
            for secret in RouteResolver.secrets(ofUserinfo: userinfo) where !secrets.contains(secret) { secrets.append(secret) }
        }
        if let proxy = server?.proxy, let userinfo = RemoteSpec.credentials(in: proxy) {
            // The server's proxy credentials (rest.md §7: secrets): a proxy or an origin
            // that echoes the `Proxy-Authorization` it got must not show them either.
            for secret in RouteResolver.secrets(ofUserinfo: userinfo) where !secrets.contains(secret) { secrets.append(secret) }
        }

        // Auth (rest.md §1): the job's session, else its api's, else its server's.
        var authSession: String?
        if applyAuth, let name = spec.auth ?? api?.auth ?? server?.auth {
            if let fixed = fixedAuth[name] {
                // The scheme's own headers and texts (worked out once): shared, not
                // copied, when the request has no header or secret of its own.
                if headers.isEmpty {
                    headers = fixed.headers
                } else {
                    headers.merge(fixed.headers) { _, scheme in scheme }
                }
                secrets = secrets.isEmpty ? fixed.secrets : secrets + fixed.secrets
            } else if configuration.auth[name] != nil {
                authSession = name  // OAuth2: the token is added per attempt
            } else {
                throw JobError(.invalid, "auth: unknown auth '\(name)'")
            }
        }

        // Body.
        var method = spec.method ?? api?.method ?? "GET"
        if !RemoteSpec.isValidMethod(method) {
            // Only a method that came from a reference can be other than valid upper case here.
            method = method.uppercased()
            guard RemoteSpec.isValidMethod(method) else { throw JobError(.invalid, "method: invalid method '\(ValidationError.clip(method))'") }
        }
        let dogma = spec.dogma ?? api?.dogma ?? configuration.defaults.dogma
        var body: [UInt8]?
        var upload: UploadPlan?
        if let file = spec.bodyFile {
            upload = .file(file)
            if headers["content-type"] == nil { add("Content-Type", "application/octet-stream") }
        } else if spec.bodyEncoding == .multipart, let value = spec.body {
            let parts: [MultipartPart]
            do {
                parts = try MultipartPart.parts(of: value, path: "body")
            } catch {
                throw JobError(.invalid, error.description)
            }
            let boundary = "hydra-" + Hex.string((0..<12).map { _ in UInt8.random(in: 0...255) })
            upload = .multipart(boundary: boundary, parts: parts)
            add("Content-Type", "multipart/form-data; boundary=\(boundary)")
        } else if let value = spec.body {
            var encoded: (bytes: [UInt8], contentType: String)?
            if spec.bodyEncoding == nil, let dogma {
                do {
                    encoded = try encodeWithDogma(dogma, value)
                } catch {
                    throw JobError(.invalid, "dogma \(dogma) cannot encode the body: \(error)")
                }
            }
            let bytes: [UInt8]
            let contentType: String
            if let encoded {
                (bytes, contentType) = encoded
            } else {
                (bytes, contentType) = try encode(body: value, encoding: spec.bodyEncoding ?? .json)
            }
            body = bytes
            if headers["content-type"] == nil { add("Content-Type", contentType) }
        }

        if spec.gzipBody == true {
            if let plain = body {
                do { body = try Gzip.compress(plain) } catch { throw JobError(.invalid, "gzipBody: \(error)") }
            }
            if body != nil || upload != nil { add("Content-Encoding", "gzip") }
        }
        let digestUpload = spec.contentMD5 == true && upload != nil
        if spec.contentMD5 == true, upload == nil {
            add("Content-MD5", Data(Insecure.MD5.hash(data: body ?? [])).base64EncodedString())
        }

        var saveAs: SaveAsPath?
        if let text = spec.saveAs {
            do {
                saveAs = try SaveAsPath(text, reserved: reservedPaths)
            } catch {
                throw JobError(.invalid, "saveAs: \(error.message)")
            }
        }

        var request = HTTPRequest(
            method: method, url: url, headers: headers.values.elements, body: body,
            timeoutMilliseconds: timeoutMs ?? api?.timeoutMs ?? configuration.defaults.timeoutMs,
            connectTimeoutMilliseconds: spec.connectTimeoutMs ?? configuration.defaults.connectTimeoutMs,
            maxRedirects: spec.maxRedirects ?? configuration.defaults.maxRedirects,
            verifyTLS: server?.verifyTLS ?? true, caFile: server?.caFile, acceptEncoding: true,
            maxBodyBytes: saveAs == nil ? configuration.defaults.maxBodyBytes : nil, reportsProgress: true)
        if saveAs != nil { request.diskReserve = configuration.state.diskReserve }
        // Credential headers curl would send on to any host a redirect names (it keeps
        // back only Authorization and Cookie): the client follows such a request's redirects.
        for name in headers.keys where name != "authorization" && name != "cookie" && isCredential(name) {
            request.originBoundHeaders.append(name)
        }
        request.pinnedPublicKey = server?.pinnedPublicKey
        request.clientCert = server?.clientCert
        request.clientKey = server?.clientKey
        request.proxy = server?.proxy
        return PreparedRequest(http: request, serverKey: serverKey, explicitPath: path,
                               givenURL: path == nil ? spec.url : nil,
                               dogma: dogma,
                               expect: spec.expect, retry: RouteResolver.retry(spec.retry, api: api?.retry, defaults: configuration.defaults.retry),
                               api: spec.api, saveAs: saveAs,
                               savedFile: saveAs.map { RouteResolver.join(stateDirectory, $0.relative) },
                               errorBodyLimit: min(configuration.defaults.maxBodyBytes, RouteResolver.errorBodyFromFileLimit),
                               authSession: authSession, upload: upload, digestUpload: digestUpload,
                               gzipUpload: upload != nil && spec.gzipBody == true, secrets: secrets)
    }

    /// The largest body of an unexpected `saveAs` answer read back for its error.
    static let errorBodyFromFileLimit = 1 << 20

    private func encode(body: JSONValue, encoding: BodyEncoding) throws(JobError) -> ([UInt8], String) {
        switch encoding {
        case .json:
            return (JSONWriter.bytes(body), "application/json")
        case .text:
            return (Array(Template.text(of: body).utf8), "text/plain; charset=utf-8")
        case .form:
            guard case .object(let fields) = body else { throw JobError(.invalid, "bodyEncoding form needs an object body") }
            return (Array(RouteResolver.encodeQuery(fields).utf8), "application/x-www-form-urlencoded")
        case .base64:
            guard case .string(let text) = body, let data = Data(base64Encoded: text) else {
                throw JobError(.invalid, "bodyEncoding base64 needs a base64 string body")
            }
            return ([UInt8](data), "application/octet-stream")
        case .multipart:
            throw JobError(.invalid, "bodyEncoding multipart needs {\"parts\": [...]}")
        }
    }

    // MARK: - Pieces, shared with submit-time validation

    /// Names of the `:name` segments of an endpoint.
    /// The path variables an endpoint requires: its `:name` segments without a
    /// default (`:name=default` needs no value, rest.md §8).
    static func pathVariables(in endpoint: String) -> [String] {
        endpoint.split(separator: "/").compactMap { segment in
            guard let variable = pathVariable(segment), variable.defaultValue == nil else { return nil }
            return variable.name
        }
    }

    /// `.` or `..`: a path variable with such a value would leave its segment
    /// (the server resolves it: `/users/../items` is `/items`).
    static func isDotSegment(_ text: String) -> Bool { text == "." || text == ".." }

    static func dotSegmentReason(_ text: String) -> String {
        "\(text.debugDescription) is a dot segment: it would change the route, not fill a segment"
    }

    /// A path variable segment, `:name` or `:name=default`; nil for a literal one.
    static func pathVariable(_ segment: Substring) -> (name: String, defaultValue: String?)? {
        guard segment.hasPrefix(":") else { return nil }
        let body = segment.dropFirst()
        guard let equals = body.firstIndex(of: "=") else { return body.isEmpty ? nil : (String(body), nil) }
        let name = body[..<equals]
        return name.isEmpty ? nil : (String(name), String(body[body.index(after: equals)...]))
    }

    /// The endpoint with its variables filled from `vars`, else their defaults;
    /// a variable whose value (or default) is `""` takes its segment away.
    static func fill(endpoint: String, with vars: OrderedDictionary<String, JSONValue>) throws(JobError) -> String {
        var out: [Substring] = []
        for segment in endpoint.split(separator: "/", omittingEmptySubsequences: false) {
            guard let variable = pathVariable(segment) else {
                out.append(segment)
                continue
            }
            let text: String
            if let value = vars[variable.name] {
                text = Template.text(of: value)
            } else if let defaultValue = variable.defaultValue {
                text = defaultValue
            } else {
                throw JobError(.invalid, "pathVars.\(variable.name): missing for endpoint \(endpoint)")
            }
            if RouteResolver.isDotSegment(text) {
                throw JobError(.invalid, "pathVars.\(variable.name): " + RouteResolver.dotSegmentReason(text))
            }
            if !text.isEmpty { out.append(Substring(percentEncode(text))) }
        }
        return out.joined(separator: "/")
    }

    static func join(_ base: String, _ path: String) -> String {
        if path.isEmpty { return base }
        switch (base.hasSuffix("/"), path.hasPrefix("/")) {
        case (true, true): return base + path.dropFirst()
        case (false, false): return base + "/" + path
        default: return base + path
        }
    }

    static func encodeQuery(_ fields: OrderedDictionary<String, JSONValue>) -> String {
        var parts: [String] = []
        for (name, value) in fields {
            let values: [JSONValue] = value.arrayValue ?? [value]
            for item in values where !item.isNull {
                parts.append(percentEncode(name) + "=" + percentEncode(Template.text(of: item)))
            }
        }
        return parts.joined(separator: "&")
    }

    static func percentEncode(_ text: String) -> String { PercentEncoding.encode(text) }

    /// The path (and query) of an absolute URL: what follows `scheme://host[:port]`.
    static func pathOf(url: String) -> String {
        let utf8 = url.utf8
        var i = utf8.startIndex
        var seen = 0  // of "://"
        while i < utf8.endIndex {
            let byte = utf8[i]
            i = utf8.index(after: i)
            if byte == UInt8(ascii: ":") { seen = 1 } else if byte == UInt8(ascii: "/") && seen > 0 { seen += 1 } else { seen = 0 }
            if seen == 3 { break }
        }
        guard seen == 3 else { return url }
        guard let slash = utf8[i...].firstIndex(of: UInt8(ascii: "/")) else { return "/" }
        return String(url[slash...])
    }

    /// The configured server a full URL belongs to: the longest base URL it
    /// starts with, ending there or at a `/`, `?` or `#` (so the server
    /// `http://h:80` does not claim `http://h:8080/x`, nor give it its headers).
    static func server(of url: String, in servers: OrderedDictionary<String, Configuration.Server>) -> String? {
        var best: (key: String, length: Int)?
        for (key, server) in servers where url.hasPrefix(server.url) {
            let base = server.url
            let rest = url.utf8.dropFirst(base.utf8.count)
            guard base.hasSuffix("/") || rest.isEmpty || [UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#")].contains(rest.first!)
            else { continue }
            if base.utf8.count > best?.length ?? -1 { best = (key, base.utf8.count) }
        }
        return best?.key
    }

    /// How an error names a URL it refused: its scheme, quoted, or "no
    /// scheme"; never the rest of it.
    static func schemeForError(_ url: String) -> String {
        guard let end = url.range(of: "://")?.lowerBound else { return "no scheme" }
        let scheme = url[..<end]
        let allowed = scheme.utf8.allSatisfy { b in
            (b >= 0x61 && b <= 0x7a) || (b >= 0x41 && b <= 0x5a) || (b >= 0x30 && b <= 0x39) || b == 0x2b || b == 0x2d || b == 0x2e
        }
        return allowed && !scheme.isEmpty && scheme.utf8.count <= 16 ? "\"\(scheme)://\"" : "no scheme"
    }

    /// The texts a URL's `user:password` part can come back as: whole, as written
    /// and percent-decoded, and the Basic credentials curl makes of it. Not the
    /// password alone: masking searches raw bytes, and a password such as `json`
    /// or `1234` would rewrite a response's own text (a content type, a body).
    static func secrets(ofUserinfo userinfo: Substring) -> [String] {
        let raw = String(userinfo)
        let decoded = raw.removingPercentEncoding ?? raw
        var unique: [String] = []
        for text in [raw, decoded] where text.utf8.count >= 4 && !unique.contains(text) { unique.append(text) }
        let basic = Data(decoded.utf8).base64EncodedString()
        if basic.utf8.count >= 8 && !unique.contains(basic) { unique.append(basic) }
        return unique
    }

    /// The retry policy of a job, field by field: the job's, else its api's,
    /// else `defaults.retry`, else the built-in values.
    static func retry(_ job: RetryPolicy?, api: RetryPolicy?, defaults: RetryPolicy) -> RetryPolicy {
        let base = api.map { $0.filling(from: defaults) } ?? defaults
        return job.map { $0.filling(from: base) } ?? base
    }
}

extension Configuration.State {
    /// What a download to a file leaves free on its disk (`state.minFreeBytes`).
    package var diskReserve: HTTPRequest.DiskReserve {
        guard let minFreeBytes else { return .automatic }
        return minFreeBytes == 0 ? .none : .bytes(minFreeBytes)
    }
}
