import Foundation
import HydraCore
import HydraHTTP
import HydraLoop

/// One OAuth2 session (rest.md §1): its tokens, and the one token request in
/// flight that every request needing a token waits for.
///
/// Threading: any thread reads the state under its lock (a fresh token costs
/// one uncontended lock). A token request runs on the loop of the worker that
/// found the token missing or stale, on that worker's connection pool; every
/// waiter is resumed on its own loop. Waiters are resumed outside the lock.
final class OAuth2Session: Sendable {
    let name: String
    let scheme: AuthScheme
    private let settings: AuthScheme.OAuth2
    /// Builds the POST of a token request from its form fields (the manager's routing: TLS, headers, timeouts).
    private let makeRequest: @Sendable (_ form: [(String, String)]) throws(JobError) -> HTTPRequest
    /// Keeps the tokens at rest (sealed) or forgets them (nil); does nothing without a key.
    private let persist: @Sendable (OAuth2Tokens?) -> Void
    private let state: Locked<State>

    /// Starts `request` on the calling loop and calls back there (a worker's ``HTTPClient``).
    typealias Send = (_ request: HTTPRequest, _ completion: @escaping (Result<HTTPResponse, HTTPFailure>) -> Void) -> Void

    private struct Waiter: Sendable {
        let loop: EventLoop
        let resume: @Sendable (Result<String, JobError>) -> Void
    }

    private struct State {
        var tokens: OAuth2Tokens?
        var fetching = false
        var failed = false
        var waiters: [Waiter] = []
        /// Bumped by logout: a token request started before it is not kept.
        var generation = 0
        var tokenRequests = 0
    }

    /// The grant of one token request.
    private enum Grant {
        case clientCredentials
        case password(username: String, password: String)
        case refresh(String)
    }

    init(name: String, scheme: AuthScheme, restored: OAuth2Tokens?,
         makeRequest: @escaping @Sendable ([(String, String)]) throws(JobError) -> HTTPRequest,
         persist: @escaping @Sendable (OAuth2Tokens?) -> Void) {
        self.name = name
        self.scheme = scheme
        settings = scheme.oauth2!
        self.makeRequest = makeRequest
        self.persist = persist
        state = Locked(State(tokens: restored))
    }

    private var isPasswordGrant: Bool {
        if case .password = scheme { return true }
        return false
    }

    static func now() -> Double { Date().timeIntervalSince1970 }

    /// The access token when it is fresh (not in its refresh window); nil otherwise. Any thread.
    func freshToken(now: Double = OAuth2Session.now()) -> String? {
        state.withLock { s in
            guard let tokens = s.tokens, tokens.isFresh(at: now) else { return nil }
            return tokens.access
        }
    }

    /// Calls `body` on `loop` (the calling thread's) with a token: at once when
    /// one is fresh, else once the session's one token request in flight (started
    /// here, with `send`, if none is) has an answer. A failure has kind `auth`.
    func withToken(on loop: EventLoop, send: @escaping Send, _ body: @escaping (Result<String, JobError>) -> Void) {
        let now = Self.now()
        let bound = LoopBound(body, loop: loop)
        let waiter = Waiter(loop: loop, resume: { bound.value($0) })
        enum Next { case use(String), wait, fetch(Grant, Int), fail(JobError) }
        let next: Next = state.withLock { s in
            if let tokens = s.tokens, tokens.isFresh(at: now) { return .use(tokens.access) }
            s.waiters.append(waiter)
            if s.fetching { return .wait }
            if let refresh = s.tokens?.refresh {
                s.fetching = true
                return .fetch(.refresh(refresh), s.generation)
            }
            if !isPasswordGrant {
                s.fetching = true
                return .fetch(.clientCredentials, s.generation)
            }
            s.waiters.removeLast()
            // A password session without a refresh token uses its token to the end.
            if let tokens = s.tokens, tokens.isUnexpired(at: now) { return .use(tokens.access) }
            return .fail(JobError(.auth, "auth \(name): not logged in (auth.login, or hydra auth login \(name))"))
        }
        switch next {
        case .use(let token): body(.success(token))
        case .wait: break
        case .fail(let error): body(.failure(error))
        case .fetch(let grant, let generation): fetch(grant, generation: generation, send: send, then: nil)
        }
    }

    /// Marks `token` as refused (a 401) and tells whether the request may be
    /// sent again with another: true when the next ``withToken(on:send:_:)``
    /// can get one by itself (a refresh token, client credentials, or a token
    /// that already replaced this one). A token already replaced is left alone,
    /// so fifty 401s of the same old token cause one token request.
    ///
    /// False for a password session that holds no refresh token: it cannot
    /// renew without the password (never kept), so its token is dropped, the
    /// session reads `failed` in `auth.status` until the next `auth.login`,
    /// and the caller fails the request with the 401 (kind `http`).
    func reject(_ token: String) -> Bool {
        state.withLock { s in
            guard let tokens = s.tokens, tokens.access == token else {
                // Replaced (or being replaced) already; else whatever the session's grant can do.
                return s.tokens != nil || s.fetching || !isPasswordGrant
            }
            if tokens.refresh != nil || !isPasswordGrant {
                s.tokens?.expiresAt = 0
                return true
            }
            s.tokens = nil
            s.failed = true
            return false
        }
    }

    /// Logs in with the password grant (`auth.login`); `completion` runs on
    /// the loop `send` sends on, with when the token runs out (nil: never
    /// said). The password is sent once and not kept.
    func login(username: String, password: String, send: @escaping Send,
               completion: @escaping (Result<Double?, JobError>) -> Void) {
        let generation = state.withLock { s in
            s.fetching = true
            return s.generation
        }
        fetch(.password(username: username, password: password), generation: generation, send: send) { result in
            completion(result.map(\.expiresAt))
        }
    }

    /// Fetches a token now whatever the state (client credentials: `auth.login` without a password).
    func renew(send: @escaping Send, completion: @escaping (Result<Double?, JobError>) -> Void) {
        let (generation, refresh) = state.withLock { s in
            s.fetching = true
            return (s.generation, s.tokens?.refresh)
        }
        fetch(refresh.map(Grant.refresh) ?? .clientCredentials, generation: generation, send: send) { result in
            completion(result.map(\.expiresAt))
        }
    }

    /// Forgets the tokens, here and at rest (`auth.logout`). Any thread.
    func logout() {
        let waiters = state.withLock { s in
            s.tokens = nil
            s.failed = false
            s.generation += 1
            s.fetching = false
            defer { s.waiters = [] }
            return s.waiters
        }
        persist(nil)
        resume(waiters, .failure(JobError(.auth, "auth \(name): logged out")))
    }

    /// `auth.status`: never a token.
    func status(now: Double = OAuth2Session.now()) -> (state: String, expiresAt: Double?, tokenRequests: Int) {
        state.withLock { s in
            let expiresAt = s.tokens?.expiresAt
            if s.fetching { return ("refreshing", expiresAt, s.tokenRequests) }
            if let tokens = s.tokens, tokens.isUnexpired(at: now) { return ("valid", expiresAt, s.tokenRequests) }
            return (s.failed ? "failed" : "none", nil, s.tokenRequests)
        }
    }

    // MARK: - Token requests

    private func form(for grant: Grant) -> [(String, String)] {
        var form: [(String, String)]
        switch grant {
        case .clientCredentials: form = [("grant_type", "client_credentials")]
        case .password(let username, let password):
            form = [("grant_type", "password"), ("username", username), ("password", password)]
        case .refresh(let token): form = [("grant_type", "refresh_token"), ("refresh_token", token)]
        }
        if let scope = settings.scope { form.append(("scope", scope)) }
        // A public client (no secret) sends its id in HTTP Basic with an empty
        // secret (rest.md §1) and names itself in the body too (RFC 6749 §3.2.1),
        // for token endpoints that look for either.
        if settings.clientSecret == nil { form.append(("client_id", settings.clientID)) }
        return form
    }

    private func fetch(_ grant: Grant, generation: Int, send: @escaping Send,
                       then: ((Result<OAuth2Tokens, JobError>) -> Void)?) {
        let request: HTTPRequest
        do {
            request = try makeRequest(form(for: grant))
        } catch {
            settle(.failure(JobError(.auth, "auth \(name): \(error.message)")), generation: generation, then: then)
            return
        }
        state.withLock { $0.tokenRequests += 1 }
        send(request) { [self] result in
            let outcome: Result<OAuth2Tokens, JobError>
            switch result {
            case .success(let response):
                switch OAuth2Tokens.parse(response, now: Self.now()) {
                case .success(var tokens):
                    if tokens.refresh == nil, case .refresh(let old) = grant { tokens.refresh = old }  // RFC 6749 §6: may be kept
                    outcome = .success(tokens)
                case .failure(let refusal):
                    if case .refresh = grant, !isPasswordGrant, then == nil {
                        // A refused refresh token: client credentials can start over.
                        state.withLock { $0.tokens?.refresh = nil }
                        fetch(.clientCredentials, generation: generation, send: send, then: then)
                        return
                    }
                    outcome = .failure(JobError(.auth, "auth \(name): \(refusal.message)"))
                }
            case .failure(let failure):
                let reason = failure.kind == .timeout ? "the token request timed out" : "the token request failed"
                outcome = .failure(JobError(.auth, "auth \(name): \(reason): \(failure.message)"))
            }
            settle(outcome, generation: generation, then: then)
        }
    }

    /// Records a token request's outcome and resumes everyone waiting for it.
    private func settle(_ outcome: Result<OAuth2Tokens, JobError>, generation: Int,
                        then: ((Result<OAuth2Tokens, JobError>) -> Void)?) {
        let now = Self.now()
        var kept: OAuth2Tokens?
        let (waiters, result, overtaken): ([Waiter], Result<String, JobError>, Bool) = state.withLock { s in
            guard s.generation == generation else {
                // `auth.logout` came while this request was out: its waiters were failed then.
                return ([], .failure(JobError(.auth, "auth \(name): logged out")), true)
            }
            s.fetching = false
            let result: Result<String, JobError>
            switch outcome {
            case .success(let tokens):
                s.tokens = tokens
                s.failed = false
                kept = tokens
                result = .success(tokens.access)
            case .failure(let error):
                s.failed = true
                if let tokens = s.tokens, tokens.isUnexpired(at: now) {
                    // The old token is good until it runs out: the refresh is tried again on the next use.
                    result = .success(tokens.access)
                } else {
                    s.tokens = nil
                    result = .failure(error)
                }
            }
            defer { s.waiters = [] }
            return (s.waiters, result, false)
        }
        if let kept { persist(kept) }
        if overtaken, case .success = outcome {
            // A login (or renewal) that a logout overtook kept nothing: it must not answer "ok".
            then?(.failure(JobError(.auth, "auth \(name): logged out while logging in")))
        } else {
            then?(outcome)
        }
        resume(waiters, result)
    }

    private func resume(_ waiters: [Waiter], _ result: Result<String, JobError>) {
        for waiter in waiters {
            if waiter.loop.inEventLoop {
                waiter.resume(result)
            } else {
                _ = waiter.loop.execute { waiter.resume(result) }
            }
        }
    }
}
