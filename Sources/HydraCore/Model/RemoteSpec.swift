import OrderedCollections

/// One HTTP request (`"type": "remote"`).
public struct RemoteSpec: Sendable {
    public var method: String?
    public var url: String?
    public var server: String?
    public var endpoint: String?
    public var api: String?
    public var pathVars: OrderedDictionary<String, JSONValue> = [:]
    public var query: OrderedDictionary<String, JSONValue> = [:]
    public var headers: OrderedDictionary<String, JSONValue> = [:]
    public var body: JSONValue?
    public var bodyEncoding: BodyEncoding?
    public var dogma: String?
    public var expect: [Int]?
    public var retry: RetryPolicy?
    public var cache: CacheSpec?
    public var saveAs: String?
    /// Extension: limit for connecting, in milliseconds.
    public var connectTimeoutMs: Int?
    /// Extension: redirects to follow (default from config, else 5).
    public var maxRedirects: Int?
    /// Any text the caller tells this call by (rest.md §8, HJRestClientManager's
    /// call identifier): echoed in every event of the step, never sent.
    public var label: String?
    /// Polling (rest.md §5): the request again every `everyMs` until a condition holds.
    public var `repeat`: RepeatSpec?
    /// Merged requests (rest.md §4): nil follows the api.
    public var coalesce: Bool?
    /// The auth session (rest.md §1) this request uses, over its api's and server's.
    public var auth: String?
    /// A raw body streamed from this file under the state folder (rest.md §2).
    public var bodyFile: String?
    /// Adds `Content-MD5` (of the body as sent).
    public var contentMD5: Bool?
    /// Compresses the body with gzip and sends `Content-Encoding: gzip`.
    public var gzipBody: Bool?
    /// See ``JobSpec/deferredJSON`` (a `remote` or a `resource` step's).
    var deferred: DeferredJSON?

    public init(method: String? = nil, url: String? = nil, server: String? = nil, endpoint: String? = nil,
                api: String? = nil) {
        self.method = method
        self.url = url
        self.server = server
        self.endpoint = endpoint
        self.api = api
    }

    public static func get(_ url: String) -> RemoteSpec { RemoteSpec(method: "GET", url: url) }
}
