/// Why a spec, a configuration value or a submission is refused, named by its
/// path (`steps[2].url: expected string`).
public struct ValidationError: Error, Sendable, CustomStringConvertible {
    /// Where the problem is: dot-separated keys and `[index]` (empty for the whole document).
    public var path: String
    /// What is wrong, for a person: `expected string` for a value of the wrong type.
    public var reason: String
    /// What was found instead, when that helps (`got number` for a value of
    /// the wrong type); nil otherwise. Kept apart from `reason` so the
    /// protocol's message stays exactly `PATH: expected TYPE` (protocol §2)
    /// while `error.data.reason` and `description` still say what was sent.
    public var detail: String?
    /// What kind of refusal it is; the protocol answers each with its own error code.
    public var kind: Kind
    /// What is refused: a member's value (the default), a member itself (a key
    /// no reader takes, or one this kind of spec does not allow), or a member
    /// that is missing. A value given as a reference may be checked later
    /// (``JobSpec/deferredJSON``); a key never is.
    public var refuses = Refused.value

    public enum Refused: Sendable, Equatable { case value, key, absence }

    public enum Kind: Sendable, Equatable {
        /// The value is wrong (-32602).
        case invalid
        /// A named thing does not exist: a named job, a worker (-32002).
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

    /// A value of the wrong JSON type at `path`: `expected TYPE` as the
    /// reason, `got TYPE` (the type of `value`) as the detail.
    public init(path: String, expected type: String, got value: JSONValue) {
        self.init(path: path, "expected \(type)", kind: .invalid)
        detail = "got \(value.typeName)"
    }

    /// This refusal, of a member itself (see ``refuses``).
    func refusingKey() -> ValidationError {
        var copy = self
        copy.refuses = .key
        return copy
    }

    /// This refusal, of a missing member (see ``refuses``).
    func refusingAbsence() -> ValidationError {
        var copy = self
        copy.refuses = .absence
        return copy
    }

    /// True when a named thing does not exist (a named job, a worker).
    public var isNotFound: Bool { kind == .notFound }

    /// `reason`, then `detail` when there is one: `expected string, got number`.
    public var fullReason: String { detail.map { "\(reason), \($0)" } ?? reason }

    /// `PATH: REASON` without the detail (`job.url: expected string`): the
    /// protocol's error message (protocol §2).
    public var message: String { path.isEmpty ? reason : "\(path): \(reason)" }

    /// `PATH: REASON, DETAIL` (`steps[1].url: expected string, got number`):
    /// for people, as `hydra run` prints it.
    public var description: String { path.isEmpty ? fullReason : "\(path): \(fullReason)" }

    /// The same error seen from a parent document (`job` + `steps[0].url`).
    public func prefixed(with prefix: String) -> ValidationError {
        var copy = self
        copy.path = FieldReader.join(prefix, path)
        return copy
    }
}

extension ValidationError {
    /// A refusal inside the graph of the named job `name`, as the submitted
    /// spec sees it: at that spec's `name` field (`path`), the reason saying
    /// where in the job's file (`jobs folder: login.json: steps[1].url: …`).
    func inNamedJob(_ name: String, at path: String) -> ValidationError {
        var named = self
        named.reason = "jobs folder: \(name).json: " + (self.path.isEmpty ? "" : self.path + ": ") + reason
        named.path = path
        return named
    }
}

extension ValidationError: Equatable {
    /// The same refusal as people and the protocol see it (``refuses`` aside).
    public static func == (a: ValidationError, b: ValidationError) -> Bool {
        a.path == b.path && a.reason == b.reason && a.detail == b.detail && a.kind == b.kind
    }
}

extension ValidationError {
    /// `text` as a refusal quotes it: the first 100 characters (a value can be
    /// as long as a message may be; the reason need not repeat it all).
    public static func clip(_ text: String) -> String {
        text.count <= 100 ? text : String(text.prefix(100)) + "…"
    }
}
