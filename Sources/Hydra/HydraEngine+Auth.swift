import HydraCore
import HydraREST

/// Auth sessions (rest.md §1) from Swift: what `auth.login`, `auth.logout`
/// and `auth.status` do over JSON-RPC.
extension HydraEngine {
    /// Logs session `name` in and returns when its token runs out (nil: the
    /// token endpoint did not say). An `oauth2-password` session needs
    /// `username` and `password` (sent once, never kept); a client-credentials
    /// one fetches a token now. Throws ``JobError`` (`invalid`, or `auth` when
    /// the token endpoint refuses or cannot be reached).
    @discardableResult
    public func login(auth name: String, username: String? = nil, password: String? = nil) async throws(JobError) -> Double? {
        let result: Result<Double?, JobError> = await withCheckedContinuation { continuation in
            rest.login(name, username: username, password: password) { continuation.resume(returning: $0) }
        }
        return try result.get()
    }

    /// Forgets session `name`'s tokens, in memory and at rest.
    public func logout(auth name: String) throws(JobError) { try rest.logout(name) }

    /// Session `name`'s state; never a token.
    public func authStatus(_ name: String) throws(JobError) -> AuthStatus { try rest.authStatus(name) }
}
