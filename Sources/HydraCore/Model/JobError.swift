import OrderedCollections

/// Why a job failed (protocol §4): a kind clients can branch on, a message
/// for people, and for HTTP failures the status and decoded body.
public struct JobError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, CaseIterable {
        case network, timeout, http, decode, invalid, cancelled, tooLarge, `internal`
        /// A polled request whose condition never held within `repeat.maxTimes` (rest.md §5).
        case condition
        /// An auth session could not get a token (rest.md §1).
        case auth
        /// A TLS failure: certificate verification, a pin mismatch, a client certificate (rest.md §7).
        case tls
    }

    public var kind: Kind
    public var message: String
    /// The HTTP status, for kind `http` (and other failures that had a response).
    public var status: Int?
    /// The decoded response body of an `http` failure.
    public var body: JSONValue?
    /// The failing step inside a graph (`"1.0"`); nil for the job itself.
    public var stepPath: String?

    public init(_ kind: Kind, _ message: String, status: Int? = nil, body: JSONValue? = nil, stepPath: String? = nil) {
        self.kind = kind
        self.message = message
        self.status = status
        self.body = body
        self.stepPath = stepPath
    }

    public var description: String {
        var text = "\(kind.rawValue): \(message)"
        if let stepPath, !stepPath.isEmpty { text += " (step \(stepPath))" }
        return text
    }

    /// The error as protocol JSON: `{"kind", "message", "status"?, "body"?, "stepPath"?}`.
    public var json: JSONValue {
        var o: OrderedDictionary<String, JSONValue> = ["kind": .string(kind.rawValue), "message": .string(message)]
        if let status { o["status"] = .int(status) }
        if let body { o["body"] = body }
        if let stepPath { o["stepPath"] = .string(stepPath) }
        return .object(o)
    }

    /// Reads the JSON form back (used by clients and the store).
    public init?(json: JSONValue) {
        guard let kindText = json["kind"]?.stringValue, let kind = Kind(rawValue: kindText) else { return nil }
        self.init(kind, json["message"]?.stringValue ?? "", status: json["status"]?.intValue,
                  body: json["body"], stepPath: json["stepPath"]?.stringValue)
    }
}
