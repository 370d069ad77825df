import CUV
import Glibc

/// Accepts connections on a TCP address or a Unix socket (created with mode
/// 0600, removed on close).
///
/// Loop thread only: created, used and closed there; `onConnection` runs
/// there. The listener closes itself and the connections it accepted when
/// its loop shuts down.
public final class StreamListener {
    private let loop: EventLoop
    private let address: SocketAddress
    private var handle: UnsafeMutablePointer<uv_stream_t>?
    private let onConnection: (StreamConnection) -> Void
    private var connections: [ObjectIdentifier: StreamConnection] = [:]
    /// The bound TCP port (useful with port 0); nil for a Unix socket.
    public private(set) var port: Int?
    /// While false, connections wait in the kernel's backlog and none is
    /// accepted: a server listens early, so that an address it cannot have
    /// stops it before it does any work, and opens once it is ready.
    /// Setting it true accepts the connections that waited.
    public var accepting: Bool {
        didSet { if accepting && connectionWaits { connectionWaits = false; acceptOne() } }
    }
    /// A connection arrived while not accepting (libuv then stops watching the
    /// socket until it is accepted).
    private var connectionWaits = false

    /// Binds and listens. Errors name the address: `cannot listen on
    /// 127.0.0.1:7400: address already in use`. With `accepting` false,
    /// connections wait until ``accepting`` is set.
    public init(loop: EventLoop, address: SocketAddress, backlog: Int32 = 511, accepting: Bool = true,
                onConnection: @escaping (StreamConnection) -> Void) throws(StreamError) {
        loop.preconditionInEventLoop()
        self.loop = loop
        self.address = address
        self.accepting = accepting
        self.onConnection = onConnection
        func failure(_ status: Int32) -> StreamError {
            StreamError("cannot listen on \(address): \(uvErrorString(status))")
        }
        switch address {
        case .tcp:
            guard var (storage, _, _) = address.ipSocketAddress() else {
                throw StreamError("cannot listen on \(address): not an IP address")
            }
            let tcp = UnsafeMutablePointer<uv_tcp_t>.allocate(capacity: 1)
            uv_tcp_init(loop.uvLoop, tcp)
            handle = UnsafeMutablePointer(OpaquePointer(tcp))
            let status = withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { uv_tcp_bind(tcp, $0, 0) }
            }
            if status < 0 { closeHandle(); throw failure(status) }
        case .unix(let path):
            // The kernel reads at most 107 bytes of a socket's path and stops at a NUL: a
            // longer path would be bound (through the private folder) where no client can reach.
            if path.utf8.count > 107 {
                throw StreamError("cannot listen on \(address): the path is \(path.utf8.count) bytes long; a Unix socket's path is at most 107")
            }
            if path.utf8.contains(0) { throw StreamError("cannot listen on \(address): the path contains a NUL byte") }
            // (bind would say "permission denied" or "no such file": name the folder instead.)
            let folder = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
            var info = stat()
            if !folder.isEmpty, stat(folder, &info) != 0 || (info.st_mode & S_IFMT) != S_IFDIR {
                throw StreamError("cannot listen on \(address): the folder \(folder) does not exist")
            }
            try StreamListener.removeStaleSocket(at: path, address: address)
            let pipe = UnsafeMutablePointer<uv_pipe_t>.allocate(capacity: 1)
            uv_pipe_init(loop.uvLoop, pipe, 0)
            handle = UnsafeMutablePointer(OpaquePointer(pipe))
            let status = StreamListener.bindPrivately(pipe, at: path)
            if status < 0 { closeHandle(); throw failure(status) }
        }
        handle!.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        let status = uv_listen(handle, backlog) { server, status in
            guard status >= 0 else { return }
            let me = Unmanaged<StreamListener>.fromOpaque(server!.pointee.data).takeUnretainedValue()
            if me.accepting { me.acceptOne() } else { me.connectionWaits = true }
        }
        if status < 0 {
            closeHandle()
            if case .unix(let path) = address { unlink(path) }
            throw failure(status)
        }
        if case .tcp = address {
            var storage = sockaddr_storage()
            var length = Int32(MemoryLayout<sockaddr_storage>.size)
            withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    _ = uv_tcp_getsockname(UnsafeMutablePointer(OpaquePointer(handle!)), $0, &length)
                }
            }
            port = Int(UInt16(bigEndian: withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_port }
            }))
        }
        loop.onShutdown { [weak self] in self?.closeAll() }
    }

    private func acceptOne() {
        guard let handle else { return }
        let client: UnsafeMutablePointer<uv_stream_t>
        var peer = "unix"
        switch address {
        case .tcp:
            let tcp = UnsafeMutablePointer<uv_tcp_t>.allocate(capacity: 1)
            uv_tcp_init(loop.uvLoop, tcp)
            client = UnsafeMutablePointer(OpaquePointer(tcp))
        case .unix:
            let pipe = UnsafeMutablePointer<uv_pipe_t>.allocate(capacity: 1)
            uv_pipe_init(loop.uvLoop, pipe, 0)
            client = UnsafeMutablePointer(OpaquePointer(pipe))
        }
        guard uv_accept(handle, client) == 0 else {
            uvCloseAndFree(client)
            return
        }
        if case .tcp = address {
            let tcp = UnsafeMutablePointer<uv_tcp_t>(OpaquePointer(client))
            uv_tcp_nodelay(tcp, 1)
            peer = StreamListener.peerName(tcp)
        }
        let connection = StreamConnection(loop: loop, handle: client, peer: peer)
        let key = ObjectIdentifier(connection)
        connections[key] = connection
        onConnection(connection)
        // Chain after the owner's onClose so the listener forgets the connection.
        let ownerClose = connection.onClose
        connection.onClose = { [weak self] in
            ownerClose?()
            self?.connections[key] = nil
        }
        connection.startReading()
    }

    private static func peerName(_ tcp: UnsafeMutablePointer<uv_tcp_t>) -> String {
        var storage = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { uv_tcp_getpeername(tcp, $0, &length) }
        } == 0
        guard ok, storage.ss_family == sa_family_t(AF_INET) else { return "tcp" }
        var name = [CChar](repeating: 0, count: 64)
        let port = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { pointer -> UInt16 in
                uv_ip4_name(pointer, &name, name.count)
                return UInt16(bigEndian: pointer.pointee.sin_port)
            }
        }
        return String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) + ":\(port)"
    }

    /// A socket file left by a process that died is removed; one a live server
    /// still accepts on is "address already in use".
    /// Binds `pipe` so that the socket at `path` is never reachable with looser
    /// permissions than 0600: it is bound in a private folder (0700) beside
    /// `path`, set to 0600 there, then renamed into place. (Binding at `path`
    /// and then changing its mode leaves a moment where anyone may connect.)
    /// A path too long for that detour is bound in place, then set to 0600.
    private static func bindPrivately(_ pipe: UnsafeMutablePointer<uv_pipe_t>, at path: String) -> Int32 {
        let slash = path.lastIndex(of: "/")
        let folder = slash.map { String(path[..<$0]) } ?? "."
        var template = Array(((folder.isEmpty ? "" : folder) + "/.hydra-XXXXXX").utf8CString)
        guard template.count + 2 < 108, template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            let status = uv_pipe_bind(pipe, path)
            if status == 0 { chmod(path, 0o600) }
            return status
        }
        let privateFolder = String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
        defer { rmdir(privateFolder) }
        let temporary = privateFolder + "/s"
        var status = uv_pipe_bind(pipe, temporary)
        guard status == 0 else { return status }
        chmod(temporary, 0o600)
        if rename(temporary, path) != 0 {
            status = -errno
            unlink(temporary)
        }
        return status
    }

    private static func removeStaleSocket(at path: String, address: SocketAddress) throws(StreamError) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        guard (info.st_mode & S_IFMT) == S_IFSOCK else {
            throw StreamError("cannot listen on \(address): the path exists and is not a socket")
        }
        if let probe = try? LineClient(connectingTo: address, timeout: .milliseconds(500)) {
            probe.close()
            throw StreamError("cannot listen on \(address): address already in use")
        }
        unlink(path)
    }

    private func closeHandle() {
        if let handle { uvCloseAndFree(handle) }
        handle = nil
    }

    /// Stops accepting; connections already accepted stay open. Idempotent.
    public func close() {
        loop.preconditionInEventLoop()
        guard handle != nil else { return }
        closeHandle()
        if case .unix(let path) = address { unlink(path) }
    }

    /// Stops accepting and closes every accepted connection (loop shutdown).
    private func closeAll() {
        close()
        for connection in connections.values { connection.closeNow() }
        connections.removeAll()
    }
}
