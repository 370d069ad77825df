extension JobSpec {
    /// Leaves in this spec (named jobs counted by their loaded graph).
    var leafCount: Int {
        switch body {
        case .remote, .resource, .local: return 1
        case .serial(let g), .concurrent(let g): return g.steps.reduce(0) { $0 + $1.leafCount }
        case .named(let n): return n.resolved?.leafCount ?? 0
        }
    }
}
