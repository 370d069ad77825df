/// Refuses at submit the `${…}` references that can never resolve (protocol
/// §4 References): bad syntax, an unknown root, `prev` where no step comes
/// before, a step id the graph does not have.
///
/// Why at submit: such a reference would otherwise fail its step only when
/// the graph reaches it, after earlier steps ran (and maybe changed things on
/// remote servers) for nothing. What only the run can tell (a path missing
/// from a result, an unset shared key) still fails the step, kind `invalid`.
enum ReferenceCheck {
    /// Checks every string of `spec` and of the named jobs it loaded.
    static func validate(_ spec: JobSpec, path: String) throws(ValidationError) {
        // Most submitted jobs are single leaves without references: one scan, nothing built.
        if spec.kind != nil && !spec.ownStringsHaveReferences { return }
        var ids: Set<String> = []
        collectIDs(spec, into: &ids)
        try check(spec, path: path, scope: Scope(ids: ids, previous: false))
    }

    /// What a step's references may name.
    private struct Scope {
        /// Step ids of the graph the step belongs to.
        let ids: Set<String>
        /// Whether a serial step comes before it (`prev`).
        let previous: Bool
    }

    /// Ids of a graph's steps; a named job's steps belong to a graph of their own.
    private static func collectIDs(_ spec: JobSpec, into ids: inout Set<String>) {
        if let id = spec.id { ids.insert(id) }
        switch spec.body {
        case .serial(let group), .concurrent(let group):
            for step in group.steps { collectIDs(step, into: &ids) }
        default:
            break
        }
    }

    private static func check(_ spec: JobSpec, path: String, scope: Scope) throws(ValidationError) {
        if spec.kind != nil && !spec.ownStringsHaveReferences { return }
        if let worker = spec.worker { try check(worker, path: FieldReader.join(path, "worker"), scope: scope) }
        switch spec.body {
        case .remote(let r):
            try checkRemote(r, path: path, scope: scope)
        case .resource(let res):
            try checkRemote(res.request, path: path, scope: scope)
        case .local(let l):
            try check(l.name, path: FieldReader.join(path, "name"), scope: scope)
            try check(l.input, path: FieldReader.join(path, "input"), scope: scope)
        case .serial(let group):
            for (i, step) in group.steps.enumerated() {
                try check(step, path: FieldReader.join(path, "steps[\(i)]"),
                          scope: Scope(ids: scope.ids, previous: i > 0 || scope.previous))
            }
        case .concurrent(let group):
            for (i, step) in group.steps.enumerated() {
                try check(step, path: FieldReader.join(path, "steps[\(i)]"), scope: scope)
            }
        case .named(let named):
            // Its input is resolved where the job stands; its steps see only its own graph.
            if let input = named.input { try check(input, path: FieldReader.join(path, "input"), scope: scope) }
            if let loaded = named.resolved { try validate(loaded, path: "jobs/\(named.name).json") }
        }
    }

    /// The references in a remote request's fields (of a `remote` or a `resource` job).
    private static func checkRemote(_ r: RemoteSpec, path: String, scope: Scope) throws(ValidationError) {
        let texts: [(String, String?)] = [("method", r.method), ("url", r.url), ("server", r.server),
                                          ("endpoint", r.endpoint), ("api", r.api), ("dogma", r.dogma),
                                          ("saveAs", r.saveAs), ("bodyFile", r.bodyFile), ("auth", r.auth)]
        for case let (key, text?) in texts { try check(text, path: FieldReader.join(path, key), scope: scope) }
        for (key, map) in [("pathVars", r.pathVars), ("query", r.query), ("headers", r.headers)] {
            for (name, value) in map {
                try check(value, path: FieldReader.join(FieldReader.join(path, key), name), scope: scope)
            }
        }
        if let body = r.body { try check(body, path: FieldReader.join(path, "body"), scope: scope) }
    }

    private static func check(_ value: JSONValue, path: String, scope: Scope) throws(ValidationError) {
        switch value {
        case .string(let s): try check(s, path: path, scope: scope)
        case .array(let items):
            for (i, item) in items.enumerated() { try check(item, path: path + "[\(i)]", scope: scope) }
        case .object(let members):
            for (key, item) in members { try check(item, path: FieldReader.join(path, key), scope: scope) }
        default: break
        }
    }

    private static func check(_ text: String, path: String, scope: Scope) throws(ValidationError) {
        guard Template.containsReference(text) else { return }
        var rest = text[...]
        while let open = rest.range(of: "${") {
            guard let close = rest[open.upperBound...].firstIndex(of: "}") else {
                throw ValidationError(path: path, "reference ${\(rest[open.upperBound...]) has no closing '}'")
            }
            let expression = rest[open.upperBound..<close]
            if let reason = problem(with: expression, scope: scope) {
                throw ValidationError(path: path, "reference ${\(expression)} can never resolve: \(reason)")
            }
            rest = rest[rest.index(after: close)...]
        }
    }

    /// Why `expression` can never resolve, or nil when it may.
    private static func problem(with expression: Substring, scope: Scope) -> String? {
        let parts = expression.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        let rest = parts.count > 1 ? parts[1] : ""
        switch parts[0] {
        case "prev":
            return scope.previous ? nil : "no earlier step in a serial group (prev is for serial steps after the first)"
        case "steps":
            let id = rest.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)[0]
            if id.isEmpty { return "missing step id (steps.ID.PATH)" }
            return scope.ids.contains(String(id)) ? nil : "the graph has no step with id '\(id)'"
        case "input": return nil
        case "shared": return rest.isEmpty ? "missing key (shared.KEY)" : nil
        case "env": return rest.isEmpty ? "missing name (env.NAME)" : nil
        default: return "unknown root '\(parts[0])' (expected prev, steps, input, shared or env)"
        }
    }
}
