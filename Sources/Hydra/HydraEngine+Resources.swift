import Foundation
import HydraCore
import HydraResources

/// The resource repository from Swift (resources.md §5): what `resource`
/// jobs, `resource.*` methods and `hydra resource` do, for embedding programs.
/// An embedded engine keeps its repository in `stateDirectory/resources` and,
/// unless given a durable index, its index in memory.
extension HydraEngine {
    /// Fetches (or serves from the repository) `url` as a `resource` job with
    /// `options` (mode, maxAgeSec, sha256, as…) and returns its result object;
    /// a failed job throws its error.
    public func fetchResource(_ url: String, options: ResourceSpec? = nil) async throws -> JSONValue {
        var spec = options ?? ResourceSpec(RemoteSpec(url: url))
        spec.request.url = url
        let result = try await run(JobSpec(.resource(spec)))
        if let error = result.error { throw error }
        return result.result ?? .null
    }

    /// The bytes of `url`'s copy in the repository (never the network), or nil.
    public func resourceData(_ url: String) throws -> Data? {
        let key = resources.key(forURL: url)
        guard let read = try resources.read(key: key, as: .base64),
              let text = read["content"]?.stringValue else { return nil }
        return Data(base64Encoded: text)
    }

    /// The file of `url`'s copy in the repository, or nil (none, or kept gzip / aes-gcm).
    public func resourceFile(_ url: String) throws -> URL? {
        guard let stat = try resources.stat(key: resources.key(forURL: url)),
              let path = stat["path"]?.stringValue else { return nil }
        return URL(fileURLWithPath: stateDirectory).appendingPathComponent(path)
    }

    /// What the repository knows of `url`'s copy (`resource.stat`), or nil.
    public func statResource(_ url: String) throws -> JSONValue? {
        try resources.stat(key: resources.key(forURL: url))
    }

    /// Removes copies by URL, key or URL prefix: `{"removed", "bytes"}`.
    /// Several selectors remove the copies of each (as `resource.remove` does);
    /// none, or a `key` that is not 64 hex digits, throws (a typo is not "0 removed").
    public func removeResources(url: String? = nil, key: String? = nil, prefix: String? = nil) async throws -> JSONValue {
        guard url != nil || key != nil || prefix != nil else { throw ValidationError(path: "url", "required (or key, or prefix)") }
        var checked: String?
        if let key {
            guard ResourceManager.isKey(key.lowercased()) else {
                throw ValidationError(path: "key", "expected a resource key: 64 hex digits")
            }
            checked = key.lowercased()
        }
        return try await withCheckedThrowingContinuation { continuation in
            resources.remove(key: checked, url: url, prefix: prefix) { continuation.resume(with: $0) }
        }
    }

    /// Adds or replaces the remaker `name` (resources.md §5: `"remaker": name`
    /// in a `resource` job keeps and returns `body(content)` under a key of its
    /// own). It runs on its worker's blocking pool (the worker's `threads`),
    /// never on a loop nor on libuv's thread pool; a throw
    /// fails the job (kind `invalid`). For a remaker that reads the job's
    /// `remakeOptions`, use `resources.register(remaker:)`.
    public func register(remaker name: String, _ body: @escaping @Sendable (Data) throws -> Data) {
        resources.register(remaker: name) { data, _ in try body(data) }
    }

    /// Removes copies unused for `olderThanSec`, then the least recently used
    /// past `maxBytes`: `{"removed", "bytes"}`.
    /// A negative or non-finite age, or negative bytes, throws naming the argument.
    public func purgeResources(olderThanSec: Double? = nil, maxBytes: Int? = nil) async throws -> JSONValue {
        if let olderThanSec, !(olderThanSec.isFinite && olderThanSec >= 0) {
            throw ValidationError(path: "olderThanSec", "must be a number of seconds, at least 0")
        }
        if let maxBytes, maxBytes < 0 { throw ValidationError(path: "maxBytes", "must be at least 0") }
        return try await withCheckedThrowingContinuation { continuation in
            resources.purge(olderThanSec: olderThanSec, maxBytes: maxBytes) { continuation.resume(with: $0) }
        }
    }
}
