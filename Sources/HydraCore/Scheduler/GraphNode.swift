import HydraLoop

/// One job or step of a running graph. Coordinator loop only.
///
/// A node is created when its step becomes ready (never before), so a step a
/// stopped serial group never reaches has no node and no events.
final class GraphNode {
    /// The spec as submitted (a named job keeps its `job` spec here).
    let spec: JobSpec
    /// What actually runs: the spec, or a named job's loaded graph.
    let effective: JobSpec
    /// Dot-separated step indexes from the root (`""` for the root).
    let path: String
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
    /// A root leaf's result not built yet (see ``DeferredResult``); `result` is nil meanwhile.
    @exclusivity(unchecked) var deferredResult: (any DeferredResult)?
    @exclusivity(unchecked) var timer: (any CoordinatorTimer)?
    /// Secret shared values this step's references read: masked in what it reports.
    @exclusivity(unchecked) var secrets = SecretMask()

    // Leaf state.
    @exclusivity(unchecked) var token: UInt64 = 0
    @exclusivity(unchecked) var workerIndex = -1

    // Group state.
    @exclusivity(unchecked) var children: [GraphNode] = []
    @exclusivity(unchecked) var results: [JSONValue?] = []
    @exclusivity(unchecked) var errors: [JobError?] = []
    @exclusivity(unchecked) var nextToStart = 0
    @exclusivity(unchecked) var running = 0
    @exclusivity(unchecked) var stopped = false
    @exclusivity(unchecked) var starting = false
    @exclusivity(unchecked) var firstError: JobError?
    /// Set when the group itself is cancelled or timed out: the error it ends with.
    @exclusivity(unchecked) var endingError: JobError?

    init(spec: JobSpec, path: String, index: Int, root: RootJob, parent: GraphNode?, scope: GraphScope) {
        self.spec = spec
        if case .named(let named) = spec.body, let loaded = named.resolved {
            var inner = loaded
            inner.id = spec.id
            if inner.timeoutMs == nil { inner.timeoutMs = spec.timeoutMs }
            effective = inner
        } else {
            effective = spec
        }
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

/// A leaf node in flight, as workers carry it: they hand it back with their
/// reports (so the coordinator needs no token table) and never read through it.
/// Only the coordinator's loop thread touches the node; the wrapper is
/// `@unchecked Sendable` for that reason alone.
struct StepReference: @unchecked Sendable {
    let node: GraphNode
}

/// The results by step id and the input of one graph (the root, or a named job). Coordinator loop only.
final class GraphScope {
    let input: JSONValue
    @exclusivity(unchecked) var results: [String: JSONValue] = [:]
    init(input: JSONValue) { self.input = input }
}

/// A submitted job: the root node plus bookkeeping for status queries. Coordinator loop only.
final class RootJob {
    let id: String
    let key: UInt64
    let priority: Int
    let createdAt: Double
    @exclusivity(unchecked) var startedAt: Double?
    @exclusivity(unchecked) var finishedAt: Double?
    let totalSteps: Int
    @exclusivity(unchecked) var doneSteps = 0
    @exclusivity(unchecked) var node: GraphNode!
    /// The submitter's completion: runs once, only when the job is final.
    @exclusivity(unchecked) var completion: (@Sendable (JobResult) -> Void)?
    /// Callers of `whenFinished`: the result, or nil if the coordinator stops first.
    @exclusivity(unchecked) var waiters: [@Sendable (JobResult?) -> Void] = []
    /// Leaf outcomes recorded before a restart, by step path: reused, not run again.
    @exclusivity(unchecked) var recoveredSteps: [String: StoredStep] = [:]
    /// Events sent before a restart: not sent again.
    @exclusivity(unchecked) var emittedEvents = EmittedEvents()
    /// True when each finished leaf step goes to the step journal.
    @exclusivity(unchecked) var journaled = false
    /// True once counted in ``RunningJobs``.
    @exclusivity(unchecked) var countedRunning = false

    init(id: String, key: UInt64, priority: Int, createdAt: Double, totalSteps: Int) {
        self.id = id
        self.key = key
        self.priority = priority
        self.createdAt = createdAt
        self.totalSteps = totalSteps
    }
}

extension JobSpec {
    /// Leaves in this spec (named jobs counted by their loaded graph).
    var leafCount: Int {
        switch body {
        case .remote, .local: return 1
        case .serial(let g), .concurrent(let g): return g.steps.reduce(0) { $0 + $1.leafCount }
        case .named(let n): return n.resolved?.leafCount ?? 0
        }
    }
}
