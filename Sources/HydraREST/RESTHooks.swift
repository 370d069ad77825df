import HydraCore
import HydraHTTP

/// What a hook knows of the call it runs for (rest.md §9).
public struct RESTHookContext: Sendable {
    /// The api the job named, if any.
    public let api: String?
    /// The configured server the request goes to, if any.
    public let server: String?
    /// The step's job id (a graph's step has its own).
    public let jobId: String
    /// The attempt under way, from 1.
    public let attempt: Int
}

/// Changes a request before it is sent (signs it, adds headers); a thrown
/// ``JobError`` fails the attempt with it. Runs on the worker's loop before
/// every attempt: keep it quick and never block.
public typealias RequestPreparer = @Sendable (_ request: inout HTTPRequest, _ context: RESTHookContext) throws(JobError) -> Void

/// Rewrites a response before `expect` and the dogma see it (unwraps an
/// envelope, fixes a status), or rejects it by throwing (a ``JobError`` of kind
/// `network`, `timeout` or `http` 5xx is retried like any). One of a chain, in
/// the order registered; the worker's loop.
public typealias ResponseProcessor = @Sendable (_ response: inout HTTPResponse, _ context: RESTHookContext) throws(JobError) -> Void

/// Turns the body of a response that failed `expect` into the job's error
/// message (nil keeps `HTTP <status>`). The worker's loop.
public typealias ErrorMapper = @Sendable (_ response: DogmaResponse, _ context: RESTHookContext) -> String?

/// The hooks embedders registered, globally (api nil) and per api. Value
/// type, kept by ``RESTManager`` under a lock and read once per call.
struct RESTHooks: Sendable {
    private var preparers: [String: [RequestPreparer]] = [:]
    private var processors: [String: [ResponseProcessor]] = [:]
    private var mappers: [String: ErrorMapper] = [:]

    /// The global hooks are kept under this key (no api name is empty).
    private static let global = ""

    var isEmpty: Bool { preparers.isEmpty && processors.isEmpty && mappers.isEmpty }

    mutating func add(preparer: @escaping RequestPreparer, api: String?) {
        preparers[api ?? Self.global, default: []].append(preparer)
    }

    mutating func add(processor: @escaping ResponseProcessor, api: String?) {
        processors[api ?? Self.global, default: []].append(processor)
    }

    mutating func set(mapper: ErrorMapper?, api: String?) { mappers[api ?? Self.global] = mapper }

    /// What applies to a call of `api`: the global hooks, then the api's; the api's error mapper over the global one.
    func resolved(api: String?) -> Resolved? {
        let resolved = Resolved(
            preparers: (preparers[Self.global] ?? []) + (api.flatMap { preparers[$0] } ?? []),
            processors: (processors[Self.global] ?? []) + (api.flatMap { processors[$0] } ?? []),
            mapper: api.flatMap { mappers[$0] } ?? mappers[Self.global])
        return resolved.preparers.isEmpty && resolved.processors.isEmpty && resolved.mapper == nil ? nil : resolved
    }

    struct Resolved {
        let preparers: [RequestPreparer]
        let processors: [ResponseProcessor]
        let mapper: ErrorMapper?
    }
}

extension RESTManager {
    /// Adds a request preparer for every request (`api` nil) or for one api's.
    /// Throws for an api the configuration does not have.
    public func addRequestPreparer(forAPI api: String? = nil, _ preparer: @escaping RequestPreparer) throws(ValidationError) {
        try checkHookAPI(api)
        updateHooks { $0.add(preparer: preparer, api: api) }
    }

    /// Adds a response processor at the end of the chain for every response (`api` nil) or one api's.
    public func addResponseProcessor(forAPI api: String? = nil, _ processor: @escaping ResponseProcessor) throws(ValidationError) {
        try checkHookAPI(api)
        updateHooks { $0.add(processor: processor, api: api) }
    }

    /// Sets (nil: removes) the error mapper for every api (`api` nil) or one; an api's wins over the global one.
    public func setErrorMapper(forAPI api: String? = nil, _ mapper: ErrorMapper?) throws(ValidationError) {
        try checkHookAPI(api)
        updateHooks { $0.set(mapper: mapper, api: api) }
    }

    private func checkHookAPI(_ api: String?) throws(ValidationError) {
        if let api, configuration.apis[api] == nil { throw ValidationError(path: "api", "unknown api '\(api)'") }
    }
}
