import CSQLite
import CSQLiteWAL
import HydraCore

/// One SQLite connection with its cached prepared statements: the only place
/// the store touches SQLite's C API and raw pointers.
///
/// Not thread-safe: its owner serialises every use (the write connection
/// belongs to the writer thread, the read connection sits behind a lock).
/// Every connection gets the same settings: WAL, the chosen `synchronous`,
/// a busy timeout and foreign keys.
final class SQLiteConnection {
    private var db: OpaquePointer?
    /// The database file, named in every error.
    let path: String
    /// Statements prepared once per connection and reused (`sqlite3_prepare_v2`).
    private var statements: [StatementKey: OpaquePointer] = [:]

    /// A statement's SQL as the cache's key, hashed by its length alone:
    /// hashing the text on every run cost the writer thread a few percent (the
    /// 64-row event insert is 1.4 KB of SQL; `perf` still found 4% of the
    /// writer in hashing 32 bytes of it one by one). A connection runs a few
    /// dozen statements, so lengths rarely collide, and equality still compares
    /// the whole text, which the same literal passes at once.
    private struct StatementKey: Hashable {
        let sql: String

        func hash(into hasher: inout Hasher) { hasher.combine(sql.utf8.count) }
    }

    /// Process-wide settings, made once before the first connection opens:
    /// no memory statistics (see `hydra_sqlite_disable_memstatus`).
    private static let libraryConfigured: Bool = hydra_sqlite_disable_memstatus() == SQLITE_OK

    /// The VFS every connection opens with: "hydra-wal" (the `CSQLiteWAL`
    /// module), SQLite's own except that a commit's WAL frames go down in one
    /// `pwrite` instead of two per page; SQLite's default only if it could not
    /// be registered. Registered after ``libraryConfigured`` (it initializes SQLite).
    private static let vfs: String? = {
        _ = libraryConfigured
        return hydra_wal_vfs_register() == SQLITE_OK ? HYDRA_WAL_VFS_NAME : nil
    }()

    /// How long a statement waits for another process's lock before failing with "database is locked".
    static let busyTimeoutMilliseconds: Int32 = 5000

    /// Opens (creating when missing) the database at `path` and applies the settings.
    /// `queryOnly` makes the connection refuse writes (the read connection).
    init(path: String, sync: SQLiteStore.SyncMode, queryOnly: Bool = false) throws(StoreError) {
        self.path = path
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let status = sqlite3_open_v2(path, &db, flags, Self.vfs)
        guard status == SQLITE_OK, db != nil else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(status))
            sqlite3_close_v2(db)
            db = nil
            throw StoreError("\(path): cannot open the database: \(message)")
        }
        sqlite3_extended_result_codes(db, 1)
        // SQLite opens a file the process may not write read-only, without a word: a server
        // would start, answer reads, and refuse every write. It stops here instead.
        if !queryOnly, sqlite3_db_readonly(db, "main") == 1 {
            close()
            throw StoreError("\(path): the database can only be read (its file or folder is not writable): nothing could be recorded")
        }
        sqlite3_busy_timeout(db, Self.busyTimeoutMilliseconds)
        var mode = ""
        try query("PRAGMA journal_mode=WAL") { row in mode = row.text(0) ?? "" }
        guard mode.lowercased() == "wal" else {
            close()
            throw StoreError("\(path): cannot switch the database to WAL mode (journal_mode is \"\(mode)\")")
        }
        try execute("PRAGMA synchronous=\(sync == .full ? "FULL" : "NORMAL"); PRAGMA foreign_keys=ON")
        if queryOnly { try execute("PRAGMA query_only=ON") }
    }

    deinit { close() }

    /// Finalizes the statements and closes the database; later calls throw "store is closed".
    func close() {
        if let db, walHook != nil { sqlite3_wal_hook(db, nil, nil) }
        walHook = nil
        for statement in statements.values { sqlite3_finalize(statement) }
        statements.removeAll()
        if let db { sqlite3_close_v2(db) }
        db = nil
    }

    /// True once the database file was deleted, renamed or replaced since it was
    /// opened: what is written from then on goes to a file no one will open again.
    var fileHasMoved: Bool {
        guard let db else { return false }
        var moved: Int32 = 0
        guard sqlite3_file_control(db, "main", SQLITE_FCNTL_HAS_MOVED, &moved) == SQLITE_OK else { return false }
        return moved != 0
    }

    /// False while a transaction is open (SQLite may end one on its own after an I/O error).
    var isAutocommit: Bool { db.map { sqlite3_get_autocommit($0) != 0 } ?? true }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    var changes: Int { db.map { Int(sqlite3_changes64($0)) } ?? 0 }

    private func error(_ context: String) -> StoreError {
        var error = StoreError("\(path): \(context): \(db.map { String(cString: sqlite3_errmsg($0)) } ?? "closed")")
        if let db {
            let primary = sqlite3_extended_errcode(db) & 0xFF
            error.isTransient = primary == SQLITE_FULL || primary == SQLITE_IOERR || primary == SQLITE_BUSY || primary == SQLITE_LOCKED
        }
        return error
    }

    /// Replaces SQLite's automatic checkpoints on this connection. After each
    /// commit `onCommit` gets the number of frames in the WAL, on the
    /// committing thread; when it returns true, the connection checkpoints
    /// right there (passive: never waits for readers, nor for a checkpoint
    /// running elsewhere).
    func replaceAutomaticCheckpoints(_ onCommit: @escaping (_ walFrames: Int) -> Bool) {
        guard let db else { return }
        let hook = WALHook(onCommit)
        walHook = hook
        sqlite3_wal_hook(db, { context, db, _, frames in
            let hook = Unmanaged<WALHook>.fromOpaque(context!).takeUnretainedValue()
            if hook.onCommit(Int(frames)) {
                _ = sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
            }
            return SQLITE_OK
        }, Unmanaged.passUnretained(hook).toOpaque())
    }

    /// The hook's closure, kept alive by the connection that calls it.
    private final class WALHook {
        let onCommit: (Int) -> Bool
        init(_ onCommit: @escaping (Int) -> Bool) { self.onCommit = onCommit }
    }
    private var walHook: WALHook?

    /// The writes SQLite made to this connection's WAL file since it opened it,
    /// and how many reached the file (see `CSQLiteWAL`); nil before the WAL is
    /// open or without the "hydra-wal" VFS. For tests.
    var walWrites: (sqlite: UInt64, file: UInt64)? {
        guard let db else { return nil }
        var sqlite: UInt64 = 0
        var file: UInt64 = 0
        guard hydra_wal_vfs_counts(db, &sqlite, &file) == SQLITE_OK else { return nil }
        return (sqlite, file)
    }

    /// Copies what it can of the WAL into the database file (a passive
    /// checkpoint: it never waits). Another checkpoint in progress is not an
    /// error. Returns the WAL's size in frames (0 when busy).
    @discardableResult
    func checkpoint() throws(StoreError) -> Int {
        guard let db else { throw StoreError.closed }
        var frames: Int32 = 0
        let status = sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_PASSIVE, &frames, nil)
        guard status == SQLITE_OK || status & 0xFF == SQLITE_BUSY else { throw error("cannot checkpoint the WAL") }
        return status == SQLITE_OK ? max(0, Int(frames)) : 0
    }

    /// Runs SQL without bindings nor results; several statements allowed (schema, pragmas).
    func execute(_ sql: String) throws(StoreError) {
        guard let db else { throw StoreError.closed }
        var message: UnsafeMutablePointer<CChar>?
        if sqlite3_exec(db, sql, nil, nil, &message) != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(db))
            sqlite3_free(message)
            throw StoreError("\(path): \(text)")
        }
    }

    /// Runs one statement (prepared once, then cached) with `bindings`, ignoring result rows.
    func run(_ sql: String, _ bindings: [SQLValue] = []) throws(StoreError) {
        try query(sql, bindings) { _ in }
    }

    /// Runs one statement (prepared once, then cached) with `bindings`; `row`
    /// sees each result row, only during the call.
    func query(_ sql: String, _ bindings: [SQLValue] = [],
               row: (SQLRow) throws(StoreError) -> Void) throws(StoreError) {
        let statement = try prepared(sql)
        // Every text value's bytes in one buffer, bound in place (`SQLITE_STATIC`)
        // while the statement runs: SQLite then copies none of them (it copied each
        // into an allocation of its own: ~23 per durable job on the writer thread).
        var texts: [UInt8] = []
        var spans: [Range<Int>?] = []
        if bindings.contains(where: \.isText) {
            texts.reserveCapacity(bindings.reduce(0) { $0 + $1.textSizeHint })
            spans.reserveCapacity(bindings.count)
            for value in bindings { spans.append(value.appendText(to: &texts)) }
        }
        try texts.withUnsafeBufferPointer { (buffer) throws(StoreError) in
            // Reset and cleared before the buffer goes: no binding outlives it.
            defer {
                sqlite3_reset(statement)
                sqlite3_clear_bindings(statement)
            }
            for (i, value) in bindings.enumerated() {
                let index = Int32(i + 1)
                if !spans.isEmpty, let span = spans[i] {
                    let status = Self.bindText(UnsafeBufferPointer(rebasing: buffer[span]), at: index, in: statement)
                    guard status == SQLITE_OK else { throw error("cannot bind parameter \(index)") }
                } else {
                    try bind(value, at: index, in: statement)
                }
            }
            while true {
                let status = sqlite3_step(statement)
                if status == SQLITE_DONE { return }
                guard status == SQLITE_ROW else { throw error("cannot run \(Self.verb(of: sql))") }
                try row(SQLRow(statement: statement))
            }
        }
    }

    private func prepared(_ sql: String) throws(StoreError) -> OpaquePointer {
        guard let db else { throw StoreError.closed }
        let key = StatementKey(sql: sql)
        if let cached = statements[key] { return cached }
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
            throw error("cannot prepare \(Self.verb(of: sql))")
        }
        statements[key] = statement
        return statement
    }

    private func bind(_ value: SQLValue, at index: Int32, in statement: OpaquePointer) throws(StoreError) {
        let status: Int32
        switch value {
        case .null: status = sqlite3_bind_null(statement, index)
        case .int(let v): status = sqlite3_bind_int64(statement, index, Int64(v))
        case .double(let v): status = sqlite3_bind_double(statement, index, v)
        case .text, .json, .utf8:
            // Bound from the statement's text buffer by `query` (see `appendText`).
            preconditionFailure("text values are bound from the statement's buffer")
        case .blob(let v):
            status = v.withUnsafeBytes { raw in
                guard let base = raw.baseAddress, !raw.isEmpty else { return sqlite3_bind_zeroblob(statement, index, 0) }
                return sqlite3_bind_blob64(statement, index, base, sqlite3_uint64(raw.count), hydra_sqlite_transient)
            }
        }
        guard status == SQLITE_OK else { throw error("cannot bind parameter \(index)") }
    }

    /// Binds UTF-8 text in place (`SQLITE_STATIC`: SQLite does not copy it):
    /// `utf8` must stay valid until the statement is reset and its bindings
    /// cleared (``query(_:_:row:)`` does both inside its buffer's scope). An
    /// empty text binds `''`, not NULL.
    private static func bindText(_ utf8: UnsafeBufferPointer<UInt8>, at index: Int32, in statement: OpaquePointer) -> Int32 {
        guard let base = utf8.baseAddress, !utf8.isEmpty else {
            return sqlite3_bind_text(statement, index, "", 0, hydra_sqlite_transient)
        }
        return base.withMemoryRebound(to: CChar.self, capacity: utf8.count) { chars in
            sqlite3_bind_text64(statement, index, chars, sqlite3_uint64(utf8.count), nil, UInt8(SQLITE_UTF8))
        }
    }

    /// The first word of a statement, for error messages (never its values).
    private static func verb(of sql: String) -> String {
        let word = sql.drop(while: \.isWhitespace).prefix(while: { !$0.isWhitespace })
        return word.isEmpty ? "statement" : word.uppercased()
    }
}

/// A value bound to a statement parameter.
enum SQLValue {
    case null
    case int(Int)
    case double(Double)
    case text(String)
    /// A JSON value, bound as its compact UTF-8 text (``JSONWriter``).
    case json(JSONValue)
    /// Text already encoded as UTF-8 (JSON encoded off the writer thread), bound as TEXT.
    case utf8([UInt8])
    case blob([UInt8])

    init(_ text: String?) { self = text.map { .text($0) } ?? .null }

    /// True for the values bound as text.
    var isText: Bool {
        switch self {
        case .text, .json, .utf8: return true
        case .null, .int, .double, .blob: return false
        }
    }

    /// About how many bytes ``appendText(to:)`` appends (exact but for JSON values).
    var textSizeHint: Int {
        switch self {
        case .text(let v): return v.utf8.count
        case .utf8(let v): return v.count
        case .json: return 64
        case .null, .int, .double, .blob: return 0
        }
    }

    /// Appends a text value's UTF-8 bytes to `buffer` and returns where they
    /// lie; nil for the values that are not text.
    func appendText(to buffer: inout [UInt8]) -> Range<Int>? {
        let start = buffer.count
        switch self {
        case .text(let v): buffer.append(contentsOf: v.utf8)
        case .json(let v): JSONWriter.write(v, into: &buffer)
        case .utf8(let v): buffer.append(contentsOf: v)
        case .null, .int, .double, .blob: return nil
        }
        return start..<buffer.count
    }
    init(_ number: Double?) { self = number.map { .double($0) } ?? .null }
    init(_ json: JSONValue?) { self = json.map { .json($0) } ?? .null }
}

/// The current row of a statement, read by column index. Valid only inside the row callback.
struct SQLRow {
    fileprivate let statement: OpaquePointer

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }
    func int(_ column: Int32) -> Int { Int(sqlite3_column_int64(statement, column)) }
    func double(_ column: Int32) -> Double { sqlite3_column_double(statement, column) }
    func optionalDouble(_ column: Int32) -> Double? { isNull(column) ? nil : double(column) }

    /// The column's text (invalid UTF-8 repaired), or nil when NULL.
    func text(_ column: Int32) -> String? {
        withText(column) { bytes in String(decoding: bytes, as: UTF8.self) }
    }

    func blob(_ column: Int32) -> [UInt8] {
        let pointer = sqlite3_column_blob(statement, column)
        let count = Int(sqlite3_column_bytes(statement, column))
        guard count > 0, let pointer else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// A JSON column parsed in place; nil when NULL, `StoreError` when it does not parse.
    func json(_ column: Int32) throws(StoreError) -> JSONValue? {
        let parsed: Result<JSONValue, JSONParseError>? = withText(column) { bytes in
            // Written by the engine: results may nest deeper than a request may.
            Result { () throws(JSONParseError) in try JSONParser.parse(bytes, maxDepth: JSONParser.maxStoredDepth) }
        }
        switch parsed {
        case nil: return nil
        case .success(let value)?: return value
        case .failure(let error)?: throw StoreError("corrupt JSON in the store (column \(column)): \(error.message)")
        }
    }

    /// The column's text as JSON values, one per line, parsed in place and
    /// given to `body` in order (an empty line is skipped); NULL has none.
    /// `StoreError` when a line does not parse.
    func jsonLines(_ column: Int32, _ body: (JSONValue) throws(StoreError) -> Void) throws(StoreError) {
        let failure: StoreError? = withText(column) { bytes in
            var start = 0
            while start < bytes.count {
                var end = start
                while end < bytes.count && bytes[end] != UInt8(ascii: "\n") { end += 1 }
                if end > start {
                    do throws(StoreError) {
                        let line = UnsafeBufferPointer(rebasing: bytes[start..<end])
                        let value: JSONValue
                        do throws(JSONParseError) {
                            value = try JSONParser.parse(line, maxDepth: JSONParser.maxStoredDepth)
                        } catch {
                            throw StoreError("corrupt JSON in the store (column \(column)): \(error.message)")
                        }
                        try body(value)
                    } catch {
                        return error
                    }
                }
                start = end + 1
            }
            return nil
        } ?? nil
        if let failure { throw failure }
    }

    private func withText<T>(_ column: Int32, _ body: (UnsafeBufferPointer<UInt8>) -> T) -> T? {
        guard let pointer = sqlite3_column_text(statement, column) else { return nil }
        let count = Int(sqlite3_column_bytes(statement, column))
        return body(UnsafeBufferPointer(start: pointer, count: count))
    }
}
