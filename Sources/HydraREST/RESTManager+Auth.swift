import Foundation
import HydraCore
import HydraHTTP
import HydraLoop

/// What `auth.status` tells about a session: never a token.
public struct AuthStatus: Sendable {
    public var name: String
    public var type: String
    /// `none`, `valid`, `refreshing` or `failed`.
    public var state: String
    /// When the token runs out (seconds since 1970), when one is held and its
    /// lifetime known; on the wire an ISO-8601 UTC string like every time.
    public var expiresAt: Double?
    /// Token requests sent since start (an extension, for operators and tests).
    public var tokenRequests: Int

    /// The `auth.status` object.
    public var json: JSONValue {
        var o: [(String, JSONValue)] = [("name", .string(name)), ("type", .string(type)), ("state", .string(state))]
        if let expiresAt { o.append(("expiresAt", .string(HydraEvent.format(expiresAt)))) }
        o.append(("tokenRequests", .int(tokenRequests)))
        return .object(.init(uniqueKeysWithValues: o))
    }
}

extension RESTManager {
    /// The names of the configured auth sessions, in configuration order.
    public var authNames: [String] { Array(configuration.auth.keys) }

    /// A session's state (`auth.status`). Throws kind `invalid` for an unknown name.
    public func authStatus(_ name: String) throws(JobError) -> AuthStatus {
        guard let scheme = configuration.auth[name] else { throw JobError(.invalid, "name: unknown auth '\(name)'") }
        guard let session = sessions.session(name) else {
            // Fixed credentials are always there.
            return AuthStatus(name: name, type: scheme.type, state: "valid", expiresAt: nil, tokenRequests: 0)
        }
        let status = session.status()
        return AuthStatus(name: name, type: scheme.type, state: status.state, expiresAt: status.expiresAt,
                          tokenRequests: status.tokenRequests)
    }

    /// Logs session `name` in (`auth.login`): the password grant for an
    /// `oauth2-password` session (the password is sent once and never kept), a
    /// token fetched now for a client-credentials one. `completion` (any thread)
    /// gets when the token runs out (nil: never said). Errors: kind `invalid`
    /// for a bad name or missing credentials, `auth` when the token endpoint refuses.
    public func login(_ name: String, username: String?, password: String?,
                      completion: @escaping @Sendable (Result<Double?, JobError>) -> Void) {
        guard let scheme = configuration.auth[name] else {
            completion(.failure(JobError(.invalid, "name: unknown auth '\(name)'")))
            return
        }
        guard let session = sessions.session(name) else {
            completion(.failure(JobError(.invalid, "name: auth '\(name)' is of type \(scheme.type): it has nothing to log in to")))
            return
        }
        if case .password = scheme {
            guard let username, !username.isEmpty else {
                completion(.failure(JobError(.invalid, "username: required for an oauth2-password session")))
                return
            }
            guard let password, !password.isEmpty else {
                completion(.failure(JobError(.invalid, "password: required for an oauth2-password session (and not empty)")))
                return
            }
            onLoginWorker(completion) { send, done in
                session.login(username: username, password: password, send: send, completion: done)
            }
        } else {
            // A client-credentials session logs in with its own credentials: a user name
            // or password given here would be ignored, so they are refused (a typo never
            // silently changes what a call does).
            if let field = username != nil ? "username" : password != nil ? "password" : nil {
                completion(.failure(JobError(.invalid, "\(field): auth '\(name)' is of type \(scheme.type): it takes no \(field)")))
                return
            }
            onLoginWorker(completion) { send, done in session.renew(send: send, completion: done) }
        }
    }

    /// Forgets a session's tokens, in memory and at rest (`auth.logout`).
    public func logout(_ name: String) throws(JobError) {
        guard let scheme = configuration.auth[name] else { throw JobError(.invalid, "name: unknown auth '\(name)'") }
        guard let session = sessions.session(name) else {
            throw JobError(.invalid, "name: auth '\(name)' is of type \(scheme.type): it has nothing to log out of")
        }
        session.logout()
    }

    /// Runs `body` on a remote worker's loop with a way to send there.
    private func onLoginWorker(_ completion: @escaping @Sendable (Result<Double?, JobError>) -> Void,
                               _ body: @escaping @Sendable (@escaping OAuth2Session.Send,
                                                            @escaping (Result<Double?, JobError>) -> Void) -> Void) {
        guard let worker = loginWorker.withLock({ $0 }) else {
            completion(.failure(JobError(.invalid, "no remote worker runs the REST manager")))
            return
        }
        let accepted = worker.loop.execute {
            let client = RESTManager.httpClient(on: worker)
            body(RESTManager.sender(client), completion)
        }
        if !accepted { completion(.failure(JobError(.cancelled, "the engine is shutting down"))) }
    }

    /// Sends a token request on `client`'s loop; a request that cannot start answers at once.
    static func sender(_ client: HTTPClient) -> OAuth2Session.Send {
        { request, completion in
            do throws(HTTPFailure) {
                _ = try client.start(request, completion: completion)
            } catch {
                completion(.failure(error))
            }
        }
    }
}
