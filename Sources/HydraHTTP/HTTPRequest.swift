/// One HTTP request as the transfer engine runs it: fully resolved (absolute
/// URL, final headers, encoded body), with the transport options that apply.
public struct HTTPRequest: Sendable {
    /// The method, upper case (`GET`, `POST`, ...).
    public var method: String
    /// The absolute URL, query included and already percent-encoded.
    public var url: String
    /// Header fields in sending order.
    public var headers: [HTTPHeader]
    /// The request body, if any.
    public var body: [UInt8]?
    /// Limit for the whole transfer (connect, redirects, body), in milliseconds.
    public var timeoutMilliseconds: Int?
    /// Limit for establishing the connection, in milliseconds.
    public var connectTimeoutMilliseconds: Int?
    /// Redirects followed before failing; 0 disables following.
    public var maxRedirects: Int
    /// TLS peer and host verification. On unless a server is explicitly configured otherwise.
    public var verifyTLS: Bool
    /// A PEM bundle of trusted certificate authorities, instead of the system's.
    public var caFile: String?
    /// Ask for gzip/deflate and decode the body transparently.
    public var acceptEncoding: Bool
    /// Stream the body to this file instead of memory (the file is created or truncated).
    public var saveTo: String?
    /// Report progress to the transfer's progress handler: a download to a file
    /// always, an upload or a download kept in memory once it reaches
    /// ``HTTPProgress/threshold`` (small transfers report nothing).
    public var reportsProgress: Bool

    public init(method: String = "GET", url: String, headers: [HTTPHeader] = [], body: [UInt8]? = nil,
                timeoutMilliseconds: Int? = nil, connectTimeoutMilliseconds: Int? = nil,
                maxRedirects: Int = 5, verifyTLS: Bool = true, caFile: String? = nil,
                acceptEncoding: Bool = true, saveTo: String? = nil, reportsProgress: Bool = false) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeoutMilliseconds = timeoutMilliseconds
        self.connectTimeoutMilliseconds = connectTimeoutMilliseconds
        self.maxRedirects = maxRedirects
        self.verifyTLS = verifyTLS
        self.caFile = caFile
        self.acceptEncoding = acceptEncoding
        self.saveTo = saveTo
        self.reportsProgress = reportsProgress
    }
}

/// A header field: a name and a value.
public struct HTTPHeader: Sendable, Equatable {
    public var name: String
    public var value: String
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}

/// How far a transfer has come in one direction.
public struct HTTPProgress: Sendable, Equatable {
    /// True for the request body going out, false for the response body coming in.
    public var upload: Bool
    public var bytes: Int64
    /// The expected total when known.
    public var totalBytes: Int64?

    /// Uploads and in-memory downloads smaller than this report no progress.
    public static let threshold: Int64 = 64 << 10

    public init(upload: Bool, bytes: Int64, totalBytes: Int64?) {
        self.upload = upload
        self.bytes = bytes
        self.totalBytes = totalBytes
    }
}
