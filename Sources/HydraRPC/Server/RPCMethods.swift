import HydraCore
import HydraServer
import HydraLoop

/// The methods of protocol §5, mapped onto ``HydraService``. RPC loop thread.
///
/// `now` answers on this loop at once; `later` may be called from any thread
/// (the server hops back to its loop before writing); `onLoop` is `later`
/// without the hop, for a caller that is on this loop already (a submit
/// group answers all its calls after one hop).
extension RPCServerRuntime {
    /// `submits`: when given (the calls of one batch), `job.submit` calls are collected
    /// there and sent to the service together once the batch has been read.
    func dispatch(_ request: RPCRequest, session: RPCSession, submits: SubmitGroup?,
                  now: (Result<JSONValue, ServiceError>) -> Void,
                  later: @escaping @Sendable (Result<JSONValue, ServiceError>) -> Void,
                  onLoop: @escaping (Result<JSONValue, ServiceError>) -> Void) {
        let params = request.params
        do throws(ServiceError) {
            switch request.method {
            case "hydra.ping":
                try params.only([])
                now(.success(["version": .string(HydraVersion.string), "uptimeSec": .int(Int(service.uptime))]))

            case "rpc.auth":
                try params.only(["token"])
                guard let token = try params.string("token") else { throw params.invalid("token", "required") }
                now(authenticate(session, token: token))

            case "job.submit":
                try params.only(["job", "input", "idempotencyKey", "priority"])
                guard let job = params["job"] else { throw params.invalid("job", "required") }
                guard case .object = job else { throw params.invalid("job", "expected object") }
                let key = try params.string("idempotencyKey")
                // An empty key (an unset variable in a client) would make unrelated jobs one.
                if key?.isEmpty == true { throw params.invalid("idempotencyKey", "must not be empty") }
                let request = HydraService.SubmitRequest(
                    job: job, input: params["input"] ?? .null, idempotencyKey: key,
                    priority: try params.int("priority") ?? 0)
                if let submits {
                    submits.add(request, reply: onLoop)
                } else {
                    submitBatcher.add(request, reply: onLoop)
                }

            case "job.status":
                try params.only(["jobId"])
                service.status(of: try params.requiredString("jobId"), reply: later)

            case "job.result":
                try params.only(["jobId", "waitMs"])
                let jobId = try params.requiredString("jobId")
                let waitMs = try params.int("waitMs", min: 0, max: RPCLimits.maxWaitMs) ?? 0
                guard waitMs > 0 else {
                    service.result(of: jobId, reply: later)
                    return
                }
                // Not final yet: wait in this loop's table, with a loop timer.
                let loop = self.loop
                let me = LoopBound(self, loop: loop)
                let caller = session.id
                service.result(of: jobId) { result in
                    if case .success(let value) = result, let state = value["state"]?.stringValue,
                       let parsed = JobState(rawValue: state), !parsed.isFinal {
                        loop.execute {
                            // Not for a connection that closed meanwhile: nobody would read the answer.
                            guard me.value.sessions[caller] != nil else { return }
                            me.value.waiters.wait(for: jobId, milliseconds: waitMs, session: caller, reply: later)
                        }
                    } else {
                        later(result)
                    }
                }

            case "job.cancel":
                try params.only(["jobId"])
                service.cancel(try params.requiredString("jobId"), reply: later)

            case "job.list":
                try params.only(["state", "limit", "after"])
                var state: JobState?
                if let name = try params.string("state") {
                    guard let s = JobState(rawValue: name) else {
                        throw params.invalid("state", "expected one of queued, running, succeeded, failed, cancelled")
                    }
                    state = s
                }
                let limit = try params.int("limit", min: 1, max: 10_000) ?? 100
                service.list(state: state, limit: limit, after: try params.string("after"), reply: later)

            case "events.subscribe":
                try params.only(["jobId", "events", "shared", "fromSeq", "caughtUp"])
                var names = try params.stringSet("events") { name in
                    EventName.all.contains(name) || name == "hydra.dropped" || EventName.isCustom(name) ? nil : "unknown event \"\(name)\""
                }
                if names?.isEmpty == true { names = nil }
                let filter = EventFilter(jobId: try params.string("jobId"), events: names,
                                         shared: try params.stringSet("shared"))
                let from = try params.int("fromSeq", min: 0).map(UInt64.init)
                let caughtUp = try params.bool("caughtUp") ?? false
                guard let jobId = filter.jobId else {
                    now(subscribe(session, filter: filter, fromSeq: from, caughtUp: caughtUp))
                    return
                }
                // A filter naming a job the server does not know would match nothing,
                // for ever (a typo, a job pruned by retention): -32002, as job.status.
                // Subscribed back on this loop, the reply written before any event.
                let me = LoopBound(self, loop: loop)
                let reply = LoopBound(onLoop, loop: loop)
                let caller = session.id
                service.status(of: jobId) { [loop] found in
                    loop.execute {
                        if case .failure(let error) = found {
                            reply.value(.failure(error))
                        } else if let session = me.value.sessions[caller] {
                            reply.value(me.value.subscribe(session, filter: filter, fromSeq: from, caughtUp: caughtUp))
                        } else {
                            reply.value(.success(.null))  // the connection closed meanwhile: nobody reads it
                        }
                    }
                }

            case "events.emit":
                try params.only(["event", "fields"])
                let name = try params.requiredString("event")
                let fields = params.values["fields"] ?? [:]
                guard case .object(let members) = fields else { throw params.invalid("fields", "expected object") }
                let emitted = Result { () throws(ServiceError) -> JSONValue in ["seq": .int(Int(try service.emit(custom: name, fields: members)))] }
                // The seq is answered once the event is in the store (a replay after a crash has it).
                if case .success = emitted { service.whenStored(emitted, later) } else { now(emitted) }

            case "worker.configure":
                try params.only(["name", "maxActive", "maxConnections", "maxHostConnections"])
                now(Result { () throws(ServiceError) in
                    try service.configure(worker: try params.requiredString("name"), maxActive: try params.int("maxActive"),
                                          maxConnections: try params.int("maxConnections"),
                                          maxHostConnections: try params.int("maxHostConnections"))
                })

            case "auth.login":
                try params.only(["name", "username", "password"])
                service.authLogin(try params.requiredString("name"), username: try params.string("username"),
                                  password: try params.string("password"), reply: later)

            case "auth.logout":
                try params.only(["name"])
                let name = try params.requiredString("name")
                now(Result { () throws(ServiceError) in
                    try service.authLogout(name)
                    return ["ok": true]
                })

            case "auth.status":
                try params.only(["name"])
                let name = try params.string("name")
                now(Result { () throws(ServiceError) in try service.authStatus(name) })

            case "dummy.set":
                try params.only(["responses"])
                guard let given = params["responses"] else { throw params.invalid("responses", "required (an array of dummy responses)") }
                guard case .array(let responses) = given else { throw params.mistyped("responses", "array of dummy responses", given) }
                now(Result { () throws(ServiceError) in ["count": .int(try service.setDummyResponses(responses))] })

            case "dummy.enable":
                try params.only(["enabled"])
                guard let enabled = try params.bool("enabled") else { throw params.invalid("enabled", "required (true or false)") }
                service.setDummiesEnabled(enabled)
                now(.success(["ok": true]))

            case "events.unsubscribe":
                try params.only(["subscription"])
                now(unsubscribe(session, id: try params.requiredString("subscription")))

            case "shared.get":
                try params.only(["key"])
                let key = try params.requiredString("key")
                service.sharedValue(key) { later($0.map { ["key": .string(key), "value": $0] }) }

            case "shared.set":
                try params.only(["key", "value", "cipher"])
                let key = try params.requiredString("key")
                guard let value = params.values["value"] else { throw params.invalid("value", "required") }
                var cipher: SharedCipher?
                if let name = try params.string("cipher") {
                    guard let named = SharedCipher(rawValue: name) else {
                        throw params.invalid("cipher", "expected aes-gcm, gzip or none")
                    }
                    cipher = named
                }
                service.setShared(key, value: value, cipher: cipher) {
                    later($0.map { ["ok": true] })
                }

            case "shared.remove":
                try params.only(["key"])
                service.removeShared(try params.requiredString("key")) { later($0.map { ["removed": .bool($0)] }) }

            case "cache.get":
                try params.only(["url", "key"])
                let url = try params.string("url"), key = try params.string("key")
                service.cachedResponse(url: url, key: key, reply: later)

            case "cache.remove":
                try params.only(["api", "url", "prefix"])
                service.removeCached(api: try params.string("api"), url: try params.string("url"),
                                     prefix: try params.string("prefix")) { later($0.map { ["removed": .int($0)] }) }

            case "resource.stat":
                try params.only(["url", "key"])
                let key = try service.resourceKey(key: try params.string("key"), url: try params.string("url"))
                service.resourceStat(key: key, named: params["url"] != nil ? "url" : "key", reply: later)

            case "resource.read":
                try params.only(["url", "key", "as", "offset", "length"])
                let key = try service.resourceKey(key: try params.string("key"), url: try params.string("url"))
                var presentation = ResourceSpec.Presentation.base64
                if let name = try params.string("as") {
                    guard let named = ResourceSpec.Presentation(rawValue: name), named != .path else {
                        throw params.invalid("as", "expected text, json or base64")
                    }
                    presentation = named
                }
                service.resourceRead(key: key, named: params["url"] != nil ? "url" : "key", as: presentation,
                                     offset: try params.int("offset", min: 0) ?? 0,
                                     length: try params.int("length", min: 0), reply: later)

            case "resource.list":
                try params.only(["prefix", "limit", "after"])
                // A page holds at most 1,000 (a larger `limit` gets that many and `next`).
                service.resourceList(prefix: try params.string("prefix"), limit: min(try params.int("limit", min: 1) ?? 100, 1000),
                                     after: try params.string("after"), reply: later)

            case "resource.remove":
                try params.only(["url", "key", "prefix"])
                let (key, url, prefix) = (try params.string("key"), try params.string("url"), try params.string("prefix"))
                guard key != nil || url != nil || prefix != nil else { throw params.invalid("url", "required (or key, or prefix)") }
                service.resourceRemove(key: key, url: url, prefix: prefix, reply: later)

            case "resource.purge":
                try params.only(["olderThanSec", "maxBytes"])
                service.resourcePurge(olderThanSec: try params.int("olderThanSec", min: 0),
                                      maxBytes: try params.int("maxBytes", min: 0), reply: later)

            case "resource.stats":
                try params.only([])
                service.resourceStats(reply: later)

            case "worker.list":
                try params.only([])
                now(.success(service.workers()))

            case "worker.pause", "worker.resume":
                try params.only(["name"])
                try service.setPaused(request.method == "worker.pause", worker: params.requiredString("name"))
                now(.success(["ok": true]))

            case "hydra.stats":
                try params.only([])
                var stats = service.stats()
                if case .object(var o) = stats {
                    o["connections"] = .int(sessions.count)
                    o["subscriptions"] = .int(subscriptionCount)
                    // Extension: `job.result` calls waiting now, and the jobs they wait on.
                    o["waiters"] = ["calls": .int(waiters.count), "jobs": .int(waiters.jobCount)]
                    // Extension: the events kept in memory for replay (the rest replay from the store).
                    o["replayRing"] = ["events": .int(recent.count), "bytes": .int(recentBytes),
                                       "maxBytes": .int(RPCServerRuntime.recentMaxBytes)]
                    stats = .object(o)
                }
                now(.success(stats))

            default:
                now(.failure(ServiceError(.methodNotFound, "method not found: \(request.method)")))
            }
        } catch {
            now(.failure(error))
        }
    }
}

/// The `job.submit` calls of one JSON-RPC batch, submitted with one store write
/// (``HydraService/submit(_:reply:)-([SubmitRequest],_)``). RPC loop thread.
///
/// The store answers on its writer thread; the group hops back to the loop
/// once and answers every call there, so the writer (the durable path's
/// bottleneck) neither builds the replies nor wakes the loop once per call.
final class SubmitGroup {
    @exclusivity(unchecked) private var requests: [HydraService.SubmitRequest] = []
    /// Run on the loop, in request order.
    @exclusivity(unchecked) private var replies: [(Result<JSONValue, ServiceError>) -> Void] = []

    func add(_ request: HydraService.SubmitRequest, reply: @escaping (Result<JSONValue, ServiceError>) -> Void) {
        requests.append(request)
        replies.append(reply)
    }

    /// Submits what was added (nothing when nothing was). Loop thread.
    func submit(to service: HydraService, loop: EventLoop) {
        guard !requests.isEmpty else { return }
        let replies = LoopBound(self.replies, loop: loop)
        service.submit(requests) { results in
            loop.execute {
                for (result, reply) in zip(results, replies.value) { reply(result.map { ["jobId": .string($0)] }) }
            }
        }
        requests.removeAll()
        self.replies.removeAll()
    }
}
