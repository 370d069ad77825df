import OrderedCollections

/// The kind of work a worker serves.
public enum JobKind: String, Sendable, Hashable, CaseIterable {
    case remote, local

    /// A dense index (0..<allCases.count) for table lookups.
    var index: Int {
        switch self {
        case .remote: return 0
        case .local: return 1
        }
    }
}
