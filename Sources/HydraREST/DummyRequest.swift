import HydraCore
import OrderedCollections

/// The request a dummy response is matched against.
public struct DummyRequest: Sendable {
    /// The server key, when the request was addressed through one (or its URL starts with one's base URL).
    public var server: String?
    /// The path after the server's base URL (or the URL's path).
    public var path: String
    public var method: String
    public var url: String
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]?
}
