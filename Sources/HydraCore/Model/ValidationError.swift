/// A spec or configuration value that is not acceptable, named by its path
/// (`steps[2].url: expected string`).
public struct ValidationError: Error, Sendable, CustomStringConvertible, Equatable {
    /// Where the problem is: dot-separated keys and `[index]` (empty for the whole document).
    public var path: String
    /// What is wrong, for a person.
    public var reason: String
    /// True when the error is "a named thing does not exist" (a named job), which
    /// the protocol reports as not-found rather than invalid.
    public var isNotFound: Bool

    public init(path: String, _ reason: String, notFound: Bool = false) {
        self.path = path
        self.reason = reason
        self.isNotFound = notFound
    }

    public var description: String { path.isEmpty ? reason : "\(path): \(reason)" }

    /// The same error seen from a parent document (`job` + `steps[0].url`).
    public func prefixed(with prefix: String) -> ValidationError {
        var copy = self
        copy.path = FieldReader.join(prefix, path)
        return copy
    }
}
