import OrderedCollections

/// One HTTP request (`"type": "remote"`).
public struct RemoteSpec: Sendable {
    /// The fields, shared by copies until one of them changes (copy on write):
    /// a spec travels by value from the submit to the worker (into the job
    /// table, a graph node, a work task, the executor), and each copy of two
    /// dozen fields would retain every string and collection among them.
    private var storage: Storage

    /// Mutable only while one value holds the only reference (see ``unique()``).
    private final class Storage: @unchecked Sendable {
        @exclusivity(unchecked) var method: String? = nil
        @exclusivity(unchecked) var url: String? = nil
        @exclusivity(unchecked) var server: String? = nil
        @exclusivity(unchecked) var endpoint: String? = nil
        @exclusivity(unchecked) var api: String? = nil
        @exclusivity(unchecked) var pathVars: OrderedDictionary<String, JSONValue> = [:]
        @exclusivity(unchecked) var query: OrderedDictionary<String, JSONValue> = [:]
        @exclusivity(unchecked) var headers: OrderedDictionary<String, JSONValue> = [:]
        @exclusivity(unchecked) var body: JSONValue? = nil
        @exclusivity(unchecked) var bodyEncoding: BodyEncoding? = nil
        @exclusivity(unchecked) var dogma: String? = nil
        @exclusivity(unchecked) var expect: [Int]? = nil
        @exclusivity(unchecked) var retry: RetryPolicy? = nil
        @exclusivity(unchecked) var cache: CacheSpec? = nil
        @exclusivity(unchecked) var saveAs: String? = nil
        @exclusivity(unchecked) var connectTimeoutMs: Int? = nil
        @exclusivity(unchecked) var maxRedirects: Int? = nil
        @exclusivity(unchecked) var label: String? = nil
        @exclusivity(unchecked) var `repeat`: RepeatSpec? = nil
        @exclusivity(unchecked) var coalesce: Bool? = nil
        @exclusivity(unchecked) var auth: String? = nil
        @exclusivity(unchecked) var bodyFile: String? = nil
        @exclusivity(unchecked) var contentMD5: Bool? = nil
        @exclusivity(unchecked) var gzipBody: Bool? = nil
        @exclusivity(unchecked) var deferred: DeferredJSON? = nil

        init() {}

        func copy() -> Storage {
            let copy = Storage()
            copy.method = method
            copy.url = url
            copy.server = server
            copy.endpoint = endpoint
            copy.api = api
            copy.pathVars = pathVars
            copy.query = query
            copy.headers = headers
            copy.body = body
            copy.bodyEncoding = bodyEncoding
            copy.dogma = dogma
            copy.expect = expect
            copy.retry = retry
            copy.cache = cache
            copy.saveAs = saveAs
            copy.connectTimeoutMs = connectTimeoutMs
            copy.maxRedirects = maxRedirects
            copy.label = label
            copy.`repeat` = `repeat`
            copy.coalesce = coalesce
            copy.auth = auth
            copy.bodyFile = bodyFile
            copy.contentMD5 = contentMD5
            copy.gzipBody = gzipBody
            copy.deferred = deferred
            return copy
        }
    }

    /// The storage, copied first when another value shares it.
    private mutating func unique() -> Storage {
        if !isKnownUniquelyReferenced(&storage) { storage = storage.copy() }
        return storage
    }

    public var method: String? {
        get { storage.method }
        _modify { let storage = unique(); yield &storage.method }
    }
    public var url: String? {
        get { storage.url }
        _modify { let storage = unique(); yield &storage.url }
    }
    public var server: String? {
        get { storage.server }
        _modify { let storage = unique(); yield &storage.server }
    }
    public var endpoint: String? {
        get { storage.endpoint }
        _modify { let storage = unique(); yield &storage.endpoint }
    }
    public var api: String? {
        get { storage.api }
        _modify { let storage = unique(); yield &storage.api }
    }
    public var pathVars: OrderedDictionary<String, JSONValue> {
        get { storage.pathVars }
        _modify { let storage = unique(); yield &storage.pathVars }
    }
    public var query: OrderedDictionary<String, JSONValue> {
        get { storage.query }
        _modify { let storage = unique(); yield &storage.query }
    }
    public var headers: OrderedDictionary<String, JSONValue> {
        get { storage.headers }
        _modify { let storage = unique(); yield &storage.headers }
    }
    public var body: JSONValue? {
        get { storage.body }
        _modify { let storage = unique(); yield &storage.body }
    }
    public var bodyEncoding: BodyEncoding? {
        get { storage.bodyEncoding }
        _modify { let storage = unique(); yield &storage.bodyEncoding }
    }
    public var dogma: String? {
        get { storage.dogma }
        _modify { let storage = unique(); yield &storage.dogma }
    }
    public var expect: [Int]? {
        get { storage.expect }
        _modify { let storage = unique(); yield &storage.expect }
    }
    public var retry: RetryPolicy? {
        get { storage.retry }
        _modify { let storage = unique(); yield &storage.retry }
    }
    public var cache: CacheSpec? {
        get { storage.cache }
        _modify { let storage = unique(); yield &storage.cache }
    }
    public var saveAs: String? {
        get { storage.saveAs }
        _modify { let storage = unique(); yield &storage.saveAs }
    }
    /// Extension: limit for connecting, in milliseconds.
    public var connectTimeoutMs: Int? {
        get { storage.connectTimeoutMs }
        _modify { let storage = unique(); yield &storage.connectTimeoutMs }
    }
    /// Extension: redirects to follow (default from config, else 5).
    public var maxRedirects: Int? {
        get { storage.maxRedirects }
        _modify { let storage = unique(); yield &storage.maxRedirects }
    }
    /// Any text the caller tells this call by (rest.md §8, HJRestClientManager's
    /// call identifier): echoed in every event of the step, never sent.
    public var label: String? {
        get { storage.label }
        _modify { let storage = unique(); yield &storage.label }
    }
    /// Polling (rest.md §5): the request again every `everyMs` until a condition holds.
    public var `repeat`: RepeatSpec? {
        get { storage.`repeat` }
        _modify { let storage = unique(); yield &storage.`repeat` }
    }
    /// Merged requests (rest.md §4): nil follows the api.
    public var coalesce: Bool? {
        get { storage.coalesce }
        _modify { let storage = unique(); yield &storage.coalesce }
    }
    /// The auth session (rest.md §1) this request uses, over its api's and server's.
    public var auth: String? {
        get { storage.auth }
        _modify { let storage = unique(); yield &storage.auth }
    }
    /// A raw body streamed from this file under the state folder (rest.md §2).
    public var bodyFile: String? {
        get { storage.bodyFile }
        _modify { let storage = unique(); yield &storage.bodyFile }
    }
    /// Adds `Content-MD5` (of the body as sent).
    public var contentMD5: Bool? {
        get { storage.contentMD5 }
        _modify { let storage = unique(); yield &storage.contentMD5 }
    }
    /// Compresses the body with gzip and sends `Content-Encoding: gzip`.
    public var gzipBody: Bool? {
        get { storage.gzipBody }
        _modify { let storage = unique(); yield &storage.gzipBody }
    }
    /// See ``JobSpec/deferredJSON`` (a `remote` or a `resource` step's).
    var deferred: DeferredJSON? {
        get { storage.deferred }
        _modify { let storage = unique(); yield &storage.deferred }
    }

    public init(method: String? = nil, url: String? = nil, server: String? = nil, endpoint: String? = nil,
                api: String? = nil) {
        storage = Storage()
        self.method = method
        self.url = url
        self.server = server
        self.endpoint = endpoint
        self.api = api
    }

    public static func get(_ url: String) -> RemoteSpec { RemoteSpec(method: "GET", url: url) }
}
