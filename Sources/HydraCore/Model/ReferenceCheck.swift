/// Refuses at submit the `${…}` references that can never resolve (protocol
/// §4 References): bad syntax, an unknown root, `prev` where no step comes
/// before, a step id the graph does not have, a step that cannot have ended
/// when the referring step starts (itself, a group it is in, a later step of
/// a serial group around it), an environment variable not in `allowEnv`.
///
/// Why at submit: such a reference would otherwise fail its step only when
/// the graph reaches it, after earlier steps ran (and maybe changed things on
/// remote servers) for nothing. What only the run can tell (a path missing
/// from a result, a step that failed, an unset shared key or variable) still
/// fails the step, kind `invalid`.
enum ReferenceCheck {
    /// Checks every string of `spec` and of the named jobs it loaded.
    /// `allowEnv`: the names `${env.NAME}` may read (nil: not checked here).
    /// Returns true for a leaf none of whose own strings holds a reference.
    @discardableResult
    static func validate(_ spec: JobSpec, path: String, allowEnv: Set<String>? = nil) throws(ValidationError) -> Bool {
        // Most submitted jobs are single leaves without references: one scan, nothing built.
        if spec.kind != nil && !spec.ownStringsHaveReferences { return true }
        var places: [String: [Int]] = [:]
        var trail: [Int] = []
        collectIDs(spec, trail: &trail, into: &places)
        try check(spec, path: path, scope: Scope(places: places, allowEnv: allowEnv, previous: false, trail: [], serial: []))
        return false
    }

    /// What a step's references may name, and where the step stands.
    private struct Scope {
        /// Where each step id of the graph stands: its step indexes from the root.
        let places: [String: [Int]]
        let allowEnv: Set<String>?
        /// Whether a serial step comes before it (`prev`).
        let previous: Bool
        /// The step's indexes from the root, and whether each group on the way is serial.
        var trail: [Int]
        var serial: [Bool]

        /// The scope of step `i` of the group this scope stands at.
        func step(_ i: Int, ofSerial isSerial: Bool) -> Scope {
            // A serial step after the first has a previous step; the first has none,
            // however deep; a concurrent group's steps take their group's place.
            Scope(places: places, allowEnv: allowEnv, previous: isSerial ? i > 0 : previous,
                  trail: trail + [i], serial: serial + [isSerial])
        }

        /// Why the step with id `id` (at `place`) has surely not ended when this one starts, or nil.
        func neverEnded(_ id: Substring, at place: [Int]) -> String? {
            var k = 0
            while k < trail.count && k < place.count && trail[k] == place[k] { k += 1 }
            if k == place.count {
                return place.count == trail.count ? "a step cannot use its own result"
                    : "step '\(id)' is a group this step is in: it ends after it"
            }
            // A group's own field naming a step inside it: leaves may inherit it, so it may resolve.
            if k == trail.count { return nil }
            if serial[k] && place[k] > trail[k] { return "step '\(id)' comes later in a serial group: it has not run yet" }
            return nil
        }
    }

    /// Where each step id of a graph stands; a named job's steps belong to a graph of their own.
    private static func collectIDs(_ spec: JobSpec, trail: inout [Int], into places: inout [String: [Int]]) {
        if let id = spec.id { places[id] = trail }
        switch spec.body {
        case .serial(let group), .concurrent(let group):
            for (i, step) in group.steps.enumerated() {
                trail.append(i)
                collectIDs(step, trail: &trail, into: &places)
                trail.removeLast()
            }
        default:
            break
        }
    }

    private static func check(_ spec: JobSpec, path: String, scope: Scope) throws(ValidationError) {
        if spec.kind != nil && !spec.ownStringsHaveReferences { return }
        if let worker = spec.worker { try check(worker, path: FieldReader.join(path, "worker"), scope: scope) }
        // A leaf decoded when it runs: every string of it, the fields left out of the typed spec too.
        if let json = spec.deferredJSON { try check(json, path: path, scope: scope) }
        switch spec.body {
        case .remote(let r):
            try checkRemote(r, path: path, scope: scope)
        case .resource(let res):
            try checkRemote(res.request, path: path, scope: scope)
        case .local(let l):
            try check(l.name, path: FieldReader.join(path, "name"), scope: scope)
            try check(l.input, path: FieldReader.join(path, "input"), scope: scope)
        case .serial(let group):
            for (i, step) in group.steps.enumerated() where step.kind == nil || step.ownStringsHaveReferences {
                try check(step, path: FieldReader.join(path, "steps[\(i)]"), scope: scope.step(i, ofSerial: true))
            }
        case .concurrent(let group):
            for (i, step) in group.steps.enumerated() where step.kind == nil || step.ownStringsHaveReferences {
                try check(step, path: FieldReader.join(path, "steps[\(i)]"), scope: scope.step(i, ofSerial: false))
            }
        case .named(let named):
            // Its input is resolved where the job stands; its steps see only its own graph.
            if let input = named.input { try check(input, path: FieldReader.join(path, "input"), scope: scope) }
            if let loaded = named.resolved {
                do {
                    try validate(loaded, path: "", allowEnv: scope.allowEnv)
                } catch {
                    throw error.inNamedJob(named.name, at: FieldReader.join(path, "name"))
                }
            }
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
        // A PATH with an empty name (`input..a`, `prev.body.`) names nothing a value has.
        func emptyName(_ path: Substring, given: Bool) -> String? {
            guard given, path.split(separator: ".", omittingEmptySubsequences: false).contains(where: \.isEmpty) else { return nil }
            return "an empty name in the path '\(path)'"
        }
        switch parts[0] {
        case "prev":
            guard scope.previous else { return "no earlier step in a serial group (prev is for serial steps after the first)" }
            return emptyName(rest, given: parts.count > 1)
        case "steps":
            let idAndPath = rest.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
            let id = idAndPath[0]
            if id.isEmpty { return "missing step id (steps.ID.PATH)" }
            guard let place = scope.places[String(id)] else { return "the graph has no step with id '\(id)'" }
            return scope.neverEnded(id, at: place) ?? emptyName(idAndPath.count > 1 ? idAndPath[1] : "", given: idAndPath.count > 1)
        case "input": return emptyName(rest, given: parts.count > 1)
        case "shared": return rest.isEmpty ? "missing key (shared.KEY)" : nil
        case "env":
            if rest.isEmpty { return "missing name (env.NAME)" }
            if let allowed = scope.allowEnv, !allowed.contains(String(rest)) { return "'\(rest)' is not listed in allowEnv" }
            return nil
        default: return "unknown root '\(parts[0])' (expected prev, steps, input, shared or env)"
        }
    }
}
