import DequeModule
import Foundation
import HydraCore
import HydraServer
import HydraLoop
import Synchronization

/// The JSON-RPC 2.0 control server of `hydra serve` (protocol.md): TCP and
/// Unix-socket listeners, line framing, authentication, method dispatch,
/// event subscriptions with replay, and per-client back-pressure.
///
/// It runs on a loop of its own ("hydra-rpc"), never a worker's, so job I/O
/// cannot starve the control plane. All connection and subscription state is
/// confined to that loop; replies computed elsewhere (the store writer, the
/// coordinator) hop back to it. While any client subscribes to events,
/// events arrive through one bus subscription and a mailbox, are kept in a
/// ring of recent events for replay, and are encoded once per event whatever
/// the number of subscribers. With no subscriber the loop takes no events at
/// all (a replay then reads the store). Subscriptions are indexed by what
/// they filter on (``SubscriptionIndex``); replays go page by page under the
/// same back-pressure as live events (``ReplayCursor``); `job.result` waits
/// are loop timers (``ResultWaiters``).
public final class RPCServer: Sendable {
    public let loop: EventLoop
    private let runtime: LoopBound<RPCServerRuntime>
    private let service: HydraService

    /// Listens on `addresses` (TCP and/or Unix). Errors name the address:
    /// `cannot listen on 127.0.0.1:7400: address already in use`. With
    /// `accepting` false, connections wait (in the kernel's backlog) until
    /// ``startAccepting()``: `hydra serve` claims its addresses before it
    /// resumes unfinished jobs, and serves once they are resumed.
    public init(service: HydraService, addresses: [SocketAddress], options: Configuration.RPC,
                accepting: Bool = true) throws {
        self.service = service
        let loop = EventLoop(name: "hydra-rpc")
        self.loop = loop
        let made: Result<(LoopBound<RPCServerRuntime>, Mailbox<HydraEvent>), StreamError> = loop.submitAndWait {
            let runtime = RPCServerRuntime(loop: loop, service: service, options: options)
            do throws(StreamError) {
                try runtime.listen(on: addresses, accepting: accepting)
            } catch {
                runtime.closeAll()
                return .failure(error)
            }
            let mailbox = Mailbox<HydraEvent>(loop: loop) { runtime.arrived($0) }
            runtime.eventSink = MailboxSink(mailbox)
            return .success((LoopBound(runtime, loop: loop), mailbox))
        }
        switch made {
        case .success(let pair): runtime = pair.0
        case .failure(let error):
            loop.shutdown()
            throw error
        }
        // The writer's thread records how far the store is; it wakes this loop only
        // while events wait for it here (not once per commit), and never after shutdown.
        let (stored, weakRuntime) = loop.submitAndWait { [runtime] in
            (runtime.value.hold.stored, LoopBound(WeakRuntime(runtime.value), loop: loop))
        }
        service.store.whenEventsStored { seq in
            if stored.store(seq) { _ = loop.execute { weakRuntime.value.runtime?.releaseStored() } }
        }
    }

    /// Accepts connections, those that waited first (see `init`'s `accepting`).
    public func startAccepting() {
        let runtime = self.runtime
        loop.submitAndWait(ifStopped: ()) { runtime.value.startAccepting() }
    }

    /// Where the server listens, as printed at startup (`127.0.0.1:7400`, `unix:/path`).
    public var listening: [String] {
        let runtime = self.runtime
        return loop.submitAndWait(ifStopped: []) { runtime.value.listeningDescriptions }
    }

    /// The bound TCP port (useful with port 0), if listening on TCP.
    public var tcpPort: Int? {
        let runtime = self.runtime
        return loop.submitAndWait(ifStopped: nil) { runtime.value.tcpPort }
    }

    /// Closes every connection (after flushing what is queued) and stops the loop.
    public func shutdown() {
        let runtime = self.runtime
        loop.submitAndWait(ifStopped: ()) { runtime.value.closeAll() }
        loop.shutdown()
    }
}

/// Forwards bus events to the RPC loop (runs on the emitting thread: one append).
final class MailboxSink: EventSink {
    let mailbox: Mailbox<HydraEvent>
    init(_ mailbox: Mailbox<HydraEvent>) { self.mailbox = mailbox }
    func receive(_ event: HydraEvent) { mailbox.send(event) }
}

/// The loop-confined state of ``RPCServer``.
final class RPCServerRuntime {
    let loop: EventLoop
    let service: HydraService
    let options: Configuration.RPC
    private var listeners: [(StreamListener, SocketAddress)] = []
    private(set) var sessions: [UInt64: RPCSession] = [:]
    private var nextSessionID: UInt64 = 1
    private var nextSubscriptionNumber = 1
    /// Live subscriptions of every session (replaying ones are not in it yet).
    let index = SubscriptionIndex()
    /// Subscriptions of every session, live or replaying.
    private(set) var subscriptionCount = 0
    /// `job.result` calls waiting for their job.
    private(set) lazy var waiters = ResultWaiters(loop: loop, service: service)
    /// Single-call submits, grouped per loop iteration (created on the loop, at first use).
    private(set) lazy var submitBatcher = SubmitBatcher(loop: loop, service: service)
    /// Recent events, oldest first, for `fromSeq` replay without the store:
    /// at most `recentCapacity` events and `recentMaxBytes` of their fields
    /// (a `job.succeeded` may carry a 64 KiB body: a count alone let 65,536 of
    /// them hold gigabytes). Older events replay from the store.
    private(set) var recent = Deque<HydraEvent>()
    private let recentCapacity = 65_536
    static let recentMaxBytes = 32 << 20
    /// What the ring's events weigh (``ringCost(_:)``).
    private(set) var recentBytes = 0
    /// The seq of the newest event delivered on this loop (while subscribed to the bus).
    private(set) var lastSeq: UInt64
    /// Events from the bus not stored yet (``EventStore/whenEventsStored(_:)``): delivered once they are.
    private(set) var hold: EventHold
    /// Feeds the bus's events to this loop (set once, when the server starts); subscribed
    /// only while some client subscribes.
    var eventSink: MailboxSink?
    /// The bus subscription of `eventSink`, while there is one.
    private var busSubscription: UInt64?
    private let secret: [UInt8]?

    init(loop: EventLoop, service: HydraService, options: Configuration.RPC) {
        self.loop = loop
        self.service = service
        self.options = options
        lastSeq = service.engine.bus.lastSeq
        hold = EventHold(storedUpTo: lastSeq)  // numbered on from the store's last event
        secret = options.secret.map { Array($0.utf8) }
    }

    // MARK: - Listening

    func listen(on addresses: [SocketAddress], accepting: Bool) throws(StreamError) {
        for address in addresses {
            let listener = try StreamListener(loop: loop, address: address, accepting: accepting) {
                [unowned self] connection in self.accept(connection)
            }
            listeners.append((listener, address))
        }
    }

    func startAccepting() {
        for (listener, _) in listeners { listener.accepting = true }
    }

    var listeningDescriptions: [String] {
        listeners.map { listener, address in
            if case .tcp(let host, _) = address, let port = listener.port {
                return host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
            }
            return address.description
        }
    }

    var tcpPort: Int? { listeners.lazy.compactMap { $0.0.port }.first }

    func closeListeners() {
        for (listener, _) in listeners { listener.close() }
        listeners.removeAll()
    }

    func closeAll() {
        closeListeners()
        waiters.closeAll()
        if let id = busSubscription {
            service.engine.unsubscribe(id)
            busSubscription = nil
        }
        for session in sessions.values { session.connection.close() }
    }

    private func accept(_ connection: StreamConnection) {
        if sessions.count >= options.maxConnections {
            var bytes = RPCEncoder.error(RPCFailure(
                id: .null, code: -32004, "too many connections (rpc.maxConnections = \(options.maxConnections))"))
            bytes.append(UInt8(ascii: "\n"))
            connection.write(bytes)
            connection.close()
            return
        }
        let session = RPCSession(id: nextSessionID, connection: connection, authenticated: secret == nil,
                                 outboundCap: options.maxOutboundBytes)
        nextSessionID += 1
        sessions[session.id] = session
        connection.maxLineBytes = options.maxMessageBytes
        let timeout = options.firstMessageTimeoutMs
        session.firstMessageTimer = loop.schedule(afterMilliseconds: UInt64(timeout)) { [weak session] in
            // Connected and silent, or (with a secret) never authenticated however
            // busy with `hydra.ping`: it would hold one of rpc.maxConnections for ever.
            guard let session else { return }
            session.firstMessageTimer = nil
            let what = session.authenticated ? "no message" : "not authenticated (rpc.auth)"
            session.send(RPCEncoder.error(RPCFailure(
                id: .null, code: -32600, "\(what) within \(timeout) ms of connecting (rpc.firstMessageTimeoutMs): closing")))
            session.connection.close()
        }
        connection.onLine = { [unowned self, unowned session] line in
            // With a secret, the deadline stands until `rpc.auth` succeeds (``authenticate(_:token:)``).
            if session.authenticated, let timer = session.firstMessageTimer {
                timer.cancel()
                session.firstMessageTimer = nil
            }
            self.handle(line: line, from: session)
        }
        connection.onLineTooLong = { [unowned self, unowned session] in
            session.send(RPCEncoder.error(RPCFailure(
                id: .null, code: -32600, "message too large: more than \(self.options.maxMessageBytes) bytes (rpc.maxMessageBytes)")))
            // The client may still be sending the rest of the line: read it away so that the
            // answer is not lost to a reset (up to 2 s), then close.
            session.connection.closeAfterReading(timeoutMilliseconds: 2_000)
        }
        connection.onEnd = { [unowned self, unowned session] in
            // A client that sent its last request and half-closed still gets every answer (for
            // up to rpc.firstMessageTimeoutMs: one that exited looks the same and is not waited for longer).
            session.peerEnded = true
            session.closeIfDone()
            guard !session.closed, session.pending > 0, session.endTimer == nil else { return }
            session.endTimer = self.loop.schedule(afterMilliseconds: UInt64(self.options.firstMessageTimeoutMs)) { [weak session] in
                session?.endTimer = nil
                session?.connection.close()
            }
        }
        connection.onDrain = { [unowned self, unowned session] in
            session.connection.resumeReading()
            self.resumeReplays(of: session)
        }
        connection.onClose = { [unowned self, unowned session] in
            session.firstMessageTimer?.cancel()
            session.firstMessageTimer = nil
            session.endTimer?.cancel()
            session.endTimer = nil
            session.closed = true
            self.remove(Array(session.subscriptions.values), from: session)
            self.waiters.sessionClosed(session.id)
            self.sessions[session.id] = nil
        }
    }

    // MARK: - Requests

    private func handle(line: ArraySlice<UInt8>, from session: RPCSession) {
        if line.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }) { return }
        let message: JSONValue
        do {
            message = try JSONParser.parse(line)
        } catch {
            session.send(RPCEncoder.error(RPCFailure(id: .null, code: -32700, "parse error: \(error)")))
            return
        }
        if case .array(let items) = message {
            guard !items.isEmpty else {
                session.send(RPCEncoder.error(RPCFailure(id: .null, code: -32600, "invalid request: empty batch")))
                return
            }
            // Each element's text, found only when one is needed (an id whose spelling
            // its value does not give): scanning every batch cost ~1.7k instructions a call.
            var texts: [ArraySlice<UInt8>]?
            func text(_ i: Int) -> ArraySlice<UInt8>? {
                if texts == nil { texts = RawJSON.elements(ofArray: line) }
                return texts!.count == items.count ? texts![i] : nil
            }
            if let refusal = BatchReply.refusal(of: items, raw: text, limit: options.maxOutboundBytes) {
                session.send(refusal)
                return
            }
            let batch = BatchReply(count: items.count, limit: options.maxOutboundBytes) { [weak session] answer in
                session?.send(answer)
            }
            let submits = SubmitGroup()
            for (i, item) in items.enumerated() {
                call(item, raw: { text(i) }, from: session, submits: submits) { id, response in batch.set(i, id: id, response) }
            }
            submits.submit(to: service, loop: loop)
            return
        }
        call(message, raw: { line }, from: session, submits: nil) { [weak session] _, response in
            if let response { session?.send(response) }
        }
    }

    /// Runs one request; `respond` gets its id and response (nil for a
    /// notification), on this loop. `raw` gives the request's text (for its id's
    /// digits, asked only when needed). `submits`: where a batch collects its `job.submit` calls.
    private func call(_ message: JSONValue, raw: () -> ArraySlice<UInt8>?, from session: RPCSession, submits: SubmitGroup?,
                      respond: @escaping (RPCID?, [UInt8]?) -> Void) {
        let request: RPCRequest
        switch RPCRequest.parse(message, raw: raw) {
        case .success(let r): request = r
        case .failure(let failure):
            respond(failure.id, RPCEncoder.error(failure))
            return
        }
        let id = request.id ?? .null
        let notification = request.isNotification
        let finish: (Result<JSONValue, ServiceError>) -> Void = { result in
            if notification { respond(nil, nil); return }
            switch result {
            case .success(let value): respond(id, RPCEncoder.result(id: id, value))
            case .failure(let error): respond(id, RPCEncoder.error(RPCFailure(id: id, error)))
            }
        }
        if !session.authenticated, request.method != "rpc.auth", request.method != "hydra.ping" {
            finish(.failure(ServiceError(.unauthorized, "unauthorized: call rpc.auth with the server's secret first")))
            return
        }
        // Replies computed on other threads come back to this loop.
        let loop = self.loop
        session.pending += 1
        let onLoop: (Result<JSONValue, ServiceError>) -> Void = { result in
            session.pending -= 1
            finish(result)
            session.closeIfDone()
        }
        guard RPCSession.scansTheStore(request.method) else {
            let bound = LoopBound(onLoop, loop: loop)
            let later: @Sendable (Result<JSONValue, ServiceError>) -> Void = { result in
                loop.execute { bound.value(result) }
            }
            dispatch(request, session: session, submits: submits, now: onLoop, later: later, onLoop: onLoop)
            return
        }
        // A read that may scan the store waits its turn within its session (see
        // ``RPCSession/readTurns``), so that one client's thousand `job.list`s
        // queue here, not in the store's reader ahead of every other client's.
        session.readTurns.run { [unowned self] release in
            guard !session.closed else {  // gone while it waited: nobody would read the answer
                release()
                onLoop(.success(.null))
                return
            }
            let done: (Result<JSONValue, ServiceError>) -> Void = { result in
                release()
                onLoop(result)
            }
            let bound = LoopBound(done, loop: loop)
            let later: @Sendable (Result<JSONValue, ServiceError>) -> Void = { result in
                loop.execute { bound.value(result) }
            }
            self.dispatch(request, session: session, submits: submits, now: done, later: later, onLoop: done)
        }
    }

    // MARK: - Events

    /// What an event weighs in the ring: its encoded fields and a fixed part.
    static func ringCost(_ event: HydraEvent) -> Int { (event.encodedFields?.count ?? 0) + 160 }

    /// A bus event reached the loop: delivered once it is in the store, so
    /// that no client sees an event a replay after `kill -9` would not have
    /// (protocol §6: seq is durable). The wait is the store's group commit
    /// (about a millisecond while events flow).
    func arrived(_ event: HydraEvent) {
        if hold.admit(event) {
            deliver(event)
        } else {
            releaseStored()
        }
    }

    /// The store wrote more events: the held ones it covers go out, in order.
    func releaseStored() {
        while let event = hold.nextStored() { deliver(event) }
    }

    /// A stored event: keep it for replay and send it to the
    /// live subscriptions that match it (found through the index: the cost
    /// does not grow with subscriptions that do not).
    private func deliver(_ event: HydraEvent) {
        // One sent before the loop last left the bus: subscriptions made since
        // replay it from the store if they asked for it.
        guard event.seq > lastSeq else { return }
        lastSeq = event.seq
        recent.append(event)
        recentBytes += RPCServerRuntime.ringCost(event)
        while recent.count > recentCapacity || recentBytes > RPCServerRuntime.recentMaxBytes, recent.count > 1 {
            recentBytes -= RPCServerRuntime.ringCost(recent.removeFirst())
        }
        var encoded: [UInt8]?
        var touched: [UInt64: RPCSession] = [:]
        index.forEachCandidate(of: event) { subscription in
            guard event.seq > subscription.after, subscription.filter.matches(event) else { return }
            let session = subscription.session
            // A session this event already backed up (through another of its subscriptions) loses
            // them all with `hydra.dropped` below; sending it more could pass twice the cap and
            // close it without the notice. Its subscriptions replay from their last seen seq.
            if touched[session.id] != nil, session.isBackedUp { return }
            if encoded == nil { encoded = event.encodedJSON() }
            var out: [UInt8] = []
            RPCEncoder.eventNotification(subscription: subscription.id, event: encoded!, into: &out)
            session.send(raw: out)
            touched[session.id] = session
        }
        for session in touched.values { enforceOutboundCap(session) }
    }

    /// A client that stops reading loses its subscriptions (with a final
    /// `hydra.dropped`); one that keeps piling up replies is disconnected.
    private func enforceOutboundCap(_ session: RPCSession) {
        guard session.isBackedUp, !session.subscriptions.isEmpty else { return }
        let ids = session.subscriptions.keys.map { JSONValue.string($0) }
        remove(Array(session.subscriptions.values), from: session)
        session.sendNotice(RPCEncoder.notification("hydra.dropped", [
            "subscriptions": .array(ids),
            "reason": .string("outgoing buffer above rpc.maxOutboundBytes (\(options.maxOutboundBytes) bytes): the client is not reading"),
        ]))
    }

    /// `caughtUp`: send `hydra.caughtUp` once the subscription is live (see ``announceCaughtUp(_:)``).
    func subscribe(_ session: RPCSession, filter: EventFilter, fromSeq: UInt64?,
                   caughtUp: Bool = false) -> Result<JSONValue, ServiceError> {
        guard session.subscriptions.count < options.maxSubscriptions else {
            return .failure(ServiceError(.overloaded,
                "too many subscriptions on this connection: \(session.subscriptions.count) (rpc.maxSubscriptions = \(options.maxSubscriptions))"))
        }
        let subscription = Subscription(number: nextSubscriptionNumber, filter: filter, session: session)
        nextSubscriptionNumber += 1
        if busSubscription == nil, let eventSink {
            // The first subscription: from here on the bus feeds this loop
            // every event after `lastSeq`; earlier ones are in the store.
            recent.removeAll()
            recentBytes = 0
            hold.removeAll()
            let (busID, seq) = service.engine.bus.subscribe(EventFilter(), sink: eventSink)
            busSubscription = busID
            lastSeq = seq
        }
        session.subscriptions[subscription.id] = subscription
        subscription.announcesCaughtUp = caughtUp
        subscriptionCount += 1
        let reply: JSONValue = ["subscription": .string(subscription.id), "seq": .int(Int(lastSeq))]
        if let fromSeq, fromSeq < lastSeq {
            // The reply goes first; the replay follows it, then the live events.
            startReplay(subscription, after: fromSeq)
        } else {
            subscription.after = fromSeq ?? 0
            index.insert(subscription)
            if caughtUp {
                // After the reply, which is written when this returns.
                let context = LoopBound((self, subscription), loop: loop)
                loop.execute {
                    let (server, subscription) = context.value
                    server.announceCaughtUp(subscription)
                }
            }
        }
        return .success(reply)
    }

    /// Extension: tells a client that asked (`caughtUp: true`) that every
    /// retained event its subscription replays has been sent, and which seq
    /// the live events follow: `{"subscription", "seq"}`. A client following
    /// one job learns there that a final event it has not seen is not coming
    /// (the job ended at or before its `fromSeq`). Once per subscription.
    func announceCaughtUp(_ subscription: Subscription) {
        guard subscription.active, subscription.announcesCaughtUp else { return }
        subscription.announcesCaughtUp = false
        // Every matching event up to here was delivered (``deliver(_:)`` keeps `lastSeq`).
        let seq = max(subscription.after, lastSeq)
        subscription.session.send(RPCEncoder.notification("hydra.caughtUp", [
            "subscription": .string(subscription.id), "seq": .int(Int(seq)),
        ]))
    }

    func unsubscribe(_ session: RPCSession, id: String) -> Result<JSONValue, ServiceError> {
        guard let subscription = session.subscriptions[id] else {
            return .failure(ServiceError.notFound(
                field: "subscription", "no subscription '\(ServiceError.clip(id))' on this connection"))
        }
        remove([subscription], from: session)
        return .success(["ok": true])
    }

    /// Ends subscriptions of `session` (unsubscribed, dropped, or the connection closed).
    func remove(_ subscriptions: [Subscription], from session: RPCSession) {
        guard !subscriptions.isEmpty else { return }
        for subscription in subscriptions where subscription.active {
            subscription.active = false
            if subscription.replay != nil {
                subscription.replay = nil
                session.replaying -= 1
            } else {
                index.remove(subscription)
            }
            session.subscriptions[subscription.id] = nil
            subscriptionCount -= 1
        }
        subscriptionsRemoved()
    }

    /// Leaves the bus once no client subscribes any more: events then cost
    /// this loop nothing. The ring is dropped (it would have a gap).
    private func subscriptionsRemoved() {
        guard let id = busSubscription, subscriptionCount == 0 else { return }
        service.engine.unsubscribe(id)
        busSubscription = nil
        recent.removeAll()
        recentBytes = 0
        hold.removeAll()
    }

    // MARK: - Auth

    func authenticate(_ session: RPCSession, token: String) -> Result<JSONValue, ServiceError> {
        guard let secret else {
            session.authenticated = true
            return .success(["ok": true])
        }
        if constantTimeEqual(Array(token.utf8), secret) {
            session.authenticated = true
            session.firstMessageTimer?.cancel()
            session.firstMessageTimer = nil
            return .success(["ok": true])
        }
        session.wrongTokens += 1
        guard session.wrongTokens >= RPCLimits.maxWrongTokens else {
            return .failure(ServiceError(.unauthorized, "unauthorized: wrong token"))
        }
        // Closed once this answer is written (the close runs on a later turn of the loop).
        let connection = LoopBound(session.connection, loop: loop)
        loop.execute { connection.value.close() }
        return .failure(ServiceError(.unauthorized,
            "unauthorized: wrong token (\(RPCLimits.maxWrongTokens) wrong tokens on this connection: it closes)"))
    }
}

/// Compares two byte strings in time that depends only on their lengths.
func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    var difference: UInt8 = a.count == b.count ? 0 : 1
    let n = max(a.count, b.count)
    for i in 0..<n {
        let x = i < a.count ? a[i] : 0
        let y = i < b.count ? b[i] : 0
        difference |= x ^ y
    }
    return difference == 0
}

/// The runtime, not kept alive by the store's callback once the server stops. Loop-confined.
final class WeakRuntime {
    weak var runtime: RPCServerRuntime?
    init(_ runtime: RPCServerRuntime) { self.runtime = runtime }
}
