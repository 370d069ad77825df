import HydraLoop
import HydraCore
import Synchronization

/// The read connection behind a lock: reads run on the caller's thread, one
/// at a time, beside the writer (WAL). A read starts a fresh snapshot, so it
/// sees every write whose callback already ran. Thread-safe.
final class ReadConnection: Sendable {
    private let connection: Locked<ConnectionBox?>

    /// Takes over `connection` (used by no one else).
    init(_ connection: SQLiteConnection) {
        self.connection = Locked(ConnectionBox(connection))
    }

    /// Runs `body` with the connection, under the lock; "store is closed" once closed.
    func use<T: Sendable>(_ body: (SQLiteConnection) throws(StoreError) -> T) throws(StoreError) -> T {
        try connection.withLock { (box: inout ConnectionBox?) throws(StoreError) -> T in
            guard let box else { throw StoreWriter.closedError }
            return try body(box.connection)
        }
    }

    /// Runs `body` in one read transaction: several queries see one snapshot.
    func snapshot<T: Sendable>(_ body: (SQLiteConnection) throws(StoreError) -> T) throws(StoreError) -> T {
        try use { db throws(StoreError) -> T in
            try db.run("BEGIN")
            defer { if !db.isAutocommit { try? db.run("COMMIT") } }
            return try body(db)
        }
    }

    /// Closes the connection; later reads throw "store is closed".
    func close() {
        let box = connection.withLock { box in
            defer { box = nil }
            return box
        }
        box?.connection.close()
    }
}

/// Hands the (non-`Sendable`) connection to the lock that serialises its use.
private final class ConnectionBox: @unchecked Sendable {
    let connection: SQLiteConnection
    init(_ connection: SQLiteConnection) { self.connection = connection }
}
