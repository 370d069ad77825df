import Foundation
import HydraCore
import Hydra

/// The `resource.*` methods (resources.md §2) over the engine's resource
/// manager. Each answers through `reply`, from the service's read thread
/// (``StoreReads``) or the repository's chores thread: they read the index and
/// files, which never happens on the RPC loop.
extension HydraService {
    /// Which copy `resource.stat` or `resource.read` names: `key`, else the
    /// key of `url`. A text that cannot be a key names no copy: `-32002`, as
    /// resources.md §2 answers for any copy that is not there, with the
    /// reason saying what a key looks like.
    public func resourceKey(key: String?, url: String?) throws(ServiceError) -> String {
        if key != nil, url != nil { throw ServiceError.invalidParams(field: "key", "give url or key, not both") }
        if let key {
            guard let lowered = Self.lowercasedKey(key) else {
                throw ServiceError.notFound(field: "key", "not in repository (a resource key is 64 hex digits)")
            }
            return lowered
        }
        if let url { return engine.resources.key(forURL: url) }
        throw ServiceError.invalidParams(field: "url", "required (or key)")
    }

    /// A key as given (either case), lowercased; nil for a text that cannot be one.
    static func lowercasedKey(_ key: String) -> String? {
        let lowered = key.lowercased()
        return ResourceManager.isKey(lowered) ? lowered : nil
    }

    /// `resource.stat`; `field` is the param that named the copy (`key` or `url`), for the error.
    public func resourceStat(key: String, named field: String = "key",
                             reply: @escaping @Sendable (Result<JSONValue, ServiceError>) -> Void) {
        let resources = engine.resources
        reads.run {
            do throws(StoreError) {
                guard let stat = try resources.stat(key: key) else {
                    reply(.failure(.notFound(field: field, "not in repository")))
                    return
                }
                reply(.success(stat))
            } catch {
                reply(.failure(ServiceError(error)))
            }
        }
    }

    /// `resource.read`: from the repository only.
    public func resourceRead(key: String, named field: String = "key", as presentation: ResourceSpec.Presentation,
                             offset: Int, length: Int?, reply: @escaping @Sendable (Result<JSONValue, ServiceError>) -> Void) {
        let resources = engine.resources
        reads.run {
            do throws(JobError) {
                guard let read = try resources.read(key: key, as: presentation, offset: offset, length: length) else {
                    reply(.failure(.notFound(field: field, "not in repository")))
                    return
                }
                reply(.success(read))
            } catch {
                // `decode`: the bytes are not what `as` asks for; else the copy cannot be opened.
                let field = error.kind == .decode ? "as" : field
                let reason = error.message.hasPrefix("as: ") ? String(error.message.dropFirst(4)) : error.message
                reply(.failure(.invalidParams(field: field, reason)))
            }
        }
    }

    /// `resource.list`.
    public func resourceList(prefix: String?, limit: Int, after: String?,
                             reply: @escaping @Sendable (Result<JSONValue, ServiceError>) -> Void) {
        if let after, !ResourceManager.isKey(after) {
            reply(.failure(ServiceError.invalidParams(field: "after", "expected the \"next\" of a previous page (a key)")))
            return
        }
        let resources = engine.resources
        reads.run {
            do throws(StoreError) {
                guard let page = try resources.list(prefix: prefix, limit: limit, after: after) else {
                    reply(.failure(ServiceError.invalidParams(field: "after", "no copy has this key any more (removed, purged or evicted since that page): list again without after")))
                    return
                }
                reply(.success(page))
            } catch {
                reply(.failure(ServiceError(error)))
            }
        }
    }

    /// `resource.remove`.
    public func resourceRemove(key: String?, url: String?, prefix: String?,
                               reply: @escaping @Sendable (Result<JSONValue, ServiceError>) -> Void) {
        // A removal is not a lookup: a text that cannot be a key is a typo to
        // point out, not "nothing removed".
        var checked: String?
        if let key {
            guard let lowered = Self.lowercasedKey(key) else {
                reply(.failure(.invalidParams(field: "key", "expected a resource key: 64 hex digits")))
                return
            }
            checked = lowered
        }
        engine.resources.remove(key: checked, url: url, prefix: prefix) { reply($0.mapError(ServiceError.init)) }
    }

    /// `resource.purge`.
    public func resourcePurge(olderThanSec: Int?, maxBytes: Int?,
                              reply: @escaping @Sendable (Result<JSONValue, ServiceError>) -> Void) {
        engine.resources.purge(olderThanSec: olderThanSec.map(Double.init), maxBytes: maxBytes) {
            reply($0.mapError(ServiceError.init))
        }
    }

    /// `resource.stats`.
    public func resourceStats(reply: @escaping @Sendable (Result<JSONValue, ServiceError>) -> Void) {
        let resources = engine.resources
        reads.run {
            do throws(StoreError) {
                reply(.success(try resources.statsJSON()))
            } catch {
                reply(.failure(ServiceError(error)))
            }
        }
    }
}
