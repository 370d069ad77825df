import DequeModule
import Foundation
import HydraCore
import HydraLoop

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
/// all (a replay then reads the store).
public final class RPCServer: Sendable {
    public let loop: EventLoop
    private let runtime: LoopBound<RPCServerRuntime>
    private let service: HydraService

    /// Listens on `addresses` (TCP and/or Unix). Errors name the address:
    /// `cannot listen on 127.0.0.1:7400: address already in use`.
    public init(service: HydraService, addresses: [SocketAddress], options: Configuration.RPC) throws {
        self.service = service
        let loop = EventLoop(name: "hydra-rpc")
        self.loop = loop
        let made: Result<(LoopBound<RPCServerRuntime>, Mailbox<HydraEvent>), StreamError> = loop.submitAndWait {
            let runtime = RPCServerRuntime(loop: loop, service: service, options: options)
            do throws(StreamError) {
                try runtime.listen(on: addresses)
            } catch {
                runtime.closeAll()
                return .failure(error)
            }
            let mailbox = Mailbox<HydraEvent>(loop: loop) { runtime.deliver($0) }
            runtime.eventSink = MailboxSink(mailbox)
            return .success((LoopBound(runtime, loop: loop), mailbox))
        }
        switch made {
        case .success(let pair): runtime = pair.0
        case .failure(let error):
            loop.shutdown()
            throw error
        }
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
    private var nextSubscriptionID = 1
    /// Recent events, oldest first, for `fromSeq` replay without the store.
    private var recent = Deque<HydraEvent>()
    private let recentCapacity = 65_536
    /// The seq of the newest event that reached this loop (while subscribed to the bus).
    private var lastSeq: UInt64
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
        lastSeq = service.engine.scheduler.bus.lastSeq
        secret = options.secret.map { Array($0.utf8) }
    }

    // MARK: - Listening

    func listen(on addresses: [SocketAddress]) throws(StreamError) {
        for address in addresses {
            let listener = try StreamListener(loop: loop, address: address) { [unowned self] connection in
                self.accept(connection)
            }
            listeners.append((listener, address))
        }
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
        if let id = busSubscription {
            service.engine.unsubscribe(id)
            busSubscription = nil
        }
        for session in sessions.values { session.connection.close() }
    }

    private func accept(_ connection: StreamConnection) {
        if sessions.count >= options.maxConnections {
            var bytes = JSONWriter.bytes(RPCEncoder.error(RPCFailure(
                id: .null, code: -32004, "too many connections (rpc.maxConnections = \(options.maxConnections))")))
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
        connection.onLine = { [unowned self, unowned session] line in
            self.handle(line: line, from: session)
        }
        connection.onLineTooLong = { [unowned self, unowned session] in
            session.send(RPCEncoder.error(RPCFailure(
                id: .null, code: -32600, "message too large: more than \(self.options.maxMessageBytes) bytes (rpc.maxMessageBytes)")))
            session.connection.close()
        }
        connection.onClose = { [unowned self, unowned session] in
            session.closed = true
            let subscribed = !session.subscriptions.isEmpty
            session.subscriptions.removeAll()
            self.sessions[session.id] = nil
            if subscribed { self.subscriptionsRemoved() }
        }
    }

    // MARK: - Requests

    private func handle(line: ArraySlice<UInt8>, from session: RPCSession) {
        if line.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }) { return }
        let message: JSONValue
        do {
            message = try JSONParser.parse(Array(line))
        } catch {
            session.send(RPCEncoder.error(RPCFailure(id: .null, code: -32700, "parse error: \(error)")))
            return
        }
        if case .array(let items) = message {
            guard !items.isEmpty else {
                session.send(RPCEncoder.error(RPCFailure(id: .null, code: -32600, "invalid request: empty batch")))
                return
            }
            let batch = BatchReply(count: items.count) { [weak session] responses in
                guard let session, !responses.isEmpty else { return }
                session.send(.array(responses))
            }
            let submits = SubmitGroup()
            for (i, item) in items.enumerated() {
                call(item, from: session, submits: submits) { response in batch.set(i, response) }
            }
            submits.submit(to: service)
            return
        }
        call(message, from: session, submits: nil) { [weak session] response in
            if let response { session?.send(response) }
        }
    }

    /// Runs one request; `respond` gets the response (nil for a notification), on this loop.
    /// `submits`: where a batch collects its `job.submit` calls.
    private func call(_ message: JSONValue, from session: RPCSession, submits: SubmitGroup?,
                      respond: @escaping (JSONValue?) -> Void) {
        let request: RPCRequest
        switch RPCRequest.parse(message) {
        case .success(let r): request = r
        case .failure(let failure):
            respond(RPCEncoder.error(failure))
            return
        }
        let id = request.id ?? .null
        let notification = request.isNotification
        let finish: (Result<JSONValue, ServiceError>) -> Void = { result in
            if notification { respond(nil); return }
            switch result {
            case .success(let value): respond(RPCEncoder.result(id: id, value))
            case .failure(let error): respond(RPCEncoder.error(RPCFailure(id: id, error)))
            }
        }
        if !session.authenticated, request.method != "rpc.auth", request.method != "hydra.ping" {
            finish(.failure(ServiceError(.unauthorized, "unauthorized: call rpc.auth with the server's secret first")))
            return
        }
        // Replies computed on other threads come back to this loop.
        let loop = self.loop
        session.pending += 1
        let pending = LoopBound((session, finish), loop: loop)
        let later: @Sendable (Result<JSONValue, ServiceError>) -> Void = { result in
            loop.execute {
                let (session, finish) = pending.value
                session.pending -= 1
                finish(result)
            }
        }
        dispatch(request, session: session, submits: submits, now: { result in
            session.pending -= 1
            finish(result)
        }, later: later)
    }

    // MARK: - Events

    /// A bus event reached the loop: keep it for replay and fan it out.
    func deliver(_ event: HydraEvent) {
        // One sent before the loop last left the bus: subscriptions made since
        // replay it from the store if they asked for it.
        guard event.seq > lastSeq else { return }
        lastSeq = event.seq
        recent.append(event)
        if recent.count > recentCapacity { recent.removeFirst() }
        var encoded: [UInt8]?
        for session in sessions.values where !session.subscriptions.isEmpty {
            for i in session.subscriptions.indices
            where event.seq > session.subscriptions[i].after && session.subscriptions[i].filter.matches(event) {
                if session.subscriptions[i].held != nil {
                    session.subscriptions[i].held!.append(event)
                    continue
                }
                if encoded == nil { encoded = JSONWriter.bytes(event.json) }
                var out: [UInt8] = []
                RPCEncoder.eventNotification(subscription: session.subscriptions[i].id, event: encoded!, into: &out)
                session.send(raw: out)
            }
            enforceOutboundCap(session)
        }
    }

    /// A client that stops reading loses its subscriptions (with a final
    /// `hydra.dropped`); one that keeps piling up replies is disconnected.
    private func enforceOutboundCap(_ session: RPCSession) {
        let queued = session.connection.queuedBytes
        guard queued > options.maxOutboundBytes else { return }
        if !session.subscriptions.isEmpty {
            let ids = session.subscriptions.map { JSONValue.string($0.id) }
            session.subscriptions.removeAll()
            subscriptionsRemoved()
            session.send(RPCEncoder.notification("hydra.dropped", [
                "subscriptions": .array(ids),
                "reason": .string("outgoing buffer above rpc.maxOutboundBytes (\(options.maxOutboundBytes) bytes): the client is not reading"),
            ]))
        }
    }

    func subscribe(_ session: RPCSession, filter: EventFilter, fromSeq: UInt64?) -> Result<JSONValue, ServiceError> {
        let id = "s\(nextSubscriptionID)"
        nextSubscriptionID += 1
        if busSubscription == nil, let eventSink {
            // The first subscription: from here on the bus feeds this loop
            // every event after `lastSeq`; earlier ones are in the store.
            recent.removeAll()
            let (busID, seq) = service.engine.scheduler.bus.subscribe(EventFilter(), sink: eventSink)
            busSubscription = busID
            lastSeq = seq
        }
        let upTo = lastSeq
        let reply: JSONValue = ["subscription": .string(id), "seq": .int(Int(upTo))]
        guard let fromSeq, fromSeq < upTo else {
            session.subscriptions.append(Subscription(id: id, filter: filter, after: fromSeq ?? 0))
            return .success(reply)
        }
        if let oldest = recent.first, oldest.seq <= fromSeq + 1 {
            var replay: [HydraEvent] = []
            for event in recent where event.seq > fromSeq && event.seq <= upTo && filter.matches(event) {
                replay.append(event)
            }
            // The reply goes first; replayed events follow it, then the live ones
            // (held until then).
            session.subscriptions.append(Subscription(id: id, filter: filter, held: []))
            let context = LoopBound((self, session, replay), loop: loop)
            loop.execute {
                let (server, session, replay) = context.value
                server.replayRead(.success(replay), for: session, subscription: id)
            }
            return .success(reply)
        }
        // Older than the ring: read from the store, off the loop (a flush waits
        // for a commit). Live events wait in `held` meanwhile.
        session.subscriptions.append(Subscription(id: id, filter: filter, held: []))
        let context = LoopBound((self, session), loop: loop)
        let bus = service.engine.scheduler.bus, store = service.store, loop = self.loop
        DispatchQueue.global().async {
            let read = Result { () throws(StoreError) -> [HydraEvent] in
                // The bus hands an event to the store journal and to this loop in
                // one emit: once no emit runs, every event up to `upTo` is queued.
                bus.waitForEmits()
                store.flush()
                var replay: [HydraEvent] = []
                var after = fromSeq
                while after < upTo {
                    let page = try store.events(after: after, limit: 10_000)
                    guard let last = page.last else { break }
                    for event in page where event.seq <= upTo && filter.matches(event) { replay.append(event) }
                    after = last.seq
                }
                return replay
            }
            loop.execute {
                let (server, session) = context.value
                server.replayRead(read, for: session, subscription: id)
            }
        }
        return .success(reply)
    }

    /// The replay of a subscription is ready: send it, then the live events
    /// held meanwhile, and let later ones through.
    private func replayRead(_ read: Result<[HydraEvent], StoreError>, for session: RPCSession, subscription id: String) {
        guard let index = session.subscriptions.firstIndex(where: { $0.id == id }) else { return }
        switch read {
        case .success(let replay):
            let held = session.subscriptions[index].held ?? []
            session.subscriptions[index].held = nil
            send(replay + held, to: session, subscription: id)
        case .failure(let error):
            session.subscriptions.remove(at: index)
            subscriptionsRemoved()
            session.send(RPCEncoder.notification("hydra.dropped", [
                "subscriptions": [.string(id)], "reason": .string("replay failed: \(error)"),
            ]))
        }
    }

    /// Sends replayed events of one subscription, stopping if the client stops reading.
    private func send(_ events: [HydraEvent], to session: RPCSession, subscription id: String) {
        guard session.subscriptions.contains(where: { $0.id == id }) else { return }
        for event in events {
            var out: [UInt8] = []
            RPCEncoder.eventNotification(subscription: id, event: JSONWriter.bytes(event.json), into: &out)
            session.send(raw: out)
            if session.connection.queuedBytes > options.maxOutboundBytes {
                enforceOutboundCap(session)
                return
            }
        }
    }

    func unsubscribe(_ session: RPCSession, id: String) -> Result<JSONValue, ServiceError> {
        guard let index = session.subscriptions.firstIndex(where: { $0.id == id }) else {
            return .failure(ServiceError(.notFound, "subscription \(id) not found"))
        }
        session.subscriptions.remove(at: index)
        subscriptionsRemoved()
        return .success(["ok": true])
    }

    /// Leaves the bus once no client subscribes any more: events then cost
    /// this loop nothing. The ring is dropped (it would have a gap).
    private func subscriptionsRemoved() {
        guard let id = busSubscription, !sessions.values.contains(where: { !$0.subscriptions.isEmpty }) else { return }
        service.engine.unsubscribe(id)
        busSubscription = nil
        recent.removeAll()
    }

    // MARK: - Auth

    func authenticate(_ session: RPCSession, token: String) -> Result<JSONValue, ServiceError> {
        guard let secret else {
            session.authenticated = true
            return .success(["ok": true])
        }
        if constantTimeEqual(Array(token.utf8), secret) {
            session.authenticated = true
            return .success(["ok": true])
        }
        return .failure(ServiceError(.unauthorized, "unauthorized: wrong token"))
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

/// Collects the responses of a batch and sends them as one array once all are in.
/// RPC loop thread only.
final class BatchReply {
    private var responses: [JSONValue?]
    private var remaining: Int
    private let done: ([JSONValue]) -> Void

    init(count: Int, done: @escaping ([JSONValue]) -> Void) {
        responses = Array(repeating: nil, count: count)
        remaining = count
        self.done = done
    }

    func set(_ index: Int, _ response: JSONValue?) {
        responses[index] = response
        remaining -= 1
        guard remaining == 0 else { return }
        var present: [JSONValue] = []
        present.reserveCapacity(responses.count)
        for case let response? in responses { present.append(response) }
        done(present)
    }
}
