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
    /// Progress: bytes received so far and the expected total when known.
    public typealias Progress = (_ bytes: Int64, _ total: Int64?) -> Void

    private let loop: EventLoop
    private let multi: UnsafeMutableRawPointer
    private var timer: LoopTimer!
    private var transfers: [UInt64: Transfer] = [:]
    private var idleEasyHandles: [UnsafeMutableRawPointer] = []
    private var nextID: UInt64 = 1
    private var closed = false
    private var pendingCompletions: [(Transfer, CURLcode)] = []
    private var completing: [(Transfer, CURLcode)] = []
    /// The timer's action, made once (curl restarts the timer for every transfer).
    private var timeoutAction: () -> Void

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
        guard let multi = curl_multi_init() else { fatalError("curl_multi_init failed") }
        self.multi = multi
        timer = LoopTimer(loop: loop)
        timeoutAction = {}
        let me = Unmanaged.passUnretained(self).toOpaque()
        hydra_multi_setopt_ptr(multi, CURLMOPT_SOCKETDATA, me)
        hydra_multi_setopt_ptr(multi, CURLMOPT_TIMERDATA, me)
        hydra_multi_setopt_socket_cb(multi) { _, socket, what, userp, socketp in
            Unmanaged<HTTPClient>.fromOpaque(userp!).takeUnretainedValue()
                .watch(socket: socket, what: what, context: socketp)
            return 0
        }
        hydra_multi_setopt_timer_cb(multi) { _, timeoutMs, userp in
            Unmanaged<HTTPClient>.fromOpaque(userp!).takeUnretainedValue().setTimer(timeoutMs)
            return 0
        }
        hydra_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, max(1, options.maxConnections))
        hydra_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, max(1, options.maxHostConnections))
        hydra_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, max(1, options.maxConnections))
        hydra_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        timeoutAction = { [unowned self] in self.socketAction(CURL_SOCKET_TIMEOUT, 0) }
    }

    /// Starts `request`. `completion` runs exactly once on the loop thread, never
    /// before `start` returns; after ``cancel(_:)`` it runs with `.cancelled`.
    /// Throws ``HTTPFailure`` (kind `invalid`) when the request cannot start.
    public func start(_ request: HTTPRequest, progress: Progress? = nil,
                      completion: @escaping Completion) throws(HTTPFailure) -> HTTPTransferID {
        loop.preconditionInEventLoop()
        precondition(!closed, "HTTPClient used after close()")
        let id = nextID
        nextID += 1
        let easy = idleEasyHandles.popLast() ?? curl_easy_init()!
        let transfer = Transfer(id: id, easy: easy, completion: completion, progress: progress)
        if let path = request.saveTo {
            guard let file = fopen(path, "wb") else {
                let reason = String(cString: strerror(errno))
                recycle(easy)
                throw HTTPFailure(.invalid, "cannot write \(path): \(reason)")
            }
            transfer.file = file
        }
        do {
            try transfer.configure(request)
        } catch {
            transfer.releaseResources()
            recycle(easy)
            throw error
        }
        transfers[id] = transfer
        let code = curl_multi_add_handle(multi, easy)
        if code != CURLM_OK {
            transfers[id] = nil
            transfer.releaseResources()
            recycle(easy)
            throw HTTPFailure(.invalid, String(cString: curl_multi_strerror(code)))
        }
        return HTTPTransferID(value: id)
    }

    /// Cancels a transfer in flight; its completion runs now with kind `cancelled`.
    /// Unknown or finished ids are ignored.
    public func cancel(_ id: HTTPTransferID) {
        loop.preconditionInEventLoop()
        guard let transfer = transfers.removeValue(forKey: id.value) else { return }
        curl_multi_remove_handle(multi, transfer.easy)
        finish(transfer, failure: HTTPFailure(.cancelled, "cancelled"))
    }

    /// Cancels every transfer and frees the multi handle. Loop thread only. Idempotent.
    public func close() {
        loop.preconditionInEventLoop()
        guard !closed else { return }
        for id in Array(transfers.keys) { cancel(HTTPTransferID(value: id)) }
        closed = true
        timer.close()
        curl_multi_cleanup(multi)  // calls the socket callback with REMOVE for open sockets
        for easy in idleEasyHandles { curl_easy_cleanup(easy) }
        idleEasyHandles.removeAll()
    }

    // MARK: - curl callbacks (loop thread, from inside libcurl)

    private func watch(socket: curl_socket_t, what: Int32, context: UnsafeMutableRawPointer?) {
        if what == CURL_POLL_REMOVE {
            if let context {
                SocketWatch.from(context).close()
                curl_multi_assign(multi, socket, nil)
            }
            return
        }
        let watch: SocketWatch
        if let context {
            watch = SocketWatch.from(context)
        } else {
            watch = SocketWatch(loop: loop.uvLoop, socket: socket, client: self)
            curl_multi_assign(multi, socket, watch.opaque)
        }
        var events: Int32 = 0
        if what & CURL_POLL_IN != 0 { events |= Int32(UV_READABLE.rawValue) }
        if what & CURL_POLL_OUT != 0 { events |= Int32(UV_WRITABLE.rawValue) }
        watch.start(events: events)
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

    fileprivate func socketAction(_ socket: curl_socket_t, _ flags: Int32) {
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
        for (transfer, result) in completing { complete(transfer, result) }
        completing.removeAll(keepingCapacity: true)
    }

    private func complete(_ transfer: Transfer, _ result: CURLcode) {
        if result == CURLE_OK {
            let response = transfer.response()
            transfer.releaseResources()
            recycle(transfer.easy)
            transfer.completion(.success(response))
        } else {
            finish(transfer, failure: transfer.failure(for: result))
        }
    }

    private func finish(_ transfer: Transfer, failure: HTTPFailure) {
        transfer.releaseResources()
        recycle(transfer.easy)
        transfer.completion(.failure(failure))
    }

    /// Keeps an easy handle for the next request: a reset handle keeps its
    /// connection cache link, DNS and TLS session state.
    private func recycle(_ easy: UnsafeMutableRawPointer) {
        if idleEasyHandles.count < 1024 && !closed {
            curl_easy_reset(easy)
            idleEasyHandles.append(easy)
        } else {
            curl_easy_cleanup(easy)
        }
    }
}

/// The `uv_poll_t` watching one socket for curl. Loop thread only.
/// Ownership: curl holds an unretained pointer (via `curl_multi_assign`); the
/// poll handle holds the object until its close callback.
private final class SocketWatch {
    private let handle: UnsafeMutablePointer<uv_poll_t>
    let socket: curl_socket_t
    unowned let client: HTTPClient

    init(loop: UnsafeMutablePointer<uv_loop_t>, socket: curl_socket_t, client: HTTPClient) {
        self.socket = socket
        self.client = client
        handle = .allocate(capacity: 1)
        uv_poll_init_socket(loop, handle, socket)
        handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
    }

    var opaque: UnsafeMutableRawPointer { handle.pointee.data }

    static func from(_ opaque: UnsafeMutableRawPointer) -> SocketWatch {
        Unmanaged<SocketWatch>.fromOpaque(opaque).takeUnretainedValue()
    }

    func start(events: Int32) {
        uv_poll_start(handle, events) { handle, status, events in
            let watch = Unmanaged<SocketWatch>.fromOpaque(handle!.pointee.data).takeUnretainedValue()
            var flags: Int32 = 0
            if status < 0 {
                flags = CURL_CSELECT_ERR
            } else {
                if events & Int32(UV_READABLE.rawValue) != 0 { flags |= CURL_CSELECT_IN }
                if events & Int32(UV_WRITABLE.rawValue) != 0 { flags |= CURL_CSELECT_OUT }
            }
            watch.client.socketAction(watch.socket, flags)
        }
    }

    func close() {
        uv_poll_stop(handle)
        uv_close(uvHandle(handle)) { handle in
            Unmanaged<SocketWatch>.fromOpaque(handle!.pointee.data).release()
            handle!.deallocate()
        }
    }
}
