import HydraLoop

/// One job or step of a running graph. Coordinator loop only.
///
/// A node is created when its step becomes ready (never before), so a step a
/// stopped serial group never reaches has no node and no events.
final class GraphNode {
    /// The spec as submitted (a named job keeps its `job` spec here).
    let spec: JobSpec
    /// What actually runs: the spec, or a named job's loaded graph (the last
    /// one's, when a job's file names another job).
    let effective: JobSpec
    /// Dot-separated step indexes from the root (`""` for the root).
    let path: String
    /// A remote or resource step's `label` (rest.md §8; a resource job is
    /// routed as a remote one), echoed in each of its events. Read only when
    /// an event is built (nobody listening: never).
    var label: String? {
        switch effective.body {
        case .remote(let remote): return remote.label
        case .resource(let resource): return resource.request.label
        default: return nil
        }
    }
    /// Position in the parent's steps.
    let index: Int
    unowned(unsafe) let root: RootJob
    /// The parent group; nil for the root.
    unowned(unsafe) let parent: GraphNode?
    /// The graph this node belongs to (its `id` is recorded there).
    let scope: GraphScope
    /// The graph its steps belong to: a new one for a named job, else `scope`.
    @exclusivity(unchecked) var innerScope: GraphScope

    @exclusivity(unchecked) var state = JobState.queued
    @exclusivity(unchecked) var result: JSONValue?
    /// The result's encoded length once succeeded (an upper bound while
    /// unbuilt): what it adds to its group's collected results.
    @exclusivity(unchecked) var resultBytes = 0
    /// How deep its result nests (an upper bound for a remote one), for its group's
    /// (``JSONParser/maxResultDepth``: groups and `${prev}` chains wrap results deeper and deeper).
    @exclusivity(unchecked) var resultDepth = 0
    /// Its result before secrets were masked in it, kept (in memory only) when
    /// masking changed it: what later steps' references read, so a graph that
    /// reads an encrypted shared value and hands it on passes the value, not `***`.
    @exclusivity(unchecked) var clearResult: JSONValue?
    /// A result not built yet (a remote step's, a group's: see ``DeferredResult``); `result` is nil meanwhile.
    @exclusivity(unchecked) var deferredResult: (any DeferredResult)?
    @exclusivity(unchecked) var timer: (any CoordinatorTimer)?
    /// Secret shared values this step's references read: masked in what it reports.
    @exclusivity(unchecked) var secrets = SecretMask()

    // Leaf state.
    @exclusivity(unchecked) var token: UInt64 = 0
    @exclusivity(unchecked) var workerIndex = -1

    // Group state.
    /// The steps started so far, in step order: `children[i]` is step `i` (``CoordinatorRuntime`` reads `${prev}` there).
    @exclusivity(unchecked) var children: [GraphNode] = []
    @exclusivity(unchecked) var results: [StepResult?] = []
    @exclusivity(unchecked) var errors: [JobError?] = []
    /// The encoded length of the `results` and `errors` items so far (`null`
    /// for a step not finished), kept as steps finish so that checking the
    /// collected results against `limits.maxResultBytes` never walks them.
    @exclusivity(unchecked) var collectedBytes = 0
    @exclusivity(unchecked) var nextToStart = 0
    @exclusivity(unchecked) var running = 0
    @exclusivity(unchecked) var stopped = false
    @exclusivity(unchecked) var starting = false
    @exclusivity(unchecked) var firstError: JobError?
    /// Set when the group itself is cancelled or timed out: the error it ends with.
    @exclusivity(unchecked) var endingError: JobError?

    init(spec: JobSpec, path: String, index: Int, root: RootJob, parent: GraphNode?, scope: GraphScope) {
        self.spec = spec
        // A named job's file may hold another named job: what runs is the
        // graph at the end of the chain, with this step's id and the shortest
        // time limit of the chain (each bounds everything below it).
        var effective = spec
        while case .named(let named) = effective.body, let loaded = named.resolved {
            var inner = loaded
            inner.id = spec.id
            if let outer = effective.timeoutMs { inner.timeoutMs = min(inner.timeoutMs ?? outer, outer) }
            effective = inner
        }
        self.effective = effective
        self.path = path
        self.index = index
        self.root = root
        self.parent = parent
        self.scope = scope
        self.innerScope = scope
    }

    var group: GroupSpec? {
        switch effective.body {
        case .serial(let g), .concurrent(let g): return g
        default: return nil
        }
    }

    var isSerial: Bool { if case .serial = effective.body { return true }; return false }
    var isLeaf: Bool { effective.kind != nil }

    func childPath(_ i: Int) -> String { path.isEmpty ? String(i) : path + "." + String(i) }
}
