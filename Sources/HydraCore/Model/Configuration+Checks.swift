/// A configuration built in Swift gets the checks a file gets: an embedding
/// program's typo (a worker with `maxActive` 0 runs nothing, a negative dummy
/// delay traps a loop, two workers of one name, the repository in the state
/// folder itself) is refused with the key's path when the engine starts.
extension Configuration {
    /// The ranges of the configuration's numbers, for a file's decoding and a
    /// configuration built in Swift alike (the spec-like defaults share
    /// ``SpecBounds``).
    public enum Bounds {
        /// A worker's `maxConnections`, `maxHostConnections` and `maxActive`.
        public static let workerLimit = 1...Worker.maxLimit
        /// A worker's `threads`.
        public static let threads = 1...256
        /// A dummy response's `status`.
        public static let status = 100...599
        /// `dummy.responses[].delayMs`, `state.minFreeBytes`, `resources.memoryBytes`, `retention.hours`.
        public static let nonNegative = 0...Int.max
        /// A dummy response's delay: at most 10 minutes (a longer one is a typo, and every job it answers would wait it).
        public static let dummyDelayMs = 0...600_000
        /// `resources.maxBytes`, `defaults.maxBodyBytes`, `limits.maxQueuedJobs`.
        public static let positive = 1...Int.max
        /// `resources.purgeIntervalSec` (at most a year: the timer counts milliseconds in 64 bits).
        public static let purgeIntervalSec = 1...31_536_000
        /// `limits.maxResultBytes`.
        public static let maxResultBytes = 1024...Int.max
    }

    /// Checks what decoding a file checks, for a configuration built (or
    /// changed) in Swift, and fills what decoding fills (an api's server from
    /// `defaults.server`). The `rpc` section is the server's, read from its file.
    public mutating func check() throws(ValidationError) {
        try Configuration.checkPlainText(state.path, path: "state.path")
        if state.path.isEmpty { throw ValidationError(path: "state.path", "must not be empty (a folder; \".\" for the current one)") }
        try SpecBounds.check(state.minFreeBytes, Bounds.nonNegative, "state.minFreeBytes")
        guard !workers.isEmpty else { throw ValidationError(path: "workers", "at least one worker is required") }
        var names: Set<String> = []
        for (i, worker) in workers.enumerated() {
            try worker.check(path: "workers[\(i)]")
            guard names.insert(worker.name).inserted else {
                throw ValidationError(path: "workers[\(i)].name", "duplicate worker '\(worker.name)'")
            }
        }
        try SpecBounds.check(defaults.timeoutMs, SpecBounds.timeoutMs, "defaults.timeoutMs")
        try SpecBounds.check(defaults.maxBodyBytes, Bounds.positive, "defaults.maxBodyBytes")
        try SpecBounds.check(defaults.connectTimeoutMs, SpecBounds.timeoutMs, "defaults.connectTimeoutMs")
        try SpecBounds.check(defaults.maxRedirects, SpecBounds.maxRedirects, "defaults.maxRedirects")
        try defaults.retry.checkValues(path: "defaults.retry")
        try HeaderSyntax.check(defaults.headers, path: "defaults.headers")
        for (key, server) in servers {
            _ = try Configuration.checkBaseURL(server.url, path: "servers.\(key).url")
            try HeaderSyntax.check(server.headers, path: "servers.\(key).headers")
        }
        for (key, api) in apis { try api.check(path: "apis.\(key)") }
        guard dummy.responses.count <= Dummy.maxResponses else {
            throw ValidationError(path: "dummy.responses", "at most \(Dummy.maxResponses) dummy responses (each request is matched against them in turn)")
        }
        for (i, response) in dummy.responses.enumerated() { try response.check(path: "dummy.responses[\(i)]") }
        resources.path = try Resources.folder(resources.path, at: "resources.path")
        try SpecBounds.check(resources.memoryBytes, Bounds.nonNegative, "resources.memoryBytes")
        try SpecBounds.check(resources.maxBytes, Bounds.positive, "resources.maxBytes")
        try SpecBounds.check(resources.maxAgeSec, SpecBounds.lifetimeSec, "resources.maxAgeSec")
        try SpecBounds.check(resources.purgeIntervalSec, Bounds.purgeIntervalSec, "resources.purgeIntervalSec")
        if jobsPath.isEmpty { throw ValidationError(path: "jobs.path", "must not be empty (a folder)") }
        try Configuration.checkPlainText(jobsPath, path: "jobs.path")
        try SpecBounds.check(maxQueuedJobs, Bounds.positive, "limits.maxQueuedJobs")
        try SpecBounds.check(maxResultBytes, Bounds.maxResultBytes, "limits.maxResultBytes")
        try SpecBounds.check(retentionHours, Bounds.nonNegative, "retention.hours")
        try checkAllowEnv(allowEnv)
        try checkReferences()
    }
}

extension Configuration.Worker {
    /// A worker's name: not empty, and no control characters (names reach
    /// logs, events and terminals, where they would be escape sequences).
    static func checkName(_ name: String, path: String) throws(ValidationError) {
        guard !name.isEmpty else { throw ValidationError(path: path, "must not be empty") }
        try Configuration.checkPlainText(name, path: path)
    }

    /// A worker's name and numbers, as the file's `workers[i]` is checked.
    func check(path: String) throws(ValidationError) {
        try Self.checkName(name, path: path + ".name")
        try SpecBounds.check(maxConnections, Configuration.Bounds.workerLimit, path + ".maxConnections")
        try SpecBounds.check(maxHostConnections, Configuration.Bounds.workerLimit, path + ".maxHostConnections")
        try SpecBounds.check(maxActive, Configuration.Bounds.workerLimit, path + ".maxActive")
        try SpecBounds.check(threads, Configuration.Bounds.threads, path + ".threads")
    }
}

extension Configuration.API {
    /// An api built in Swift, as the file's `apis.KEY` is checked.
    func check(path: String) throws(ValidationError) {
        guard RemoteSpec.isValidMethod(method) else { throw ValidationError(path: path + ".method", "invalid method '\(method)'") }
        try Configuration.checkEndpoint(endpoint, path: path + ".endpoint")
        try HeaderSyntax.check(headers, path: path + ".headers")
        try SpecBounds.check(timeoutMs, SpecBounds.timeoutMs, path + ".timeoutMs")
        try SpecBounds.check(staleIfErrorSec, SpecBounds.staleIfErrorSec, path + ".staleIfErrorSec")
        try SpecBounds.check(cacheTTL, SpecBounds.lifetimeSec, path + ".cacheTTL")
        try retry?.checkValues(path: path + ".retry")
    }
}

extension Configuration.DummyResponse {
    /// A dummy response built in Swift (`dummy.responses[i]` of a file is checked as it is read).
    func check(path: String) throws(ValidationError) {
        if let method, !RemoteSpec.isValidMethod(method) {
            throw ValidationError(path: path + ".method", "invalid method '\(method)'")
        }
        try SpecBounds.check(status, Configuration.Bounds.status, path + ".status")
        try Configuration.checkEndpoint(endpoint, path: path + ".endpoint")
        try SpecBounds.check(delayMs, Configuration.Bounds.dummyDelayMs, path + ".delayMs")
    }
}
