/// The job starts the store writer holds back, so that most jobs get one
/// row update when they finish instead of one when they start and another
/// when they finish (and one move in the state index instead of two).
///
/// A start (`markStarted`) is fire and forget, and nobody reads it from the
/// store while the engine still knows the job (`job.status` of a live job is
/// answered from memory). So the writer keeps it until the first of: the
/// job's finish (folded into that update), one of its steps being recorded
/// (a resumed graph must find its start beside its steps), a flush or a
/// close (every write queued before them is committed, starts included), or
/// ``maxDelayMs`` after the oldest one was held. Writer thread only.
struct StartMarks {
    /// How long a start may wait for its job's finish before it is written anyway.
    static let maxDelayMs = 200

    private var pending: [String: Double] = [:]
    /// When the oldest start still held (or one folded since) was held, in
    /// `DispatchTime` nanoseconds; nil when none is held.
    private var oldestHeldAt: UInt64?

    var isEmpty: Bool { pending.isEmpty }

    /// What one batch does with the starts.
    struct Plan {
        /// Indexes of the batch's `markStarted` writes that are held back, not run.
        var skipped: Set<Int> = []
        /// Index of a `finish` write -> the start time it records too.
        var startTimes: [Int: Double] = [:]
        /// Starts written at the top of this batch.
        var written: [(jobId: String, time: Double)] = []
    }

    /// Plans `writes`: holds their starts, folds held starts into finishes,
    /// and writes the starts that must not wait any longer (all of them with
    /// `writeAll`, or when a barrier is in the batch). `now`: `DispatchTime`
    /// nanoseconds.
    mutating func plan(_ writes: [WriteOperation], writeAll: Bool, now: UInt64) -> Plan {
        var plan = Plan()
        var writeAll = writeAll
        for (i, operation) in writes.enumerated() {
            switch operation {
            case .markStarted(let jobId, let time):
                pending[jobId] = time
                if oldestHeldAt == nil { oldestHeldAt = now }
                plan.skipped.insert(i)
            case .finish(let jobId, _, _, _, _):
                if !pending.isEmpty, let time = pending.removeValue(forKey: jobId) { plan.startTimes[i] = time }
            case .step(let jobId, _, _, _):
                if !pending.isEmpty, let time = pending.removeValue(forKey: jobId) { plan.written.append((jobId, time)) }
            case .barrier:
                writeAll = true
            default:
                break
            }
        }
        if let oldest = oldestHeldAt, now &- oldest >= UInt64(Self.maxDelayMs) * 1_000_000 { writeAll = true }
        if writeAll {
            for (jobId, time) in pending { plan.written.append((jobId, time)) }
            pending.removeAll(keepingCapacity: true)
        }
        if pending.isEmpty { oldestHeldAt = nil }
        return plan
    }
}
