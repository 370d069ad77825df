import OrderedCollections

/// A file kept in the resource repository (`"type": "resource"`, resources.md
/// §1). Its address and transfer options are a remote job's (``request``:
/// url / server+endpoint / api, pathVars, query, headers, retry, expect,
/// timeouts), always sent with GET; the rest says how the copy is used and kept.
public struct ResourceSpec: Sendable {
    /// `use` a fresh copy, else fetch; always `refresh` (conditionally); `only` never touch the network.
    public enum Mode: String, Sendable, CaseIterable { case use, refresh, only }
    /// What the result carries besides the stat fields.
    public enum Presentation: String, Sendable, CaseIterable { case path, text, json, base64 }

    /// The request: a remote spec without method, body, dogma, cache or saveAs.
    public var request: RemoteSpec
    public var mode: Mode = .use
    /// Freshness in seconds; nil: `resources.maxAgeSec`.
    public var maxAgeSec: Int?
    public var cipher: ResourceCipher = .none
    /// The expected SHA-256 of the content (64 hex digits, kept lowercase).
    public var sha256: String?
    public var remaker: String?
    public var remakeOptions: JSONValue?
    /// Nil: `path` (a copy kept in clear) or none (gzip / aes-gcm copies have no path).
    public var presentation: Presentation?

    public init(_ request: RemoteSpec) { self.request = request }

    /// The fields of a remote job that a resource job refuses: a resource is a GET of a URL.
    static let refusedRemoteFields = ["method", "body", "bodyEncoding", "dogma", "cache", "saveAs", "bodyFile", "contentMD5", "gzipBody",
                                      "repeat", "coalesce"]

    /// Why a resource job refuses remote field `name` (one of ``refusedRemoteFields``).
    static func refusal(of name: String) -> String {
        switch name {
        case "repeat": return "not allowed in a resource job (a resource is fetched, not polled: poll with a remote job)"
        case "coalesce": return "not allowed in a resource job (jobs of one resource always share one transfer)"
        default: return "not allowed in a resource job (a resource is fetched with GET)"
        }
    }

    init(reader r: inout FieldReader) throws(ValidationError) {
        // `"method": "GET"` says what a resource job does anyway: allowed.
        for name in ResourceSpec.refusedRemoteFields where r.value(name) != nil && !(name == "method" && r.value(name) == "GET") {
            throw ValidationError(path: r.path(name), ResourceSpec.refusal(of: name)).refusingKey()
        }
        var mode = Mode.use
        if let text = try r.string("mode") {
            guard let m = Mode(rawValue: text) else { throw ValidationError(path: r.path("mode"), "expected one of use, refresh, only") }
            mode = m
        }
        let maxAge = try r.int("maxAgeSec", in: SpecBounds.lifetimeSec)
        var cipher = ResourceCipher.none
        if let text = try r.string("cipher") {
            guard let c = ResourceCipher(rawValue: text) else {
                throw ValidationError(path: r.path("cipher"), "unknown cipher '\(ValidationError.clip(text))' (expected none, gzip or aes-gcm)")
            }
            cipher = c
        }
        // Hex digits in either case; kept lowercase, as digests are shown.
        let sha = try r.string("sha256")?.lowercased()
        if let sha, sha.utf8.count != 64 || !sha.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }) {
            throw ValidationError(path: r.path("sha256"), "expected 64 hex digits (a SHA-256)")
        }
        let remaker = try r.string("remaker")
        // A remaker's name is no free text: one from a reference is resolved and checked as the step runs.
        if let remaker, Template.containsReference(remaker) {
            throw ValidationError(path: r.path("remaker"), "expected a remaker's name or exactly one ${…} reference")
        }
        let options = r.value("remakeOptions")
        if options != nil, remaker == nil { throw ValidationError(path: r.path("remakeOptions"), "given without remaker") }
        if let options, options.objectValue == nil { throw ValidationError(path: r.path("remakeOptions"), expected: "object", got: options) }
        var presentation: Presentation?
        if let text = try r.string("as") {
            guard let p = Presentation(rawValue: text) else { throw ValidationError(path: r.path("as"), "expected one of path, text, json, base64") }
            presentation = p
        }
        if cipher == .aesGCM, presentation != nil {
            throw ValidationError(path: r.path("as"), "not allowed with cipher aes-gcm (the content would be stored in the job's result in clear); read it with resource.read")
        }
        if cipher != .none, presentation == .path {
            throw ValidationError(path: r.path("as"), "a \(cipher.rawValue) copy has no path; use text, json or base64")
        }
        self.init(try RemoteSpec(reader: &r))
        self.mode = mode
        maxAgeSec = maxAge
        self.cipher = cipher
        sha256 = sha
        self.remaker = remaker
        remakeOptions = options
        self.presentation = presentation
    }

    func write(into o: inout OrderedDictionary<String, JSONValue>) {
        request.write(into: &o)
        if mode != .use { o["mode"] = .string(mode.rawValue) }
        if let maxAgeSec { o["maxAgeSec"] = .int(maxAgeSec) }
        if cipher != .none { o["cipher"] = .string(cipher.rawValue) }
        if let sha256 { o["sha256"] = .string(sha256) }
        if let remaker { o["remaker"] = .string(remaker) }
        if let remakeOptions { o["remakeOptions"] = remakeOptions }
        if let presentation { o["as"] = .string(presentation.rawValue) }
    }
}
