import HydraCore
import HydraLoop

/// One client connection of the RPC server: its authentication state, its
/// event subscriptions and its outgoing bytes. RPC loop thread only.
final class RPCSession {
    let id: UInt64
    let connection: StreamConnection
    var authenticated: Bool
    /// Subscriptions by id, in creation order.
    var subscriptions: [Subscription] = []
    /// Set once the connection is gone: late replies are dropped.
    var closed = false
    /// Replies still being computed (async methods); for diagnostics.
    var pending = 0

    /// `rpc.maxOutboundBytes`: past it the session stops reading requests (and
    /// the server drops its subscriptions); past twice it, it is disconnected.
    let outboundCap: Int

    init(id: UInt64, connection: StreamConnection, authenticated: Bool, outboundCap: Int) {
        self.id = id
        self.connection = connection
        self.authenticated = authenticated
        self.outboundCap = outboundCap
        connection.onDrain = { [unowned connection] in connection.resumeReading() }
    }

    /// Writes one message and its newline.
    func send(_ message: JSONValue) {
        guard !closed else { return }
        var bytes = JSONWriter.bytes(message)
        bytes.append(UInt8(ascii: "\n"))
        send(raw: bytes)
    }

    /// Writes prepared bytes (already framed), applying the outbound cap: a
    /// client that does not read its replies is not read from until it does.
    func send(raw bytes: [UInt8]) {
        guard !closed else { return }
        connection.write(bytes)
        let queued = connection.queuedBytes
        if queued > 2 * outboundCap {
            connection.closeNow()
        } else if queued > outboundCap {
            connection.pauseReading()
        }
    }
}

/// One `events.subscribe` of a session. RPC loop thread only.
struct Subscription {
    let id: String
    let filter: EventFilter
    /// While its `fromSeq` replay is read from the store (off the loop), the
    /// live events it matches wait here, to follow the replayed ones.
    var held: [HydraEvent]?
    /// Events up to this seq are not sent live: a `fromSeq` ahead of the
    /// loop names events the client already has.
    var after: UInt64 = 0
}
