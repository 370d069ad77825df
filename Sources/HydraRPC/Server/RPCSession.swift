import HydraCore
import HydraLoop
import OrderedCollections

/// One client connection of the RPC server: its authentication state, its
/// event subscriptions and its outgoing bytes. RPC loop thread only.
final class RPCSession {
    let id: UInt64
    let connection: StreamConnection
    var authenticated: Bool
    /// Subscriptions by id, in creation order (at most `rpc.maxSubscriptions`).
    var subscriptions: OrderedDictionary<String, Subscription> = [:]
    /// How many of `subscriptions` are replaying (``ReplayCursor``).
    var replaying = 0
    /// Set once the connection is gone: late replies are dropped.
    var closed = false
    /// Wrong `rpc.auth` tokens sent on this connection (see ``RPCLimits/maxWrongTokens``).
    var wrongTokens = 0
    /// Replies still being computed (async methods); for diagnostics.
    var pending = 0
    /// Closes the connection unless a first message comes (`rpc.firstMessageTimeoutMs`).
    var firstMessageTimer: ScheduledTask?
    /// The client finished sending (a half-close, or it exited: the server cannot
    /// tell them apart): the connection closes once every reply is out, or
    /// after `rpc.firstMessageTimeoutMs` (a client that exited is not waited
    /// for longer; its subscriptions end with the connection).
    var peerEnded = false
    /// Closes the connection of a client that finished sending when its replies take too long.
    var endTimer: ScheduledTask?
    /// This session's reads that may scan the store (``scansTheStore(_:)``):
    /// at most two under way, the rest wait here. The store has one reader;
    /// without this, a client sending a thousand `job.list`s (in a batch or
    /// pipelined) put every other client's behind them for a minute and more.
    let readTurns = Turns(limit: 2)

    /// Methods whose answer may read many rows of the store, or a whole copy
    /// of the repository (`resource.read` without `length` holds a 30 MB copy
    /// as 40 MB of base64: ten pipelined ones held 300 MB), on the store's
    /// one read thread.
    static func scansTheStore(_ method: String) -> Bool {
        method == "job.list" || method == "resource.list" || method == "resource.read"
    }

    /// Closes a connection whose client finished sending, once no reply is due to it.
    func closeIfDone() {
        guard peerEnded, !closed, pending == 0 else { return }
        connection.close()
    }

    /// `rpc.maxOutboundBytes`: past it the session stops reading requests (and
    /// the server drops its subscriptions); past twice it, it is disconnected.
    let outboundCap: Int

    init(id: UInt64, connection: StreamConnection, authenticated: Bool, outboundCap: Int) {
        self.id = id
        self.connection = connection
        self.authenticated = authenticated
        self.outboundCap = outboundCap
    }

    /// Writes one message (JSON text without its newline) and its newline.
    func send(_ message: [UInt8]) {
        guard !closed else { return }
        var bytes = message
        bytes.append(UInt8(ascii: "\n"))
        send(raw: bytes)
    }

    /// Writes prepared bytes (already framed), applying the outbound cap: a
    /// client that does not read its replies is not read from until it does,
    /// and one whose backlog already passed twice the cap is disconnected.
    ///
    /// The backlog is judged before the write: one reply larger than the cap
    /// (a `job.result` of a result near `limits.maxResultBytes`) is written
    /// whole to a client that keeps up, never answered by a closed connection.
    func send(raw bytes: [UInt8]) {
        guard !closed else { return }
        if backlog / 2 > outboundCap {
            connection.closeNow()
            return
        }
        connection.write(bytes)
        if backlog > outboundCap {
            connection.pauseReading()
        }
    }

    /// Writes a notice the client must get whatever its backlog (`hydra.dropped`,
    /// saying why its subscriptions ended): judged by ``send(raw:)``, the notice
    /// that follows the event crossing the cap could close the connection instead.
    func sendNotice(_ message: [UInt8]) {
        guard !closed else { return }
        var bytes = message
        bytes.append(UInt8(ascii: "\n"))
        connection.write(bytes)
    }

    /// True while the outgoing buffer is above the cap (judged as ``backlog`` does,
    /// after a flush): replays wait for it to drain. RPC loop thread only.
    var isBackedUp: Bool { backlog > outboundCap }

    /// Bytes the client has not taken. Past the cap, what this loop turn queued
    /// is offered to the kernel first: a burst of events in one turn (a group
    /// commit's) to a client that reads is not a client that does not read.
    private var backlog: Int {
        if connection.queuedBytes > outboundCap { connection.flushNow() }
        return connection.queuedBytes
    }
}
