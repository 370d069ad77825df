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
    /// A body read while it is sent (files, multipart forms), instead of ``body``.
    public var bodyStream: HTTPBodyStream?
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
    /// Public-key pins of the server (`sha256//BASE64;…`); a mismatch fails with kind `tls`.
    public var pinnedPublicKey: String?
    /// A client certificate and key (PEM files) for mutual TLS.
    public var clientCert: String?
    public var clientKey: String?
    /// The proxy to go through (`http://`, `https://`, `socks5h://`, with credentials
    /// maybe); nil: none (the environment's proxy variables are not used either).
    public var proxy: String?
    /// Ask for gzip/deflate and decode the body transparently.
    public var acceptEncoding: Bool
    /// Stream the body to this open file instead of memory. The caller opens
    /// it (deciding where and how safely) and closes it; each transfer empties
    /// it first and writes from its start.
    public var saveToFile: Int32?
    /// Write at this offset of ``saveToFile`` (a `Range` resume: the bytes kept
    /// before it stay, anything after it goes) instead of emptying it first.
    /// An earlier attempt that failed after writing more than it was known to
    /// have written cannot leave those bytes between the kept ones and the rest.
    public var resumeFileAt: Int?
    /// The most body bytes kept in memory, counted after gzip/deflate decoding;
    /// a larger body aborts the transfer with kind `tooLarge` as soon as the
    /// limit is passed (or at once, when an unencoded body's `Content-Length`
    /// says so). nil: no limit. For a body streamed to ``saveToFile`` it bounds
    /// the bytes written by this transfer (`saveAs` downloads give none).
    public var maxBodyBytes: Int?
    /// Report progress to the transfer's progress handler: a download to a file
    /// always, an upload or a download kept in memory once it reaches
    /// ``HTTPProgress/threshold`` (small transfers report nothing).
    public var reportsProgress: Bool
    /// Header names (lowercased) sent only to the request's own origin (scheme,
    /// host and port): credentials such as an api key. curl sends custom headers
    /// to any host a redirect names (it keeps back only `Authorization` and
    /// `Cookie`), so a request with any of these follows its redirects in
    /// ``HTTPClient`` instead, leaving them out (with `Authorization` and
    /// `Cookie`) once a redirect leaves the origin.
    public var originBoundHeaders: [String] = []

    /// The client, not curl, follows this request's redirects (see ``originBoundHeaders``).
    var followsRedirectsItself: Bool { maxRedirects > 0 && !originBoundHeaders.isEmpty }
    /// The redirects curl follows by itself.
    var curlRedirects: Int { originBoundHeaders.isEmpty ? maxRedirects : 0 }

    public init(method: String = "GET", url: String, headers: [HTTPHeader] = [], body: [UInt8]? = nil,
                timeoutMilliseconds: Int? = nil, connectTimeoutMilliseconds: Int? = nil,
                maxRedirects: Int = 5, verifyTLS: Bool = true, caFile: String? = nil,
                acceptEncoding: Bool = true, saveToFile: Int32? = nil, maxBodyBytes: Int? = nil,
                reportsProgress: Bool = false) {
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
        self.saveToFile = saveToFile
        self.maxBodyBytes = maxBodyBytes
        self.reportsProgress = reportsProgress
    }
}
