import Foundation
import OrderedCollections

/// How many bytes the values references bring into one step may add up to.
///
/// Checked while references resolve, before anything is copied: a serial
/// graph whose every step echoes `["${prev}","${prev}"]` doubles its result
/// at each step, and must stop at the limit instead of at the machine's
/// memory. One budget spans every string of the step being resolved.
public final class ReferenceBudget {
    public let limit: Int
    public private(set) var remaining: Int

    public init(limit: Int) {
        self.limit = limit
        remaining = limit
    }

    /// Takes `value`'s encoded size from the budget, or throws when it does not fit.
    func charge(_ value: JSONValue, for reference: String) throws(ReferenceError) {
        guard let size = value.encodedSize(limit: remaining) else { throw exceeded(reference) }
        remaining -= size
    }

    func exceeded(_ reference: String) -> ReferenceError {
        var error = ReferenceError(reference: reference, reason: "the values referenced are larger than limits.maxResultBytes (\(limit) bytes)")
        error.tooLarge = true
        return error
    }
}
