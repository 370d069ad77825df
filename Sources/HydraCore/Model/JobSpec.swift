import OrderedCollections

/// A job as protocol §4 describes it: one HTTP request, a named local job,
/// a serial or concurrent group of steps, or a named job graph, plus the
/// fields every spec may carry.
///
/// Specs are decoded once (``JobSpec/init(json:path:)``) into these typed
/// values; strings may still hold `${…}` references, resolved when the step starts.
public struct JobSpec: Sendable {
    /// A name unique within its graph, used in `steps.ID` references.
    public var id: String?
    /// The worker to run on; default: the first worker of the fitting kind.
    public var worker: String?
    /// Time limit for the job, in milliseconds (a remote job: per attempt).
    public var timeoutMs: Int?
    /// What the job does.
    public var body: Body
    /// For a leaf whose fields other than free text hold `${…}` references
    /// (`"timeoutMs": "${input.limit}"`): its JSON as submitted, decoded in full
    /// once the references are resolved, when the step runs. The typed fields
    /// above then leave out those fields. Nil for every other spec.
    ///
    /// Kept in the leaf's own spec (``RemoteSpec``, ``LocalSpec``), not here:
    /// a spec is copied on every hop of a submit, and a field more in it made
    /// each copy cost more (~0.7k instructions a submit, measured).
    public internal(set) var deferredJSON: JSONValue? {
        get {
            switch body {
            case .remote(let r): return r.deferred?.json
            case .resource(let res): return res.request.deferred?.json
            case .local(let l): return l.deferred?.json
            default: return nil
            }
        }
        set {
            let box = newValue.map(DeferredJSON.init)
            switch body {
            case .remote(var r): r.deferred = box; body = .remote(r)
            case .resource(var res): res.request.deferred = box; body = .resource(res)
            case .local(var l): l.deferred = box; body = .local(l)
            default: break
            }
        }
    }

    public indirect enum Body: Sendable {
        case remote(RemoteSpec)
        /// A file of the resource repository; runs on a remote worker (resources.md).
        case resource(ResourceSpec)
        case local(LocalSpec)
        case serial(GroupSpec)
        case concurrent(GroupSpec)
        case named(NamedJobSpec)
    }

    public init(id: String? = nil, worker: String? = nil, timeoutMs: Int? = nil, _ body: Body) {
        self.id = id
        self.worker = worker
        self.timeoutMs = timeoutMs
        self.body = body
    }

    /// The spec's `type` as written in JSON.
    public var typeName: String {
        switch body {
        case .remote: return "remote"
        case .resource: return "resource"
        case .local: return "local"
        case .serial: return "serial"
        case .concurrent: return "concurrent"
        case .named: return "job"
        }
    }

    /// The job kind a worker must serve to run this spec; nil for groups.
    public var kind: JobKind? {
        switch body {
        case .remote, .resource: return .remote
        case .local: return .local
        default: return nil
        }
    }

    // MARK: Convenience constructors for Swift users

    public static func remote(_ spec: RemoteSpec, id: String? = nil) -> JobSpec { JobSpec(id: id, .remote(spec)) }
    public static func local(_ name: String, input: JSONValue = .null, id: String? = nil) -> JobSpec {
        JobSpec(id: id, .local(LocalSpec(name: name, input: input)))
    }
    public static func serial(_ steps: [JobSpec], stopWhenFailed: Bool = true, id: String? = nil) -> JobSpec {
        JobSpec(id: id, .serial(GroupSpec(steps: steps, stopWhenFailed: stopWhenFailed)))
    }
    public static func concurrent(_ steps: [JobSpec], maxConcurrency: Int? = nil, stopWhenFailed: Bool = false,
                                  id: String? = nil) -> JobSpec {
        JobSpec(id: id, .concurrent(GroupSpec(steps: steps, stopWhenFailed: stopWhenFailed, maxConcurrency: maxConcurrency)))
    }
    public static func named(_ name: String, input: JSONValue? = nil, id: String? = nil) -> JobSpec {
        JobSpec(id: id, .named(NamedJobSpec(name: name, input: input)))
    }
}

/// A leaf's JSON as submitted, for ``JobSpec/deferredJSON``: boxed, so that
/// the leaf specs it rides in grow by one optional reference.
final class DeferredJSON: Sendable {
    let json: JSONValue
    init(_ json: JSONValue) { self.json = json }
}
