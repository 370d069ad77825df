import CCurl
import CUV
import Foundation
import HydraLoop

/// Identifies a transfer of one ``HTTPClient``.
public struct HTTPTransferID: Hashable, Sendable {
    let value: UInt64
}

/// A libcurl multi handle driven by one ``EventLoop`` through the socket-action API:
/// one `uv_poll_t` per socket curl asks to watch, one loop timer for curl's timeouts,
/// completions read with `curl_multi_info_read`. No polling, no thread per request.
///
/// Ownership and threads: created, used and closed on its loop's thread only;
/// every callback (completion, progress) runs there. It owns the multi handle,
/// the easy handles (kept and reused, with their connections) and the poll handles.
/// The connection pool belongs to the multi handle: keep-alive reuse, HTTP/2
/// multiplexing where the server offers it, limits from ``HTTPPoolOptions``.
public final class HTTPClient {
    public typealias Completion = (Result<HTTPResponse, HTTPFailure>) -> Void
    /// Progress of an upload or a download (see ``HTTPRequest/reportsProgress``);
    /// at most ten reports a second per direction, plus the last one.
    public typealias Progress = (HTTPProgress) -> Void
    /// Opens the file a spooled body spills to (see ``HTTPRequest/spoolBytes``)
    /// and returns its descriptor, which stays the caller's; the transfer
    /// empties it and writes from its start. Runs on the loop thread, inside
    /// the transfer, at most once per request and redirect it follows.
    public typealias SpillFile = () -> Result<Int32, HTTPFailure>

    private let loop: EventLoop
    private let multi: UnsafeMutableRawPointer
    @exclusivity(unchecked) private var timer: LoopTimer!
    /// Transfers in flight, by id (curl's `CURLOPT_PRIVATE`).
    @exclusivity(unchecked) private var transfers = CounterTable<Transfer>(capacity: 256)
    /// The URLs its transfers fetch, parsed once each (see ``ParsedURL``).
    private let urls = ParsedURLCache()
    /// Finished transfers kept for reuse, with their easy handles.
    @exclusivity(unchecked) private var idle: [Transfer] = []
    /// A watch per socket curl has asked to watch and not closed (see ``SocketWatch``).
    @exclusivity(unchecked) private var sockets = CounterTable<SocketWatch>(capacity: 256)
    /// A descriptor as a key of `sockets` (descriptors are small numbers the kernel reuses, lowest first).
    private static func slot(_ socket: curl_socket_t) -> UInt64 { UInt64(UInt32(bitPattern: socket)) }
    /// Sockets curl closed so far (see ``complete(_:_:)``: transfers in flight then are reset).
    @exclusivity(unchecked) private var socketsClosed: UInt64 = 0
    @exclusivity(unchecked) private var nextID: UInt64 = 1
    @exclusivity(unchecked) private var closed = false
    @exclusivity(unchecked) private var pendingCompletions: [(Transfer, CURLcode)] = []
    @exclusivity(unchecked) private var completing: [(Transfer, CURLcode)] = []
    /// The timer's action, made once (curl restarts the timer for every transfer).
    @exclusivity(unchecked) private var timeoutAction: () -> Void
    /// Hands quiet sockets to curl while transfers run (see ``sweepQuietSockets()``).
    @exclusivity(unchecked) private var sweepTimer: LoopTimer!
    @exclusivity(unchecked) private var sweeping = false
    /// The pool's limits now.
    @exclusivity(unchecked) private var limits: HTTPPoolOptions
    /// Every socket curl opened and has not closed (its connections, busy or
    /// pooled), with its inode: a number is only acted on while it still names that socket.
    @exclusivity(unchecked) private var connections: [curl_socket_t: UInt64] = [:]
    /// Connections opened under looser limits than today's (see ``setPoolOptions(_:)``):
    /// each is shut down as soon as no transfer uses it.
    @exclusivity(unchecked) private var retiring: Set<curl_socket_t> = []

    /// Transfers started and not yet completed.
    public var activeCount: Int { transfers.count }

    /// Call once per process before starting threads that use libcurl. Idempotent.
    public static func initializeLibrary() { _ = libraryInitialized }
    private static let libraryInitialized: Bool = {
        curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK
    }()

    /// Creates a client on `loop`. Loop thread only.
    public init(loop: EventLoop, options: HTTPPoolOptions = HTTPPoolOptions()) {
        loop.preconditionInEventLoop()
        HTTPClient.initializeLibrary()
        self.loop = loop
        limits = options
        guard let multi = curl_multi_init() else { fatalError("curl_multi_init failed") }
        self.multi = multi
        timer = LoopTimer(loop: loop)
        sweepTimer = LoopTimer(loop: loop)
        timeoutAction = {}
        let me = Unmanaged.passUnretained(self).toOpaque()
        hydra_multi_setopt_ptr(multi, CURLMOPT_SOCKETDATA, me)
        hydra_multi_setopt_ptr(multi, CURLMOPT_TIMERDATA, me)
        hydra_multi_setopt_socket_cb(multi) { _, socket, what, userp, _ in
            Unmanaged<HTTPClient>.fromOpaque(userp!)._withUnsafeGuaranteedRef { $0.watch(socket: socket, what: what) }
            return 0
        }
        hydra_multi_setopt_timer_cb(multi) { _, timeoutMs, userp in
            Unmanaged<HTTPClient>.fromOpaque(userp!)._withUnsafeGuaranteedRef { $0.setTimer(timeoutMs) }
            return 0
        }
        apply(options)
        hydra_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        timeoutAction = { [unowned self] in self.socketAction(CURL_SOCKET_TIMEOUT, 0) }
    }

    /// Changes the pool's limits; transfers started from now on obey them (the
    /// ones under way finish as they are). Loop thread only.
    ///
    /// curl checks its limits only when it opens a connection: a pooled one is
    /// reused whatever they say. So when a limit goes down, every connection
    /// opened before is retired: shut down (`shutdown(2)`, so curl finds it dead
    /// and closes it) as soon as no transfer uses it, and the next requests open
    /// connections under the new limits.
    public func setPoolOptions(_ options: HTTPPoolOptions) {
        loop.preconditionInEventLoop()
        let lowered = options.maxConnections < limits.maxConnections || options.maxHostConnections < limits.maxHostConnections
        limits = options
        apply(options)
        if lowered {
            retiring = Set(connections.keys)
            retireIdleConnections()
        }
    }

    /// Shuts down the retiring connections no transfer uses now: those curl
    /// is not watching (it watches a connection while a transfer uses it, from
    /// connect to `CURL_POLL_REMOVE`, and no idle pooled one).
    private func retireIdleConnections() {
        for socket in retiring where sockets[Self.slot(socket)]?.isWanted != true {
            if let inode = connections[socket], HTTPClient.inode(of: socket) == inode {
                _ = Glibc.shutdown(socket, Int32(SHUT_RDWR))
            }
            retiring.remove(socket)
        }
    }

    /// The inode of an open descriptor (sockets have one too), or nil.
    private static func inode(of descriptor: Int32) -> UInt64? {
        var info = stat()
        return fstat(descriptor, &info) == 0 ? UInt64(info.st_ino) : nil
    }

    private func apply(_ options: HTTPPoolOptions) {
        hydra_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, max(1, options.maxConnections))
        hydra_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, max(1, options.maxHostConnections))
        hydra_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, max(1, options.maxConnections))
    }

    /// Starts `request`. `completion` runs exactly once on the loop thread, never
    /// before `start` returns; after ``cancel(_:)`` it runs with `.cancelled`.
    /// `spillFile` opens the file of a body bound for one that the request
    /// spools without giving a ``HTTPRequest/saveToFile``, if it must spill.
    /// Throws ``HTTPFailure`` (kind `invalid`) when the request cannot start.
    public func start(_ request: HTTPRequest, progress: Progress? = nil, spillFile: SpillFile? = nil,
                      completion: @escaping Completion) throws(HTTPFailure) -> HTTPTransferID {
        loop.preconditionInEventLoop()
        precondition(!closed, "HTTPClient used after close()")
        let id = nextID
        nextID += 1
        let transfer = idle.popLast()
            ?? Transfer(client: Unmanaged.passUnretained(self).toOpaque(), urls: urls)
        do {
            try transfer.begin(id: id, request, completion: completion, progress: progress, spillFile: spillFile)
        } catch {
            recycle(transfer)
            throw error
        }
        transfer.socketsClosedAtStart = socketsClosed
        let code = curl_multi_add_handle(multi, transfer.easy)
        if code != CURLM_OK {
            transfer.end()
            recycle(transfer)
            throw HTTPFailure(.invalid, String(cString: curl_multi_strerror(code)))
        }
        transfers.insert(transfer, forKey: id)
        if !sweeping, URLScheme(of: request.url) == .https { startSweeping() }
        return HTTPTransferID(value: id)
    }

    /// Cancels a transfer in flight; its completion runs now with kind `cancelled`.
    /// Unknown or finished ids are ignored.
    public func cancel(_ id: HTTPTransferID) {
        loop.preconditionInEventLoop()
        guard let transfer = transfers.removeValue(forKey: id.value) else { return }
        curl_multi_remove_handle(multi, transfer.easy)
        complete(transfer, .failure(HTTPFailure(.cancelled, "cancelled")))
    }

    /// Cancels every transfer and frees the multi handle. Loop thread only. Idempotent.
    public func close() {
        loop.preconditionInEventLoop()
        guard !closed else { return }
        for transfer in transfers.allValues { cancel(HTTPTransferID(value: transfer.id)) }
        closed = true
        timer.close()
        sweepTimer.close()
        idle.removeAll()  // their easy handles first: the multi handle outlives them
        curl_multi_cleanup(multi)  // closes the pooled connections through closeSocket
        for watch in sockets.allValues { watch.close() }
        sockets.removeAll()
    }

    // MARK: - curl callbacks (loop thread, from inside libcurl)

    static func from(_ pointer: UnsafeMutableRawPointer) -> HTTPClient {
        Unmanaged<HTTPClient>.fromOpaque(pointer).takeUnretainedValue()
    }

    private func watch(socket: curl_socket_t, what: Int32) {
        if what == CURL_POLL_REMOVE {
            // A connection's watch may stay armed while it idles (see ``SocketWatch``).
            sockets[Self.slot(socket)]?.release()
            return
        }
        let watch: SocketWatch
        if let known = sockets[Self.slot(socket)] {
            watch = known
        } else {
            // Known once, when made: a watch lives as long as its socket (a number
            // reused by a new socket gets a new watch, see ``openSocket(_:)``).
            watch = SocketWatch(loop: loop.uvLoop, socket: socket, client: self, connection: connections[socket] != nil)
            sockets.insert(watch, forKey: Self.slot(socket))
        }
        var events: Int32 = 0
        if what & CURL_POLL_IN != 0 { events |= Int32(UV_READABLE.rawValue) }
        if what & CURL_POLL_OUT != 0 { events |= Int32(UV_WRITABLE.rawValue) }
        watch.want(events)
    }

    /// curl's `CURLOPT_OPENSOCKETFUNCTION`: opens the socket (close-on-exec).
    /// A watch still filed under the new descriptor belongs to a socket closed
    /// without our close callback: it is dropped so the new socket gets its own.
    func openSocket(_ address: curl_sockaddr) -> curl_socket_t {
        let fd = Glibc.socket(address.family, address.socktype | Int32(SOCK_CLOEXEC.rawValue), address.protocol)
        guard fd >= 0 else { return CURL_SOCKET_BAD }
        sockets.removeValue(forKey: Self.slot(fd))?.close()
        connections[fd] = HTTPClient.inode(of: fd)
        retiring.remove(fd)  // (a number reused: a new connection)
        return fd
    }

    /// curl's `CURLOPT_CLOSESOCKETFUNCTION`: closes the socket's watch, then the socket.
    func closeSocket(_ socket: curl_socket_t) -> Int32 {
        socketsClosed &+= 1
        sockets.removeValue(forKey: Self.slot(socket))?.close()
        connections[socket] = nil
        retiring.remove(socket)
        return Glibc.close(socket)
    }

    private func setTimer(_ timeoutMs: Int) {
        if timeoutMs < 0 {
            timer.stop()
        } else {
            // 0 means "as soon as possible": a 0 ms libuv timer runs on the next iteration.
            timer.start(afterMilliseconds: UInt64(timeoutMs), timeoutAction)
        }
    }

    // MARK: - Driving curl (loop thread, outside libcurl)

    /// Hands readiness of `socket` (or a timeout) to curl, then completes what finished.
    func socketAction(_ socket: curl_socket_t, _ flags: Int32) {
        var running: Int32 = 0
        curl_multi_socket_action(multi, socket, flags, &running)
        collectCompleted()
    }

    /// Reads every DONE message first, then completes the transfers: a completion
    /// may start or cancel transfers, which must not happen inside the info_read loop.
    private func collectCompleted() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
            let result = hydra_msg_result(message)
            var privateData: UnsafeMutableRawPointer?
            hydra_easy_getinfo_ptr(easy, CURLINFO_PRIVATE, &privateData)
            let id = UInt64(UInt(bitPattern: privateData))
            if let transfer = transfers.removeValue(forKey: id) {
                pendingCompletions.append((transfer, result))
            }
        }
        guard !pendingCompletions.isEmpty else { return }
        // Trade arrays instead of copying: completions may add to `pendingCompletions` again.
        swap(&pendingCompletions, &completing)
        for (transfer, _) in completing { curl_multi_remove_handle(multi, transfer.easy) }
        for (transfer, result) in completing {
            if result == CURLE_OK, transfer.following != nil {
                switch transfer.redirectHop() {
                case .follow(let next):
                    follow(transfer, to: next)
                    continue
                case .refuse(let failure):
                    complete(transfer, .failure(failure))
                    continue
                case .none:
                    break
                }
            }
            complete(transfer, transfer.outcome(result))
        }
        completing.removeAll(keepingCapacity: true)
        // Transfers just done left their connections in the pool: none has picked one again yet.
        if !retiring.isEmpty { retireIdleConnections() }
    }

    /// Sends the next request of a redirect the client follows itself, on the
    /// same transfer and id (a cancel still reaches it).
    private func follow(_ transfer: Transfer, to next: HTTPRequest) {
        guard let completion = transfer.completion else { return }
        let id = transfer.id, progress = transfer.progress, spillFile = transfer.spillFile, hops = transfer.hops + 1
        transfer.end()
        do {
            try transfer.begin(id: id, next, completion: completion, progress: progress, spillFile: spillFile)
        } catch {
            recycle(transfer)
            completion(.failure(error))
            return
        }
        transfer.hops = hops
        // Still watched with no redirect left: one more ends the chain as curl's would.
        if !next.originBoundHeaders.isEmpty { transfer.following = next }
        let code = curl_multi_add_handle(multi, transfer.easy)
        guard code == CURLM_OK else {
            transfer.end()
            recycle(transfer)
            completion(.failure(HTTPFailure(.invalid, String(cString: curl_multi_strerror(code)))))
            return
        }
        transfers.insert(transfer, forKey: id)
        if !sweeping, URLScheme(of: next.url) == .https { startSweeping() }
    }

    /// Watches polled although curl does not watch their sockets: idle
    /// established connections only (see ``SocketWatch``). Loop thread; for tests.
    var armedIdleWatches: Int {
        sockets.allValues.count { $0.isArmedIdle }
    }

    // MARK: - Quiet sockets (libcurl 7.88 over HTTP/2)

    /// How often quiet sockets are handed to curl while transfers run.
    static let quietSocketSweepMilliseconds: UInt64 = 100

    /// Starts the sweep of quiet sockets; it stops itself when no transfer is left.
    /// Started by https requests only: HTTP/2 is negotiated over TLS alone here.
    private func startSweeping() {
        sweeping = true
        sweepTimer.start(afterMilliseconds: Self.quietSocketSweepMilliseconds,
                         repeatMilliseconds: Self.quietSocketSweepMilliseconds) { [unowned self] in self.sweepQuietSockets() }
    }

    /// Hands curl, as readable, each established connection (see
    /// ``SocketWatch``) a transfer uses that had no readiness since the last sweep.
    ///
    /// Why: over HTTP/2, libcurl 7.88 stops feeding nghttp2 when a frame for a
    /// stream whose buffer is full arrives (`NGHTTP2_ERR_PAUSE`), and keeps
    /// the rest of what it read from the socket in the connection's input
    /// buffer. Only a later receive call of one of the connection's streams
    /// processes that input; when the stream that paused ends on its
    /// `Content-Length` it makes none, the socket has nothing more to say, and
    /// the other streams wait for their last frames, already read, until
    /// their timeouts (seen against nghttpd: 7–15 of 600 jobs of 1 MB stopped
    /// at 999,424 bytes; the same in plain C on the socket API; the curl tool,
    /// which runs every transfer on each pass, never). A spurious "readable"
    /// makes curl run the socket's transfers, whose receive call processes the
    /// buffered input (or reads nothing: EAGAIN). A socket that had readiness
    /// is left alone: its transfers are being run anyway.
    private func sweepQuietSockets() {
        guard !transfers.isEmpty, !closed else {
            sweeping = false
            sweepTimer.stop()
            return
        }
        // Established connections only (HTTP/2 runs on nothing else): a connect in
        // progress or curl's resolver socket is left to its own readiness.
        for watch in sockets.allValues where watch.isEstablished && watch.isWanted && !watch.takeReadiness() {
            // Still this socket's watch, and still wanted: a completion of this sweep may have closed it.
            guard sockets[Self.slot(watch.socket)] === watch, watch.isWanted else { continue }
            socketAction(watch.socket, CURL_CSELECT_IN)
        }
    }

    /// Ends the transfer, files it for reuse, then runs its completion (which may start the next).
    private func complete(_ transfer: Transfer, _ result: Result<HTTPResponse, HTTPFailure>) {
        let completion = transfer.completion
        // curl 7.88 counts the retries of a request whose kept-alive connection
        // turned out dead per easy handle, for the handle's whole life (it
        // resets the count only when giving up, or in curl_easy_reset; see curl
        // pull request 19066, 2025): a long-lived handle failed its sixth such request at once
        // ("Connection died, tried 5 times before giving up"). Such a retry
        // closes a socket, so a handle in use while one closed is reset before
        // its next request (rare while connections are kept alive).
        if socketsClosed != transfer.socketsClosedAtStart { transfer.resetBeforeNextUse() }
        transfer.end()
        recycle(transfer)
        completion?(result)
    }

    /// Keeps a finished transfer (and its easy handle) for the next request.
    private func recycle(_ transfer: Transfer) {
        if idle.count < 1024 && !closed { idle.append(transfer) }
    }
}
