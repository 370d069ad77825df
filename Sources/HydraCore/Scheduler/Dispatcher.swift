import HydraLoop
import Synchronization

/// Binds managers to workers (the Hydra idea) and routes each leaf job to a
/// worker: the one its spec names, else the first worker of the fitting kind.
/// Also checks a whole spec at submit time and expands named jobs.
/// Immutable after creation; thread-safe.
public final class Dispatcher: Sendable {
    public let workers: [Worker]
    /// Indexed by `JobKind.index` (a switch, not a hash, on the submit path):
    /// the managers bound to workers of that kind.
    private let managers: [[any JobManager]]
    /// The manager of each spec type (`remote`, `resource`, `local`).
    private let managersByType: TypeTable<any JobManager>
    private let defaultWorker: [Int?]
    private let library: (any JobLibrary)?
    /// The names `${env.NAME}` may read (config `allowEnv`); nil: not checked at submit.
    private let allowEnv: Set<String>?
    /// Every manager's ``JobManager/secretHeaderNames``: what `job.queued` summaries mask.
    let secretHeaderNames: Set<String>

    /// Nesting of named jobs deeper than this is refused (it is almost surely a cycle).
    public static let maxNamedJobDepth = 16
    /// Groups nested deeper than this, counted through named jobs, are refused:
    /// as deep as one request can write them (`JSONParser.maxDepth`, two JSON
    /// levels a group), which every part of the engine handles.
    public static let maxGroupDepth = 255
    /// A job whose named jobs bring in more than this many steps is refused: a
    /// few small files can name each other into millions, and checking them
    /// runs on the submitting thread. (A spec written out in full is bounded
    /// by the size of its request instead.)
    public static let maxNamedExpansionSteps = 100_000

    init(workers: [Worker], managers: [any JobManager], library: (any JobLibrary)?,
         allowEnv: Set<String>? = nil) throws(ValidationError) {
        self.workers = workers
        self.library = library
        self.allowEnv = allowEnv
        var byKind = [[any JobManager]](repeating: [], count: JobKind.allCases.count)
        var byType = TypeTable<any JobManager>()
        for manager in managers {
            for kind in manager.kinds { byKind[kind.index].append(manager) }
            for type in manager.jobTypes { byType.set(manager, for: type) }
        }
        self.managers = byKind
        managersByType = byType
        secretHeaderNames = managers.reduce(into: []) { $0.formUnion($1.secretHeaderNames) }
        var defaults = [Int?](repeating: nil, count: JobKind.allCases.count)
        for (i, worker) in workers.enumerated() where defaults[worker.kind.index] == nil {
            guard !byKind[worker.kind.index].isEmpty else {
                throw ValidationError(path: "workers[\(i)].kind", "no manager runs \(worker.kind.rawValue) jobs")
            }
            defaults[worker.kind.index] = i
        }
        defaultWorker = defaults
    }

    /// The managers bound to workers of `kind`.
    func managers(for kind: JobKind) -> [any JobManager] { managers[kind.index] }

    /// The index of the worker that runs `spec` (a leaf).
    func workerIndex(for spec: JobSpec) -> Int? {
        guard let kind = spec.kind else { return nil }
        if let name = spec.worker {
            return workers.firstIndex { $0.name == name && $0.kind == kind }
        }
        return defaultWorker[kind.index]
    }

    /// Checks `spec` and everything in it, and loads named jobs. Errors name the
    /// field by path under `path` (`job.steps[2].url: expected string`). Also
    /// says whether the spec is a plain leaf: a leaf none of whose own strings
    /// holds a `${…}` reference, so the coordinator sends it to its worker as
    /// it is, without looking again (``Submission/plainLeaf``).
    ///
    /// `library`: where named jobs come from instead of the jobs folder (a
    /// stored job's record, see ``RecordedJobLibrary``). `namedJobs`: the
    /// named jobs it loaded, name -> spec JSON, nil when none.
    func check(_ spec: JobSpec, path: String, library: (any JobLibrary)? = nil) throws(ValidationError)
        -> (spec: JobSpec, plainLeaf: Bool, namedJobs: JSONValue?) {
        // A single step (most submits) loads no named job and counts nothing: no context made for it.
        let context = spec.kind != nil ? Dispatcher.stepContext : PrepareContext(library: library ?? self.library)
        let prepared = try prepare(spec, path: path, depth: 0, groupDepth: 0, inheritedWorker: nil, context: context)
        let plainLeaf = try ReferenceCheck.validate(prepared, path: path, allowEnv: allowEnv)
        return (prepared, plainLeaf, context.loadedJSON)
    }

    /// The context of a spec that is a single step (never written to).
    private static let stepContext = PrepareContext(library: nil)

    /// One ``check(_:path:library:)``'s state (its parts may run on several threads).
    private final class PrepareContext: Sendable {
        let library: (any JobLibrary)?
        /// The steps named jobs brought in so far.
        let steps = Atomic<Int>(0)
        /// The named jobs loaded so far, by name (written only when one is loaded).
        let loaded = Locked<[String: JobSpec]>([:])

        init(library: (any JobLibrary)?) { self.library = library }

        /// What was loaded, as one JSON object sorted by name (nil: nothing).
        var loadedJSON: JSONValue? {
            let specs = loaded.withLock { $0 }
            guard !specs.isEmpty else { return nil }
            return .object(.init(uniqueKeysWithValues: specs.sorted { $0.key < $1.key }.map { ($0.key, $0.value.json) }))
        }
    }

    /// `depth`: named jobs around it; `groupDepth`: groups around it, through
    /// named jobs; `inheritedWorker`: the nearest `worker` of a group or named
    /// job around it (a default for its steps of that worker's kind).
    private func prepare(_ spec: JobSpec, path: String, depth: Int, groupDepth: Int, inheritedWorker: String?,
                         context: PrepareContext) throws(ValidationError) -> JobSpec {
        // What JSON decoding checks, for a spec built in Swift (a few comparisons).
        try spec.checkValues(path: path)
        var spec = spec
        var inheritedWorker = inheritedWorker
        if spec.kind == nil, let name = spec.worker {
            // A group's or a named job's worker: the default of its steps of that
            // worker's kind (protocol §4: every spec may carry one).
            guard !Template.containsReference(name) else {
                throw ValidationError(path: FieldReader.join(path, "worker"),
                                      "a group's or named job's worker cannot be a reference (a step's can)")
            }
            guard workers.contains(where: { $0.name == name }) else {
                throw ValidationError(path: FieldReader.join(path, "worker"), "unknown worker '\(name)'", notFound: true)
            }
            inheritedWorker = name
        }
        switch spec.body {
        case .remote, .resource, .local:
            let kind = spec.kind!
            if depth > 0 { context.steps.add(1, ordering: .relaxed) }
            if spec.worker == nil, let name = inheritedWorker, workers.contains(where: { $0.name == name && $0.kind == kind }) {
                spec.worker = name
            }
            // A worker named by a reference is checked when the step runs. One that does
            // not exist is not found (-32002, protocol §2), like an unknown named job; one
            // of the wrong kind exists, so that is an invalid value (-32602).
            if let name = spec.worker, !Template.containsReference(name) {
                guard let worker = workers.first(where: { $0.name == name }) else {
                    throw ValidationError(path: FieldReader.join(path, "worker"), "unknown worker '\(name)'", notFound: true)
                }
                guard worker.kind == kind else {
                    throw ValidationError(path: FieldReader.join(path, "worker"),
                                          "worker '\(name)' runs \(worker.kind.rawValue) jobs, not \(kind.rawValue)")
                }
            } else if defaultWorker[kind.index] == nil {
                throw ValidationError(path: FieldReader.join(path, "type"), "no \(kind.rawValue) worker is configured")
            }
            guard let manager = managersByType[spec.typeName] else {
                throw ValidationError(path: FieldReader.join(path, "type"), "no manager runs \(spec.typeName) jobs")
            }
            try manager.validate(spec, path: path)
        case .serial(var group):
            group.steps = try prepare(steps: group.steps, path: path, depth: depth, groupDepth: groupDepth + 1,
                                      inheritedWorker: inheritedWorker, context: context)
            spec.body = .serial(group)
        case .concurrent(var group):
            group.steps = try prepare(steps: group.steps, path: path, depth: depth, groupDepth: groupDepth + 1,
                                      inheritedWorker: inheritedWorker, context: context)
            spec.body = .concurrent(group)
        case .named(var named):
            guard depth < Dispatcher.maxNamedJobDepth else {
                throw ValidationError(path: FieldReader.join(path, "name"), "named jobs nested too deep (a cycle?)")
            }
            guard let library = context.library else {
                throw ValidationError(path: FieldReader.join(path, "name"), "no jobs folder is configured", notFound: true)
            }
            let loaded = try library.spec(named: named.name, path: FieldReader.join(path, "name"))
            context.loaded.withLock { if $0[named.name] == nil { $0[named.name] = loaded } }
            do {
                named.resolved = try prepare(loaded, path: "", depth: depth + 1, groupDepth: groupDepth,
                                             inheritedWorker: inheritedWorker, context: context)
            } catch {
                throw error.inNamedJob(named.name, at: FieldReader.join(path, "name"))
            }
            if context.steps.load(ordering: .relaxed) > Dispatcher.maxNamedExpansionSteps {
                throw ValidationError(path: FieldReader.join(path, "name"),
                                      "the named jobs make this job larger than \(Dispatcher.maxNamedExpansionSteps) steps")
            }
            spec.body = .named(named)
        }
        return spec
    }

    /// A group's steps, prepared into a new array (assigning into the group's
    /// own copied all 50,000 steps of a large one first), in parts at once when many.
    private func prepare(steps specs: [JobSpec], path: String, depth: Int, groupDepth: Int, inheritedWorker: String?,
                         context: PrepareContext) throws(ValidationError) -> [JobSpec] {
        guard groupDepth <= Dispatcher.maxGroupDepth else {
            throw ValidationError(path: path.isEmpty ? "steps" : path,
                                  "groups nest deeper than \(Dispatcher.maxGroupDepth) levels (named jobs included)")
        }
        let stepsPath = FieldReader.join(path, "steps")
        return try ParallelWork.inParts(specs.count) { [self] (range) throws(ValidationError) -> [JobSpec] in
            var prepared: [JobSpec] = []
            prepared.reserveCapacity(range.count)
            for i in range {
                prepared.append(try prepare(specs[i], path: stepsPath + "[\(i)]", depth: depth, groupDepth: groupDepth,
                                            inheritedWorker: inheritedWorker, context: context))
            }
            return prepared
        }
    }
}

/// Where named job graphs come from (`{"type": "job", "name": …}`).
public protocol JobLibrary: Sendable {
    /// The spec named `name`; a missing one throws a not-found ``ValidationError`` at `path`.
    func spec(named name: String, path: String) throws(ValidationError) -> JobSpec
}
