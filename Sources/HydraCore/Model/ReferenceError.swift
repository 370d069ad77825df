import Foundation
import OrderedCollections

/// A reference that names nothing (`${steps.login.body.token}` before `login`
/// finished, a missing path, an environment variable not in `allowEnv`).
public struct ReferenceError: Error, Sendable, CustomStringConvertible {
    public var reference: String
    public var reason: String
    /// True when the reference resolved but its value would pass the size
    /// budget (`limits.maxResultBytes`): kind `tooLarge`, not `invalid`.
    public var tooLarge = false
    public var description: String {
        tooLarge ? "reference ${\(reference)}: \(reason)" : "unresolved reference ${\(reference)}: \(reason)"
    }
}
