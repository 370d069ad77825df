import Synchronization

/// Tells a copy being replaced from a corrupt one. A new copy is renamed over
/// the old file before its index entry is committed: in between, a reader
/// holding the old entry finds a file that does not match it. Dropping that
/// "corrupt" copy deleted the new one. Every replacement is counted from just
/// before its rename until its entry is committed (or it gave up); a reader
/// drops a mismatching copy only when no replacement was under way when it
/// looked the entry up and none began since. Otherwise it fetches, and the
/// fetch puts a good copy in place either way. Thread-safe.
final class ReplacementWatch: Sendable {
    private let underWay = Atomic<Int>(0)
    private let begun = Atomic<Int>(0)

    /// What a reader notes before it looks an entry up.
    struct Mark {
        fileprivate let underWay: Int
        fileprivate let begun: Int
    }

    func mark() -> Mark {
        // `begun` first: a replacement that begins between the two reads shows in `underWay`.
        let begun = begun.load(ordering: .acquiring)
        return Mark(underWay: underWay.load(ordering: .acquiring), begun: begun)
    }

    /// Whether a replacement could have changed a file since `mark`.
    func mayHaveReplaced(since mark: Mark) -> Bool {
        mark.underWay > 0 || begun.load(ordering: .acquiring) != mark.begun
    }

    /// Before a copy's file is renamed into place.
    func begin() {
        underWay.add(1, ordering: .acquiringAndReleasing)
        begun.add(1, ordering: .acquiringAndReleasing)
    }

    /// Once its index entry is committed, or it failed: exactly once per ``begin()``.
    func end() {
        underWay.subtract(1, ordering: .acquiringAndReleasing)
    }
}
