import Foundation
import HydraAtRest
import HydraCore
import HydraHTTP
import HydraLoop
import Synchronization

/// The REST client manager (the HJRestClientManager idea): servers, api routes,
/// dogmas, dummy responses; it runs `remote` jobs on the remote workers the
/// dispatcher binds it to, one ``HTTPClient`` (connection pool) per worker.
/// Thread-safe: dogmas and dummy handlers may be registered at any time.
public final class RESTManager: JobManager {
    public let name = "rest"
    public let kinds: Set<JobKind> = [.remote]
    let resolver: RouteResolver
    private let dogmas: Locked<[String: any Dogma]>
    private let dummyHandlers = Locked<[DummyHandler]>([])
    private let dummyHandlerCount = Atomic<Int>(0)
    /// Runtime control of dummy responses (`dummy.enable`, `dummy.set`): whether
    /// they answer, and the list set at runtime, asked before the config's.
    private let dummyControl: Locked<(enabled: Bool, responses: [Configuration.DummyResponse])>
    private let dummiesEnabled: Atomic<Bool>
    let statistics = RESTStatistics()
    /// Where cached responses live; nil: caching is off (the embedded default).
    let cache: (any ResponseCache)?
    /// The auth sessions of the configuration's `auth` section.
    let sessions: AuthSessions
    /// Embedders' hooks (rest.md §9), and whether there are any (read per call without the lock).
    private let hooks = Locked(RESTHooks())
    private let hasHooks = Atomic<Bool>(false)
    /// A remote worker this manager runs on: where `auth.login` sends its token request.
    let loginWorker = Locked<WorkerContext?>(nil)

    /// Removes what interrupted `saveAs` downloads left in `stateDirectory`
    /// (their temporary files); a server calls it at startup, before recovery.
    /// Returns how many files it removed.
    @discardableResult
    public static func removeLeftoverDownloads(in stateDirectory: String) -> Int {
        DownloadFile.removeLeftovers(in: stateDirectory)
    }

    /// - Parameters:
    ///   - cache: where responses are cached (none: no caching).
    ///   - authTokens: where auth sessions keep their tokens, sealed with `sharedKey`
    ///     (without both, tokens live in memory only).
    ///   - sharedKey: the `HYDRA_SHARED_KEY` passphrase.
    public init(configuration: Configuration, stateDirectory: String, cache: (any ResponseCache)? = nil,
                authTokens: (any AuthTokenStore)? = nil, sharedKey: String? = nil) {
        resolver = RouteResolver(configuration: configuration, stateDirectory: stateDirectory)
        self.cache = cache
        sessions = AuthSessions(configuration: configuration, resolver: resolver, store: authTokens,
                                key: AtRestKey(passphrase: sharedKey))
        dummyControl = Locked((configuration.dummy.enabled, []))
        dummiesEnabled = Atomic(configuration.dummy.enabled)
        let builtIn: [any Dogma] = [JSONDogma(), TextDogma(), RawDogma()]
        dogmas = Locked(Dictionary(uniqueKeysWithValues: builtIn.map { ($0.name, $0) }))
    }

    public var configuration: Configuration { resolver.configuration }

    /// The `auth` section's api-key headers, masked in `job.queued` summaries.
    public var secretHeaderNames: Set<String> { Set(configuration.apiKeyHeaders) }

    func updateHooks(_ change: (inout RESTHooks) -> Void) {
        hooks.withLock {
            change(&$0)
            hasHooks.store(!$0.isEmpty, ordering: .releasing)
        }
    }

    /// The hooks a call of `api` runs; nil when there are none (the common case: no lock taken).
    func hooks(api: String?) -> RESTHooks.Resolved? {
        guard hasHooks.load(ordering: .acquiring) else { return nil }
        return hooks.withLock { $0.resolved(api: api) }
    }

    /// Adds or replaces a dogma; specs name it with `"dogma": name`.
    public func register(dogma: any Dogma) {
        dogmas.withLock { $0[dogma.name] = dogma }
    }

    func dogma(named name: String) -> (any Dogma)? { dogmas.withLock { $0[name] } }

    /// Adds a Swift dummy handler, asked before the configured dummy responses.
    public func register(dummy handler: @escaping DummyHandler) {
        dummyHandlers.withLock {
            $0.append(handler)
            dummyHandlerCount.store($0.count, ordering: .releasing)
        }
    }

    /// False when no dummy response can match (the common case): skips building the responder.
    var mayAnswerWithDummies: Bool {
        dummiesEnabled.load(ordering: .acquiring) || dummyHandlerCount.load(ordering: .acquiring) > 0
    }

    var dummyResponder: DummyResponder {
        let (enabled, runtime) = dummyControl.withLock { $0 }
        return DummyResponder(enabled: enabled, responses: runtime + configuration.dummy.responses,
                              handlers: dummyHandlers.withLock { $0 })
    }

    /// Turns the dummy responses (the config's and the runtime list) on or off
    /// for the next requests (`dummy.enable`). Any thread.
    public func setDummiesEnabled(_ enabled: Bool) {
        dummyControl.withLock {
            $0.enabled = enabled
            dummiesEnabled.store(enabled, ordering: .releasing)
        }
    }

    /// Replaces the runtime list of dummy responses, asked before the config's
    /// (`dummy.set`, in the config's `dummy.responses` format). Errors name the
    /// entry and field (`responses[1].server: unknown server 'x'`). Any thread.
    /// Returns how many entries the list holds.
    @discardableResult
    public func setDummyResponses(_ json: [JSONValue]) throws(ValidationError) -> Int {
        guard json.count <= Configuration.Dummy.maxResponses else {
            throw ValidationError(path: "responses", "at most \(Configuration.Dummy.maxResponses) dummy responses (each request is matched against them in turn)")
        }
        var responses: [Configuration.DummyResponse] = []
        for (i, item) in json.enumerated() {
            let response = try Configuration.DummyResponse(json: item, path: "responses[\(i)]")
            if let server = response.server, configuration.servers[server] == nil {
                throw ValidationError(path: "responses[\(i)].server", "unknown server '\(server)'")
            }
            responses.append(response)
        }
        dummyControl.withLock { $0.responses = responses }
        return responses.count
    }

    /// Request counters since start.
    public var stats: RESTStatistics.Snapshot { statistics.snapshot }

    public func validate(_ spec: JobSpec, path: String) throws(ValidationError) {
        guard case .remote(let remote) = spec.body else { return }
        // The resolver's stored configuration, read field by field: a copy of the
        // whole struct (`configuration`) cost a submit ~1k instructions.
        let resolver = self.resolver
        func at(_ key: String) -> String { FieldReader.join(path, key) }
        var endpoint = remote.endpoint
        if let endpoint, !Template.containsReference(endpoint) { try Configuration.checkEndpoint(endpoint, path: at("endpoint")) }
        if let api = remote.api, !Template.containsReference(api) {
            guard let route = resolver.configuration.apis[api] else { throw ValidationError(path: at("api"), "unknown api '\(api)'") }
            endpoint = route.endpoint
        }
        if let name = remote.auth, !Template.containsReference(name), resolver.configuration.auth.index(forKey: name) == nil {
            throw ValidationError(path: at("auth"), "unknown auth '\(name)'")
        }
        if let server = remote.server, !Template.containsReference(server), resolver.configuration.servers[server] == nil {
            throw ValidationError(path: at("server"), "unknown server '\(server)'")
        }
        if remote.url == nil && remote.server == nil && remote.api == nil && resolver.configuration.defaults.server == nil {
            throw ValidationError(path: at("server"), "required with endpoint when defaults.server is not set")
        }
        if let url = remote.url, !Template.containsReference(url) {
            guard URLScheme(of: url) != nil else {
                throw ValidationError(path: at("url"), "expected an http:// or https:// URL")
            }
            if let problem = URLSyntax.problem(in: url) { throw ValidationError(path: at("url"), "not a URL: \(problem)") }
        }
        if let endpoint {
            for name in RouteResolver.pathVariables(in: endpoint) where remote.pathVars[name] == nil {
                throw ValidationError(path: at("pathVars.\(name)"), "required by endpoint \(endpoint)")
            }
        }
        try checkPathVars(remote, endpoint: endpoint, at: at)
        if let dogma = remote.dogma {
            // A dogma named by a reference is checked when the step runs, before sending.
            if !Template.containsReference(dogma), self.dogma(named: dogma) == nil {
                throw ValidationError(path: at("dogma"), "unknown dogma '\(ValidationError.clip(dogma))'")
            }
        } else {
            // The configuration's dogma for this job, checked before anything is sent.
            try checkConfiguredDogma(api: remote.api.flatMap { Template.containsReference($0) ? nil : $0 })
        }
        // The job's method, or its api's; GET without either.
        let method = remote.method ?? remote.api.flatMap { resolver.configuration.apis[$0]?.method } ?? "GET"
        if remote.cache != nil, !Template.containsReference(method), method != "GET" {
            throw ValidationError(path: at("cache"), "only GET responses are cached (the method is \(method))")
        }
        if remote.coalesce == true, !Template.containsReference(method), method != "GET" {
            // rest.md §4: merging is for GET only; silently sending each one alone would hide the mistake.
            throw ValidationError(path: at("coalesce"), "only GET requests are merged (the method is \(method))")
        }
        // Parsed specs were checked as they were read; these checks also cover specs built in code.
        for (name, value) in remote.headers {
            if !HeaderSyntax.isValidName(name) { throw ValidationError(path: at("headers.\(name)"), HeaderSyntax.nameProblem) }
            if case .string(let text) = value, !HeaderSyntax.isValidValue(text) {
                throw ValidationError(path: at("headers.\(name)"), HeaderSyntax.valueProblem)
            }
        }
        if let saveAs = remote.saveAs, !Template.containsReference(saveAs) {
            // By its letters, then against what is on disk now (opening the file checks again).
            do {
                try SaveAsPath(saveAs, reserved: resolver.reservedPaths).checkExisting(in: resolver.stateDirectory)
            } catch {
                throw ValidationError(path: at("saveAs"), error.message)
            }
        }
        // Upload files named literally must be there now (-32602); one from a reference is checked as the job runs.
        func checkUpload(_ text: String, field: String) throws(ValidationError) {
            guard !Template.containsReference(text) else { return }
            do {
                try UploadFile(text, stateDirectory: resolver.stateDirectory, reserved: resolver.reservedPaths).close()
            } catch {
                throw ValidationError(path: at(field), error.message)
            }
        }
        if let file = remote.bodyFile { try checkUpload(file, field: "bodyFile") }
        if remote.bodyEncoding == .multipart, let body = remote.body {
            // Each part on its own: a reference elsewhere in the body does not defer a literal file's check.
            for (i, part) in (try MultipartPart.partsKnownAtSubmit(of: body, path: at("body")) ?? []).enumerated() {
                if case .file(let file)? = part?.content { try checkUpload(file, field: "body.parts[\(i)].file") }
            }
        }
        if let body = remote.body, !Template.containsReference(body) {
            switch remote.bodyEncoding {
            case .form? where body.objectValue == nil:
                throw ValidationError(path: at("body"), "expected object for bodyEncoding form")
            case .base64?:
                guard let text = body.stringValue, Data(base64Encoded: text) != nil else {
                    throw ValidationError(path: at("body"), "expected a base64 string for bodyEncoding base64")
                }
            default: break
            }
        }
    }

    /// Checks every dogma the configuration names (`apis.*.dogma`, `defaults.dogma`)
    /// against the registered ones: a server checks them at startup, after
    /// registering its dogmas.
    public func checkConfiguredDogmas() throws(ValidationError) {
        for api in configuration.apis.keys.sorted() { try checkConfiguredDogma(api: api) }
        try checkConfiguredDogma(api: nil)
    }

    /// The dogma a job of `api` (or with no api) gets from the configuration, if any, must be registered.
    private func checkConfiguredDogma(api: String?) throws(ValidationError) {
        if let api, let name = resolver.configuration.apis[api]?.dogma {
            if dogma(named: name) == nil { throw ValidationError(path: "apis.\(api).dogma", "unknown dogma '\(name)'") }
        } else if let name = resolver.configuration.defaults.dogma, dogma(named: name) == nil {
            throw ValidationError(path: "defaults.dogma", "unknown dogma '\(name)'")
        }
    }

    public func makeExecutor(for worker: WorkerContext) -> any JobExecutor {
        loginWorker.withLock { if $0 == nil { $0 = worker } }
        return RESTExecutor(manager: self, worker: worker)
    }
}

/// Counters of the REST manager (`hydra.stats`). Thread-safe.
public final class RESTStatistics: Sendable {
    private let requests = Atomic<Int>(0)
    private let retries = Atomic<Int>(0)
    private let dummies = Atomic<Int>(0)
    private let failures = Atomic<Int>(0)
    private let cacheHits = Atomic<Int>(0)
    private let cacheMisses = Atomic<Int>(0)
    private let merged = Atomic<Int>(0)

    public struct Snapshot: Sendable {
        public var requests: Int
        public var retries: Int
        public var dummyResponses: Int
        public var failedRequests: Int
        public var cacheHits: Int
        public var cacheMisses: Int
        /// Requests answered by an identical one already in flight (`coalesce`).
        public var merged: Int
    }

    func countRequest() { requests.add(1, ordering: .relaxed) }
    func countRetry() { retries.add(1, ordering: .relaxed) }
    func countDummy() { dummies.add(1, ordering: .relaxed) }
    func countFailure() { failures.add(1, ordering: .relaxed) }
    func countCacheHit() { cacheHits.add(1, ordering: .relaxed) }
    func countCacheMiss() { cacheMisses.add(1, ordering: .relaxed) }
    func countMerged() { merged.add(1, ordering: .relaxed) }

    var snapshot: Snapshot {
        Snapshot(requests: requests.load(ordering: .relaxed), retries: retries.load(ordering: .relaxed),
                 dummyResponses: dummies.load(ordering: .relaxed), failedRequests: failures.load(ordering: .relaxed),
                 cacheHits: cacheHits.load(ordering: .relaxed), cacheMisses: cacheMisses.load(ordering: .relaxed),
                 merged: merged.load(ordering: .relaxed))
    }
}

extension RESTManager {
    /// A typo never silently changes what a call does (protocol §4): path
    /// variables the route never uses are refused (a `url` is sent as it is:
    /// it takes none), and so is a value that is a dot segment (`.`, `..`),
    /// which would move the request to another route.
    func checkPathVars(_ remote: RemoteSpec, endpoint: String?, at: (String) -> String) throws(ValidationError) {
        guard !remote.pathVars.isEmpty else { return }
        if remote.url != nil {
            throw ValidationError(path: at("pathVars"), "a url is sent as it is: path variables are for an endpoint or api")
        }
        for (name, value) in remote.pathVars {
            if case .string(let text) = value, RouteResolver.isDotSegment(text) {
                throw ValidationError(path: at("pathVars.\(name)"), RouteResolver.dotSegmentReason(text))
            }
        }
        guard let endpoint, !Template.containsReference(endpoint), remote.api.map(Template.containsReference) != true else { return }
        let used = Set(endpoint.split(separator: "/").compactMap { RouteResolver.pathVariable($0)?.name })
        for name in remote.pathVars.keys where !used.contains(name) {
            throw ValidationError(path: at("pathVars.\(name)"), "endpoint \(endpoint) has no :\(name) segment")
        }
    }
}
