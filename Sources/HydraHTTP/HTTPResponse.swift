/// A completed HTTP exchange: the final response after any redirects.
public struct HTTPResponse: Sendable {
    /// The status code of the final response.
    public var status: Int
    /// The final response's header fields, in arrival order.
    public var headers: HTTPHeaderBlock
    /// The body (decoded from gzip/deflate), empty when it was saved to a file
    /// (unless it was spooled: ``isSpooled``).
    public var body: [UInt8]
    /// Body bytes received (decoded size).
    public var bodyBytes: Int
    /// Where the final response came from, when redirects led elsewhere; nil: the request's URL.
    public var redirectedURL: String? = nil
    /// The body of a request saved to a file stayed within its
    /// ``HTTPRequest/spoolBytes``: it is all in ``body``, and the file is empty.
    public var isSpooled = false

    /// A response made elsewhere than a transfer (a dummy answer, a hook's rewrite).
    public init(status: Int, headers: [HTTPHeader], body: [UInt8]) {
        self.status = status
        self.headers = HTTPHeaderBlock(headers)
        self.body = body
        bodyBytes = body.count
    }

    /// A response of `bodyBytes` bytes whose `body` may hold none of them (streamed to a file).
    public init(status: Int, headers: HTTPHeaderBlock, body: [UInt8], bodyBytes: Int) {
        self.status = status
        self.headers = headers
        self.body = body
        self.bodyBytes = bodyBytes
    }

    /// The first value of header `name` (case-insensitive).
    public func header(_ name: String) -> String? { headers.first(name) }
}

/// Why a transfer produced no response.
public struct HTTPFailure: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable {
        /// DNS, connect, TLS, protocol or read errors.
        case network
        /// The transfer or connect time limit passed.
        case timeout
        /// The transfer was cancelled by its owner.
        case cancelled
        /// The request could not be started (bad URL, malformed header, unwritable file).
        case invalid
        /// Certificate verification, a pin mismatch, a client certificate refused, a handshake failure.
        case tls
        /// The body kept in memory passed ``HTTPRequest/maxBodyBytes``; the transfer was aborted.
        case tooLarge
        /// A body written to a file would have left its disk less than ``HTTPRequest/diskReserve``.
        case diskFull
    }
    public var kind: Kind
    public var message: String
    /// What arrived before the connection broke mid-body: the status, the
    /// headers and the body so far (in memory, or only counted when it went to
    /// ``HTTPRequest/saveToFile``), when it was not content-decoded (its bytes
    /// are the server's, so a `Range` request can ask for the rest). nil otherwise.
    public var partial: HTTPResponse?

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}
