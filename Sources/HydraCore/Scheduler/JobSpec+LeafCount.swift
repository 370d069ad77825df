extension JobSpec {
    /// Leaves in this spec (named jobs counted by their loaded graph).
    var leafCount: Int {
        switch body {
        case .remote, .resource, .local: return 1
        case .serial(let g), .concurrent(let g): return g.steps.reduce(0) { $0 + $1.leafCount }
        case .named(let n): return n.resolved?.leafCount ?? 0
        }
    }

    /// Whether the step at `path` (dot-separated step indexes below this spec)
    /// is a leaf; false when there is no such step.
    func isLeaf(at path: Substring) -> Bool {
        var spec = self.loaded
        for part in path.split(separator: ".") {
            switch spec.body {
            case .serial(let group), .concurrent(let group):
                guard let i = Int(part), group.steps.indices.contains(i) else { return false }
                spec = group.steps[i].loaded
            default:
                return false
            }
        }
        return spec.kind != nil
    }

    /// A named job's loaded graph (the last one's, when a job's file names
    /// another job); any other spec as it is.
    private var loaded: JobSpec {
        var spec = self
        while case .named(let named) = spec.body, let resolved = named.resolved { spec = resolved }
        return spec
    }
}
