import Synchronization

/// A flag one thread sets and others read.
final class CancellationFlag: Sendable {
    /// A flag nobody sets, for jobs that cannot be cancelled midway.
    static let never = CancellationFlag()
    private let flag = Atomic<Bool>(false)
    func set() { flag.store(true, ordering: .releasing) }
    var isSet: Bool { flag.load(ordering: .acquiring) }
}
