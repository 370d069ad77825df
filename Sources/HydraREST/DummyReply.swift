import HydraCore
import OrderedCollections

/// A canned answer: status, headers, body (a JSON value, kept as is), and a delay.
public struct DummyReply: Sendable {
    public var status: Int
    public var headers: OrderedDictionary<String, String>
    public var body: JSONValue?
    public var delayMs: Int
    public init(status: Int = 200, headers: OrderedDictionary<String, String> = [:], body: JSONValue? = nil,
                delayMs: Int = 0) {
        self.status = status
        self.headers = headers
        self.body = body
        self.delayMs = delayMs
    }
}

/// A Swift dummy handler: sees the request, answers it or returns nil to pass.
public typealias DummyHandler = @Sendable (DummyRequest) -> DummyReply?
