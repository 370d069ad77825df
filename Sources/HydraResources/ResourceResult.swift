import HydraCore
import OrderedCollections

/// A `resource` job's result (resources.md §1) handed to the coordinator
/// unbuilt: the copy's index record and where the job got it.
///
/// Why: a server keeps its last finished jobs in memory (10,000), and a
/// resource's result as a built object (nine members, most of them strings of
/// 20 to 80 bytes) cost about 2 KB each; the record it is built from is a
/// third of that, shared with nothing else. It is built when someone reads it
/// (`job.result`, an event), and encoded straight to JSON for the journal.
/// Only for results without `content` (`as` absent or `path`).
final class ResourceResult: DeferredResult {
    let record: ResourceRecord
    /// `memory`, `disk`, `network` or `revalidated`.
    let source: String
    /// For the copy's path (computed when built, not kept).
    let manager: ResourceManager

    init(record: ResourceRecord, source: String, manager: ResourceManager) {
        self.record = record
        self.source = source
        self.manager = manager
    }

    func build() -> JSONValue { .object(fields) }

    var fields: OrderedDictionary<String, JSONValue> {
        var o = ResourceExecutor.stat(record, path: manager.relativePath(of: record.key))
        o["source"] = .string(source)
        return o
    }
}
