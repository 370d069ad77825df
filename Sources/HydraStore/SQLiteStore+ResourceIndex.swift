import HydraCore

/// The resource-index slice (``ResourceIndexStore``) on SQLite: the
/// `resources` table of migration 4. Reads run on the caller's thread on the
/// read connection; writes go through the writer thread as every write does.
/// (The conformance itself comes with ``StateStore``'s, in `SQLiteStore.swift`.)
extension SQLiteStore {
    static let resourceColumns = """
        key, url, bytes, disk_bytes, content_type, sha256, etag, last_modified, stored_at, last_used_at, cipher, status, file_id
        """

    /// The entry for `key`, or nil. Caller's thread.
    public func resource(key: String) throws(StoreError) -> ResourceRecord? {
        try reader.use { db throws(StoreError) in
            var found: ResourceRecord?
            try db.query("SELECT \(Self.resourceColumns) FROM resources WHERE key = ?", [.text(key)]) { row throws(StoreError) in
                found = try Self.record(row)
            }
            return found
        }
    }

    /// A page of entries, newest first. Caller's thread.
    public func resources(urlPrefix: String?, after: String?, limit: Int) throws(StoreError) -> [ResourceRecord] {
        var conditions: [String] = []
        var bindings: [SQLValue] = []
        if let urlPrefix {
            // Not LIKE: `%` and `_` in a prefix are literal. substr counts characters.
            conditions.append("substr(url, 1, ?) = ?")
            bindings += [.int(urlPrefix.unicodeScalars.count), .text(urlPrefix)]
        }
        if let after {
            conditions.append("(stored_at, key) < (SELECT stored_at, key FROM resources WHERE key = ?)")
            bindings.append(.text(after))
        }
        let filter = conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND ")
        bindings.append(.int(max(0, limit)))
        let sql = "SELECT \(Self.resourceColumns) FROM resources\(filter) ORDER BY stored_at DESC, key DESC LIMIT ?"
        return try reader.use { db throws(StoreError) in
            var records: [ResourceRecord] = []
            try db.query(sql, bindings) { row throws(StoreError) in records.append(try Self.record(row)) }
            return records
        }
    }

    /// Every entry, least recently used first. Caller's thread.
    public func resourcesByUse() throws(StoreError) -> [ResourceRecord] {
        try reader.use { db throws(StoreError) in
            var records: [ResourceRecord] = []
            try db.query("SELECT \(Self.resourceColumns) FROM resources ORDER BY last_used_at, key") { row throws(StoreError) in
                records.append(try Self.record(row))
            }
            return records
        }
    }

    /// Inserts or replaces an entry. Any thread; `done` on the writer thread.
    public func storeResource(_ record: ResourceRecord, done: (@Sendable (Result<Void, StoreError>) -> Void)?) {
        var counted: (@Sendable (Result<Int, StoreError>) -> Void)?
        if let done {
            counted = { result in done(result.map { _ in () }) }
        }
        writer.enqueue(.resourceIndex(.store(record), done: counted))
    }

    /// Renews `lastUsedAt`. Fire and forget, any thread.
    public func touchResources(_ keys: [String], at time: Double) {
        guard !keys.isEmpty else { return }
        writer.enqueue(.resourceIndex(.touch(keys, time), done: nil))
    }

    /// Deletes entries; `done` (writer thread) receives how many existed. Any thread.
    public func removeResources(_ keys: [String], done: @escaping @Sendable (Result<Int, StoreError>) -> Void) {
        writer.enqueue(.resourceIndex(.remove(keys), done: done))
    }

    public func removeResource(_ key: String, ifStoredAt storedAt: Double,
                               done: @escaping @Sendable (Result<Bool, StoreError>) -> Void) {
        writer.enqueue(.resourceIndex(.removeIfStoredAt(key, storedAt), done: { done($0.map { $0 > 0 }) }))
    }

    private static func record(_ row: SQLRow) throws(StoreError) -> ResourceRecord {
        let cipherName = row.text(10) ?? ""
        guard let cipher = ResourceCipher(rawValue: cipherName) else {
            throw StoreError("resources: unknown cipher '\(cipherName)' in the index")
        }
        return ResourceRecord(
            key: row.text(0) ?? "", url: row.text(1) ?? "", bytes: row.int(2), diskBytes: row.int(3),
            contentType: row.text(4), sha256: row.text(5) ?? "", etag: row.text(6), lastModified: row.text(7),
            storedAt: row.double(8), lastUsedAt: row.double(9), cipher: cipher, status: row.int(11),
            fileID: row.isNull(12) ? nil : UInt64(bitPattern: Int64(row.int(12))))
    }
}

/// A write to the `resources` table, run by the writer thread in its batch's transaction.
enum ResourceIndexWrite: Sendable {
    case store(ResourceRecord)
    case touch([String], Double)
    case remove([String])
    /// The entry, only while it is the copy stored at that time.
    case removeIfStoredAt(String, Double)

    /// Runs the statements; returns the rows changed. Writer thread.
    func apply(on db: SQLiteConnection) throws(StoreError) -> Int {
        switch self {
        case .store(let r):
            try db.run("""
                INSERT OR REPLACE INTO resources (\(SQLiteStore.resourceColumns))
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                [.text(r.key), .text(r.url), .int(r.bytes), .int(r.diskBytes), SQLValue(r.contentType), .text(r.sha256),
                 SQLValue(r.etag), SQLValue(r.lastModified), .double(r.storedAt), .double(r.lastUsedAt),
                 .text(r.cipher.rawValue), .int(r.status), r.fileID.map { .int(Int(Int64(bitPattern: $0))) } ?? .null])
            return db.changes
        case .touch(let keys, let time):
            var changed = 0
            for key in keys {
                try db.run("UPDATE resources SET last_used_at = max(last_used_at, ?) WHERE key = ?", [.double(time), .text(key)])
                changed += db.changes
            }
            return changed
        case .remove(let keys):
            var removed = 0
            for key in keys {
                try db.run("DELETE FROM resources WHERE key = ?", [.text(key)])
                removed += db.changes
            }
            return removed
        case .removeIfStoredAt(let key, let storedAt):
            try db.run("DELETE FROM resources WHERE key = ? AND stored_at = ?", [.text(key), .double(storedAt)])
            return db.changes
        }
    }
}
