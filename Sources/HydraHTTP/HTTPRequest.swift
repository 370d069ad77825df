/// One HTTP request as the transfer engine runs it: fully resolved (absolute
/// URL, final headers, encoded body), with the transport options that apply.
public struct HTTPRequest: Sendable {
    /// The fields, shared by copies until one of them changes (copy on write):
    /// a request passes by value from the route resolver to a transfer, and a
    /// copy of a dozen strings and arrays would retain each of them.
    private var storage: Storage

    /// Mutable only while this value holds the one reference to it (see ``unique()``),
    /// so no two threads ever write or read-while-writing the same instance.
    private final class Storage: @unchecked Sendable {
        @exclusivity(unchecked) var method: String
        @exclusivity(unchecked) var url: String
        @exclusivity(unchecked) var headers: [HTTPHeader] = []
        @exclusivity(unchecked) var body: [UInt8]?
        @exclusivity(unchecked) var bodyStream: HTTPBodyStream?
        @exclusivity(unchecked) var timeoutMilliseconds: Int?
        @exclusivity(unchecked) var connectTimeoutMilliseconds: Int?
        @exclusivity(unchecked) var maxRedirects = 5
        @exclusivity(unchecked) var verifyTLS = true
        @exclusivity(unchecked) var caFile: String?
        @exclusivity(unchecked) var pinnedPublicKey: String?
        @exclusivity(unchecked) var clientCert: String?
        @exclusivity(unchecked) var clientKey: String?
        @exclusivity(unchecked) var proxy: String?
        @exclusivity(unchecked) var acceptEncoding = true
        @exclusivity(unchecked) var saveToFile: Int32?
        @exclusivity(unchecked) var resumeFileAt: Int?
        @exclusivity(unchecked) var spoolBytes = 0
        @exclusivity(unchecked) var maxBodyBytes: Int?
        @exclusivity(unchecked) var diskReserve = DiskReserve.none
        @exclusivity(unchecked) var reportsProgress = false
        @exclusivity(unchecked) var originBoundHeaders: [String] = []

        init(method: String, url: String) {
            self.method = method
            self.url = url
        }

        func copy() -> Storage {
            let copy = Storage(method: method, url: url)
            copy.headers = headers
            copy.body = body
            copy.bodyStream = bodyStream
            copy.timeoutMilliseconds = timeoutMilliseconds
            copy.connectTimeoutMilliseconds = connectTimeoutMilliseconds
            copy.maxRedirects = maxRedirects
            copy.verifyTLS = verifyTLS
            copy.caFile = caFile
            copy.pinnedPublicKey = pinnedPublicKey
            copy.clientCert = clientCert
            copy.clientKey = clientKey
            copy.proxy = proxy
            copy.acceptEncoding = acceptEncoding
            copy.saveToFile = saveToFile
            copy.resumeFileAt = resumeFileAt
            copy.spoolBytes = spoolBytes
            copy.maxBodyBytes = maxBodyBytes
            copy.diskReserve = diskReserve
            copy.reportsProgress = reportsProgress
            copy.originBoundHeaders = originBoundHeaders
            return copy
        }
    }

    /// The storage, copied first when another value shares it.
    private mutating func unique() -> Storage {
        if !isKnownUniquelyReferenced(&storage) { storage = storage.copy() }
        return storage
    }

    /// The method, upper case (`GET`, `POST`, ...).
    public var method: String {
        get { storage.method }
        _modify { let storage = unique(); yield &storage.method }
    }
    /// The absolute URL, query included and already percent-encoded.
    public var url: String {
        get { storage.url }
        _modify { let storage = unique(); yield &storage.url }
    }
    /// Header fields in sending order.
    public var headers: [HTTPHeader] {
        get { storage.headers }
        _modify { let storage = unique(); yield &storage.headers }
    }
    /// The request body, if any.
    public var body: [UInt8]? {
        get { storage.body }
        _modify { let storage = unique(); yield &storage.body }
    }
    /// A body read while it is sent (files, multipart forms), instead of ``body``.
    public var bodyStream: HTTPBodyStream? {
        get { storage.bodyStream }
        _modify { let storage = unique(); yield &storage.bodyStream }
    }
    /// Limit for the whole transfer (connect, redirects, body), in milliseconds.
    public var timeoutMilliseconds: Int? {
        get { storage.timeoutMilliseconds }
        _modify { let storage = unique(); yield &storage.timeoutMilliseconds }
    }
    /// Limit for establishing the connection, in milliseconds.
    public var connectTimeoutMilliseconds: Int? {
        get { storage.connectTimeoutMilliseconds }
        _modify { let storage = unique(); yield &storage.connectTimeoutMilliseconds }
    }
    /// Redirects followed before failing; 0 disables following.
    public var maxRedirects: Int {
        get { storage.maxRedirects }
        _modify { let storage = unique(); yield &storage.maxRedirects }
    }
    /// TLS peer and host verification. On unless a server is explicitly configured otherwise.
    public var verifyTLS: Bool {
        get { storage.verifyTLS }
        _modify { let storage = unique(); yield &storage.verifyTLS }
    }
    /// A PEM bundle of trusted certificate authorities, instead of the system's.
    public var caFile: String? {
        get { storage.caFile }
        _modify { let storage = unique(); yield &storage.caFile }
    }
    /// Public-key pins of the server (`sha256//BASE64;…`); a mismatch fails with kind `tls`.
    public var pinnedPublicKey: String? {
        get { storage.pinnedPublicKey }
        _modify { let storage = unique(); yield &storage.pinnedPublicKey }
    }
    /// A client certificate and key (PEM files) for mutual TLS.
    public var clientCert: String? {
        get { storage.clientCert }
        _modify { let storage = unique(); yield &storage.clientCert }
    }
    public var clientKey: String? {
        get { storage.clientKey }
        _modify { let storage = unique(); yield &storage.clientKey }
    }
    /// The proxy to go through (`http://`, `https://`, `socks5h://`, with credentials
    /// maybe); nil: none (the environment's proxy variables are not used either).
    public var proxy: String? {
        get { storage.proxy }
        _modify { let storage = unique(); yield &storage.proxy }
    }
    /// Ask for gzip/deflate and decode the body transparently.
    public var acceptEncoding: Bool {
        get { storage.acceptEncoding }
        _modify { let storage = unique(); yield &storage.acceptEncoding }
    }
    /// Stream the body to this open file instead of memory. The caller opens
    /// it (deciding where and how safely) and closes it; each transfer empties
    /// it first and writes from its start.
    public var saveToFile: Int32? {
        get { storage.saveToFile }
        _modify { let storage = unique(); yield &storage.saveToFile }
    }
    /// Write at this offset of ``saveToFile`` (a `Range` resume: the bytes kept
    /// before it stay, anything after it goes) instead of emptying it first.
    /// An earlier attempt that failed after writing more than it was known to
    /// have written cannot leave those bytes between the kept ones and the rest.
    public var resumeFileAt: Int? {
        get { storage.resumeFileAt }
        _modify { let storage = unique(); yield &storage.resumeFileAt }
    }
    /// A body bound for a file (``isBoundForFile``) no longer than this is
    /// held in memory instead and handed back in the response
    /// (``HTTPResponse/isSpooled``) with the file, if any, left empty, for the
    /// caller to write in one piece off its loop thread. One that grows past it
    /// goes to the file from then on, the bytes so far first; so do the bytes
    /// so far of a transfer cut mid-body (a `Range` resume finds them in the
    /// file). Without a ``saveToFile`` the file is opened only then, by the
    /// transfer's ``HTTPClient/SpillFile``. 0, or a ``resumeFileAt``: every
    /// byte goes to ``saveToFile`` as it arrives.
    public var spoolBytes: Int {
        get { storage.spoolBytes }
        _modify { let storage = unique(); yield &storage.spoolBytes }
    }
    /// The body goes to a file (``saveToFile``), or is spooled for one (``spoolBytes``).
    var isBoundForFile: Bool { saveToFile != nil || spoolBytes > 0 }

    /// The most body bytes kept in memory, counted after gzip/deflate decoding;
    /// a larger body aborts the transfer with kind `tooLarge` as soon as the
    /// limit is passed (or at once, when an unencoded body's `Content-Length`
    /// says so). nil: no limit. For a body streamed to ``saveToFile`` it bounds
    /// the bytes written by this transfer (`saveAs` downloads give none).
    public var maxBodyBytes: Int? {
        get { storage.maxBodyBytes }
        _modify { let storage = unique(); yield &storage.maxBodyBytes }
    }
    /// What a body written to a file leaves free on its disk: the transfer
    /// stops (kind `tooLarge`) once writing on would leave less, checked every
    /// few megabytes. A compression bomb (2 MB on the wire, gigabytes once
    /// decoded) or a server that never stops cannot fill the disk.
    public var diskReserve: DiskReserve {
        get { storage.diskReserve }
        _modify { let storage = unique(); yield &storage.diskReserve }
    }

    /// How much of a disk a download to a file keeps free.
    public enum DiskReserve: Sendable, Equatable {
        /// No check.
        case none
        /// 1 GiB, or a twentieth of a smaller disk.
        case automatic
        /// This many bytes.
        case bytes(Int)

        /// The bytes to keep free on a disk of `total` bytes.
        public func bytes(ofDisk total: Int) -> Int {
            switch self {
            case .none: return 0
            case .automatic: return min(1 << 30, total / 20)
            case .bytes(let n): return n
            }
        }
    }

    /// Report progress to the transfer's progress handler: a download to a file
    /// always, an upload or a download kept in memory once it reaches
    /// ``HTTPProgress/threshold`` (small transfers report nothing).
    public var reportsProgress: Bool {
        get { storage.reportsProgress }
        _modify { let storage = unique(); yield &storage.reportsProgress }
    }
    /// Header names (lowercased) sent only to the request's own origin (scheme,
    /// host and port): credentials such as an api key. curl sends custom headers
    /// to any host a redirect names (it keeps back only `Authorization` and
    /// `Cookie`), so a request with any of these follows its redirects in
    /// ``HTTPClient`` instead, leaving them out (with `Authorization` and
    /// `Cookie`) once a redirect leaves the origin.
    public var originBoundHeaders: [String] {
        get { storage.originBoundHeaders }
        _modify { let storage = unique(); yield &storage.originBoundHeaders }
    }

    /// The client, not curl, follows this request's redirects (see ``originBoundHeaders``).
    var followsRedirectsItself: Bool { maxRedirects > 0 && !originBoundHeaders.isEmpty }
    /// The redirects curl follows by itself.
    var curlRedirects: Int { originBoundHeaders.isEmpty ? maxRedirects : 0 }

    public init(method: String = "GET", url: String, headers: [HTTPHeader] = [], body: [UInt8]? = nil,
                timeoutMilliseconds: Int? = nil, connectTimeoutMilliseconds: Int? = nil,
                maxRedirects: Int = 5, verifyTLS: Bool = true, caFile: String? = nil,
                acceptEncoding: Bool = true, saveToFile: Int32? = nil, maxBodyBytes: Int? = nil,
                reportsProgress: Bool = false) {
        let storage = Storage(method: method, url: url)
        storage.headers = headers
        storage.body = body
        storage.timeoutMilliseconds = timeoutMilliseconds
        storage.connectTimeoutMilliseconds = connectTimeoutMilliseconds
        storage.maxRedirects = maxRedirects
        storage.verifyTLS = verifyTLS
        storage.caFile = caFile
        storage.acceptEncoding = acceptEncoding
        storage.saveToFile = saveToFile
        storage.maxBodyBytes = maxBodyBytes
        storage.reportsProgress = reportsProgress
        self.storage = storage
    }
}
