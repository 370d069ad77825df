import Foundation
import Hydra

/// Counts leaf steps from events for the live progress line of `hydra run` and
/// `hydra submit --follow`: `hydra: steps 3/5 done · 1 in flight · 0 failed · 2 retries · 1.4s`.
struct ProgressTracker {
    private let start = Date()
    private var running: Set<String> = []
    private var done = 0
    private var failed = 0
    /// `job.retrying` events seen: a step that retries is slow for a reason the user should see.
    private var retries = 0
    /// Leaf steps in the job, when known (`done/total`); else only `done` is shown.
    var total: Int?

    init(total: Int? = nil) { self.total = total }

    mutating func observe(_ event: HydraEvent) {
        let key = event.rootJobId + "/" + event.stepPath
        switch event.name {
        case EventName.started where event.fields["worker"]?.stringValue != nil:
            running.insert(key)
        case EventName.retrying:
            retries += 1
        case EventName.succeeded, EventName.failed, EventName.cancelled:
            if running.remove(key) != nil || event.fields["worker"]?.stringValue != nil {
                done += 1
                if event.name != EventName.succeeded { failed += 1 }
            }
        default:
            break
        }
    }

    /// The same, for an event received as JSON (`hydra submit --follow`).
    mutating func observe(json event: JSONValue) {
        guard case .object(var fields) = event, let name = event["event"]?.stringValue else { return }
        for key in ["seq", "event", "jobId", "rootJobId", "stepPath", "time"] { fields[key] = nil }
        observe(HydraEvent(seq: UInt64(event["seq"]?.intValue ?? 0), name: name,
                           jobId: event["jobId"]?.stringValue ?? "", rootJobId: event["rootJobId"]?.stringValue ?? "",
                           stepPath: event["stepPath"]?.stringValue ?? "", time: 0, fields: fields))
    }

    var line: String {
        let elapsed = String(format: "%.1fs", Date().timeIntervalSince(start))
        let steps = total.map { "\(done)/\($0)" } ?? "\(done)"
        return "hydra: steps \(steps) done · \(running.count) in flight · \(failed) failed · "
            + "\(retries) \(retries == 1 ? "retry" : "retries") · \(elapsed)"
    }

    /// Leaf steps (remote and local) in a job spec, for `total`; nil when the spec
    /// names a job from the jobs folder, whose steps are only known where it runs.
    static func leafCount(of spec: JSONValue) -> Int? {
        switch spec["type"]?.stringValue {
        case "remote", "local": return 1
        case "serial", "concurrent":
            var count = 0
            for step in spec["steps"]?.arrayValue ?? [] {
                guard let leaves = leafCount(of: step) else { return nil }
                count += leaves
            }
            return count
        default: return nil
        }
    }
}
