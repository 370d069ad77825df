import Foundation
import HydraLoop
import OrderedCollections

/// The configuration file (`config.md`), decoded and checked. Every key is
/// optional; unknown keys are errors naming their path.
public struct Configuration: Sendable {
    public var rpc = RPC()
    public var state = State()
    public var workers: [Worker] = Configuration.defaultWorkers
    public var servers: OrderedDictionary<String, Server> = [:]
    public var apis: OrderedDictionary<String, API> = [:]
    public var defaults = Defaults()
    public var dummy = Dummy()
    /// Auth sessions by name (rest.md §1); apis, servers and jobs opt in with `"auth": NAME`.
    public var auth: OrderedDictionary<String, AuthScheme> = [:]
    /// The header names of the `api-key` auth schemes, lowercased (their values are secrets).
    public var apiKeyHeaders: [String] { auth.values.compactMap(\.secretHeader) }
    /// The resource repository (resources.md §4).
    public var resources = Resources()
    public var jobsPath = "jobs"
    public var maxQueuedJobs = 1_000_000
    /// `limits.maxResultBytes`: a step's result, or a group's collected results, larger than
    /// this once encoded fails the step with kind `tooLarge` (protocol §4).
    public var maxResultBytes = 16_777_216
    public var retentionHours = 24
    public var allowEnv: [String] = []

    public init() {}

    public static let defaultWorkers: [Worker] = [
        Worker(name: "rest", kind: .remote, maxConnections: 64, maxHostConnections: 16, maxActive: 256, threads: 2),
        Worker(name: "local", kind: .local, maxConnections: 64, maxHostConnections: 16, maxActive: 256, threads: 2),
    ]

    public struct RPC: Sendable {
        public var listen = "127.0.0.1:7400"
        public var unixSocket: String?
        public var secret: String?
        public var allowInsecure = false
        public var maxMessageBytes = 1_048_576
        public var maxOutboundBytes = 8_388_608
        public var maxConnections = 1024
        /// Subscriptions one connection may hold (`-32004` past it).
        public var maxSubscriptions = 256
        /// A connection that sends no complete message this long after it
        /// opened is closed (an extension: idle sockets would otherwise hold
        /// every one of `maxConnections`); a client that ended its side is
        /// waited for this long for its pending answers.
        public var firstMessageTimeoutMs = 30_000

        /// The largest `maxMessageBytes` and `maxOutboundBytes` taken (1 TiB):
        /// far past any real need, and far from overflowing the sums they enter.
        public static let maxByteLimit = 1 << 40
    }

    public struct State: Sendable {
        public enum Sync: String, Sendable { case normal, full }
        public var path = "var"
        public var sync = Sync.normal
        /// What a download to a file (`saveAs`, a resource) leaves free on its
        /// disk; it stops with kind `tooLarge` rather than go below. nil: 1 GiB,
        /// or a twentieth of a smaller disk; 0: no check. (An extension of config.md.)
        public var minFreeBytes: Int?

        /// The database file's name; every file whose name starts with it is the database's.
        public static let databaseName = "hydra.db"
        /// The marker `hydra serve` leaves after a clean stop.
        public static let cleanShutdownName = "clean-shutdown"
        /// The file `hydra serve` locks: one server per state folder.
        public static let lockName = "hydra.lock"
        /// The files the server keeps at the top of `path` beside the database.
        public static let ownedNames: Set<String> = [cleanShutdownName, lockName]

        /// True for a top-level name (lowercased) that is one of the server's own files.
        public static func isOwned(_ top: String) -> Bool { top.hasPrefix(databaseName) || ownedNames.contains(top) }
    }

    /// `resources`: where the resource repository lives and how much it keeps.
    public struct Resources: Sendable {
        /// Under `state.path` (relative), or absolute.
        public var path = "resources"
        /// The in-memory LRU of content, by bytes; 0 turns it off.
        public var memoryBytes = 67_108_864
        /// On disk; past it the least recently used copies go first.
        public var maxBytes = 1_073_741_824
        /// The default freshness of a copy.
        public var maxAgeSec = 86_400
        /// How often expired and over-budget copies are removed.
        public var purgeIntervalSec = 3_600

        /// `path` checked as the repository's folder: relative to `state.path`,
        /// inside it (no `..`, and not `state.path` itself), and not a name the
        /// server owns there (its database `hydra.db*`, the `clean-shutdown`
        /// marker). Startup reconciliation removes files in this folder that
        /// the index does not know, so it must never be the state folder
        /// itself. Returns the path normalized (components joined with `/`).
        static func folder(_ path: String, at field: String) throws(ValidationError) -> String {
            let parts = path.split(separator: "/", omittingEmptySubsequences: true).filter { $0 != "." }
            guard !path.hasPrefix("/"), !path.utf8.contains(0), !parts.isEmpty, !parts.contains("..") else {
                throw ValidationError(path: field, "expected a folder inside state.path (relative, without '..', not state.path itself), got \(path.debugDescription)")
            }
            let top = parts[0].lowercased()
            guard !State.isOwned(top) else {
                throw ValidationError(path: field, "\(path.debugDescription) is a file the server owns in state.path")
            }
            return parts.joined(separator: "/")
        }
    }

    public struct Worker: Sendable {
        /// The largest `maxConnections`, `maxHostConnections` and `maxActive`
        /// (in the file and through `worker.configure`).
        public static let maxLimit = 1_000_000
        public var name: String
        public var kind: JobKind
        public var maxConnections: Int
        public var maxHostConnections: Int
        public var maxActive: Int
        public var threads: Int
        public init(name: String, kind: JobKind, maxConnections: Int = 64, maxHostConnections: Int = 16,
                    maxActive: Int = 256, threads: Int = 2) {
            self.name = name
            self.kind = kind
            self.maxConnections = maxConnections
            self.maxHostConnections = maxHostConnections
            self.maxActive = maxActive
            self.threads = threads
        }
    }

    /// A server: its base URL, plus (extension) transport options.
    /// In the file either `"key": "http://…"` or `"key": {"url": …, "verifyTLS": false, …}`.
    public struct Server: Sendable {
        public var url: String
        /// TLS verification; on unless explicitly turned off for this server.
        public var verifyTLS = true
        public var caFile: String?
        /// Public-key pins (`sha256//BASE64`, several separated by `;`): the server's key must match one (rest.md §7).
        public var pinnedPublicKey: String?
        /// A client certificate and its key (PEM files) for mutual TLS.
        public var clientCert: String?
        public var clientKey: String?
        /// The proxy requests to this server go through (`http://`, `https://`, `socks5h://`,
        /// credentials allowed; they are secrets, never shown).
        public var proxy: String?
        /// Headers sent with every request to this server (between defaults and api).
        public var headers: OrderedDictionary<String, String> = [:]
        /// The auth session every request to this server uses, unless its api or job names another.
        public var auth: String?
        public init(url: String) { self.url = url }
    }

    public struct API: Sendable {
        public var server: String
        public var endpoint: String
        public var method: String = "GET"
        public var headers: OrderedDictionary<String, String> = [:]
        public var dogma: String?
        public var cacheTTL: Int?
        /// `"cacheTTL": "http"` (rest.md §3): lifetimes from the responses.
        public var cacheTTLFromHTTP = false
        /// How long past its lifetime a stored response answers when every attempt failed (rest.md §3).
        public var staleIfErrorSec: Int?
        public var invalidates: [String] = []
        public var cacheIgnoreQuery = false
        /// Merged requests (rest.md §4): an identical GET in flight is shared.
        public var coalesce = false
        /// The auth session of this api's requests (over the server's).
        public var auth: String?
        public var retry: RetryPolicy?
        public var timeoutMs: Int?
        /// An api at `endpoint` on `server` (empty: `defaults.server`).
        public init(server: String = "", endpoint: String) {
            self.server = server
            self.endpoint = endpoint
        }
    }

    public struct Defaults: Sendable {
        public var server: String?
        public var dogma: String?
        public var timeoutMs = 30_000
        /// A response body kept in memory (after decoding) larger than this fails with kind `tooLarge`.
        public var maxBodyBytes = 67_108_864
        /// Extension: connect time limit.
        public var connectTimeoutMs = 10_000
        /// Extension: redirects followed.
        public var maxRedirects = 5
        public var retry = RetryPolicy(maxAttempts: 1)
        public var headers: OrderedDictionary<String, String> = ["User-Agent": "hydra/\(HydraVersion.string)"]
    }

    public struct Dummy: Sendable {
        public var enabled = false
        public var responses: [DummyResponse] = []
        /// Each request is matched against the list in turn, on its worker's loop:
        /// 100,000 entries cost every request a quarter of a second.
        public static let maxResponses = 10_000
    }

    public struct DummyResponse: Sendable {
        public var server: String?
        public var endpoint: String
        public var method: String?
        public var status = 200
        public var headers: OrderedDictionary<String, String> = [:]
        public var body: JSONValue?
        public var delayMs = 0

        public init(endpoint: String) { self.endpoint = endpoint }

        /// One entry of `dummy.responses` (also `dummy.set`'s); errors name the field under `path`.
        public init(json: JSONValue, path: String) throws(ValidationError) {
            var d = try FieldReader(json, path: path)
            endpoint = try d.requiredString("endpoint")
            try Configuration.checkEndpoint(endpoint, path: d.path("endpoint"))
            server = try d.string("server")
            method = try d.string("method")?.uppercased()
            if let method, !RemoteSpec.isValidMethod(method) {
                throw ValidationError(path: d.path("method"), "invalid method '\(method)'")
            }
            status = try d.int("status", in: Bounds.status) ?? 200
            headers = try d.stringMap("headers") ?? [:]
            // A reply's headers are checked as a request's are (a CR/LF in a name was taken).
            for (name, value) in headers {
                if !HeaderSyntax.isValidName(name) { throw ValidationError(path: d.path("headers") + ".\(name)", HeaderSyntax.nameProblem) }
                if !HeaderSyntax.isValidValue(value) { throw ValidationError(path: d.path("headers") + ".\(name)", HeaderSyntax.valueProblem) }
            }
            body = d.value("body")
            delayMs = try d.int("delayMs", in: Bounds.dummyDelayMs) ?? 0
            try d.rejectUnknownKeys()
        }
    }
}

/// The version of this build.
public enum HydraVersion {
    public static let string = "0.1.0"
}

extension Configuration {
    /// Why `path` could not be read, as the CLI says it of a spec file
    /// (`No such file or directory`, also for a dangling link; `it is a folder`).
    private static func unreadable(_ path: String) -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return String(cString: strerror(errno)) }
        defer { close(fd) }
        var info = stat()
        if fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFDIR { return "it is a folder" }
        return "it cannot be read whole"
    }

    /// Reads and checks a configuration file. Errors name the file and key path.
    public static func load(path: String) throws -> Configuration {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigurationError(file: path, ValidationError(path: "", "cannot read the file: \(unreadable(path))"))
        }
        let json: JSONValue
        switch Result(catching: { () throws(JSONParseError) in try JSONParser.parse([UInt8](data), refusingRepeatedKeys: true) }) {
        case .success(let parsed): json = parsed
        case .failure(let error):
            // FILE:LINE:COLUMN: not JSON: ..., so an editor can jump to the spot.
            throw ConfigurationError(file: "\(path):\(error.line):\(error.column)",
                                     ValidationError(path: "", "not JSON: \(error.message)"))
        }
        do {
            return try Configuration(json: json)
        } catch {
            throw ConfigurationError(file: path, error)
        }
    }

    /// Decodes a configuration document; `${env.NAME}` in the `auth` section
    /// and in a server's `proxy` reads `environment` (the process's by default).
    public init(json: JSONValue,
                environment: [String: String] = ProcessInfo.processInfo.environment) throws(ValidationError) {
        self.init()
        var r = try FieldReader(json, path: "")
        if var o = try r.object("rpc") {
            rpc.listen = try o.string("listen") ?? rpc.listen
            if SocketAddress(parsing: rpc.listen).map({ if case .tcp = $0 { true } else { false } }) != true {
                throw ValidationError(path: o.path("listen"), "\"\(rpc.listen)\" is not HOST:PORT")
            }
            rpc.unixSocket = try o.string("unixSocket")
            if let socket = rpc.unixSocket { try Configuration.checkUnixSocket(socket, path: o.path("unixSocket")) }
            rpc.secret = try o.string("secret")
            if rpc.secret?.isEmpty == true {
                throw ValidationError(path: o.path("secret"), "must not be empty (leave it out to run without a secret)")
            }
            rpc.allowInsecure = try o.bool("allowInsecure") ?? false
            rpc.maxMessageBytes = try o.int("maxMessageBytes", min: 256, max: RPC.maxByteLimit) ?? rpc.maxMessageBytes
            rpc.maxOutboundBytes = try o.int("maxOutboundBytes", min: 1024, max: RPC.maxByteLimit) ?? rpc.maxOutboundBytes
            rpc.maxConnections = try o.int("maxConnections", min: 1, max: Worker.maxLimit) ?? rpc.maxConnections
            rpc.maxSubscriptions = try o.int("maxSubscriptions", min: 1, max: Worker.maxLimit) ?? rpc.maxSubscriptions
            rpc.firstMessageTimeoutMs = try o.int("firstMessageTimeoutMs", min: 100, max: 86_400_000) ?? rpc.firstMessageTimeoutMs
            try o.rejectUnknownKeys()
        }
        if var o = try r.object("state") {
            state.path = try o.string("path") ?? state.path
            try Configuration.checkPlainText(state.path, path: o.path("path"))
            if state.path.isEmpty { throw ValidationError(path: o.path("path"), "must not be empty (a folder; \".\" for the current one)") }
            state.minFreeBytes = try o.int("minFreeBytes", in: Bounds.nonNegative)
            if let sync = try o.string("sync") {
                guard let s = State.Sync(rawValue: sync) else {
                    throw ValidationError(path: o.path("sync"), "expected normal or full")
                }
                state.sync = s
            }
            try o.rejectUnknownKeys()
        }
        if let items = try r.array("workers") {
            guard !items.isEmpty else { throw ValidationError(path: r.path("workers"), "at least one worker is required") }
            workers = []
            var names: Set<String> = []
            for (i, item) in items.enumerated() {
                var w = try FieldReader(item, path: "workers[\(i)]")
                let name = try w.requiredString("name")
                try Worker.checkName(name, path: w.path("name"))
                guard names.insert(name).inserted else { throw ValidationError(path: w.path("name"), "duplicate worker '\(name)'") }
                let kindText = try w.requiredString("kind")
                guard let kind = JobKind(rawValue: kindText) else {
                    throw ValidationError(path: w.path("kind"), "expected remote or local")
                }
                workers.append(Worker(
                    name: name, kind: kind,
                    maxConnections: try w.int("maxConnections", in: Bounds.workerLimit) ?? 64,
                    maxHostConnections: try w.int("maxHostConnections", in: Bounds.workerLimit) ?? 16,
                    maxActive: try w.int("maxActive", in: Bounds.workerLimit) ?? 256,
                    threads: try w.int("threads", in: Bounds.threads) ?? 2))
                try w.rejectUnknownKeys()
            }
        }
        if let o = try r.object("servers") {
            for (key, value) in o.members {
                let path = o.path(key)
                if case .string(let url) = value {
                    servers[key] = Server(url: try Configuration.checkBaseURL(url, path: path))
                    continue
                }
                guard case .object = value else {
                    throw ValidationError(path: path, "expected string (the base URL) or object, got \(value.typeName)")
                }
                var s = try FieldReader(value, path: path)
                var server = Server(url: try Configuration.checkBaseURL(try s.requiredString("url"), path: s.path("url")))
                server.verifyTLS = try s.bool("verifyTLS") ?? true
                // Files are relative to the directory the server runs in (as the config's other paths).
                server.caFile = try s.string("caFile")
                if let file = server.caFile { try Configuration.checkReadable(file, path: s.path("caFile")) }
                if let pins = try s.string("pinnedPublicKey") {
                    server.pinnedPublicKey = try Configuration.checkPins(pins, path: s.path("pinnedPublicKey"))
                }
                server.clientCert = try s.string("clientCert")
                server.clientKey = try s.string("clientKey")
                switch (server.clientCert, server.clientKey) {
                case (let cert?, let key?):
                    try Configuration.checkReadable(cert, path: s.path("clientCert"))
                    try Configuration.checkReadable(key, path: s.path("clientKey"))
                case (nil, nil): break
                case (nil, _?): throw ValidationError(path: s.path("clientCert"), "required with clientKey")
                case (_?, nil): throw ValidationError(path: s.path("clientKey"), "required with clientCert")
                }
                // `${env.NAME}` keeps proxy credentials out of the file, as in the auth section.
                if let proxy = try s.string("proxy") {
                    server.proxy = try AuthScheme.expand(proxy, path: s.path("proxy"), environment: environment)
                }
                if let proxy = server.proxy { try Configuration.checkProxy(proxy, path: s.path("proxy")) }
                server.headers = try s.stringMap("headers") ?? [:]
                try HeaderSyntax.check(server.headers, path: s.path("headers"))
                server.auth = try s.string("auth")
                try s.rejectUnknownKeys()
                servers[key] = server
            }
        }
        if let o = try r.object("auth") {
            for (key, value) in o.members {
                auth[key] = try AuthScheme(json: value, path: o.path(key), environment: environment)
            }
        }
        if let o = try r.object("apis") {
            for (key, value) in o.members {
                var a = try FieldReader(value, path: o.path(key))
                // Without a server the api uses defaults.server (filled in by `checkReferences`).
                let server = try a.string("server") ?? ""
                var api = API(server: server, endpoint: try a.requiredString("endpoint"))
                try Configuration.checkEndpoint(api.endpoint, path: a.path("endpoint"))
                api.method = try a.string("method")?.uppercased() ?? "GET"
                if !RemoteSpec.isValidMethod(api.method) {
                    throw ValidationError(path: a.path("method"), "invalid method '\(api.method)'")
                }
                api.headers = try a.stringMap("headers") ?? [:]
                try HeaderSyntax.check(api.headers, path: a.path("headers"))
                api.dogma = try a.string("dogma")
                (api.cacheTTL, api.cacheTTLFromHTTP) = try CacheSpec.lifetime(&a, "cacheTTL")
                api.staleIfErrorSec = try a.int("staleIfErrorSec", in: SpecBounds.staleIfErrorSec)
                api.invalidates = try a.stringArray("invalidates") ?? []
                api.cacheIgnoreQuery = try a.bool("cacheIgnoreQuery") ?? false
                api.coalesce = try a.bool("coalesce") ?? false
                if api.coalesce && api.method != "GET" {
                    throw ValidationError(path: a.path("coalesce"), "only GET requests are merged (the method is \(api.method))")
                }
                api.auth = try a.string("auth")
                if var retry = try a.object("retry") { api.retry = try RetryPolicy(reader: &retry) }
                api.timeoutMs = try a.int("timeoutMs", in: SpecBounds.timeoutMs)
                try a.rejectUnknownKeys()
                apis[key] = api
            }
        }
        if var o = try r.object("defaults") {
            defaults.server = try o.string("server")
            defaults.dogma = try o.string("dogma")
            defaults.timeoutMs = try o.int("timeoutMs", in: SpecBounds.timeoutMs) ?? defaults.timeoutMs
            defaults.maxBodyBytes = try o.int("maxBodyBytes", in: Bounds.positive) ?? defaults.maxBodyBytes
            defaults.connectTimeoutMs = try o.int("connectTimeoutMs", in: SpecBounds.timeoutMs) ?? defaults.connectTimeoutMs
            defaults.maxRedirects = try o.int("maxRedirects", in: SpecBounds.maxRedirects) ?? defaults.maxRedirects
            if var retry = try o.object("retry") { defaults.retry = try RetryPolicy(reader: &retry).filling(from: RetryPolicy()) }
            if let headers = try o.stringMap("headers") {
                try HeaderSyntax.check(headers, path: o.path("headers"))
                var given = headers.mapValues { $0.replacingOccurrences(of: "VERSION", with: HydraVersion.string) }
                // Headers of one's own do not drop Hydra's User-Agent; naming it (`""`: none) does.
                if !given.keys.contains(where: { $0.lowercased() == "user-agent" }) {
                    given.updateValue("hydra/\(HydraVersion.string)", forKey: "User-Agent", insertingAt: 0)
                }
                defaults.headers = given
            }
            try o.rejectUnknownKeys()
        }
        if var o = try r.object("dummy") {
            dummy.enabled = try o.bool("enabled") ?? false
            let items = try o.array("responses") ?? []
            guard items.count <= Dummy.maxResponses else {
                throw ValidationError(path: o.path("responses"), "at most \(Dummy.maxResponses) dummy responses (each request is matched against them in turn)")
            }
            for (i, item) in items.enumerated() {
                dummy.responses.append(try DummyResponse(json: item, path: o.path("responses") + "[\(i)]"))
            }
            try o.rejectUnknownKeys()
        }
        if var o = try r.object("resources") {
            if let path = try o.string("path") { resources.path = try Resources.folder(path, at: o.path("path")) }
            resources.memoryBytes = try o.int("memoryBytes", in: Bounds.nonNegative) ?? resources.memoryBytes
            resources.maxBytes = try o.int("maxBytes", in: Bounds.positive) ?? resources.maxBytes
            resources.maxAgeSec = try o.int("maxAgeSec", in: SpecBounds.lifetimeSec) ?? resources.maxAgeSec
            resources.purgeIntervalSec = try o.int("purgeIntervalSec", in: Bounds.purgeIntervalSec) ?? resources.purgeIntervalSec
            try o.rejectUnknownKeys()
        }
        if var o = try r.object("jobs") {
            jobsPath = try o.string("path") ?? jobsPath
            if jobsPath.isEmpty { throw ValidationError(path: o.path("path"), "must not be empty (a folder)") }
            try Configuration.checkPlainText(jobsPath, path: o.path("path"))
            try o.rejectUnknownKeys()
        }
        if var o = try r.object("limits") {
            maxQueuedJobs = try o.int("maxQueuedJobs", in: Bounds.positive) ?? maxQueuedJobs
            maxResultBytes = try o.int("maxResultBytes", in: Bounds.maxResultBytes) ?? maxResultBytes
            try o.rejectUnknownKeys()
        }
        if var o = try r.object("retention") {
            retentionHours = try o.int("hours", in: Bounds.nonNegative) ?? retentionHours
            try o.rejectUnknownKeys()
        }
        allowEnv = try r.stringArray("allowEnv") ?? []
        try checkAllowEnv(allowEnv)
        try r.rejectUnknownKeys()
        try checkReferences()
    }

    /// `allowEnv`: portable names, none of them the server's secrets, none twice.
    func checkAllowEnv(_ names: [String]) throws(ValidationError) {
        for (i, name) in names.enumerated() {
            guard Configuration.isEnvironmentName(name) else {
                throw ValidationError(path: "allowEnv[\(i)]",
                                      "expected the name of an environment variable (letters, digits and _, not first a digit)")
            }
            // `${env.NAME}` puts the value in results and events: never a secret of the server's own.
            guard !Configuration.secretVariables.contains(name) else {
                throw ValidationError(path: "allowEnv[\(i)]", "\(name) is the server's secret: it may not be read by jobs")
            }
            guard names.firstIndex(of: name) == i else {
                throw ValidationError(path: "allowEnv[\(i)]", "duplicate '\(name)'")
            }
        }
    }

    /// Cross-checks: apis name known servers (or get defaults.server), defaults.server
    /// exists, worker kinds present. An `invalidates` entry may name an api not
    /// configured (the spec's own example does): it then removes nothing.
    mutating func checkReferences() throws(ValidationError) {
        for (key, api) in apis where api.server.isEmpty {
            guard let server = defaults.server else {
                throw ValidationError(path: "apis.\(key).server", "required when defaults.server is not set")
            }
            apis[key]?.server = server
        }
        for (key, api) in apis where servers[api.server] == nil {
            throw ValidationError(path: "apis.\(key).server", "unknown server '\(api.server)'")
        }
        for (key, api) in apis {
            if let name = api.auth, auth[name] == nil { throw ValidationError(path: "apis.\(key).auth", "unknown auth '\(name)'") }
        }
        for (key, server) in servers {
            if let name = server.auth, auth[name] == nil { throw ValidationError(path: "servers.\(key).auth", "unknown auth '\(name)'") }
        }
        if let server = defaults.server, servers[server] == nil {
            throw ValidationError(path: "defaults.server", "unknown server '\(server)'")
        }
        for (i, response) in dummy.responses.enumerated() {
            if let server = response.server, servers[server] == nil {
                throw ValidationError(path: "dummy.responses[\(i)].server", "unknown server '\(server)'")
            }
        }
    }

    /// The longest Unix socket path (`sun_path` less its terminating NUL).
    public static let maxUnixSocketPath = 107

    /// The environment variables that hold the server's secrets.
    public static let secretVariables: Set<String> = ["HYDRA_RPC_SECRET", "HYDRA_SHARED_KEY"]

    /// A portable environment variable name: `[A-Za-z_][A-Za-z0-9_]*`.
    static func isEnvironmentName(_ name: String) -> Bool {
        guard let first = name.utf8.first, !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else { return false }
        return name.utf8.allSatisfy { byte in
            byte == UInt8(ascii: "_") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
        }
    }

    /// Refuses control characters (a NUL cuts a path short where the system reads
    /// it; an escape sequence in a name rewrites the terminal that prints it).
    /// A Unix socket's path (`rpc.unixSocket`, `--unix-socket`): not empty, no
    /// control character, and within the 107 bytes `sun_path` holds (a
    /// relative path is checked again once made absolute).
    public static func checkUnixSocket(_ socket: String, path: String) throws(ValidationError) {
        if socket.isEmpty {
            throw ValidationError(path: path, "must not be empty (a socket path, or null for none)")
        }
        try checkPlainText(socket, path: path)
        if socket.utf8.count > maxUnixSocketPath {
            throw ValidationError(path: path, "\(socket.utf8.count) bytes long: a Unix socket's path is at most \(maxUnixSocketPath)")
        }
    }

    /// Text that reaches logs, events and terminals (names, paths): no control character.
    public static func checkPlainText(_ text: String, path: String) throws(ValidationError) {
        if let bad = text.unicodeScalars.first(where: { $0.properties.generalCategory == .control }) {
            let hex = String(bad.value, radix: 16, uppercase: true)
            throw ValidationError(path: path, "must not contain control characters (U+\(String(repeating: "0", count: max(0, 4 - hex.count)) + hex))")
        }
    }

    /// A file the server must read (a CA bundle, a certificate, a key).
    private static func checkReadable(_ file: String, path: String) throws(ValidationError) {
        guard FileManager.default.isReadableFile(atPath: file) else {
            throw ValidationError(path: path, "cannot read \(file.debugDescription)")
        }
    }

    /// `sha256//BASE64` pins of 32-byte digests, separated by `;` (curl's format).
    /// Checks a pin list and returns it as curl takes it: spaces around the
    /// `;` separators are dropped (curl would compare them as part of a pin).
    private static func checkPins(_ pins: String, path: String) throws(ValidationError) -> String {
        let items = pins.split(separator: ";", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        for item in items {
            guard item.hasPrefix("sha256//"), let digest = Data(base64Encoded: String(item.dropFirst(8))), digest.count == 32 else {
                throw ValidationError(path: path, "expected sha256//BASE64 (the base64 of a 32-byte SHA-256), several separated by ';'")
            }
        }
        return items.joined(separator: ";")
    }

    /// A proxy URL: `http://`, `https://` or `socks5h://`, with a host. The
    /// message never repeats the URL (it may hold credentials).
    private static func checkProxy(_ proxy: String, path: String) throws(ValidationError) {
        let schemes = ["http://", "https://", "socks5h://"]
        guard let scheme = schemes.first(where: { proxy.lowercased().hasPrefix($0) }) else {
            throw ValidationError(path: path, "expected an http://, https:// or socks5h:// proxy URL")
        }
        guard !proxy.contains(where: { $0 == " " || $0 == "\n" || $0 == "\r" || $0 == "\t" }) else {
            throw ValidationError(path: path, "the proxy URL contains a space or a line break")
        }
        let rest = proxy.dropFirst(scheme.count)
        let authority = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        // After the credentials, if any: `host`, `host:port`, `[v6]` or `[v6]:port`.
        let hostPort = authority.lastIndex(of: "@").map { authority[authority.index(after: $0)...] } ?? authority
        var host = hostPort
        var port: Substring?
        if hostPort.hasPrefix("[") {
            guard let close = hostPort.firstIndex(of: "]") else { throw ValidationError(path: path, "the proxy URL's [address] is not closed") }
            host = hostPort[hostPort.index(after: hostPort.startIndex)..<close]
            let after = hostPort[hostPort.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw ValidationError(path: path, "the proxy URL has text after its [address]") }
                port = after.dropFirst()
            }
        } else if let colon = hostPort.lastIndex(of: ":") {
            host = hostPort[..<colon]
            port = hostPort[hostPort.index(after: colon)...]
        }
        guard !host.isEmpty else { throw ValidationError(path: path, "the proxy URL has no host") }
        guard hostPort.hasPrefix("[") || !host.contains(":") else {
            throw ValidationError(path: path, "an IPv6 proxy address goes in brackets: [::1]:3128")
        }
        if let port {
            guard let number = Int(port), (1...65535).contains(number) else {
                throw ValidationError(path: path, "the proxy URL's port must be a number from 1 to 65535")
            }
        }
    }

    /// A server's base URL: an http(s) URL without a query or fragment
    /// (endpoints are appended to it: `…/q?a=1` put them in the query, and
    /// `…#frag` lost them).
    static func checkBaseURL(_ url: String, path: String) throws(ValidationError) -> String {
        _ = try checkURL(url, path: path)
        if url.contains("?") || url.contains("#") {
            throw ValidationError(path: path, "a base URL takes no query or fragment (endpoints are appended to it)")
        }
        return url
    }

    /// An endpoint is a path under a server, not a URL of its own (an absolute
    /// one was appended to the server's: `http://host/http://other/x`).
    public static func checkEndpoint(_ endpoint: String, path: String) throws(ValidationError) {
        if endpoint.contains("://") {
            throw ValidationError(path: path, "a path under the server (/v1/...), not a URL: name the host in servers, or use url")
        }
    }

    static func checkURL(_ url: String, path: String) throws(ValidationError) -> String {
        guard url.hasPrefix("http://") || url.hasPrefix("https://") else {
            throw ValidationError(path: path, "expected an http:// or https:// URL")
        }
        guard let host = URLComponents(string: url)?.host, !host.isEmpty else {
            throw ValidationError(path: path, "expected an http:// or https:// URL with a host")
        }
        if let problem = URLSyntax.problem(in: url) { throw ValidationError(path: path, "not a URL: \(problem)") }
        return url
    }
}

/// A configuration file that cannot be used: `FILE: key.path: problem`.
public struct ConfigurationError: Error, CustomStringConvertible {
    public var file: String
    public var error: ValidationError
    public init(file: String, _ error: ValidationError) {
        self.file = file
        self.error = error
    }
    public var description: String { "\(file): \(error)" }
}
