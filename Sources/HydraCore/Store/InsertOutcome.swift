import Foundation

/// What ``StateStore/insert(_:done:)`` did with one job.
public enum InsertOutcome: Sendable, Equatable {
    /// Recorded as new.
    case inserted
    /// Its idempotency key was already used, by `jobId`; `sameSpec` tells
    /// whether that job had the same spec and input.
    case existing(jobId: String, sameSpec: Bool)
}
