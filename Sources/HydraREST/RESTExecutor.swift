import Crypto
import Foundation
import HydraCore
import HydraHTTP
import HydraLoop
import OrderedCollections

/// Runs remote jobs on one remote worker: builds the request, answers from a
/// dummy when one matches, drives the transfer on the worker's ``HTTPClient``,
/// judges the response (`expect`, dogma), and retries with backoff on the
/// loop's timers. Loop-confined (see ``JobExecutor``).
final class RESTExecutor: JobExecutor {
    private let manager: RESTManager
    private let loop: EventLoop
    private let client: HTTPClient
    @exclusivity(unchecked) private var calls = CounterTable<RemoteCall>(capacity: 256)
    /// Merged requests (`coalesce`): by request key, the calls waiting for the
    /// one identical request in flight (whose call is not in the list).
    @exclusivity(unchecked) private var inFlight: [String: [RemoteCall]] = [:]

    /// One remote job across its attempts.
    private final class RemoteCall {
        let task: WorkTask
        let handle: TaskHandle
        /// The request; a `saveAs` download's file descriptor is set in it once opened.
        @exclusivity(unchecked) var request: PreparedRequest
        let started = DispatchTime.now().uptimeNanoseconds
        @exclusivity(unchecked) var attempts = 0
        @exclusivity(unchecked) var transfer: HTTPTransferID?
        @exclusivity(unchecked) var timer: ScheduledTask?
        /// Where a successful response is cached, and for how long.
        @exclusivity(unchecked) var cacheKey: String?
        @exclusivity(unchecked) var cacheTTL: Double = 0
        /// `"http"` lifetimes: the response says how long it is fresh (rest.md §3).
        @exclusivity(unchecked) var cacheFromHTTP = false
        /// `staleIfErrorSec`, and the stored response that may answer when every attempt fails.
        @exclusivity(unchecked) var staleIfErrorSec: Double?
        @exclusivity(unchecked) var staleFallback: CachedResponse?
        /// False once an attempt failed in a way that does not allow the stale answer
        /// (rest.md §3: only when *every* attempt failed with kind network, timeout or a 5xx).
        @exclusivity(unchecked) var everyFailureAllowsStale = true
        /// The stale stored response a conditional request (`If-None-Match`) revalidates.
        @exclusivity(unchecked) var revalidating: CachedResponse?
        /// The temporary file a `saveAs` body goes to across attempts, until committed or discarded.
        @exclusivity(unchecked) var download: DownloadFile?
        /// Polling (`repeat`), and the round under way (from 1).
        let polling: RepeatSpec?
        @exclusivity(unchecked) var round = 1
        /// Set when identical requests in flight are shared (`coalesce`): what identifies them
        /// (for a session's call, with the token it carries: see ``authorize(_:_:)``).
        @exclusivity(unchecked) var mergeKey: String?
        /// The merge key without a token, as ``mergeKey(_:_:)`` made it.
        @exclusivity(unchecked) var requestMergeKey: String?
        /// True while this call waits for another call's identical request.
        @exclusivity(unchecked) var following = false
        /// The OAuth2 token the request carries now, and whether it waits for one.
        @exclusivity(unchecked) var token: String?
        @exclusivity(unchecked) var waitingForToken = false
        /// Set once a 401 made the call get a new token and send again (once only).
        @exclusivity(unchecked) var reauthorized = false
        /// The files a streamed body reads, closed when the call ends.
        @exclusivity(unchecked) var uploads: [UploadFile] = []
        /// True while the body's `Content-MD5` is computed off the loop; a cancel then waits for it.
        @exclusivity(unchecked) var digesting = false
        @exclusivity(unchecked) var cancelledWhileDigesting = false
        /// The embedders' hooks for this call's api (rest.md §9); nil when none are registered.
        @exclusivity(unchecked) var hooks: RESTHooks.Resolved?
        /// The dummy reply that answers every attempt instead of the network.
        @exclusivity(unchecked) var dummy: DummyReply?

        init(task: WorkTask, handle: TaskHandle, request: PreparedRequest, polling: RepeatSpec?) {
            self.task = task
            self.handle = handle
            self.request = request
            self.polling = polling
            // A step resumed after a restart counts the attempts it made before; a
            // polling one the rounds it made (each round has the whole retry policy).
            if let polling { round = min(task.roundsMade + 1, max(1, polling.maxTimes)) } else { attempts = task.attemptsMade }
        }

        var elapsedMs: Double {
            (Double(DispatchTime.now().uptimeNanoseconds - started) / 1e5).rounded() / 10
        }
    }

    init(manager: RESTManager, worker: WorkerContext) {
        self.manager = manager
        loop = worker.loop
        client = RESTManager.httpClient(on: worker)
    }

    func start(_ task: WorkTask, handle: TaskHandle) {
        guard case .remote(let spec) = task.spec.body else {
            handle.finish(.failure(JobError(.internal, "not a remote job")))
            return
        }
        let prepared: PreparedRequest
        do {
            let manager = self.manager
            prepared = try manager.resolver.prepare(spec, timeoutMs: task.spec.timeoutMs) { name, body in
                try manager.dogma(named: name)?.encode(body: body)
            }
        } catch {
            handle.finish(.failure(error))
            return
        }
        // Checked at submit unless a reference named it: never send what could not be decoded.
        if let name = spec.dogma, manager.dogma(named: name) == nil {
            handle.finish(.failure(JobError(.invalid, "dogma: unknown dogma '\(ValidationError.clip(name))'")))
            return
        }
        // As at submit, for a method, `cache` or `coalesce` that came from a reference.
        if prepared.http.method != "GET", spec.cache != nil || spec.coalesce == true {
            let field = spec.cache != nil ? "cache: only GET responses are cached" : "coalesce: only GET requests are merged"
            handle.finish(.failure(JobError(.invalid, "\(field) (the method is \(prepared.http.method))")))
            return
        }
        let call = RemoteCall(task: task, handle: handle, request: prepared, polling: spec.repeat)
        call.mergeKey = mergeKey(spec, prepared)
        call.requestMergeKey = call.mergeKey
        call.hooks = manager.hooks(api: prepared.api)
        calls.insert(call, forKey: task.token)
        if let reply = dummyReply(for: prepared) {
            manager.statistics.countDummy()
            handle.skipped(reason: "dummy")
            call.dummy = reply
            attempt(call)
            return
        }
        if let cache = manager.cache, let plan = cachePlan(spec, prepared) {
            let now = Date().timeIntervalSince1970
            let entry = plan.mode == .bypass ? nil : cache.storedResponse(plan.key)
            if plan.mode == .use || plan.mode == .only, let entry, now < entry.expiresAt, case .object(var hit) = entry.value {
                manager.statistics.countCacheHit()
                handle.skipped(reason: "cache")
                hit["fromCache"] = true
                hit["attempts"] = 0
                hit["elapsedMs"] = .double(call.elapsedMs)
                finish(call, .success(.object(hit)))
                return
            }
            manager.statistics.countCacheMiss()
            if plan.mode == .only {
                finish(call, .failure(JobError(.invalid, "cache: no fresh cached response (cache.mode only)")))
                return
            }
            if plan.mode != .bypass, plan.ttl > 0 || plan.fromHTTP {
                call.cacheKey = plan.key
                call.cacheTTL = plan.ttl
                call.cacheFromHTTP = plan.fromHTTP
                call.staleIfErrorSec = plan.staleIfErrorSec
            }
            if let entry, plan.mode != .bypass {
                if plan.staleIfErrorSec != nil { call.staleFallback = entry }
                if plan.mode == .use, let validators = HTTPCachePolicy.validators(entry.value["headers"]) {
                    // Stale, with validators: ask whether it is still good (a 304 renews it).
                    if let etag = validators.etag { call.request.http.headers.append(HTTPHeader("If-None-Match", etag)) }
                    if let modified = validators.lastModified {
                        call.request.http.headers.append(HTTPHeader("If-Modified-Since", modified))
                    }
                    call.revalidating = entry
                    // Its answer may be a 304 about this call's own stored response: nothing to
                    // share with a call that did not ask (it would fail with HTTP 304).
                    call.mergeKey = nil
                    call.requestMergeKey = nil
                }
            }
        }
        if let plan = prepared.upload {
            do {
                call.request.http.bodyStream = try openUpload(plan, call: call)
            } catch {
                finish(call, .failure(error))
                return
            }
            if prepared.digestUpload {
                digest(call)
                return
            }
        }
        attempt(call)
    }

    // MARK: - Uploads

    /// Opens the files of a streamed body and lays the body out (rest.md §2).
    /// A file that is missing, a link, or not under the state folder fails the
    /// call with kind `invalid` naming the field.
    private func openUpload(_ plan: UploadPlan, call: RemoteCall) throws(JobError) -> HTTPBodyStream {
        let gzip = call.request.gzipUpload
        func open(_ text: String, field: String) throws(JobError) -> UploadFile {
            do {
                let file = try UploadFile(text, stateDirectory: manager.resolver.stateDirectory,
                                          reserved: manager.resolver.reservedPaths)
                call.uploads.append(file)
                return file
            } catch {
                throw JobError(.invalid, "\(field): \(error.message)")
            }
        }
        switch plan {
        case .file(let text):
            let file = try open(text, field: "bodyFile")
            return HTTPBodyStream([.file(descriptor: file.descriptor, length: file.length)], gzip: gzip)
        case .multipart(let boundary, let parts):
            var segments: [HTTPBodyStream.Segment] = []
            var text: [UInt8] = []
            func quoted(_ value: String) -> String { value.replacingOccurrences(of: "\"", with: "%22") }
            for (i, part) in parts.enumerated() {
                text += Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"\(quoted(part.name))\"".utf8)
                switch part.content {
                case .value(let value):
                    text += Array("\r\n".utf8)
                    if case .string(let string) = value {
                        if let type = part.contentType { text += Array("Content-Type: \(type)\r\n".utf8) }
                        text += Array("\r\n".utf8) + Array(string.utf8)
                    } else {
                        text += Array("Content-Type: \(part.contentType ?? "application/json")\r\n\r\n".utf8) + JSONWriter.bytes(value)
                    }
                case .file(let path):
                    let file = try open(path, field: "body.parts[\(i)].file")
                    text += Array("; filename=\"\(quoted(part.filename ?? file.name))\"\r\n".utf8)
                    text += Array("Content-Type: \(part.contentType ?? "application/octet-stream")\r\n\r\n".utf8)
                    segments.append(.bytes(text))
                    text = []
                    segments.append(.file(descriptor: file.descriptor, length: file.length))
                }
                text += Array("\r\n".utf8)
            }
            text += Array("--\(boundary)--\r\n".utf8)
            segments.append(.bytes(text))
            return HTTPBodyStream(segments, gzip: gzip)
        }
    }

    /// Computes a streamed body's `Content-MD5` on libuv's thread pool (a
    /// 1 GiB file takes seconds to read; the loop goes on meanwhile), then
    /// sends the request.
    private func digest(_ call: RemoteCall) {
        guard let stream = call.request.http.bodyStream else {
            attempt(call)
            return
        }
        call.digesting = true
        loop.offload({ RESTExecutor.md5(of: stream) }) { [self] result in
            call.digesting = false
            guard calls[call.task.token] === call else {
                // The executor closed meanwhile (its client too): only the files are left to close.
                for file in call.uploads { file.close() }
                return
            }
            if call.cancelledWhileDigesting {
                finish(call, .failure(JobError(.cancelled, "cancelled")))
                return
            }
            switch result {
            case .success(let md5):
                call.request.http.headers.append(HTTPHeader("Content-MD5", md5))
                attempt(call)
            case .failure(let error):
                finish(call, .failure(error))
            }
        }
    }

    /// The base64 MD5 of a streamed body as it will be sent. Blocking file I/O: the thread pool.
    private static func md5(of stream: HTTPBodyStream) -> Result<String, JobError> {
        let reader = HTTPBodyReader(stream)
        var hash = Insecure.MD5()
        var buffer = [UInt8](repeating: 0, count: 256 << 10)
        while true {
            let n = buffer.withUnsafeMutableBytes { reader.read(into: $0) }
            if n < 0 { return .failure(JobError(.invalid, reader.failure ?? "cannot read the body")) }
            if n == 0 { return .success(Data(hash.finalize()).base64EncodedString()) }
            hash.update(data: buffer[..<n])
        }
    }

    /// How a job uses the cache: its `cache` spec, else its api's `cacheTTL`
    /// (mode `use`). Only GET responses are cached. The key is the method and
    /// the URL (without the query when the api says `cacheIgnoreQuery`), plus
    /// a digest of the request's credentials when it has any (see
    /// ``CacheKey``): one caller's response is never another's.
    private func cachePlan(_ spec: RemoteSpec, _ request: PreparedRequest)
        -> (mode: CacheSpec.Mode, ttl: Double, fromHTTP: Bool, staleIfErrorSec: Double?, key: String)?
    {
        let api = request.api.flatMap { manager.configuration.apis[$0] }
        let fromHTTP = spec.cache.map { $0.ttlFromHTTP || ($0.ttlSec == nil && api?.cacheTTLFromHTTP == true) }
            ?? api?.cacheTTLFromHTTP ?? false
        let ttl = spec.cache?.ttlSec ?? api?.cacheTTL
        // A `saveAs` job's result names its own file, which a stored response would not
        // write; a polling job judges every round's response: neither is answered from the cache.
        guard request.http.method == "GET", request.saveAs == nil, spec.repeat == nil,
              spec.cache != nil || (ttl ?? 0) > 0 || fromHTTP else { return nil }
        let stale = (spec.cache?.staleIfErrorSec ?? api?.staleIfErrorSec).map(Double.init)
        var url = request.http.url
        if api?.cacheIgnoreQuery == true, let q = url.firstIndex(of: "?") { url = String(url[..<q]) }
        var key = CacheKey.make(url: url, headers: request.http.headers, secrets: request.secrets,
                                keyedBy: manager.cache?.keySecret ?? [])
        if let session = request.authSession { key += " session=" + session }
        // A result decoded with another dogma (the job's, else its api's) is no answer
        // for a job that decodes otherwise; the configuration's default keeps the plain key.
        if let dogma = request.dogma, dogma != manager.configuration.defaults.dogma { key += " dogma=" + dogma }
        return (spec.cache?.mode ?? .use, Double(ttl ?? 0), fromHTTP, stale, key)
    }

    func reconfigure(_ limits: WorkerLimits) {
        client.setPoolOptions(HTTPPoolOptions(maxConnections: limits.maxConnections,
                                              maxHostConnections: limits.maxHostConnections))
    }

    func cancel(_ task: WorkTask, handle: TaskHandle) {
        guard let call = calls[task.token] else { return }
        if call.digesting {
            // Its files are being read off the loop: the call ends when that thread is done with them.
            call.cancelledWhileDigesting = true
            return
        }
        if call.waitingForToken {
            // Its token request goes on for the others; the call ends now and ignores the answer.
            call.waitingForToken = false
            finish(call, .failure(JobError(.cancelled, "cancelled")))
            return
        }
        if call.following, let key = call.mergeKey {
            // Waiting for another call's request: it leaves the queue, the request goes on.
            inFlight[key]?.removeAll { $0 === call }
            call.following = false
            finish(call, .failure(JobError(.cancelled, "cancelled")))
            return
        }
        if let transfer = call.transfer {
            client.cancel(transfer)  // its completion finishes the call
        } else {
            call.timer?.cancel()
            call.timer = nil
            finish(call, .failure(JobError(.cancelled, "cancelled")))
        }
    }

    func close() {
        inFlight.removeAll()
        for call in calls.allValues {
            call.timer?.cancel()
            call.download?.discard()
            // A file the thread pool still reads for a digest stays open until it is done (the answer closes it).
            if !call.digesting { for file in call.uploads { file.close() } }
        }
        calls.removeAll()
        client.close()
    }

    // MARK: - Attempts

    /// The key of identical requests when `call` may share one in flight:
    /// `coalesce` (job, else api) on a GET with no body nor `saveAs`; the
    /// method, the URL and every header (credentials included) tell them apart.
    private func mergeKey(_ spec: RemoteSpec, _ request: PreparedRequest) -> String? {
        let api = request.api.flatMap { manager.configuration.apis[$0] }
        guard spec.coalesce ?? api?.coalesce ?? false, request.http.method == "GET", request.http.body == nil,
              request.saveAs == nil else { return nil }
        var key = "GET " + request.http.url
        // The api's preparers and processors run for the request that is sent: calls of another api do not share it.
        if let api = request.api { key += "\napi " + api }
        if let session = request.authSession { key += "\nsession " + session }
        for header in request.http.headers.sorted(by: { $0.name.lowercased() < $1.name.lowercased() }) {
            key += "\n" + header.name.lowercased() + ": " + header.value
        }
        return key
    }

    private func attempt(_ call: RemoteCall) {
        call.attempts += 1
        if let reply = call.dummy {
            answer(call, with: reply)
            return
        }
        if let name = call.request.authSession, let session = manager.sessions.session(name) {
            if let token = session.freshToken() {
                authorize(call, token)
            } else {
                // One token request for every call that needs it, wherever it runs.
                call.waitingForToken = true
                // The wait counts against the attempt's time limit, as the transfer does.
                let limit = call.request.http.timeoutMilliseconds ?? 0
                let waitStarted = DispatchTime.now().uptimeNanoseconds
                if limit > 0 {
                    call.timer = loop.schedule(afterMilliseconds: UInt64(limit)) { [unowned self] in
                        call.timer = nil
                        guard call.waitingForToken else { return }
                        call.waitingForToken = false
                        self.completed(call, .failure(HTTPFailure(.timeout,
                            "timed out after \(limit) ms waiting for the token of auth '\(name)'")))
                    }
                }
                session.withToken(on: loop, send: RESTManager.sender(client)) { [unowned self] result in
                    guard call.waitingForToken, self.calls[call.task.token] === call else { return }
                    call.waitingForToken = false
                    call.timer?.cancel()
                    call.timer = nil
                    switch result {
                    case .success(let token):
                        self.authorize(call, token)
                        guard limit > 0 else { return self.transmit(call) }
                        // This attempt's transfer gets what the wait left (the next attempt the whole limit).
                        let waited = Int((DispatchTime.now().uptimeNanoseconds - waitStarted) / 1_000_000)
                        call.request.http.timeoutMilliseconds = max(1, limit - waited)
                        self.transmit(call)
                        call.request.http.timeoutMilliseconds = limit
                    case .failure(let error):
                        self.manager.statistics.countFailure()
                        self.finish(call, .failure(error))
                    }
                }
                return
            }
        }
        transmit(call)
    }

    /// One attempt answered by a dummy reply, after its delay: as a response
    /// from the network, so processors, `expect`, the api's dogma and the retry
    /// policy see it (HJ's behaviour). A delay past the job's timeout is a timeout.
    private func answer(_ call: RemoteCall, with reply: DummyReply) {
        if let timeout = call.request.http.timeoutMilliseconds, timeout > 0, timeout < reply.delayMs {
            call.timer = loop.schedule(afterMilliseconds: UInt64(timeout)) { [unowned self] in
                call.timer = nil
                self.completed(call, .failure(HTTPFailure(.timeout,
                    "timed out after \(timeout) ms (dummy response delayed \(reply.delayMs) ms)")))
            }
            return
        }
        call.timer = loop.schedule(afterMilliseconds: UInt64(reply.delayMs)) { [unowned self] in
            call.timer = nil
            self.completed(call, .success(RESTExecutor.response(of: reply)))
        }
    }

    /// Puts `token` in the call's request (`Authorization: Bearer`), in place of any it had.
    private func authorize(_ call: RemoteCall, _ token: String) {
        call.token = token
        // Calls merge only when they carry the same token: a follower masks what comes back
        // with its own token, so another one (replaced meanwhile) would show in its result;
        // and a 401 must reject the token that was sent.
        if let key = call.requestMergeKey { call.mergeKey = key + "\ntoken " + token }
        call.request.http.headers.removeAll { $0.hasName("authorization") }
        call.request.http.headers.append(HTTPHeader("Authorization", "Bearer " + token))
    }

    /// Sends the call's request, or joins an identical one in flight (`coalesce`).
    private func transmit(_ call: RemoteCall) {
        if let key = call.mergeKey {
            if inFlight[key] != nil {
                // An identical request is under way: its response is this call's too.
                inFlight[key]!.append(call)
                call.following = true
                manager.statistics.countMerged()
                return
            }
            inFlight[key] = []
        }
        manager.statistics.countRequest()
        if let saveAs = call.request.saveAs, call.download == nil {
            do {
                let download = try DownloadFile(saveAs, stateDirectory: manager.resolver.stateDirectory)
                call.download = download
                call.request.http.saveToFile = download.descriptor
            } catch {
                finish(call, .failure(error))
                return
            }
        }
        var outgoing = call.request.http
        if let preparers = call.hooks?.preparers, !preparers.isEmpty {
            // Embedders' preparers change this attempt's copy (a signature is made per attempt).
            do throws(JobError) {
                let context = hookContext(call)
                for preparer in preparers { try preparer(&outgoing, context) }
            } catch {
                let followers = call.mergeKey.flatMap { inFlight.removeValue(forKey: $0) } ?? []
                finish(call, .failure(error))
                for follower in followers { shared(.failure(HTTPFailure(.invalid, error.message)), with: follower) }
                return
            }
        }
        do {
            let handle = call.handle
            // Passed as it is stored when no preparer changed it: no copy of the request per attempt.
            call.transfer = try client.start(
                outgoing,
                progress: call.request.http.reportsProgress ? { progress in
                    handle.progress(bytes: progress.bytes, totalBytes: progress.totalBytes, upload: progress.upload)
                } : nil,
                completion: { [unowned self] result in
                    call.transfer = nil
                    let followers = call.mergeKey.flatMap { self.inFlight.removeValue(forKey: $0) } ?? []
                    self.completed(call, result)
                    for follower in followers { self.shared(result, with: follower) }
                })
        } catch {
            let followers = call.mergeKey.flatMap { inFlight.removeValue(forKey: $0) } ?? []
            finish(call, .failure(JobError(.invalid, error.message)))
            for follower in followers { shared(.failure(HTTPFailure(.invalid, error.message)), with: follower) }
        }
    }

    /// A merged call gets the response of the request it waited for and judges
    /// it with its own `expect`, dogma and retry policy; when that request was
    /// cancelled (its own job was), the call sends its own instead.
    private func shared(_ result: Result<HTTPResponse, HTTPFailure>, with call: RemoteCall) {
        call.following = false
        if case .failure(let failure) = result, failure.kind == .cancelled, !call.handle.isCancelled {
            call.attempts -= 1
            attempt(call)
            return
        }
        completed(call, result)
    }

    private func completed(_ call: RemoteCall, _ result: Result<HTTPResponse, HTTPFailure>) {
        let outcome: StepOutcome
        var retryAfterMs: Int?
        switch result {
        case .success(var response):
            if response.status == 304, let entry = call.revalidating {
                revalidated(call, entry, response)
                return
            }
            if response.status == 401, let token = call.token, !call.reauthorized, !call.handle.isCancelled,
               let session = call.request.authSession.flatMap(manager.sessions.session) {
                // Once on a 401 (rest.md §1): a new token, and the same request again. A session that
                // cannot get one by itself (a password grant without a refresh token) fails it with this 401.
                call.reauthorized = true
                if session.reject(token) {
                    call.attempts -= 1
                    attempt(call)
                    return
                }
            }
            var errorBodyLeftOut = false
            if let download = call.download, !Self.expects(response.status, call) {
                // A saveAs answer the job does not expect keeps its body in the error, as any other
                // (protocol §4), when it is small enough to read back on the loop.
                if let body = download.contents(upTo: call.request.errorBodyLimit) { response.body = body } else { errorBodyLeftOut = true }
            }
            if !call.request.secrets.isEmpty || call.token != nil {
                // A server that echoes the credentials must not put them in a result or an event.
                response.mask(call.request.secrets)
                if let token = call.token { response.mask(token) }
            }
            if let processors = call.hooks?.processors, !processors.isEmpty {
                do throws(JobError) {
                    let context = hookContext(call)
                    for processor in processors { try processor(&response, context) }
                } catch {
                    rejected(call, error)
                    return
                }
            }
            switch judge(response: response, call: call, errorBodyLeftOut: errorBodyLeftOut) {
            case .success(let built):
                if let polling = call.polling, pollAgain(call, polling, result: built, bytes: response.bodyBytes) { return }
                do {
                    try call.download?.commit()
                } catch {
                    finish(call, .failure(error))
                    return
                }
                succeed(call, built)
                return
            case .failure(var error):
                if error.kind == .http, let mapper = call.hooks?.mapper,
                   let message = mapper(DogmaResponse(status: response.status, headers: response.headers, body: response.body),
                                        hookContext(call)) {
                    error.message = message
                }
                outcome = .failure(error)
                if RESTExecutor.isRetryable(error), let value = response.header("retry-after") {
                    // Honoured in full (protocol §4), not bounded by the policy's maxBackoffMs.
                    retryAfterMs = RetryAfter.milliseconds(value)
                }
            }
        case .failure(let failure):
            switch failure.kind {
            case .cancelled: outcome = .failure(JobError(.cancelled, "cancelled"))
            case .timeout: outcome = .failure(JobError(.timeout, failure.message))
            case .network: outcome = .failure(JobError(.network, failure.message))
            case .tls: outcome = .failure(JobError(.tls, failure.message))
            case .invalid: outcome = .failure(JobError(.invalid, failure.message))
            case .diskFull: outcome = .failure(JobError(.tooLarge, failure.message))
            case .tooLarge:
                let limit = call.request.http.maxBodyBytes ?? 0
                outcome = .failure(JobError(.tooLarge,
                    "the response body is larger than defaults.maxBodyBytes (\(limit) bytes, counted after decoding); use saveAs for larger bodies"))
            }
        }
        if case .failure(let error, _) = outcome, !RESTExecutor.allowsStaleAnswer(error) { call.everyFailureAllowsStale = false }
        if case .failure(let error, _) = outcome, scheduleRetry(call, error, afterMs: retryAfterMs) { return }
        if case .failure = outcome, let entry = call.staleFallback, let stale = call.staleIfErrorSec,
           call.everyFailureAllowsStale, Date().timeIntervalSince1970 <= entry.expiresAt + stale,
           case .object(var answer) = entry.value {
            // Offline answer (rest.md §3): the stored response, marked stale, and not stored again.
            call.cacheKey = nil
            answer["fromCache"] = true
            answer["stale"] = true
            answer["attempts"] = .int(call.attempts)
            answer["elapsedMs"] = .double(call.elapsedMs)
            call.handle.skipped(reason: "stale")
            finish(call, .success(.object(answer)))
            return
        }
        if case .failure = outcome { manager.statistics.countFailure() }
        finish(call, outcome)
    }

    /// A response a processor rejected: retried or failed like a judged failure.
    private func rejected(_ call: RemoteCall, _ error: JobError) {
        if !RESTExecutor.allowsStaleAnswer(error) { call.everyFailureAllowsStale = false }
        if scheduleRetry(call, error, afterMs: nil) { return }
        manager.statistics.countFailure()
        finish(call, .failure(error))
    }

    /// Schedules the call's next attempt when `error` is worth one and the
    /// policy has attempts left (after `Retry-After` when the server gave one);
    /// false when the call ends here.
    private func scheduleRetry(_ call: RemoteCall, _ error: JobError, afterMs retryAfterMs: Int?) -> Bool {
        guard RESTExecutor.isRetryable(error), call.attempts < call.request.retry.maxAttempts, !call.handle.isCancelled else {
            return false
        }
        // The backoff is within 0...maxBackoffMs and Retry-After within the ceiling; the ceiling
        // also bounds a policy with a huge maxBackoffMs.
        let delay = max(0, min(retryAfterMs ?? call.request.retry.delayMs(afterAttempt: call.attempts), RetryAfter.ceilingMs))
        manager.statistics.countRetry()
        call.handle.retrying(attempt: call.attempts + 1, delayMs: delay, error: error)
        call.timer = loop.schedule(afterMilliseconds: UInt64(delay)) { [unowned self] in
            call.timer = nil
            self.attempt(call)
        }
        return true
    }

    private func hookContext(_ call: RemoteCall) -> RESTHookContext {
        RESTHookContext(api: call.request.api, server: call.request.serverKey, jobId: call.task.jobId, attempt: call.attempts)
    }

    /// Failures a stale stored response may stand in for: the network, a timeout, a 5xx.
    static func allowsStaleAnswer(_ error: JobError) -> Bool {
        switch error.kind {
        case .network, .timeout: true
        case .http: (error.status ?? 0) >= 500
        default: false
        }
    }

    /// A `304 Not Modified` to a conditional request: the stored response is
    /// still good. It answers (`fromCache`, `revalidated`) and is stored again,
    /// fresh from now (its lifetime from the 304's headers when they give one).
    private func revalidated(_ call: RemoteCall, _ entry: CachedResponse, _ response: HTTPResponse) {
        guard case .object(var answer) = entry.value else {
            finish(call, .failure(JobError(.internal, "cache: a stored response is not an object")))
            return
        }
        if call.cacheFromHTTP, case .object(var headers)? = answer["headers"] {
            // The 304's caching headers replace the stored ones (RFC 9111 §4.3.4).
            for name in ["cache-control", "expires", "date", "etag", "last-modified"] {
                if let value = response.header(name) { headers[name] = .string(value) }
            }
            answer["headers"] = .object(headers)
        }
        answer["fromCache"] = true
        answer["revalidated"] = true
        answer["attempts"] = .int(call.attempts)
        answer["elapsedMs"] = .double(call.elapsedMs)
        manager.statistics.countCacheHit()
        finish(call, .success(.object(answer)))
    }

    /// A polled call's response: true when another round follows (scheduled
    /// after `everyMs`), false when the condition holds. Every round's
    /// response emits `job.progress {round}` first (rest.md §5), the one that
    /// meets the condition and the last of `maxTimes` included, so N rounds
    /// are N progress events, all before the final event. After `maxTimes`
    /// rounds without the condition, the call fails with kind `condition` and
    /// the last response as its result (true: nothing more to do here).
    private func pollAgain(_ call: RemoteCall, _ polling: RepeatSpec, result: RemoteResult, bytes: Int) -> Bool {
        let built = result.build()
        call.handle.polled(round: call.round, bytes: bytes)
        if polling.isMet(by: built) { return false }
        guard call.round < polling.maxTimes else {
            let wanted = polling.negated ? "other than \(JSONWriter.string(polling.value))" : JSONWriter.string(polling.value)
            finish(call, .failure(JobError(.condition,
                "repeat: \(polling.path) was not \(wanted) after \(call.round) rounds"), result: built))
            return true
        }
        call.round += 1
        call.attempts = 0  // each round has the whole retry policy
        call.timer = loop.schedule(afterMilliseconds: UInt64(polling.everyMs)) { [unowned self] in
            call.timer = nil
            self.attempt(call)
        }
        return true
    }

    private func finish(_ call: RemoteCall, _ outcome: StepOutcome) {
        calls.removeValue(forKey: call.task.token)
        call.download?.discard()  // nothing once committed
        for file in call.uploads { file.close() }
        if case .success(let result) = outcome, let cache = manager.cache {
            // A 206 is part of a body (RFC 9111 §3.3): never answered from the cache as the whole.
            if let key = call.cacheKey, case .object(var stored) = result, stored["status"] != .int(206) {
                let headers = stored["headers"]
                let now = Date().timeIntervalSince1970
                // `no-store` and `private` are honoured whatever the lifetime's source
                // (`lifetime` says nil for them).
                let ttl = call.cacheFromHTTP ? HTTPCachePolicy.lifetime(headers, now: now)
                    : HTTPCachePolicy.forbidsStoring(headers) ? nil : call.cacheTTL
                if let ttl {
                    stored["attempts"] = nil
                    stored["elapsedMs"] = nil
                    stored["revalidated"] = nil
                    stored["fromCache"] = false
                    // Kept past its lifetime while it can be revalidated (a day) or answer offline.
                    let keep = max(call.staleIfErrorSec ?? 0, HTTPCachePolicy.validators(headers) != nil ? 86_400 : 0)
                    cache.storeResponse(key, api: call.request.api, value: .object(stored), ttl: ttl, keep: keep, now: now)
                }
            }
            if let apis = apisInvalidated(by: call) {
                afterInvalidating(apis, in: cache) { call.handle.finish(outcome) }
                return
            }
        }
        call.handle.finish(outcome)
    }

    /// Ends a call with a response judged a success. Its result object is built
    /// on the coordinator (see ``DeferredResult``), unless the cache needs it here.
    private func succeed(_ call: RemoteCall, _ result: RemoteResult) {
        if call.cacheKey != nil {
            finish(call, .success(result.build()))
            return
        }
        calls.removeValue(forKey: call.task.token)
        for file in call.uploads { file.close() }
        if let cache = manager.cache, let apis = apisInvalidated(by: call) {
            afterInvalidating(apis, in: cache) { call.handle.succeed(building: result) }
            return
        }
        call.handle.succeed(building: result)
    }

    /// The apis whose cached responses a successful call of `call`'s api makes stale (`invalidates`).
    private func apisInvalidated(by call: RemoteCall) -> [String]? {
        guard let api = call.request.api, let apis = manager.configuration.apis[api]?.invalidates, !apis.isEmpty else {
            return nil
        }
        return apis
    }

    /// Empties the cached responses of `apis`, then runs `body` on this loop: the
    /// job that made them stale is reported only once no later read can see them.
    private func afterInvalidating(_ apis: [String], in cache: any ResponseCache, _ body: @escaping () -> Void) {
        let bound = LoopBound(body, loop: loop)
        let loop = self.loop
        cache.invalidate(apis: apis) { _ = loop.execute { bound.value() } }
    }

    // MARK: - Judging responses

    /// What a response amounts to: a success (its result, not yet built) or a failure.
    private enum Judgement {
        case success(RemoteResult)
        case failure(JobError)
    }

    /// True when `status` is one the call expects (`expect`, else any 2xx).
    private static func expects(_ status: Int, _ call: RemoteCall) -> Bool {
        call.request.expect.map { $0.contains(status) } ?? (200...299).contains(status)
    }

    /// Checks the status against `expect` and decodes the body with the job's
    /// dogma. The body is decoded here, on the worker's loop, because a body
    /// that does not decode fails the job; the rest of the result waits.
    /// `errorBodyLeftOut`: the body of an unexpected `saveAs` answer was too large to read back.
    private func judge(response: HTTPResponse, call: RemoteCall, errorBodyLeftOut: Bool) -> Judgement {
        let dogmaResponse = DogmaResponse(status: response.status, headers: response.headers, body: response.body)
        let expected = Self.expects(response.status, call)
        let saveTo = call.request.savedFile
        let body: JSONBody
        if saveTo != nil && (expected || errorBodyLeftOut) {
            // Saved to the file, or an error body too large to read back from it.
            body = JSONBody(.null)
        } else {
            do {
                body = try decode(dogmaResponse, dogma: call.request.dogma)
            } catch {
                if !expected {
                    // Keep what can be kept of an error body.
                    let fallback = (try? TextDogma().decode(dogmaResponse)) ?? .null
                    return .failure(httpError(response.status, body: fallback))
                }
                return .failure(JobError(.decode, String(describing: error), status: response.status))
            }
        }
        guard expected else { return .failure(httpError(response.status, body: body.value)) }
        return .success(RemoteResult(status: response.status, headers: response.headers, body: body,
                                     file: saveTo.map { ($0, response.bodyBytes) }, attempts: call.attempts,
                                     elapsedMs: call.elapsedMs,
                                     url: RemoteSpec.redactingCredentials(response.redirectedURL ?? call.request.http.url)))
    }

    /// A dummy reply as the bytes a server would send: a string body as it
    /// is (`text/plain` unless a header says), any other JSON as JSON text
    /// (`application/json` unless a header says).
    static func response(of reply: DummyReply) -> HTTPResponse {
        var headers = reply.headers.map { HTTPHeader($0.key, $0.value) }
        var body: [UInt8] = []
        if let value = reply.body, !value.isNull {
            let hasType = headers.contains { $0.hasName("content-type") }
            if case .string(let text) = value {
                body = Array(text.utf8)
                if !hasType { headers.append(HTTPHeader("Content-Type", "text/plain; charset=utf-8")) }
            } else {
                body = JSONWriter.bytes(value)
                if !hasType { headers.append(HTTPHeader("Content-Type", "application/json")) }
            }
        }
        return HTTPResponse(status: reply.status, headers: headers, body: body)
    }

    private func httpError(_ status: Int, body: JSONValue?) -> JobError {
        JobError(.http, "HTTP \(status)", status: status, body: body)
    }

    /// The body decoded by the job's dogma (or the one its content type implies);
    /// JSON kept as its bytes where it can be (see ``JSONBody``).
    private func decode(_ response: DogmaResponse, dogma name: String?) throws -> JSONBody {
        let dogma: any Dogma
        if let name {
            guard let named = manager.dogma(named: name) else { throw DecodeError("unknown dogma '\(ValidationError.clip(name))'") }
            dogma = named
        } else {
            dogma = response.impliedDogma
        }
        return try dogma.decodeBody(response)
    }

    private func dummyReply(for request: PreparedRequest) -> DummyReply? {
        guard manager.mayAnswerWithDummies else { return nil }
        let responder = manager.dummyResponder
        let dummy = DummyRequest(server: request.serverKey, path: request.path, method: request.http.method,
                                 url: request.http.url, headers: request.http.headers.map { ($0.name, $0.value) },
                                 body: request.http.body)
        return responder.reply(to: dummy)
    }

    // MARK: - Helpers

    static func isRetryable(_ error: JobError) -> Bool {
        switch error.kind {
        case .network, .timeout: return true
        case .http: return error.status.map { $0 >= 500 || $0 == 429 } ?? false
        default: return false
        }
    }
}
