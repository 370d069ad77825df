import HydraLoop

/// A leaf node in flight, as workers carry it: they hand it back with their
/// reports (so the coordinator needs no token table) and never read through it.
/// Only the coordinator's loop thread touches the node; the wrapper is
/// `@unchecked Sendable` for that reason alone.
struct StepReference: @unchecked Sendable {
    let node: GraphNode
}
