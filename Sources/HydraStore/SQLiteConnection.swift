import CSQLite
import HydraCore

/// One SQLite connection with cached prepared statements: the only place the
/// store touches SQLite's C API. Not thread-safe: its owner serialises use
/// (the writer thread, or the reader lock).
final class SQLiteConnection {
    private var db: OpaquePointer?
    private let path: String
    private var statements: [String: OpaquePointer] = [:]

    init(path: String, sync: SQLiteStore.SyncMode) throws(StoreError) {
        self.path = path
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let status = sqlite3_open_v2(path, &db, flags, nil)
        guard status == SQLITE_OK else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close(db)
            db = nil
            throw StoreError("\(path): \(message)")
        }
        sqlite3_busy_timeout(db, 5000)
        try execute("PRAGMA journal_mode=WAL")
        try execute("PRAGMA synchronous=\(sync == .full ? "FULL" : "NORMAL")")
        try execute("PRAGMA foreign_keys=ON")
    }

    deinit { close() }

    func close() {
        for statement in statements.values { sqlite3_finalize(statement) }
        statements.removeAll()
        if let db { sqlite3_close(db) }
        db = nil
    }

    private func error(_ context: String) -> StoreError {
        StoreError("\(path): \(context): \(db.map { String(cString: sqlite3_errmsg($0)) } ?? "closed")")
    }

    /// Runs SQL without results (several statements allowed).
    func execute(_ sql: String) throws(StoreError) {
        guard let db else { throw StoreError("store is closed") }
        var message: UnsafeMutablePointer<CChar>?
        if sqlite3_exec(db, sql, nil, nil, &message) != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? "error"
            sqlite3_free(message)
            throw StoreError("\(path): \(text)")
        }
    }

    /// Runs a cached prepared statement with `bindings`; `row` sees each result row.
    func run(_ sql: String, _ bindings: [SQLValue] = [], row: ((SQLRow) throws(StoreError) -> Void)? = nil) throws(StoreError) {
        guard let db else { throw StoreError("store is closed") }
        let statement: OpaquePointer
        if let cached = statements[sql] {
            statement = cached
        } else {
            var prepared: OpaquePointer?
            guard sqlite3_prepare_v2(db, sql, -1, &prepared, nil) == SQLITE_OK, let prepared else {
                throw error("prepare")
            }
            statements[sql] = prepared
            statement = prepared
        }
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        for (i, value) in bindings.enumerated() {
            let index = Int32(i + 1)
            switch value {
            case .null: sqlite3_bind_null(statement, index)
            case .int(let v): sqlite3_bind_int64(statement, index, Int64(v))
            case .double(let v): sqlite3_bind_double(statement, index, v)
            case .text(let v): sqlite3_bind_text(statement, index, v, -1, hydra_sqlite_transient)
            case .blob(let v):
                v.withUnsafeBytes { raw in
                    _ = sqlite3_bind_blob(statement, index, raw.baseAddress, Int32(raw.count), hydra_sqlite_transient)
                }
            }
        }
        while true {
            let status = sqlite3_step(statement)
            if status == SQLITE_DONE { return }
            guard status == SQLITE_ROW else { throw error("step") }
            try row?(SQLRow(statement: statement))
        }
    }

    /// Rows changed by the last statement.
    var changes: Int { db.map { Int(sqlite3_changes($0)) } ?? 0 }
}

/// A value bound to a statement parameter.
enum SQLValue {
    case null
    case int(Int)
    case double(Double)
    case text(String)
    case blob([UInt8])

    init(_ text: String?) { self = text.map { .text($0) } ?? .null }
    init(_ number: Double?) { self = number.map { .double($0) } ?? .null }
}

/// The current row of a statement, read by column index. Valid only inside the row callback.
struct SQLRow {
    let statement: OpaquePointer

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }
    func int(_ column: Int32) -> Int { Int(sqlite3_column_int64(statement, column)) }
    func double(_ column: Int32) -> Double { sqlite3_column_double(statement, column) }
    func optionalDouble(_ column: Int32) -> Double? { isNull(column) ? nil : double(column) }

    func text(_ column: Int32) -> String? {
        guard let pointer = sqlite3_column_text(statement, column) else { return nil }
        return String(cString: pointer)
    }

    func blob(_ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(statement, column))
        guard count > 0, let pointer = sqlite3_column_blob(statement, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// A JSON column; nil when NULL, `StoreError` when it does not parse.
    func json(_ column: Int32) throws(StoreError) -> JSONValue? {
        guard let text = text(column) else { return nil }
        do { return try JSONParser.parse(text) } catch { throw StoreError("corrupt JSON in the store: \(error)") }
    }
}
