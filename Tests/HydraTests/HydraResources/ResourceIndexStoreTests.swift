import Foundation
import HydraCore
import Testing

@testable import HydraResources
@testable import HydraStore

/// The resource-index slice of the SQLite store (``ResourceIndexStore``), on
/// real files in a fresh folder per test.
@Suite(.ownThreads) final class ResourceIndexStoreTests: Sendable {
    let root = NSTemporaryDirectory() + "hydra-resindex-\(UUID().uuidString)"

    deinit { try? FileManager.default.removeItem(atPath: root) }

    func record(_ key: String, url: String, storedAt: Double, usedAt: Double, cipher: ResourceCipher = .none) -> ResourceRecord {
        ResourceRecord(key: key, url: url, bytes: 10, diskBytes: 12, contentType: "text/plain", sha256: String(repeating: "a", count: 64),
                       etag: "\"e-\(key)\"", lastModified: "Tue, 24 Nov 2026 05:00:00 GMT", storedAt: storedAt,
                       lastUsedAt: usedAt, cipher: cipher)
    }

    func store(_ db: SQLiteStore, _ r: ResourceRecord) throws(StoreError) {
        try waitForResult { db.storeResource(r, done: $0) }
    }

    @Test func storesReadsAndSurvivesReopening() throws {
        let dir = root + "/a"
        let db = try SQLiteStore(directory: dir)
        let a = record("k1", url: "http://h/a", storedAt: 100, usedAt: 100, cipher: .aesGCM)
        try store(db, a)
        #expect(try db.resource(key: "k1") == a)
        #expect(try db.resource(key: "nope") == nil)
        // Replaced whole by a later store (a revalidation renews storedAt and validators).
        var renewed = a
        renewed.storedAt = 200
        renewed.etag = nil
        try store(db, renewed)
        #expect(try db.resource(key: "k1") == renewed)
        db.close()
        let again = try SQLiteStore(directory: dir)
        defer { again.close() }
        #expect(try again.resource(key: "k1") == renewed)
    }

    @Test func listsNewestFirstByPrefixInPages() throws {
        let db = try SQLiteStore(directory: root + "/b")
        defer { db.close() }
        for i in 0..<5 {
            try store(db, record("k\(i)", url: i % 2 == 0 ? "http://h/even/\(i)" : "http://h/odd_%/\(i)", storedAt: Double(i), usedAt: Double(10 - i)))
        }
        #expect(try db.resources(urlPrefix: nil, after: nil, limit: 10).map(\.key) == ["k4", "k3", "k2", "k1", "k0"])
        #expect(try db.resources(urlPrefix: "http://h/even/", after: nil, limit: 10).map(\.key) == ["k4", "k2", "k0"])
        // The prefix is literal: `%` and `_` match only themselves.
        #expect(try db.resources(urlPrefix: "http://h/odd_%", after: nil, limit: 10).map(\.key) == ["k3", "k1"])
        #expect(try db.resources(urlPrefix: "http://h/odd%", after: nil, limit: 10).isEmpty)
        let first = try db.resources(urlPrefix: nil, after: nil, limit: 2)
        #expect(first.map(\.key) == ["k4", "k3"])
        #expect(try db.resources(urlPrefix: nil, after: first.last!.key, limit: 2).map(\.key) == ["k2", "k1"])
        #expect(try db.resourcesByUse().map(\.key) == ["k4", "k3", "k2", "k1", "k0"])
    }

    @Test func touchesAndRemoves() throws {
        let db = try SQLiteStore(directory: root + "/c")
        defer { db.close() }
        try store(db, record("x", url: "http://h/x", storedAt: 1, usedAt: 1))
        try store(db, record("y", url: "http://h/y", storedAt: 1, usedAt: 2))
        db.touchResources(["x"], at: 50)
        db.touchResources(["x"], at: 40)  // never goes back
        db.flush()
        #expect(try db.resource(key: "x")?.lastUsedAt == 50)
        #expect(try db.resourcesByUse().map(\.key) == ["y", "x"])
        let removed = try waitForResult { db.removeResources(["x", "missing"], done: $0) }
        #expect(removed == 1)
        #expect(try db.resourcesByUse().map(\.key) == ["y"])
    }

    /// An eviction removes an entry only while it is the copy it chose: a copy
    /// stored since (another `storedAt`) stays. The SQLite index and the
    /// embedded one alike.
    @Test func aConditionalRemovalLeavesANewerCopy() throws {
        let db = try SQLiteStore(directory: root + "/d")
        defer { db.close() }
        let memory = MemoryResourceIndex()
        for index in [db as any ResourceIndexStore, memory] {
            try waitForResult { index.storeResource(record("k", url: "http://h/k", storedAt: 2.5, usedAt: 2.5), done: $0) }
            #expect(try waitForResult { index.removeResource("k", ifStoredAt: 1.25, done: $0) } == false)
            #expect(try index.resource(key: "k")?.storedAt == 2.5)
            #expect(try waitForResult { index.removeResource("k", ifStoredAt: 2.5, done: $0) } == true)
            #expect(try index.resource(key: "k") == nil)
            #expect(try waitForResult { index.removeResource("k", ifStoredAt: 2.5, done: $0) } == false)
        }
    }

    /// A file is unlinked only when no copy of its key began being put in
    /// place since the removal chose it, nor is under way.
    @Test func aReplacementKeepsItsFileFromARemoval() {
        let watch = ReplacementWatch()
        let chosen = watch.generation()
        var unlinked = 0
        #expect(watch.unlinkUnlessReplaced("k", since: chosen, removed: 1) { unlinked += 1 })
        watch.begin("k")
        #expect(!watch.unlinkUnlessReplaced("k", since: chosen, removed: 1) { unlinked += 1 })   // under way
        watch.end("k", committed: 2)
        #expect(!watch.unlinkUnlessReplaced("k", since: chosen, removed: 1) { unlinked += 1 })   // another copy since
        // The removal read the new copy itself (stored at 2) and deleted its entry: its file goes too.
        #expect(watch.unlinkUnlessReplaced("k", since: chosen, removed: 2) { unlinked += 1 })
        #expect(watch.unlinkUnlessReplaced("other", since: chosen, removed: 1) { unlinked += 1 })
        #expect(watch.unlinkUnlessReplaced("k", since: watch.generation(), removed: 1) { unlinked += 1 })  // chosen after it
        #expect(unlinked == 4)
        // A replacement that failed commits nothing: the last committed copy stays the one known.
        watch.begin("k")
        watch.end("k", committed: nil)
        #expect(watch.unlinkUnlessReplaced("k", since: chosen, removed: 2) {})
        // Past its limit of keys the watch forgets finished ones, and then stays on the safe side.
        let before = watch.generation()
        for n in 0..<5000 {
            watch.begin("key\(n)")
            watch.end("key\(n)", committed: Double(n))
        }
        #expect(!watch.unlinkUnlessReplaced("key0", since: before, removed: 0) {})
        #expect(watch.unlinkUnlessReplaced("key0", since: watch.generation(), removed: 0) {})
    }
}
