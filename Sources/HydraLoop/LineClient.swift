import Glibc

/// A blocking, line-oriented client socket (POSIX), for the CLI and tests.
/// Not thread-safe: one user thread at a time.
public final class LineClient {
    private var fd: Int32
    private var buffer: [UInt8] = []
    /// Where `recv` reads: allocated once, never zero-filled (a fresh zeroed
    /// 64 KiB array per read cost a client of one-call submits 7% of its CPU).
    private var chunk = [UInt8](unsafeUninitializedCapacity: 64 * 1024) { _, count in count = 64 * 1024 }
    private let address: SocketAddress
    /// The longest line read before giving up (a broken or hostile peer that
    /// never sends a newline must not take the client's memory): 256 MiB,
    /// far above any answer a server sends (results stop at 16 MiB by default).
    public var maxLineBytes = 256 << 20

    /// Connects within `timeout`. Errors name the address: `cannot connect to
    /// 127.0.0.1:7400: Connection refused`.
    public init(connectingTo address: SocketAddress, timeout: Duration = .seconds(5)) throws(StreamError) {
        self.address = address
        func failure(_ reason: String) -> StreamError { StreamError("cannot connect to \(address): \(reason)") }
        switch address {
        case .tcp:
            guard let ip = address.ipSocketAddress() else { throw failure("not an IP address") }
            var storage = ip.storage
            let (family, length) = (ip.family, ip.length)
            fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw failure(LineClient.errorText()) }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            try connect(storage: &storage, length: length, timeout: timeout, failure: failure)
        case .unix(let path):
            var a = sockaddr_un()
            a.sun_family = sa_family_t(AF_UNIX)
            let bytes = Array(path.utf8)
            guard bytes.count < MemoryLayout.size(ofValue: a.sun_path) else { throw failure("path too long") }
            withUnsafeMutableBytes(of: &a.sun_path) { raw in
                for (i, b) in bytes.enumerated() { raw[i] = b }
                raw[bytes.count] = 0
            }
            fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw failure(LineClient.errorText()) }
            var storage = sockaddr_storage()
            withUnsafeMutableBytes(of: &storage) { dst in
                withUnsafeBytes(of: &a) { src in dst.copyMemory(from: src) }
            }
            try connect(storage: &storage, length: socklen_t(MemoryLayout<sockaddr_un>.size), timeout: timeout,
                        failure: failure)
        }
    }

    private func connect(storage: inout sockaddr_storage, length: socklen_t, timeout: Duration,
                         failure: (String) -> StreamError) throws(StreamError) {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        let status = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, length) }
        }
        if status != 0 {
            guard errno == EINPROGRESS || errno == EAGAIN else {
                let text = LineClient.errorText()
                close()
                throw failure(text)
            }
            guard wait(for: Int16(POLLOUT), timeout: timeout) else {
                close()
                throw failure("timed out")
            }
            var error: Int32 = 0
            var size = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size)
            if error != 0 {
                close()
                throw failure(String(cString: strerror(error)))
            }
        }
        _ = fcntl(fd, F_SETFL, flags)
    }

    /// Sends `line`, adding `\n` when missing. Never raises SIGPIPE.
    public func send(_ line: [UInt8]) throws(StreamError) {
        var bytes = line
        if bytes.last != UInt8(ascii: "\n") { bytes.append(UInt8(ascii: "\n")) }
        try send(raw: bytes)
    }

    /// Ends this side of the stream (a half-close): the peer reads the end, and
    /// this side may still read its answers.
    public func finishSending() {
        if fd >= 0 { _ = shutdown(fd, Int32(SHUT_WR)) }
    }

    /// Sends `bytes` as they are. Never raises SIGPIPE.
    public func send(raw bytes: [UInt8]) throws(StreamError) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw StreamError("\(address): \(LineClient.errorText())")
            }
            offset += n
        }
    }

    /// The next line without its terminator; nil at end of stream. Throws on
    /// errors and when `timeout` passes ("timed out").
    public func readLine(timeout: Duration? = nil) throws(StreamError) -> [UInt8]? {
        var scanned = 0
        while true {
            if let i = buffer[scanned...].firstIndex(of: UInt8(ascii: "\n")) {
                var line = Array(buffer[..<i])
                buffer.removeFirst(i + 1)
                if line.last == UInt8(ascii: "\r") { line.removeLast() }
                return line
            }
            scanned = buffer.count
            guard buffer.count <= maxLineBytes else {
                throw StreamError("\(address): a line longer than \(maxLineBytes) bytes (no newline): not an answer")
            }
            if let timeout, !wait(for: Int16(POLLIN), timeout: timeout) {
                throw StreamError("\(address): timed out")
            }
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 {
                if errno == EINTR { continue }
                throw StreamError("\(address): \(LineClient.errorText())")
            }
            if n == 0 {
                if buffer.isEmpty { return nil }
                defer { buffer = [] }
                return buffer
            }
            buffer.append(contentsOf: chunk[..<n])
        }
    }

    /// Closes the socket. Idempotent: the descriptor is forgotten at once, so
    /// a later call (or `deinit`) never closes a number another thread has
    /// been given since (a failed connect closed twice once took down a test
    /// run: the second close hit another loop's descriptor, and libuv aborts).
    public func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }

    deinit { close() }

    private func wait(for events: Int16, timeout: Duration) -> Bool {
        let (seconds, attoseconds) = timeout.components
        let milliseconds = Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000)
        var entry = pollfd(fd: fd, events: events, revents: 0)
        while true {
            let n = poll(&entry, 1, milliseconds)
            if n < 0 && errno == EINTR { continue }
            return n > 0
        }
    }

    private static func errorText() -> String { String(cString: strerror(errno)) }
}
