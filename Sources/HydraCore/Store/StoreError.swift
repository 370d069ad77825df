import Foundation

/// A failure of the state store (disk full, corrupt file, missing key...).
public struct StoreError: Error, Sendable, CustomStringConvertible {
    public var description: String
    /// Set when the caller's argument was wrong (a bad `after` cursor), not the store.
    public var invalidArgument: String?
    /// The store could not write for now (disk full, an I/O error, a lock held
    /// elsewhere): the same write may succeed later, unlike a refused one (a
    /// duplicate id).
    public var isTransient = false
    /// The store was closed (the server is stopping): nothing more is written or read.
    public var isClosed = false
    public init(_ description: String) { self.description = description }

    /// What every call gets once the store is closed.
    public static var closed: StoreError {
        var error = StoreError("store is closed")
        error.isClosed = true
        return error
    }
    public init(_ description: String, invalidArgument: String) {
        self.description = description
        self.invalidArgument = invalidArgument
    }
}

extension StoredStep {
    /// The outcome to replay for a recovered step.
    var outcome: StepOutcome {
        if state == .succeeded { return .success(result ?? .null) }
        let error = error.flatMap(JobError.init(json:)) ?? JobError(.internal, "step failed before a restart")
        return .failure(error, result: result)
    }
}
