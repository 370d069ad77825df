/// The final states of protocol §5, plus the live ones.
public enum JobState: String, Sendable, CaseIterable {
    case queued, running, succeeded, failed, cancelled

    public var isFinal: Bool { self == .succeeded || self == .failed || self == .cancelled }
}
