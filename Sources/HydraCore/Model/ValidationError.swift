/// Why a spec, a configuration value or a submission is refused, named by its
/// path (`steps[2].url: expected string`).
public struct ValidationError: Error, Sendable, CustomStringConvertible, Equatable {
    /// Where the problem is: dot-separated keys and `[index]` (empty for the whole document).
    public var path: String
    /// What is wrong, for a person.
    public var reason: String
    /// What kind of refusal it is; the protocol answers each with its own error code.
    public var kind: Kind

    public enum Kind: Sendable, Equatable {
        /// The value is wrong (-32602).
        case invalid
        /// A named thing does not exist, such as a named job (-32002).
        case notFound
        /// The queue limit (`limits.maxQueuedJobs`) is reached; nothing was accepted (-32004).
        case overloaded
        /// The engine is stopping and takes no new work (-32005).
        case shuttingDown
    }

    public init(path: String, _ reason: String, notFound: Bool = false) {
        self.init(path: path, reason, kind: notFound ? .notFound : .invalid)
    }

    public init(path: String, _ reason: String, kind: Kind) {
        self.path = path
        self.reason = reason
        self.kind = kind
    }

    /// True when a named thing does not exist (a named job).
    public var isNotFound: Bool { kind == .notFound }

    public var description: String { path.isEmpty ? reason : "\(path): \(reason)" }

    /// The same error seen from a parent document (`job` + `steps[0].url`).
    public func prefixed(with prefix: String) -> ValidationError {
        var copy = self
        copy.path = FieldReader.join(prefix, path)
        return copy
    }
}
