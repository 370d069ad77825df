import Foundation
import HydraLoop
import OrderedCollections

extension JobSpec {
    /// Decodes a spec, checking every field; errors name the field by path
    /// relative to `path` (`steps[2].url: expected string`). Unknown keys are refused.
    ///
    /// A remote, resource or local step may hold `${…}` references in fields
    /// that are not free text (a number, a choice, a digest: `"maxAgeSec":
    /// "${input.age}"`): those fields are checked once resolved, when the step
    /// runs (protocol §4: any string of a step may be a reference). The rest
    /// is checked here. A group's own fields and a named job's are not deferred.
    public init(json: JSONValue, path: String = "") throws(ValidationError) {
        do {
            try self.init(checking: json, path: path)
        } catch {
            self = try JobSpec.deferringReferences(in: json, path: path, firstError: error)
        }
    }

    /// A leaf whose refusal comes from fields holding references: decoded
    /// without those fields (each refusal of a value that is exactly one
    /// reference takes that member out, then the rest is checked again; a
    /// member then reported missing takes out the object it belongs to),
    /// keeping its JSON to be decoded in full once resolved. Throws the first
    /// refusal that is not one of those (an unknown key never is).
    private static func deferringReferences(in json: JSONValue, path: String,
                                            firstError: ValidationError) throws(ValidationError) -> JobSpec {
        guard case .object(var members) = json, case .string(let type)? = members["type"],
              ["remote", "resource", "local"].contains(type) else { throw firstError }
        var error = firstError
        var removed: Set<String> = []
        while error.kind == .invalid {
            switch error.refuses {
            case .value:
                guard JobSpec.removeMember(at: error.path, under: path, from: &members, onlyAReference: true) else { throw error }
            case .absence:
                // A required member taken out above (`repeat.everyMs`): the object around it waits too.
                guard removed.contains(error.path), let dot = error.path.lastIndex(of: "."),
                      JobSpec.removeMember(at: String(error.path[..<dot]), under: path, from: &members, onlyAReference: false)
                else { throw error }
            case .key:
                throw error
            }
            removed.insert(error.path)
            do {
                var spec = try JobSpec(checking: .object(members), path: path)
                spec.deferredJSON = json
                return spec
            } catch let next {
                error = next
            }
        }
        throw error
    }

    /// Takes out of `members` the member that `errorPath` (below `base`) points
    /// into. `onlyAReference`: only when the value there is exactly one
    /// reference (whose value, of any JSON type, only the run knows; text
    /// around a reference is checked here). An array is taken out whole.
    /// `type` and `id` are never taken out (the graph is built from them at submit).
    private static func removeMember(at errorPath: String, under base: String,
                                     from members: inout OrderedDictionary<String, JSONValue>, onlyAReference: Bool) -> Bool {
        var rest = Substring(errorPath)
        if !base.isEmpty {
            guard rest.hasPrefix(base + ".") else { return false }
            rest = rest.dropFirst(base.count + 1)
        }
        // `cache.mode` → keys [cache, mode]; `expect[0]` → keys [expect], then index 0.
        let keyPart = rest.firstIndex(of: "[").map { rest[..<$0] } ?? rest
        let keys = keyPart.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard let first = keys.first, first != "type", first != "id" else { return false }
        if onlyAReference {
            var value: JSONValue? = .object(members)
            for key in keys { value = value?[key] }
            var indexes = rest[keyPart.endIndex...]
            while indexes.hasPrefix("["), let close = indexes.firstIndex(of: "]"),
                  let i = Int(indexes[indexes.index(after: indexes.startIndex)..<close]) {
                value = value?[i]
                indexes = indexes[indexes.index(after: close)...]
            }
            guard indexes.isEmpty || indexes.hasPrefix("."), case .string(let text)? = value, Template.isWholeReference(text)
            else { return false }
        }
        func remove(_ keys: ArraySlice<String>, from object: inout OrderedDictionary<String, JSONValue>) -> Bool {
            guard let key = keys.first, let inner = object[key] else { return false }
            if keys.count > 1, case .object(var nested) = inner {
                guard remove(keys.dropFirst(), from: &nested) else { return false }
                object[key] = .object(nested)
                return true
            }
            object.removeValue(forKey: key)
            return true
        }
        return remove(keys[...], from: &members)
    }

    /// Decodes and checks every field, references included as they are (never
    /// deferred: what a deferred leaf is decoded with once resolved, where a
    /// `${` in the values is text from a result, not a reference).
    init(checking json: JSONValue, path: String) throws(ValidationError) {
        var r = try FieldReader(json, path: path)
        let type = try r.requiredString("type")
        let id = try r.string("id")
        if let id, id.isEmpty || id.contains(".") {
            throw ValidationError(path: r.path("id"), "must be a non-empty name without '.'")
        }
        let worker = try r.string("worker")
        let timeoutMs = try r.int("timeoutMs", in: SpecBounds.timeoutMs)
        _ = r.value("description")  // free text, allowed on every spec
        let body: Body
        switch type {
        case "remote": body = .remote(try RemoteSpec(reader: &r))
        case "resource": body = .resource(try ResourceSpec(reader: &r))
        case "local":
            body = .local(LocalSpec(name: try r.requiredString("name"), input: r.value("input") ?? .null))
        case "serial", "concurrent":
            guard let items = try r.array("steps") else { throw r.missing("steps") }
            let stepsPath = r.path("steps")
            // A group of thousands is decoded in parts at once (the first error in step order is the one thrown).
            let steps = try ParallelWork.inParts(items.count) { (range) throws(ValidationError) -> [JobSpec] in
                var decoded: [JobSpec] = []
                decoded.reserveCapacity(range.count)
                for i in range { decoded.append(try JobSpec(json: items[i], path: stepsPath + "[\(i)]")) }
                return decoded
            }
            var seen: Set<String> = []
            try JobSpec.checkUniqueIDs(steps, path: stepsPath, seen: &seen)
            let stop = try r.bool("stopWhenFailed") ?? (type == "serial")
            if type == "serial" {
                body = .serial(GroupSpec(steps: steps, stopWhenFailed: stop))
            } else {
                let max = try r.int("maxConcurrency", in: SpecBounds.maxConcurrency)
                body = .concurrent(GroupSpec(steps: steps, stopWhenFailed: stop, maxConcurrency: max))
            }
        case "job":
            body = .named(NamedJobSpec(name: try r.requiredString("name"), input: r.value("input")))
        default:
            throw ValidationError(path: r.path("type"),
                                  "unknown type '\(type)' (expected remote, resource, local, serial, concurrent or job)")
        }
        try r.rejectUnknownKeys()
        self.init(id: id, worker: worker, timeoutMs: timeoutMs, body)
    }

    /// The spec as protocol JSON (what ``init(json:path:)`` reads back).
    public var json: JSONValue {
        if let deferredJSON { return deferredJSON }
        var o = OrderedDictionary<String, JSONValue>()
        o["type"] = .string(typeName)
        if let id { o["id"] = .string(id) }
        if let worker { o["worker"] = .string(worker) }
        if let timeoutMs { o["timeoutMs"] = .int(timeoutMs) }
        switch body {
        case .remote(let r): r.write(into: &o)
        case .resource(let res): res.write(into: &o)
        case .local(let l):
            o["name"] = .string(l.name)
            if !l.input.isNull { o["input"] = l.input }
        case .serial(let g), .concurrent(let g):
            o["stopWhenFailed"] = .bool(g.stopWhenFailed)
            if let m = g.maxConcurrency { o["maxConcurrency"] = .int(m) }
            o["steps"] = .array(g.steps.map(\.json))
        case .named(let n):
            o["name"] = .string(n.name)
            if let input = n.input { o["input"] = input }
        }
        return .object(o)
    }

    /// A short description for `job.queued` events with only the fixed
    /// credential headers masked (see ``summary(secretHeaders:)``).
    public var summary: JSONValue { summary(secretHeaders: []) }

    /// A short description for `job.queued` events: type and target, and a
    /// remote job's own `headers` with credential values (``CredentialHeaders``:
    /// the fixed names, `secretHeaders` — the configuration's api-key headers,
    /// lowercased — and names holding `api-key`/`apikey`/`token`) shown as
    /// `***` (rest.md §1). Never bodies or inputs, which may hold secrets.
    public func summary(secretHeaders: Set<String>) -> JSONValue {
        var o = OrderedDictionary<String, JSONValue>()
        o["type"] = .string(typeName)
        if let id { o["id"] = .string(id) }
        switch body {
        case .remote(let r):
            // An api job without its own method uses the api's: left to the api then.
            if let method = r.method ?? (r.api == nil ? "GET" : nil) { o["method"] = .string(method) }
            if let api = r.api { o["api"] = .string(api) }
            if let server = r.server { o["server"] = .string(server) }
            if let endpoint = r.endpoint { o["endpoint"] = .string(endpoint) }
            if let url = r.url { o["url"] = .string(RemoteSpec.redactingCredentials(url)) }
            if !r.headers.isEmpty { o["headers"] = CredentialHeaders.masked(r.headers, configured: secretHeaders) }
        case .resource(let res):
            let r = res.request
            if let api = r.api { o["api"] = .string(api) }
            if let server = r.server { o["server"] = .string(server) }
            if let endpoint = r.endpoint { o["endpoint"] = .string(endpoint) }
            if let url = r.url { o["url"] = .string(RemoteSpec.redactingCredentials(url)) }
            if !r.headers.isEmpty { o["headers"] = CredentialHeaders.masked(r.headers, configured: secretHeaders) }
            // A mode from a reference reads as the reference (its value is known when the step runs).
            o["mode"] = deferredJSON?["mode"] ?? .string(res.mode.rawValue)
        case .local(let l): o["name"] = .string(l.name)
        case .serial(let g), .concurrent(let g): o["steps"] = .int(g.steps.count)
        case .named(let n): o["name"] = .string(n.name)
        }
        return .object(o)
    }

    /// Whether any string in this spec (not its steps) holds a `${` reference.
    var ownStringsHaveReferences: Bool {
        if let worker, Template.containsReference(worker) { return true }
        switch body {
        case .remote(let r): return r.deferred != nil || r.hasReferences
        case .resource(let res): return res.request.deferred != nil || res.request.hasReferences
        case .local(let l): return l.deferred != nil || Template.containsReference(l.name) || Template.containsReference(l.input)
        case .named(let n): return n.input.map(Template.containsReference) ?? false
        case .serial, .concurrent: return false
        }
    }
}

extension RemoteSpec {
    init(reader r: inout FieldReader) throws(ValidationError) {
        // A method with a reference is checked once resolved (when the step runs).
        let method = try r.string("method").map { Template.containsReference($0) ? $0 : $0.uppercased() }
        self.init(method: method, url: try r.string("url"),
                  server: try r.string("server"), endpoint: try r.string("endpoint"), api: try r.string("api"))
        if let method, !Template.containsReference(method), !RemoteSpec.isValidMethod(method) {
            throw ValidationError(path: r.path("method"), "invalid method '\(method)'")
        }
        pathVars = try r.object("pathVars")?.members ?? [:]
        query = try r.object("query")?.members ?? [:]
        headers = try r.object("headers")?.members ?? [:]
        for (name, value) in headers {
            switch value {
            case .string(let text):
                // A reference's value is checked when the step runs; the literal text around it here.
                if !HeaderSyntax.isValidValue(text) {
                    throw ValidationError(path: r.path("headers") + ".\(name)", HeaderSyntax.valueProblem)
                }
            case .int, .double, .bool: break
            default: throw ValidationError(path: r.path("headers") + ".\(name)", expected: "string", got: value)
            }
            if !HeaderSyntax.isValidName(name) {
                throw ValidationError(path: r.path("headers") + ".\(name)", HeaderSyntax.nameProblem)
            }
        }
        body = r.value("body")
        if let encoding = try r.string("bodyEncoding") {
            guard let e = BodyEncoding(rawValue: encoding) else {
                throw ValidationError(path: r.path("bodyEncoding"), "expected one of json, form, text, base64, multipart")
            }
            bodyEncoding = e
        }
        dogma = try r.string("dogma")
        if let items = try r.array("expect") {
            var codes: [Int] = []
            for (i, item) in items.enumerated() {
                guard let code = item.intValue, (100...599).contains(code) else {
                    throw ValidationError(path: r.path("expect") + "[\(i)]", "expected an HTTP status code")
                }
                codes.append(code)
            }
            guard !codes.isEmpty else { throw ValidationError(path: r.path("expect"), "must not be empty") }
            expect = codes
        }
        if var retry = try r.object("retry") {
            self.retry = try RetryPolicy(reader: &retry)
        }
        if var c = try r.object("cache") {
            let modeText = try c.string("mode") ?? "use"
            guard let mode = CacheSpec.Mode(rawValue: modeText) else {
                throw ValidationError(path: c.path("mode"), "expected one of use, refresh, bypass, only")
            }
            let (ttl, fromHTTP) = try CacheSpec.lifetime(&c, "ttlSec")
            cache = CacheSpec(mode: mode, ttlSec: ttl, ttlFromHTTP: fromHTTP,
                              staleIfErrorSec: try c.int("staleIfErrorSec", in: SpecBounds.staleIfErrorSec))
            try c.rejectUnknownKeys()
        }
        saveAs = try r.string("saveAs")
        connectTimeoutMs = try r.int("connectTimeoutMs", in: SpecBounds.timeoutMs)
        maxRedirects = try r.int("maxRedirects", in: SpecBounds.maxRedirects)
        label = try r.string("label")
        coalesce = try r.bool("coalesce")
        auth = try r.string("auth")
        bodyFile = try r.string("bodyFile")
        contentMD5 = try r.bool("contentMD5")
        gzipBody = try r.bool("gzipBody")
        if bodyFile != nil && body != nil {
            throw ValidationError(path: r.path("bodyFile"), "give body or bodyFile, not both")
        }
        if bodyEncoding == .multipart {
            guard let body else { throw ValidationError(path: r.path("body"), "required for bodyEncoding multipart") }
            // Every part whose shape is literal is checked now; a reference takes its shape when the step runs.
            _ = try MultipartPart.partsKnownAtSubmit(of: body, path: r.path("body"))
        }
        if var polling = try r.object("repeat") {
            self.repeat = try RepeatSpec(reader: &polling)
        }

        let addressCount = [url != nil, api != nil, server != nil].filter { $0 }.count
        if addressCount > 1 || (url != nil && endpoint != nil) || (api != nil && endpoint != nil) {
            throw ValidationError(path: r.path("url"), "give exactly one address: url, server+endpoint, or api")
        }
        if server != nil && endpoint == nil {
            throw ValidationError(path: r.path("endpoint"), "required with server")
        }
        if addressCount == 0 && endpoint == nil {
            throw ValidationError(path: r.path("url"), "required (or server+endpoint, or api)")
        }
    }

    func write(into o: inout OrderedDictionary<String, JSONValue>) {
        if let method { o["method"] = .string(method) }
        if let url { o["url"] = .string(url) }
        if let server { o["server"] = .string(server) }
        if let endpoint { o["endpoint"] = .string(endpoint) }
        if let api { o["api"] = .string(api) }
        if !pathVars.isEmpty { o["pathVars"] = .object(pathVars) }
        if !query.isEmpty { o["query"] = .object(query) }
        if !headers.isEmpty { o["headers"] = .object(headers) }
        if let body { o["body"] = body }
        if let bodyEncoding { o["bodyEncoding"] = .string(bodyEncoding.rawValue) }
        if let dogma { o["dogma"] = .string(dogma) }
        if let expect { o["expect"] = .array(expect.map { .int($0) }) }
        if let retry { o["retry"] = retry.json }
        if let cache {
            var c: OrderedDictionary<String, JSONValue> = ["mode": .string(cache.mode.rawValue)]
            if let ttl = cache.ttlSec { c["ttlSec"] = .int(ttl) }
            if cache.ttlFromHTTP { c["ttlSec"] = "http" }
            if let stale = cache.staleIfErrorSec { c["staleIfErrorSec"] = .int(stale) }
            o["cache"] = .object(c)
        }
        if let saveAs { o["saveAs"] = .string(saveAs) }
        if let connectTimeoutMs { o["connectTimeoutMs"] = .int(connectTimeoutMs) }
        if let maxRedirects { o["maxRedirects"] = .int(maxRedirects) }
        if let label { o["label"] = .string(label) }
        if let coalesce { o["coalesce"] = .bool(coalesce) }
        if let auth { o["auth"] = .string(auth) }
        if let bodyFile { o["bodyFile"] = .string(bodyFile) }
        if let contentMD5 { o["contentMD5"] = .bool(contentMD5) }
        if let gzipBody { o["gzipBody"] = .bool(gzipBody) }
        if let polling = self.repeat { o["repeat"] = polling.json }
    }

    var hasReferences: Bool {
        func has(_ s: String?) -> Bool { s.map(Template.containsReference) ?? false }
        return has(url) || has(server) || has(endpoint) || has(api) || has(method) || has(saveAs) || has(dogma) || has(bodyFile) || has(auth)
            || pathVars.values.contains(where: Template.containsReference)
            || query.values.contains(where: Template.containsReference)
            || headers.values.contains(where: Template.containsReference)
            || (body.map(Template.containsReference) ?? false)
    }

    /// A URL with any `user:password@` part removed, for summaries, logs and results.
    public static func redactingCredentials(_ url: String) -> String {
        guard let userinfo = credentials(in: url) else { return url }
        return String(url[..<userinfo.startIndex]) + "***" + String(url[userinfo.endIndex...])
    }

    /// The `user:password` part of a URL's authority (before its `@`), or nil.
    public static func credentials(in url: String) -> Substring? {
        // Byte scan (no Foundation search): runs for every remote job's `job.queued` and result.
        let bytes = url.utf8
        // Most URLs have no `@`: found out over contiguous bytes (a walk of the
        // UTF-8 view costs ~30 instructions a byte, twice per remote job).
        let at = UInt8(ascii: "@")
        let hasAt = bytes.withContiguousStorageIfAvailable { b in b.baseAddress.map { memchr($0, Int32(at), b.count) != nil } ?? false }
        guard hasAt ?? bytes.contains(at) else { return nil }
        var authorityStart: String.Index?
        var i = bytes.startIndex
        while i < bytes.endIndex {
            if bytes[i] == UInt8(ascii: ":") {
                let rest = bytes[bytes.index(after: i)...]
                if rest.starts(with: "//".utf8) {
                    authorityStart = bytes.index(i, offsetBy: 3)
                    break
                }
            }
            i = bytes.index(after: i)
        }
        guard let start = authorityStart else { return nil }
        let end = bytes[start...].firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }
            ?? bytes.endIndex
        // The last `@` of the authority ends the credentials (a raw `@` in a password, as curl reads it).
        guard let at = bytes[start..<end].lastIndex(of: UInt8(ascii: "@")) else { return nil }
        return url[start..<at]
    }
}

extension RetryPolicy {
    /// Reads `{maxAttempts, backoffMs, maxBackoffMs}`, remembering which were given.
    public init(reader r: inout FieldReader) throws(ValidationError) {
        self.init(maxAttempts: try r.int("maxAttempts", in: SpecBounds.retryAttempts), backoffMs: try r.int("backoffMs", in: SpecBounds.backoffMs),
                  maxBackoffMs: try r.int("maxBackoffMs", in: SpecBounds.backoffMs))
        try r.rejectUnknownKeys()
    }

    /// The fields given, so a spec written back reads as it was.
    public var json: JSONValue {
        var o: OrderedDictionary<String, JSONValue> = [:]
        if given.contains(.maxAttempts) { o["maxAttempts"] = .int(maxAttempts) }
        if given.contains(.backoffMs) { o["backoffMs"] = .int(backoffMs) }
        if given.contains(.maxBackoffMs) { o["maxBackoffMs"] = .int(maxBackoffMs) }
        return .object(o)
    }
}

extension JobSpec {
    /// Step ids must be unique within a graph: nested groups share their
    /// graph's results (`${steps.ID}`), so every level is checked, not only
    /// siblings. A named job's steps are a graph of their own.
    fileprivate static func checkUniqueIDs(_ steps: [JobSpec], path: String,
                                           seen: inout Set<String>) throws(ValidationError) {
        // Paths are made only where needed (an error, a nested group): a 50,000-step group made one per step.
        for i in steps.indices {
            if let id = steps[i].id, !seen.insert(id).inserted {
                throw ValidationError(path: path + "[\(i)].id", "duplicate id '\(id)'")
            }
            switch steps[i].body {
            case .serial(let group), .concurrent(let group):
                try checkUniqueIDs(group.steps, path: path + "[\(i)].steps", seen: &seen)
            default:
                break
            }
        }
    }
}

extension RemoteSpec {
    /// An HTTP method token as Hydra accepts it: letters and `-`, upper case.
    /// Bytes, not characters: it runs for every request (on a worker's loop).
    public static func isValidMethod(_ method: String) -> Bool {
        // (Per job: a scan of contiguous bytes when the text has them.)
        func valid(_ b: UInt8) -> Bool { (b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z")) || b == UInt8(ascii: "-") }
        guard !method.isEmpty else { return false }
        return method.utf8.withContiguousStorageIfAvailable { $0.allSatisfy(valid) } ?? method.utf8.allSatisfy(valid)
    }
}
