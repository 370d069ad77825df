import HydraLoop
import HydraCore
import Synchronization

/// The named local jobs an engine knows. Thread-safe: jobs may be registered
/// while the engine runs; a spec naming an unregistered job is refused at submit.
public final class LocalJobRegistry: Sendable {
    private let jobs = Locked<[String: LocalJob]>([:])
    private let changes = Atomic<Int>(0)

    /// Bumped on every registration, so executors can keep a snapshot and refresh it cheaply.
    var version: Int { changes.load(ordering: .acquiring) }

    /// Every registered job, with the version it corresponds to.
    var snapshot: (jobs: [String: LocalJob], version: Int) {
        jobs.withLock { ($0, changes.load(ordering: .acquiring)) }
    }

    public init(builtIns: Bool = true) {
        if builtIns { registerBuiltIns() }
    }

    /// Adds or replaces the job called `name`.
    public func register(_ name: String, _ job: LocalJob) {
        jobs.withLock {
            $0[name] = job
            changes.add(1, ordering: .releasing)
        }
    }

    /// Registers a job only when `name` is still free (built-ins provided by a higher layer).
    public func registerIfAbsent(_ name: String, _ job: LocalJob) {
        jobs.withLock {
            if $0[name] == nil {
                $0[name] = job
                changes.add(1, ordering: .releasing)
            }
        }
    }

    public func job(named name: String) -> LocalJob? {
        jobs.withLock { $0[name] }
    }

    public var names: [String] { jobs.withLock { Array($0.keys).sorted() } }

    /// `delay {ms}` (returns its input), `echo` (returns its input),
    /// `fail {message}` (fails, kind internal), `pick {from, path}`.
    private func registerBuiltIns() {
        register("delay", .delay)
        register("echo", .inline { $0.input })
        register("fail", .inline { call in
            throw JobError(.internal, call.input["message"]?.stringValue ?? "failed by request")
        })
        register("pick", .inline { call in
            guard let from = call.input["from"] else { throw JobError(.invalid, "pick: input.from is required") }
            let path = call.input["path"].map { $0.stringValue ?? Template.text(of: $0) } ?? ""
            guard let value = from.value(atPath: path) else {
                throw JobError(.invalid, "pick: no value at '\(path)'")
            }
            return value
        })
    }
}
