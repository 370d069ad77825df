import Foundation
import HydraCore
import HydraLoop
import Testing

@testable import Hydra
@testable import HydraResources
@testable import HydraStore

/// A resource index whose writes go through one FIFO writer, as the SQLite
/// store's do, and whose conditional deletes wait for the test to open a
/// gate: the writer holds a removal's commit while other writes queue behind
/// it, the window between a removal's choice and its commit made as wide as a test needs.
final class GatedRemovalIndex: ResourceIndexStore, @unchecked Sendable {
    let inner = MemoryResourceIndex()
    let writer = DispatchQueue(label: "tests.gated-removal-writer")
    let gate = DispatchSemaphore(value: 0)
    /// Writes handed to the writer so far: stores, and conditional removals.
    let stores = Locked(0)
    let removals = Locked(0)
    func resource(key: String) throws(StoreError) -> ResourceRecord? { try inner.resource(key: key) }
    func resources(urlPrefix: String?, after: String?, limit: Int) throws(StoreError) -> [ResourceRecord] {
        try inner.resources(urlPrefix: urlPrefix, after: after, limit: limit)
    }
    func resourcesByUse() throws(StoreError) -> [ResourceRecord] { try inner.resourcesByUse() }
    func storeResource(_ record: ResourceRecord, done: (@Sendable (Result<Void, StoreError>) -> Void)?) {
        stores.withLock { $0 += 1 }
        writer.async { self.inner.storeResource(record, done: done) }
    }
    func touchResources(_ keys: [String], at time: Double) { writer.async { self.inner.touchResources(keys, at: time) } }
    func removeResources(_ keys: [String], done: @escaping @Sendable (Result<Int, StoreError>) -> Void) {
        writer.async { self.inner.removeResources(keys, done: done) }
    }
    func removeResource(_ key: String, ifStoredAt storedAt: Double, done: @escaping @Sendable (Result<Bool, StoreError>) -> Void) {
        removals.withLock { $0 += 1 }
        writer.async {
            self.gate.wait()
            self.inner.removeResource(key, ifStoredAt: storedAt, done: done)
        }
    }
}

/// Removals (eviction, purge, `resource.rm`, corrupt drops) racing a new copy
/// of the same key (a refresh, a 304 renewal): the index and the files agree
/// afterwards, whichever commits first.
@Suite(.ownThreads) final class ResourceReplacementTests: Sendable {
    let state = NSTemporaryDirectory() + "hydra-replace-\(UUID().uuidString)"
    deinit { try? FileManager.default.removeItem(atPath: state) }

    /// A removal chose a copy; before its delete commits, a 304 renews that
    /// copy's entry. The renewed entry keeps its file.
    @Test func a304RenewalRacingARemovalKeepsItsFile() async throws {
        let index = GatedRemovalIndex()
        let engine = try HydraEngine(configuration: Configuration(), stateDirectory: state, resourceIndex: index)
        defer { engine.shutdown() }
        let n = "q" + UUID().uuidString.prefix(8).lowercased()
        let url = TestServer.url("/resource/\(n)")
        let first = try await engine.fetchResource(url)
        let key = try #require(first["key"]?.stringValue)
        let path = state + "/" + (first["path"]?.stringValue ?? "")
        let chosen = try #require(try index.resource(key: key))
        let chosenAt = engine.resources.replacements.generation()
        let removed = Locked<Bool>(false)
        engine.resources.removeCopies([chosen], reason: "remove", since: chosenAt) { _ in removed.withLock { $0 = true } }
        try await waitUntil { index.removals.withLock { $0 } == 1 }  // the delete waits on the writer
        async let again = engine.run(spec(#"{"type":"resource","url":"\#(url)","maxAgeSec":0}"#))
        try await waitUntil { index.stores.withLock { $0 } == 2 }  // the renewal queued behind it
        index.gate.signal()
        let renewed = try await again
        #expect(renewed.result?["source"] == "revalidated", "\(String(describing: renewed.result)) \(String(describing: renewed.error))")
        try await waitUntil { removed.withLock { $0 } }
        let entry = try index.resource(key: key)
        let fileThere = FileManager.default.fileExists(atPath: path)
        #expect(entry != nil && fileThere, "entry \(String(describing: entry?.storedAt)) vs chosen \(chosen.storedAt), file: \(fileThere)")
    }

    /// `resource.rm` and purges note the generation before they read the
    /// entries: a refresh that began and committed in between is what they
    /// read, and removing it takes its file too.
    @Test func aRemovalThatReadTheNewCopyRemovesItsFile() async throws {
        let f = try await fetchedOnSQLite()
        defer { f.close() }
        let chosenAt = f.engine.resources.replacements.generation()
        _ = try await f.engine.run(spec(#"{"type":"resource","url":"\#(f.url)","mode":"refresh"}"#))
        let read = try #require(try f.store.resource(key: f.key))
        try waitForResult { f.engine.resources.removeCopies([read], reason: "remove", since: chosenAt, done: $0) }
        #expect(try f.store.resource(key: f.key) == nil)
        #expect(!FileManager.default.fileExists(atPath: f.path))
    }

    /// An eviction that chose a copy before a refresh replaced it leaves the
    /// new copy alone: its entry (another `storedAt`) and its file stay.
    @Test func anEvictionOfAReplacedCopyLeavesTheNewOne() async throws {
        let f = try await fetchedOnSQLite()
        defer { f.close() }
        let chosen = try #require(try f.store.resource(key: f.key))
        let chosenAt = f.engine.resources.replacements.generation()
        try await Task.sleep(for: .milliseconds(5))  // another storedAt
        let refreshed = try await f.engine.run(spec(#"{"type":"resource","url":"\#(f.url)","mode":"refresh","as":"text"}"#))
        #expect(refreshed.result?["content"] == .string("resource \(f.name) v2"), "\(String(describing: refreshed.error))")
        try waitForResult { f.engine.resources.removeCopies([chosen], reason: "evicted", since: chosenAt, done: $0) }
        let kept = try #require(try f.store.resource(key: f.key))
        #expect(kept.storedAt != chosen.storedAt)
        #expect(FileManager.default.contents(atPath: f.path) == Data("resource \(f.name) v2".utf8))
        // The copy as it is now, chosen now: it goes, entry and file.
        try waitForResult {
            f.engine.resources.removeCopies([kept], reason: "evicted", since: f.engine.resources.replacements.generation(), done: $0)
        }
        #expect(try f.store.resource(key: f.key) == nil)
        #expect(!FileManager.default.fileExists(atPath: f.path))
    }

    /// An engine on a SQLite index in the test's folder, with one copy of a
    /// resource whose body changes with each request (`?bump=1`) fetched.
    struct Fetched {
        let store: SQLiteStore
        let engine: HydraEngine
        let name: String
        let url: String
        let key: String
        let path: String

        func close() {
            engine.shutdown()
            store.close()
        }
    }

    func fetchedOnSQLite() async throws -> Fetched {
        let store = try SQLiteStore(directory: state)
        let engine = try HydraEngine(configuration: Configuration(), stateDirectory: state, resourceIndex: store)
        let name = "r" + UUID().uuidString.prefix(8).lowercased()
        let url = TestServer.url("/resource/\(name)?bump=1")
        let first = try await engine.fetchResource(url)
        return Fetched(store: store, engine: engine, name: name, url: url, key: first["key"]?.stringValue ?? "",
                       path: state + "/" + (first["path"]?.stringValue ?? ""))
    }
}
