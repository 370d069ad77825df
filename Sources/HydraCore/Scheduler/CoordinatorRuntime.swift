import DequeModule
import Foundation
import HydraLoop
import OrderedCollections
import Synchronization

/// The coordinator's loop-confined state and graph logic.
final class CoordinatorRuntime {
    private let loop: EventLoop
    private let dispatcher: Dispatcher
    private let bus: EventBus
    private let environment: [String: String]
    private let shared: (any SharedDataReader)?
    private let journal: (any JobJournal)?
    private let retainFinished: Int
    /// `limits.maxResultBytes`: a step's result, or a group's results, above it fails with kind `tooLarge`.
    private let maxResultBytes: Int
    private let clock: any CoordinatorClock
    private let running: RunningJobs

    @exclusivity(unchecked) private var outboxes: [Outbox<WorkerMessage>] = []
    /// By worker index, for `job.started`.
    @exclusivity(unchecked) private var workerNames: [String] = []
    /// `job.started`'s fields for each worker, `{"worker":NAME}`, encoded once
    /// (the tree is built only for a reader of ``HydraEvent/fields``): built
    /// and encoded for the store each time, they cost the coordinator 2.2k
    /// instructions per durable submit, 2.7k per remote job over RPC (callgrind).
    @exclusivity(unchecked) private var startedFields: [[UInt8]] = []
    /// The scope of root leaf jobs without input: nothing is recorded in it.
    private let emptyScope = GraphScope(input: .null)
    // Jobs are keyed by integers (consecutive counters, see `CounterTable`); ids map to keys with `key(of:)`.
    @exclusivity(unchecked) private var active = CounterTable<RootJob>(capacity: 1 << 14)
    @exclusivity(unchecked) private var finished: CounterTable<FinishedJob>
    @exclusivity(unchecked) private var finishedOrder = Deque<UInt64>()
    /// Keys of jobs whose ids this process did not issue (given by the caller).
    @exclusivity(unchecked) private var foreignKeys: [String: UInt64] = [:]

    /// A class: the table then holds a reference per job instead of both
    /// values inline, a sixth of the memory the lookups walk.
    private final class FinishedJob {
        let status: JobStatus
        let result: JobResult
        init(status: JobStatus, result: JobResult) {
            self.status = status
            self.result = result
        }
    }
    @exclusivity(unchecked) private var nextToken: UInt64 = 1

    init(loop: EventLoop, dispatcher: Dispatcher, bus: EventBus, environment: [String: String],
         shared: (any SharedDataReader)?, journal: (any JobJournal)?, retainFinished: Int, maxResultBytes: Int,
         clock: any CoordinatorClock, running: RunningJobs) {
        self.loop = loop
        self.clock = clock
        self.maxResultBytes = maxResultBytes
        self.running = running
        self.journal = journal
        self.dispatcher = dispatcher
        self.bus = bus
        self.environment = environment
        self.shared = shared
        self.retainFinished = retainFinished
        // The keys of the jobs kept span a little more than their number (jobs finish out of order).
        finished = CounterTable(capacity: min(max(retainFinished, 1), 1 << 20) * 2)
    }

    private func key(of jobId: String) -> UInt64? {
        JobIdentifier.key(of: jobId) ?? foreignKeys[jobId]
    }

    func connectWorkers() {
        outboxes = dispatcher.workers.map { Outbox(loop: loop, target: $0.inbox) }
        workerNames = dispatcher.workers.map(\.name)
        startedFields = workerNames.map { name in
            var fields = Array(#"{"worker":"#.utf8)
            JSONWriter.writeString(name, into: &fields)
            fields.append(UInt8(ascii: "}"))
            return fields
        }
    }

    func handle(_ message: CoordinatorMessage) {
        switch message {
        case .submit(let submission): start(submission)
        case .report(let task, let report): receive(report, for: task)
        case .cancel(let jobId, let reply):
            let key = key(of: jobId)
            if let key, let root = active[key] {
                cancel(root.node, error: JobError(.cancelled, "cancelled"))
                reply(.cancelled)
            } else {
                reply(key.flatMap { finished[$0] } == nil ? .notFound : .alreadyFinal)
            }
        case .whenFinished(let jobId, let reply):
            let key = key(of: jobId)
            if let key, let root = active[key] {
                root.waiters.append(reply)
            } else {
                reply(key.flatMap { finished[$0]?.result })
            }
        case .statuses(let jobIds, let reply):
            reply(jobIds.map(status))
        }
    }

    // MARK: - Queries

    func status(_ jobId: String) -> JobStatus? {
        guard let key = key(of: jobId) else { return nil }
        if let root = active[key] { return status(of: root) }
        return finished[key]?.status
    }

    func list(state: JobState?, limit: Int, after: String?) -> [JobStatus] {
        var all = active.allValues.map(status(of:)) + finished.allValues.map(\.status)
        if let state { all = all.filter { $0.state == state } }
        all.sort { ($0.createdAt, $0.jobId) > ($1.createdAt, $1.jobId) }
        if let after, let i = all.firstIndex(where: { $0.jobId == after }) { all = Array(all[(i + 1)...]) }
        return Array(all.prefix(limit))
    }

    private func status(of root: RootJob) -> JobStatus {
        JobStatus(jobId: root.id, state: root.node.state, createdAt: root.createdAt, startedAt: root.startedAt,
                  finishedAt: root.finishedAt, stepsDone: root.doneSteps, stepsTotal: root.totalSteps)
    }

    // MARK: - Starting

    private func start(_ submission: Submission) {
        let root = RootJob(id: submission.jobId, key: submission.key, priority: submission.priority,
                           createdAt: submission.createdAt, totalSteps: submission.spec.leafCount)
        if submission.foreignID { foreignKeys[submission.jobId] = submission.key }
        // A root leaf records no step results: without input it needs no scope of its own.
        let scope = submission.input.isNull && submission.spec.kind != nil ? emptyScope : GraphScope(input: submission.input)
        let node = GraphNode(spec: submission.spec, path: "", index: 0, root: root, parent: nil, scope: scope)
        root.node = node
        root.completion = submission.completion
        root.journaled = submission.journaled && journal != nil
        root.plainLeaf = submission.plainLeaf
        root.recoveredSteps = submission.recoveredSteps
        root.emittedEvents = submission.emittedEvents
        root.startedAt = submission.startedAt
        active.insert(root, forKey: root.key)
        queued(node)
        if submission.resumed {
            // Once per restart (never deduplicated against the events of an earlier run).
            // Leaf steps, as `job.status` counts them: a failed group's own record is not one.
            let spec = submission.spec
            let done = submission.recoveredSteps.keys.count { spec.isLeaf(at: $0[...]) }
            bus.emit(EventName.resumed, jobId: root.id, rootJobId: root.id, stepPath: "") { ["stepsDone": .int(done)] }
        }
        run(node)
    }

    /// Starts a node that was just created (its `job.queued` is already out).
    private func run(_ node: GraphNode) {
        if case .named(let named) = node.spec.body {
            // A named job's steps see its own input and ids; its `input` is resolved where it is written:
            // the first one's in the graph around it, the next one's (a job's file naming
            // another job) against the first one's input, and so on down the chain.
            do throws(ReferenceError) {
                var scope = node.scope
                var layer: NamedJobSpec? = named
                while let current = layer {
                    var input = scope.input
                    if let given = current.input { input = try Template.resolve(given, in: referenceScope(for: node, in: scope)) }
                    scope = GraphScope(input: input)
                    if case .named(let next) = current.resolved?.body { layer = next } else { layer = nil }
                }
                node.innerScope = scope
            } catch {
                startedHere(node, node.effective)
                finish(node, .failure(JobError(error.tooLarge ? .tooLarge : .invalid, error.description, stepPath: node.path)))
                return
            }
        }
        if node.isLeaf {
            dispatch(node)
            return
        }
        if !node.root.recoveredSteps.isEmpty, let step = node.root.recoveredSteps.removeValue(forKey: node.path) {
            // A group that ended before the restart (a failure: see `finish`) ends
            // the same way; its steps do not run again. Its recorded steps count as done.
            let prefix = node.path.isEmpty ? "" : node.path + "."
            let inside = node.root.recoveredSteps.keys.filter { $0.hasPrefix(prefix) }
            for path in inside { node.root.recoveredSteps[path] = nil }
            node.root.doneSteps += inside.count { node.spec.isLeaf(at: $0.dropFirst(prefix.count)) }
            finish(node, step.outcome)
            return
        }
        node.state = .running
        if node.parent == nil { rootRunning(node.root) }
        emit(EventName.started, node) { ["worker": .null] }  // a group runs on no worker (protocol §6 lists the field)
        startTimer(node)
        let count = node.group!.steps.count
        node.results = Array(repeating: nil, count: count)
        node.errors = Array(repeating: nil, count: count)
        node.collectedBytes = count * 8  // `null` in both arrays
        node.children.reserveCapacity(count)
        advance(node)
    }

    private func dispatch(_ node: GraphNode) {
        if !node.root.recoveredSteps.isEmpty, let step = node.root.recoveredSteps.removeValue(forKey: node.path) {
            finish(node, step.outcome)  // it ran before the restart
            return
        }
        var spec = node.effective
        if !(node.parent == nil && node.root.plainLeaf) && spec.ownStringsHaveReferences {
            do throws(JobError) {
                // A named job's own strings (a named leaf) see its input, not the graph around it.
                spec = try resolveReferences(in: spec, scope: referenceScope(for: node, in: node.innerScope), node: node)
            } catch {
                startedHere(node, spec)
                finish(node, .failure(error))
                return
            }
        }
        guard let workerIndex = dispatcher.workerIndex(for: spec) else {
            // Only a worker named by a reference can be unknown here (the rest was checked at submit).
            let message = spec.worker.map { "worker: no \(spec.kind?.rawValue ?? "") worker named '\($0)'" } ?? "no worker for this job"
            startedHere(node, spec)
            finish(node, .failure(JobError(.invalid, message, stepPath: node.path)))
            return
        }
        let token = nextToken
        nextToken += 1
        node.token = token
        node.workerIndex = workerIndex
        if case .local = spec.body { startTimer(node, timeoutMs: spec.timeoutMs) }
        let emitted = node.root.emittedEvents
        let attemptsMade = emitted.isEmpty ? 0 : emitted.attemptsMade(stepPath: node.path)
        let roundsMade = emitted.isEmpty ? 0 : emitted.roundsMade(stepPath: node.path)
        outboxes[workerIndex].post(.run(WorkTask(token: token, spec: spec, jobId: node.root.id, stepPath: node.path,
                                                 readsSecrets: !node.secrets.isEmpty,
                                                 priority: node.root.priority, attemptsMade: attemptsMade,
                                                 roundsMade: roundsMade, step: StepReference(node: node))))
    }

    /// Moves a group on: starts its next steps (one at a time when serial, else
    /// up to `maxConcurrency`), then completes it if nothing is left to run.
    ///
    /// The one place a group completes, whatever ended its last step: a step
    /// may finish inside `run` (a reference that does not resolve, a recovered
    /// step, a nested group that completes at once), which re-enters here
    /// through `stepFinished`; the inner call returns at once and the outer
    /// loop, which sees the new counts, decides.
    private func advance(_ group: GraphNode) {
        guard !group.starting, !group.state.isFinal else { return }
        group.starting = true
        let spec = group.group!
        let limit = group.isSerial ? 1 : (spec.maxConcurrency ?? Int.max)
        while true {
            // The steps that may start now start together (protocol §4: a concurrent
            // group's "at once"): all are queued before any runs, so one that fails as it
            // starts (a reference that does not resolve) stops the others as a failure
            // reported later does (they are cancelled), instead of leaving them unstarted.
            let first = group.children.count
            while !group.stopped, group.endingError == nil, group.running < limit, group.nextToStart < spec.steps.count,
                  !group.state.isFinal {
                let i = group.nextToStart
                group.nextToStart += 1
                group.running += 1
                let child = GraphNode(spec: spec.steps[i], path: group.childPath(i), index: i, root: group.root,
                                      parent: group, scope: group.innerScope)
                group.children.append(child)
                queued(child)
            }
            let end = group.children.count
            guard first < end else { break }
            // A step already cancelled by an earlier one's failure does not run.
            for index in first..<end where !group.children[index].state.isFinal { run(group.children[index]) }
        }
        group.starting = false
        if group.running == 0, !group.state.isFinal,
           group.stopped || group.endingError != nil || group.nextToStart == spec.steps.count {
            completeGroup(group)
        }
    }

    /// `timeoutMs`: a leaf's once its references are resolved (default: the node's spec's).
    private func startTimer(_ node: GraphNode, timeoutMs: Int?? = nil) {
        guard let timeout = timeoutMs ?? node.effective.timeoutMs else { return }
        node.timer = clock.schedule(afterMilliseconds: UInt64(timeout), on: loop) { [unowned self, unowned node] in
            node.timer = nil
            self.cancel(node, error: JobError(.timeout, "timed out after \(timeout) ms"))
        }
    }

    // MARK: - Worker reports

    private func receive(_ report: WorkerReport, for task: WorkTask) {
        let node = task.step.node
        guard !node.state.isFinal else { return }  // cancelled or timed out meanwhile
        switch report {
        case .started:
            started(node, workerIndex: node.workerIndex)
        case .progress(let bytes, let total, let upload):
            emit(EventName.progress, node) {
                var fields: OrderedDictionary<String, JSONValue> = ["bytes": .int(Int(bytes))]
                if let total { fields["totalBytes"] = .int(Int(total)) }
                if upload { fields["upload"] = true }
                return fields
            }
        case .polled(let round, let bytes):
            emit(EventName.progress, node) { ["round": .int(round), "bytes": .int(bytes)] }
        case .retrying(let attempt, let delayMs, let error):
            emit(EventName.retrying, node) {
                ["attempt": .int(attempt), "delayMs": .int(delayMs), "error": node.secrets.masked(error).json]
            }
        case .skipped(let reason):
            emit(EventName.skipped, node) { ["reason": .string(reason)] }
        case .custom(let emission):
            // The task's own fields only (no step `label`: the names are the sender's to choose).
            // Masked as the step's result is: fields made from a secret shared value never go out in clear.
            let secrets = node.secrets
            emission.issued(bus.emit(emission.name, jobId: node.root.id, rootJobId: node.root.id,
                                     stepPath: node.path) {
                guard !secrets.isEmpty, case .object(let masked) = secrets.masked(.object(emission.fields)) else { return emission.fields }
                return masked
            })
        case .finished(let outcome, let ran, let skipped):
            if ran { started(node, workerIndex: node.workerIndex) }
            if let skipped { emit(EventName.skipped, node) { ["reason": .string(skipped)] } }
            finish(node, outcome)
        case .succeeded(let result, let ran, let skipped):
            if ran { started(node, workerIndex: node.workerIndex) }
            if let skipped { emit(EventName.skipped, node) { ["reason": .string(skipped)] } }
            // Built only if an event, a reference or a reader needs it (see `StepResult`,
            // `JobResult`); the journal gets it encoded without building it (`EncodedStep`).
            // `finish` takes the result from `deferredResult`; the `.null` is not used.
            node.deferredResult = result
            finish(node, .success(.null))
        }
    }

    /// A step that ends before any worker has it (its references do not
    /// resolve, the worker they name does not exist) started all the same: the
    /// engine began running it (protocol §6: queued < started < the final
    /// event), named for the worker it was for when that is known.
    private func startedHere(_ node: GraphNode, _ spec: JobSpec) {
        let named = spec.worker.map(Template.containsReference) ?? false
        started(node, workerIndex: named || spec.kind == nil ? nil : dispatcher.workerIndex(for: spec))
    }

    /// `job.queued`, with its spec's summary. While someone listens, the fields
    /// go out encoded (the tree is built only for a reader of ``HydraEvent/fields``):
    /// built as a tree and encoded for the store, they cost the coordinator
    /// 1.4k instructions more per durable submit, 0.5k per remote job over RPC
    /// (callgrind).
    private func queued(_ node: GraphNode) {
        guard node.label == nil, bus.hasSubscribers else {
            emit(EventName.queued, node) { ["spec": node.spec.summary(secretHeaders: dispatcher.secretHeaderNames)] }
            return
        }
        let summary = node.spec.summary(secretHeaders: dispatcher.secretHeaderNames)
        emit(EventName.queued, node, encoded: {
            var fields = Array(#"{"spec":"#.utf8)
            JSONWriter.write(summary, into: &fields)
            fields.append(UInt8(ascii: "}"))
            return fields
        }, build: { ["spec": summary] })
    }

    /// `job.started`: a leaf's worker started it (or, ``startedHere(_:_:)``, the engine did).
    private func started(_ node: GraphNode, workerIndex: Int?) {
        node.state = .running
        if node.parent == nil { rootRunning(node.root) }
        // With nobody listening the plain emit only takes a seq; the other would
        // still make its `build` closure (0.36k instructions a job, callgrind).
        guard let workerIndex, node.label == nil, bus.hasSubscribers else {
            let worker = workerIndex.map { workerNames[$0] }
            emit(EventName.started, node) { ["worker": worker.map(JSONValue.string) ?? .null] }
            return
        }
        let name = workerNames[workerIndex]
        emit(EventName.started, node, encoded: { startedFields[workerIndex] }, build: { ["worker": .string(name)] })
    }

    // MARK: - Finishing

    private func finish(_ node: GraphNode, _ outcome: StepOutcome) {
        guard !node.state.isFinal else { return }
        var outcome = outcome
        if !node.secrets.isEmpty {
            if let deferred = node.deferredResult, case .success = outcome {
                node.deferredResult = nil
                outcome = .success(deferred.build())
            }
            let clear = outcome
            outcome = node.secrets.masked(outcome)
            // What is stored and sent is masked; later steps' references read the value.
            if case .success(let value) = clear, case .success(let masked) = outcome, masked != value { node.clearResult = value }
        }
        if case .success(let result) = outcome, node.isLeaf {
            // A result built here (a local job's, a reference's) may nest as deep as its
            // input chain; one a worker decoded (remote) nests at most as deep as its parse allows.
            let depth = node.deferredResult == nil ? result.nestingDepth(upTo: JSONParser.maxResultDepth) : JSONParser.maxDepth + 2
            if depth > JSONParser.maxResultDepth {
                outcome = .failure(tooDeep("the step's result"))
            } else if let size = encodedSize(of: result, deferred: node.deferredResult) {
                node.resultBytes = size
                node.resultDepth = depth
            } else {
                node.deferredResult = nil
                outcome = .failure(tooLarge("the step's result"))
            }
        }
        node.timer?.cancel()
        node.timer = nil
        // Every leaf that ends is done: one that ran (before a restart too), one
        // cancelled in its worker's queue, one whose reference did not resolve.
        if node.isLeaf { node.root.doneSteps += 1 }
        // Leaves, and the groups that failed: a group's failure depends on when its
        // steps ended (which failed first, a timeout), not only on how, so it is
        // recorded rather than worked out again from its steps after a restart.
        // Its record is kept with its final event (one of a step resumed after a
        // restart may have gone out before the crash: then it is not sent again).
        if node.root.journaled, node.parent != nil, node.isLeaf || !outcome.isSuccess {
            journal?.stepFinished(jobId: node.root.id, stepPath: node.path,
                                  step: EncodedStep(outcome, deferred: node.deferredResult),
                                  finalEventFollows: !alreadySent(Self.finalEventName(outcome), node))
        }
        var encodedResult: [UInt8]?
        switch outcome {
        case .success(let result):
            node.state = .succeeded
            if let deferred = node.deferredResult, node.parent != nil {
                // A step's unbuilt result stays so in its group's results; a step
                // with an id is read by references, so it is built now.
                if let id = node.spec.id {
                    let built = deferred.build()
                    node.result = built
                    node.deferredResult = nil
                    node.scope.results[id] = built
                }
                emit(EventName.succeeded, node) { ["result": EventTrimming.trimmed(node.result ?? deferred.build())] }
            } else if let deferred = node.deferredResult {
                // A root's unbuilt result: encoded once, straight from the
                // worker's parts, for the journal and the event's stored row; a
                // tree is built only if a sink reads the event's fields.
                encodedResult = encodedRootResult(node.root, deferred)
                journalEnd(node.root, error: nil, encodedResult: encodedResult)
                if let encoded = encodedResult {
                    emit(EventName.succeeded, node, encoded: {
                        var fields: [UInt8] = []
                        fields.reserveCapacity(encoded.count + 12)
                        fields.append(contentsOf: #"{"result":"#.utf8)
                        fields.append(contentsOf: encoded)
                        fields.append(UInt8(ascii: "}"))
                        return fields
                    }, build: { ["result": deferred.build()] })
                } else {
                    emit(EventName.succeeded, node) {
                        let built = deferred.build()
                        node.result = built
                        node.deferredResult = nil
                        return ["result": EventTrimming.trimmed(built)]
                    }
                }
            } else {
                node.result = result
                if let id = node.spec.id, node.parent != nil {
                    node.scope.results[id] = node.clearResult ?? result
                    if node.clearResult != nil { node.scope.secrets[id] = node.secrets }
                }
                if node.parent == nil { journalEnd(node.root, error: nil) }
                emit(EventName.succeeded, node) { ["result": EventTrimming.trimmed(result)] }
            }
        case .failure(var error, let partial):
            if error.stepPath == nil { error.stepPath = node.path }
            node.result = partial
            node.state = error.kind == .cancelled ? .cancelled : .failed
            if node.parent == nil { journalEnd(node.root, error: error) }
            if error.kind == .cancelled {
                emit(EventName.cancelled, node) { [:] }
            } else {
                emit(EventName.failed, node) { ["error": error.json] }
            }
            if let parent = node.parent {
                stepFinished(parent, node, error: error)
                return
            }
            finishRoot(node.root, error: error)
            return
        }
        if let parent = node.parent {
            stepFinished(parent, node, error: nil)
        } else {
            finishRoot(node.root, error: nil, encodedResult: encodedResult)
        }
    }

    /// A root leaf's result encoded as JSON, when the journal or a listener
    /// will need it and its event would carry it whole (no body left out: see
    /// ``EventTrimming``); else nil, and the event is built the usual way.
    private func encodedRootResult(_ root: RootJob, _ deferred: any DeferredResult) -> [UInt8]? {
        guard root.journaled || bus.hasSubscribers, root.node.label == nil,
              deferred.encodedSize(limit: EventTrimming.maxBodyBytes) != nil else { return nil }
        var out: [UInt8] = []
        deferred.encode(into: &out)
        return out
    }

    private func stepFinished(_ group: GraphNode, _ step: GraphNode, error: JobError?) {
        group.running -= 1
        if step.state == .succeeded {
            group.results[step.index] = step.deferredResult.map(StepResult.deferred) ?? .built(step.result ?? .null)
            group.collectedBytes += step.resultBytes - 4
        } else if let partial = step.result, let size = partial.encodedSize(limit: maxResultBytes),
                  group.collectedBytes + size - 4 <= maxResultBytes {
            // A failed nested group's own result (its steps' results and errors): kept in
            // the parent's, so partial results are never lost at any depth (protocol §4);
            // unless keeping it would make the parent too large: its error then stays
            // the step's, not a `tooLarge` of the whole group.
            group.results[step.index] = .built(partial)
            group.collectedBytes += size - 4
        }
        group.errors[step.index] = error
        if let error { group.collectedBytes += error.json.encodedSize(limit: Int.max)! - 4 }
        if let error, group.endingError == nil {
            if group.firstError == nil { group.firstError = error }
            if group.group!.stopWhenFailed && !group.stopped {
                group.stopped = true
                // Concurrent: the steps still running are cancelled.
                for sibling in group.children where !sibling.state.isFinal {
                    cancel(sibling, error: JobError(.cancelled, "cancelled: step \(error.stepPath ?? "") failed"))
                }
            }
        }
        advance(group)
    }

    /// Every step of the group is final (or will never start): `group.done`, then the group's own final event.
    private func completeGroup(_ group: GraphNode) {
        guard !group.state.isFinal else { return }
        let stopped = group.stopped || group.endingError != nil
        // `{"results":[…],"errors":[…],"stopped":…}`: the items, their commas and the frame.
        // An upper bound while some results are unbuilt (their sizes are bounds).
        let count = group.results.count
        let bound = group.collectedBytes + 2 * max(count - 1, 0) + 37 + (stopped ? 4 : 5)
        let groupResult = GroupResult(results: group.results, errors: group.errors, stopped: stopped, size: bound)
        assert(bound >= groupResult.build().encodedSize(limit: Int.max)!, "the group's collected size is off")
        // Over the limit by the bound: measured exactly before the group fails.
        // `{"results": [...]}`: two levels around its deepest step result.
        let depth = group.children.reduce(0) { max($0, $1.resultDepth) } + 2
        let tooLargeResults = depth > JSONParser.maxResultDepth
            || (bound > maxResultBytes && groupResult.build().encodedSize(limit: maxResultBytes) == nil)
        group.resultDepth = depth  // a failed group's partial results are kept in its parent's too
        emit(EventName.groupDone, group) {
            // Results the group cannot keep are not in its event either (stored and
            // replayed as it is): one null per step, and why.
            tooLargeResults
                ? ["results": .array(Array(repeating: .null, count: count)), "stopped": .bool(stopped), "tooLarge": true]
                : ["results": .array(group.results.map { $0?.value ?? .null }), "stopped": .bool(stopped)]
        }
        if tooLargeResults {
            // Nothing half-kept: the collected results are dropped whole, the group fails.
            finish(group, .failure(depth > JSONParser.maxResultDepth ? tooDeep("the group's collected results")
                                                                      : tooLarge("the group's collected results")))
        } else if let ending = group.endingError, ending.kind == .cancelled || group.firstError == nil {
            // A cancelled group is cancelled (its job was); one that timed out after a
            // step had failed carries that step's error (protocol §4: the first failing step's).
            finish(group, .failure(ending, result: groupResult.build()))
        } else if let error = group.firstError {
            finish(group, .failure(error, result: groupResult.build()))
        } else {
            group.resultBytes = bound
            group.deferredResult = groupResult
            finish(group, .success(.null))
        }
    }

    /// Cancels a node and everything running under it; `error` says why (cancelled or timeout).
    private func cancel(_ node: GraphNode, error: JobError) {
        guard !node.state.isFinal else { return }
        // A leaf, or a group that never started (queued with its siblings, cancelled
        // before its turn to run: see `advance`): it ends as a leaf does, with no result.
        if node.isLeaf || node.state == .queued {
            if node.token != 0 {
                outboxes[node.workerIndex].post(.cancel(node.token))
            }
            // A leaf whose own time ran out in its worker's queue: its limit counts from
            // when it was queued, and it started then (protocol §6: queued < started < its
            // final event). A step cancelled before it started has no `job.started`.
            if error.kind == .timeout, node.isLeaf, node.state == .queued {
                started(node, workerIndex: node.workerIndex >= 0 ? node.workerIndex : nil)
            }
            var error = error
            error.stepPath = node.path
            finish(node, .failure(error))
            return
        }
        node.endingError = { var e = error; e.stepPath = node.path; return e }()
        for child in node.children where !child.state.isFinal {
            cancel(child, error: JobError(.cancelled, error.kind == .timeout ? "cancelled: group timed out" : "cancelled"))
        }
        advance(node)
    }

    /// The job is running (a leaf: its worker started it; a group: its steps
    /// are being started): counted once (`hydra.stats`), its `startedAt` set
    /// now unless kept from before a restart (a job still queued, behind a
    /// paused worker say, has none), and journaled.
    private func rootRunning(_ root: RootJob) {
        guard !root.countedRunning else { return }
        root.countedRunning = true
        if root.startedAt == nil { root.startedAt = clock.now() }
        running.add(1)
        if root.journaled, let startedAt = root.startedAt { journal?.jobStarted(jobId: root.id, at: startedAt) }
    }

    /// The name of the final event a step with `outcome` gets.
    private static func finalEventName(_ outcome: StepOutcome) -> String {
        switch outcome {
        case .success: EventName.succeeded
        case .failure(let error, _): error.kind == .cancelled ? EventName.cancelled : EventName.failed
        }
    }

    /// A journaled root's end, told to the journal before its final event is
    /// emitted (the store keeps the two together: see ``JobJournal``), with
    /// the end time ``finishRoot(_:error:encodedResult:)`` then reports.
    /// `encodedResult`: the result's JSON when it was already encoded (see `encodedRootResult`).
    private func journalEnd(_ root: RootJob, error: JobError?, encodedResult: [UInt8]? = nil) {
        guard root.journaled, let journal else { return }
        let node = root.node!
        let finishedAt = clock.now()
        root.finishedAt = finishedAt
        let result = node.deferredResult.map { JobResult(jobId: root.id, deferred: $0) }
            ?? JobResult(jobId: root.id, state: node.state, result: node.result, error: error)
        let finalEvent = result.state == .succeeded ? EventName.succeeded : result.state == .cancelled ? EventName.cancelled : EventName.failed
        journal.jobFinished(jobId: root.id, state: result.state, result: result.encodedJSON(result: encodedResult),
                            at: finishedAt, finalEventFollows: !alreadySent(finalEvent, node))
    }

    private func finishRoot(_ root: RootJob, error: JobError?, encodedResult: [UInt8]? = nil) {
        let node = root.node!
        if root.countedRunning { running.add(-1) }
        // Set already for a journaled job (`journalEnd`, before its final event).
        if root.finishedAt == nil { root.finishedAt = clock.now() }
        active.removeValue(forKey: root.key)
        let result = node.deferredResult.map { JobResult(jobId: root.id, deferred: $0) }
            ?? JobResult(jobId: root.id, state: node.state, result: node.result, error: error)
        finished.insert(FinishedJob(status: status(of: root), result: result), forKey: root.key)
        finishedOrder.append(root.key)
        if finishedOrder.count > retainFinished, let oldest = finishedOrder.popFirst() {
            if let gone = finished.removeValue(forKey: oldest), !foreignKeys.isEmpty {
                foreignKeys[gone.result.jobId] = nil
            }
        }
        root.completion?(result)
        for waiter in root.waiters { waiter(result) }
        root.waiters.removeAll()
    }

    /// A leaf's result's encoded length, or nil past `limits.maxResultBytes`
    /// (protocol §4 Size limits). An unbuilt result's is an upper bound.
    private func encodedSize(of result: JSONValue, deferred: (any DeferredResult)?) -> Int? {
        if let deferred { return deferred.encodedSize(limit: maxResultBytes) }
        return result.encodedSize(limit: maxResultBytes)
    }

    private func tooLarge(_ what: String) -> JobError {
        JobError(.tooLarge, "\(what) is larger than limits.maxResultBytes (\(maxResultBytes) bytes)")
    }

    /// Kind `tooLarge` too: a result nested past what the store and clients read back.
    private func tooDeep(_ what: String) -> JobError {
        JobError(.tooLarge, "\(what) nests deeper than \(JSONParser.maxResultDepth) levels")
    }

    /// The coordinator is stopping: whoever waits on an unfinished job hears nil.
    /// A journaled job's completion does not run (it did not finish: it resumes at
    /// the next start); an embedder's job, which nothing resumes, completes as
    /// cancelled, so that no caller awaits it for ever.
    func abandonWaiters() {
        for root in active.allValues {
            for waiter in root.waiters { waiter(nil) }
            root.waiters.removeAll()
            if !root.journaled, let completion = root.completion {
                root.completion = nil
                completion(Scheduler.shutDownResult(root.id))
            }
        }
    }

    // MARK: - Events and references

    @inline(__always)
    private func emit(_ name: String, _ node: GraphNode, _ fields: () -> OrderedDictionary<String, JSONValue>) {
        if alreadySent(name, node) { return }
        bus.emit(name, jobId: node.root.id, rootJobId: node.root.id, stepPath: node.path) {
            guard let label = node.label else { return fields() }
            var labelled = fields()
            labelled["label"] = .string(label)
            return labelled
        }
    }

    /// Emits an event whose fields are already encoded (see ``EventBus``).
    private func emit(_ name: String, _ node: GraphNode, encoded: () -> [UInt8],
                      build: @escaping @Sendable () -> OrderedDictionary<String, JSONValue>) {
        if alreadySent(name, node) { return }
        bus.emit(name, jobId: node.root.id, rootJobId: node.root.id, stepPath: node.path, encoded: encoded, build: build)
    }

    /// A job resumed after a restart: what it already sent is not sent twice.
    @inline(__always)
    private func alreadySent(_ name: String, _ node: GraphNode) -> Bool {
        !node.root.emittedEvents.isEmpty && node.root.emittedEvents.contains(stepPath: node.path, name: name)
    }

    /// What `node`'s references see in `scope`: its graph's (`node.scope`), or
    /// for a named job's own strings the named job's (`node.innerScope`), which
    /// sees no `prev` or step ids from outside.
    private func referenceScope(for node: GraphNode, in scope: GraphScope) -> ReferenceScope {
        let environment = self.environment
        let shared = self.shared
        var references = ReferenceScope(
            previous: scope === node.scope ? previousResult(of: node) : nil,
            step: { id in
                // A step whose result holds a secret in clear: this one masks it too.
                if !scope.secrets.isEmpty, let secrets = scope.secrets[id] { node.secrets.formUnion(secrets) }
                return scope.results[id]
            },
            input: scope.input,
            shared: { key in
                guard let shared, let value = shared.value(forKey: key) else { return nil }
                if shared.isSecret(key) { node.secrets.add(value) }
                return value
            },
            environment: { environment[$0] },
            budget: ReferenceBudget(limit: maxResultBytes))
        references.sharedProblem = { key in
            // Stored encrypted, unreadable here: no value, but not "no shared value" either.
            shared?.isSecret(key) == true ? "shared key '\(key)' is encrypted (aes-gcm) and cannot be read without HYDRA_SHARED_KEY" : nil
        }
        return references
    }

    /// The result of the step before `node` in the nearest serial group above
    /// it: a step of a concurrent group takes its group's (the group stands at
    /// one place of the serial group around it); the first step of a serial group has none.
    private func previousResult(of node: GraphNode) -> JSONValue? {
        var current = node
        while let parent = current.parent {
            // The first step of a serial group has no previous step (protocol §4), at any depth.
            if parent.isSerial && current.index == 0 { return nil }
            if parent.isSerial {
                // Only a step that succeeded has a result to use (a failed group's partial one is not).
                guard parent.errors[current.index - 1] == nil else { return nil }
                let previous = parent.children[current.index - 1]
                if let clear = previous.clearResult {
                    // Read in clear, masked wherever this step reports it.
                    node.secrets.formUnion(previous.secrets)
                    return clear
                }
                return parent.results[current.index - 1]?.value
            }
            if parent.scope !== current.scope { return nil }  // a named job's graph does not see outside
            current = parent
        }
        return nil
    }

    /// A remote request (of a `remote` or a `resource` job) with its references resolved.
    private static func resolved(_ r: RemoteSpec, in scope: ReferenceScope) throws(ReferenceError) -> RemoteSpec {
        var r = r
        func text(_ s: String?) throws(ReferenceError) -> String? {
            guard let s else { return nil }
            return try Template.resolveText(s, in: scope)
        }
        r.url = try text(r.url)
        r.server = try text(r.server)
        r.endpoint = try text(r.endpoint)
        r.api = try text(r.api)
        r.method = try text(r.method)
        r.saveAs = try text(r.saveAs)
        r.dogma = try text(r.dogma)
        r.bodyFile = try text(r.bodyFile)
        r.auth = try text(r.auth)
        for (k, v) in r.pathVars { r.pathVars[k] = try Template.resolve(v, in: scope) }
        for (k, v) in r.query { r.query[k] = try Template.resolve(v, in: scope) }
        for (k, v) in r.headers { r.headers[k] = try Template.resolve(v, in: scope) }
        if let body = r.body { r.body = try Template.resolve(body, in: scope) }
        return r
    }

    /// The leaf `spec` with its references resolved; a step failure (kind
    /// `invalid`, or `tooLarge`) when one does not resolve or, for a leaf
    /// decoded only now (``JobSpec/deferredJSON``), when a resolved value is refused.
    private func resolveReferences(in spec: JobSpec, scope: ReferenceScope, node: GraphNode) throws(JobError) -> JobSpec {
        let stepPath = node.path
        let resolved: JSONValue
        do throws(ReferenceError) {
            guard let json = spec.deferredJSON else { return try resolveReferences(in: spec, scope: scope) }
            resolved = try Template.resolve(json, in: scope)
        } catch {
            throw JobError(error.tooLarge ? .tooLarge : .invalid, error.description, stepPath: stepPath)
        }
        do throws(ValidationError) {
            var full = try JobSpec(checking: resolved, path: "")
            // What the node gave the step it runs (a named job's id and time limit: see `GraphNode`).
            full.id = spec.id
            if full.timeoutMs == nil { full.timeoutMs = spec.timeoutMs }
            return full
        } catch {
            guard node.secrets.isEmpty else {
                // The refusal may quote what a secret made (a member's name, a value changed in case):
                // the member of the step only, which the spec names itself.
                let field = error.path.prefix { $0 != "." && $0 != "[" }
                throw JobError(.invalid, "\(field.isEmpty ? "the step" : field): refused once its references were resolved "
                                   + "(not shown: the step read a secret)", stepPath: stepPath)
            }
            throw JobError(.invalid, "\(error.path.isEmpty ? "" : error.path + ": ")\(error.reason) (once its references were resolved)",
                           stepPath: stepPath)
        }
    }

    private func resolveReferences(in spec: JobSpec, scope: ReferenceScope) throws(ReferenceError) -> JobSpec {
        var spec = spec
        switch spec.body {
        case .remote(let r):
            spec.body = .remote(try Self.resolved(r, in: scope))
        case .resource(var res):
            res.request = try Self.resolved(res.request, in: scope)
            spec.body = .resource(res)
        case .local(var l):
            l.name = try Template.resolveText(l.name, in: scope)
            l.input = try Template.resolve(l.input, in: scope)
            spec.body = .local(l)
        default:
            break
        }
        if let worker = spec.worker { spec.worker = try Template.resolveText(worker, in: scope) }
        return spec
    }
}
