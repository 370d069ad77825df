import HydraCore
import HydraLoop

/// One client connection of the RPC server: its authentication state, its
/// event subscriptions and its outgoing bytes. RPC loop thread only.
final class RPCSession {
    let id: UInt64
    let connection: StreamConnection
    var authenticated: Bool
    /// Subscriptions by id, in creation order.
    var subscriptions: [(id: String, filter: EventFilter)] = []
    /// Set once the connection is gone: late replies are dropped.
    var closed = false
    /// Replies still being computed (async methods); for diagnostics.
    var pending = 0

    init(id: UInt64, connection: StreamConnection, authenticated: Bool) {
        self.id = id
        self.connection = connection
        self.authenticated = authenticated
    }

    /// Writes one message and its newline.
    func send(_ message: JSONValue) {
        guard !closed else { return }
        var bytes = JSONWriter.bytes(message)
        bytes.append(UInt8(ascii: "\n"))
        connection.write(bytes)
    }

    /// Writes prepared bytes (already framed).
    func send(raw bytes: [UInt8]) {
        guard !closed else { return }
        connection.write(bytes)
    }
}
