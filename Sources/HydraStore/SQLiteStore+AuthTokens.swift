import HydraCore

/// The auth-token slice (``AuthTokenStore``) on SQLite: the `auth_tokens`
/// table of migration 5, holding only what the REST manager sealed.
extension SQLiteStore {
    /// Every session's sealed tokens. Caller's thread.
    public func authTokens() throws(StoreError) -> [String: [UInt8]] {
        try reader.use { db throws(StoreError) in
            var tokens: [String: [UInt8]] = [:]
            try db.query("SELECT name, sealed FROM auth_tokens") { row in
                if let name = row.text(0) { tokens[name] = row.blob(1) }
            }
            return tokens
        }
    }

    /// Replaces (nil: removes) a session's sealed tokens. Fire and forget, any thread.
    public func storeAuthTokens(_ name: String, sealed: [UInt8]?) {
        writer.enqueue(.authTokens(name: name, sealed: sealed))
    }
}
