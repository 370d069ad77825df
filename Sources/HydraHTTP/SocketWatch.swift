import CCurl
import CUV
import HydraLoop

/// The `uv_poll_t` watching one of curl's sockets. Loop thread only.
///
/// Lifetime: one per open socket, not per transfer. It is created the first
/// time curl asks to watch the socket and closed when curl closes the socket
/// (the client's close-socket callback), so a kept-alive connection reuses it
/// without `uv_poll_init` (two `epoll_ctl` calls and an `ioctl`) and without
/// an allocation. On `CURL_POLL_REMOVE` polling stops, except on a connection
/// the client opened itself: curl may close other sockets (its resolver's
/// socket pair) without the callback, and libuv aborts the process if it
/// re-arms a descriptor that was closed under it. A stopped watch is safe
/// whatever happens to its descriptor: starting it again watches whatever
/// socket now has that number, which is what curl asks. A connection's watch
/// is closed by the client's close-socket callback before the socket is, so
/// it may stay armed while the connection idles between two requests: the
/// next request's `CURL_POLL_IN` then costs no `epoll_ctl` (a stop and a
/// start were two per request). Readiness while nobody wants it (the peer
/// closed the idle connection) stops the poll.
///
/// Only once curl has asked to read the socket: libcurl 7.88 closes a connect
/// attempt it gives up (refused, timed out, a happy-eyeballs loser) without
/// the close-socket callback, and it watches such a socket for writing only;
/// the socket it reads is the connection's, closed through the callback. An
/// attempt's watch left armed could outlive its descriptor, and a start of it
/// still pending in libuv would then be an `epoll_ctl` on a closed number.
///
/// The client's sweep of quiet sockets (see `HTTPClient`) looks at the same
/// watches: the connections' (``isEstablished``) that had no readiness since
/// its last pass.
///
/// Ownership: the client's socket table holds it; the poll handle holds it
/// (retained) until its close callback.
final class SocketWatch {
    let socket: curl_socket_t
    private let handle: UnsafeMutablePointer<uv_poll_t>
    private unowned let client: HTTPClient
    /// The libuv events polled now; 0 when stopped.
    @exclusivity(unchecked) private var polled: Int32 = 0
    /// True between curl's `CURL_POLL_IN`/`OUT` and its `CURL_POLL_REMOVE`.
    @exclusivity(unchecked) private var wanted = false
    /// A socket the client opened itself (see ``isEstablished``).
    private let isConnection: Bool
    /// curl has asked to read it (see the type's notes).
    @exclusivity(unchecked) private var read = false
    /// Readiness came since the client's last sweep of quiet sockets.
    @exclusivity(unchecked) private var readySinceSweep = false

    /// `connection`: the socket is one the client opened (see ``isEstablished``).
    init(loop: UnsafeMutablePointer<uv_loop_t>, socket: curl_socket_t, client: HTTPClient, connection: Bool) {
        self.socket = socket
        self.client = client
        isConnection = connection
        handle = .allocate(capacity: 1)
        uv_poll_init_socket(loop, handle, socket)
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
    }

    /// True while curl watches the socket: a transfer is using its connection
    /// (curl 7.88 watches no idle pooled connection).
    var isWanted: Bool { wanted }

    /// A connection's socket that curl reads, so closes through the client's
    /// callback: its watch may stay armed while it idles (see the type's notes).
    var isEstablished: Bool { isConnection && read }

    /// True while the socket is polled although curl does not watch it (an idle connection's).
    var isArmedIdle: Bool { !wanted && polled != 0 }

    /// curl wants `events` (UV_READABLE / UV_WRITABLE) on the socket.
    func want(_ events: Int32) {
        wanted = true
        if events & Int32(UV_READABLE.rawValue) != 0 { read = true }
        poll(events)
    }

    /// curl stopped watching (`CURL_POLL_REMOVE`): polling stops until it asks
    /// again, unless the socket is an established connection (see the type's notes).
    func release() {
        wanted = false
        if !isEstablished { poll(0) }
    }

    /// Whether readiness came since the last call (the client's sweep of quiet sockets asks).
    func takeReadiness() -> Bool {
        defer { readySinceSweep = false }
        return readySinceSweep
    }

    /// Stops polling and frees the handle (in its close callback). Before the socket is closed.
    func close() {
        uv_close(uvHandle(handle)) { handle in
            Unmanaged<SocketWatch>.fromOpaque(handle!.pointee.data).release()
            handle!.deallocate()
        }
    }

    private func poll(_ events: Int32) {
        guard events != polled else { return }
        polled = events
        if events == 0 {
            uv_poll_stop(handle)
            return
        }
        uv_poll_start(handle, events) { handle, status, events in
            Unmanaged<SocketWatch>.fromOpaque(handle!.pointee.data)._withUnsafeGuaranteedRef { $0.ready(status, events) }
        }
    }

    /// Readiness from libuv; handed to curl while curl watches the socket.
    private func ready(_ status: Int32, _ events: Int32) {
        readySinceSweep = true
        if status < 0 { polled = 0 }  // libuv stopped the poll itself
        guard wanted else {
            poll(0)  // readiness that raced with a release: nobody is waiting for it
            return
        }
        var flags: Int32 = 0
        if status < 0 {
            // libuv reports POLLERR/POLLHUP as an error status; curl's own poll
            // reads them as "readable" (and keeps CURL_CSELECT_ERR for POLLNVAL),
            // so that it recv()s, sees the reset or the close itself, and retries
            // a request it sent on a kept-alive connection the server had just
            // closed. CURL_CSELECT_ERR would fail the transfer on the spot
            // ("select/poll returned error").
            flags = CURL_CSELECT_IN | CURL_CSELECT_OUT
        } else {
            if events & Int32(UV_READABLE.rawValue) != 0 { flags |= CURL_CSELECT_IN }
            if events & Int32(UV_WRITABLE.rawValue) != 0 { flags |= CURL_CSELECT_OUT }
        }
        client.socketAction(socket, flags)
    }
}
