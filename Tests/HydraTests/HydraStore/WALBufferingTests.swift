import Foundation
import HydraCore
import Synchronization
import Testing

@testable import HydraStore

/// The "hydra-wal" VFS (`CSQLiteWAL`) every store connection opens with: a
/// commit's WAL frames go down in one write, and nothing is left in memory
/// once the commit has returned or another connection may read the frames.
@Suite final class WALBufferingTests: Sendable {
    let root = NSTemporaryDirectory() + "hydra-wal-\(UUID().uuidString)"

    init() throws {
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    /// What a crash right now would leave of `path`: the database file and its
    /// WAL copied as they are (not the shared memory: rebuilt from the WAL), opened.
    func afterACrash(_ path: String) throws -> SQLiteConnection {
        let copy = root + "/crash-\(UUID().uuidString).db"
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        if FileManager.default.fileExists(atPath: path + "-wal") {
            try FileManager.default.copyItem(atPath: path + "-wal", toPath: copy + "-wal")
        }
        return try SQLiteConnection(path: copy, sync: .normal)
    }

    func integer(_ db: SQLiteConnection, _ sql: String) throws -> Int {
        var value = -1
        try db.query(sql) { value = $0.int(0) }
        return value
    }

    @Test func aCommitsFramesGoDownInOneWrite() throws {
        let db = try SQLiteConnection(path: root + "/one.db", sync: .normal)
        defer { db.close() }
        try db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)")
        for round in 0..<3 {
            let before = try #require(db.walWrites)
            try db.run("BEGIN IMMEDIATE")
            for i in 0..<20 {
                try db.run("INSERT INTO t VALUES (?, ?)", [.int(round * 100 + i), .blob([UInt8](repeating: UInt8(i), count: 3000))])
            }
            try db.run("COMMIT")
            let after = try #require(db.walWrites)
            // 20 rows of 3 KB dirty 20 pages and more (under 128 KiB of frames):
            // SQLite writes each frame's header, then its page.
            #expect(after.sqlite - before.sqlite >= 40)
            // One write; two when the WAL starts over (its header, written at offset 0).
            #expect(after.file - before.file <= 2, "round \(round): \(after.file - before.file) writes reached the file")
        }
    }

    /// The unix VFS writes at most 128 KiB - 1 in one call: a larger commit goes down in pieces of that size.
    @Test func aLargeCommitGoesDownInPieces() throws {
        let path = root + "/large.db"
        let db = try SQLiteConnection(path: path, sync: .normal)
        defer { db.close() }
        try db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)")
        let before = try #require(db.walWrites)
        try db.run("BEGIN IMMEDIATE")
        for i in 0..<500 {
            try db.run("INSERT INTO t VALUES (?, ?)", [.int(i), .blob([UInt8](repeating: UInt8(i & 0xFF), count: 3000))])
        }
        try db.run("COMMIT")
        let after = try #require(db.walWrites)
        let frames = Int(after.sqlite - before.sqlite) / 2
        let pieces = (frames * 4120 + 131_070) / 131_071
        #expect(frames >= 500)
        #expect(Int(after.file - before.file) <= pieces + 1)
        let copy = try afterACrash(path)
        defer { copy.close() }
        #expect(try integer(copy, "SELECT count(*) FROM t WHERE length(body) = 3000") == 500)
        #expect(try integer(copy, "SELECT sum(id) FROM t") == 499 * 500 / 2)
    }

    /// With `synchronous=FULL` SQLite syncs the WAL at each commit (the gathered frames go down first).
    @Test(arguments: [SQLiteStore.SyncMode.normal, .full])
    func everyCommitIsInTheFilesWhenItReturns(sync: SQLiteStore.SyncMode) throws {
        let path = root + "/live-\(sync).db"
        let db = try SQLiteConnection(path: path, sync: sync)
        defer { db.close() }
        try db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)")
        var rows = 0
        for round in 1...15 {
            try db.run("BEGIN IMMEDIATE")
            for _ in 0..<(round * 3) {
                try db.run("INSERT INTO t (body) VALUES (?)", [.blob([UInt8](repeating: UInt8(round), count: 1500))])
            }
            try db.run("COMMIT")
            rows += round * 3
            let copy = try afterACrash(path)
            #expect(try integer(copy, "SELECT count(*) FROM t") == rows, "round \(round)")
            #expect(try integer(copy, "SELECT count(*) FROM t WHERE length(body) <> 1500") == 0)
            copy.close()
        }
    }

    /// Money moves between accounts in transactions larger than the writer's
    /// page cache (so SQLite spills pages to the WAL before the commit, and
    /// writes spilled pages again in place), a fifth of them rolled back, while
    /// a reader on another thread checks that the total never changes.
    @Test func readersSeeOnlyWholeCommitsThroughSpillsAndRollbacks() throws {
        let path = root + "/bank.db"
        let accounts = 300
        let writer = try SQLiteConnection(path: path, sync: .normal)
        defer { writer.close() }
        try writer.execute("""
            PRAGMA cache_size=8;
            CREATE TABLE account (id INTEGER PRIMARY KEY, balance INTEGER NOT NULL, pad BLOB NOT NULL)
            """)
        try writer.run("BEGIN IMMEDIATE")
        for id in 0..<accounts { try writer.run("INSERT INTO account VALUES (?, 100, randomblob(300))", [.int(id)]) }
        try writer.run("COMMIT")

        let done = Atomic<Bool>(false)
        let reads = Atomic<Int>(0)
        let wrong = Atomic<Int>(0)
        let finished = DispatchSemaphore(value: 0)
        let reader = Thread {
            defer { finished.signal() }
            guard let db = try? SQLiteConnection(path: path, sync: .normal, queryOnly: true) else {
                wrong.add(1, ordering: .relaxed)
                return
            }
            while !done.load(ordering: .acquiring) {
                var total = -1
                var count = -1
                do {
                    try db.query("SELECT sum(balance), count(*) FROM account") { row in
                        total = row.int(0)
                        count = row.int(1)
                    }
                } catch {
                    wrong.add(1, ordering: .relaxed)
                }
                if total != accounts * 100 || count != accounts { wrong.add(1, ordering: .relaxed) }
                reads.add(1, ordering: .relaxed)
            }
            db.close()
        }
        reader.start()

        var generator = SystemRandomNumberGenerator()
        var spilledRollbacks = 0
        for round in 0..<150 {
            let before = try #require(writer.walWrites)
            try writer.run("BEGIN IMMEDIATE")
            for _ in 0..<25 {
                let from = Int.random(in: 0..<accounts, using: &generator)
                let to = Int.random(in: 0..<accounts, using: &generator)
                let amount = Int.random(in: 1...5, using: &generator)
                try writer.run("UPDATE account SET balance = balance - ? WHERE id = ?", [.int(amount), .int(from)])
                try writer.run("UPDATE account SET balance = balance + ? WHERE id = ?", [.int(amount), .int(to)])
            }
            try writer.run("UPDATE account SET pad = randomblob(300) WHERE id % 5 = ?", [.int(round % 5)])
            if round % 5 == 4 {
                try writer.run("ROLLBACK")
                if let after = writer.walWrites, after.sqlite > before.sqlite { spilledRollbacks += 1 }
            } else {
                try writer.run("COMMIT")
            }
        }
        done.store(true, ordering: .releasing)
        finished.wait()

        #expect(spilledRollbacks > 0, "no transaction spilled: the test did not exercise writes before a commit")
        #expect(reads.load(ordering: .relaxed) > 0)
        #expect(wrong.load(ordering: .relaxed) == 0)
        var check = ""
        try writer.query("PRAGMA integrity_check") { check = $0.text(0) ?? "" }
        #expect(check == "ok")
        #expect(try integer(writer, "SELECT sum(balance) FROM account") == accounts * 100)
        let copy = try afterACrash(path)
        defer { copy.close() }
        #expect(try integer(copy, "SELECT sum(balance) FROM account") == accounts * 100)
        var copied = ""
        try copy.query("PRAGMA integrity_check") { copied = $0.text(0) ?? "" }
        #expect(copied == "ok")
    }
}
