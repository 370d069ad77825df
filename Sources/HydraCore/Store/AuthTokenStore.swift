/// The auth-token slice of the state store (rest.md §1): the tokens of each
/// OAuth2 session, sealed (AES-GCM with the `HYDRA_SHARED_KEY` key) by the
/// REST manager before they get here, so the store never holds one in clear.
/// A server without the key keeps tokens in memory only and never calls it.
/// Threading as for every slice (see ``StateStore``).
public protocol AuthTokenStore: Sendable {
    /// Every session's sealed tokens, by session name.
    func authTokens() throws(StoreError) -> [String: [UInt8]]

    /// Replaces the sealed tokens of session `name`; nil removes them. Fire and forget.
    func storeAuthTokens(_ name: String, sealed: [UInt8]?)
}
