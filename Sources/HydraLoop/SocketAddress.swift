import CUV
import Glibc

/// Where a server listens or a client connects: `HOST:PORT` (IPv4,
/// `[v6]:PORT`, `localhost:PORT`) or `unix:PATH`.
public enum SocketAddress: Sendable, Equatable, CustomStringConvertible {
    case tcp(host: String, port: Int)
    case unix(path: String)

    /// Parses `HOST:PORT`, `[V6]:PORT` or `unix:PATH`; nil when malformed
    /// (no port, a port that is not plain digits or outside 0...65535, an
    /// empty host or path, a host with spaces or control characters).
    public init?(parsing text: String) {
        if text.hasPrefix("unix:") {
            let path = String(text.dropFirst(5))
            guard !path.isEmpty else { return nil }
            self = .unix(path: path)
            return
        }
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { return nil }
            portText = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            if host.contains(":") { return nil }  // bare IPv6 needs brackets
        }
        if host.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F }) { return nil }
        // Digits only, without leading zeros: "+80" and "080" are typos, not ports.
        guard !host.isEmpty, !portText.isEmpty, portText.utf8.allSatisfy({ (48...57).contains($0) }),
              portText == "0" || !portText.hasPrefix("0"),
              let port = Int(portText), (0...65535).contains(port) else { return nil }
        self = .tcp(host: host == "localhost" ? "127.0.0.1" : String(host), port: port)
    }

    /// True for addresses only this machine can reach (127.0.0.0/8, ::1, Unix sockets).
    public var isLoopback: Bool {
        switch self {
        case .unix: return true
        case .tcp(let host, _): return host.hasPrefix("127.") || host == "::1"
        }
    }

    public var isIPv6: Bool {
        if case .tcp(let host, _) = self { return host.contains(":") }
        return false
    }

    public var description: String {
        switch self {
        case .unix(let path): return "unix:\(path)"
        case .tcp(let host, let port): return host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        }
    }
}

/// A socket that could not listen, connect, read or write; the message names the address.
public struct StreamError: Error, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

extension SocketAddress {
    /// The C socket address of a TCP address (IPv4 or IPv6), with its family and
    /// length; nil when the host is not an IP address or this is a Unix path.
    /// For the listener and the client of this module only.
    func ipSocketAddress() -> (storage: sockaddr_storage, family: Int32, length: socklen_t)? {
        guard case .tcp(let host, let port) = self else { return nil }
        var storage = sockaddr_storage()
        let v6 = host.contains(":")
        let status: Int32 = withUnsafeMutablePointer(to: &storage) { pointer in
            if v6 {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { uv_ip6_addr(host, Int32(port), $0) }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { uv_ip4_addr(host, Int32(port), $0) }
        }
        guard status == 0 else { return nil }
        return v6 ? (storage, AF_INET6, socklen_t(MemoryLayout<sockaddr_in6>.size))
                  : (storage, AF_INET, socklen_t(MemoryLayout<sockaddr_in>.size))
    }
}

extension SocketAddress {
    /// The addresses a host name (`vm:7400`) stands for (`getaddrinfo`: IPv4
    /// and IPv6, in its order, to be tried in turn); an IP address or a Unix
    /// path as it is. Throws naming the host when the name does not resolve.
    /// Blocks while it looks the name up: for clients, never on a loop.
    public func resolvingHostName() throws(StreamError) -> [SocketAddress] {
        guard case .tcp(let host, let port) = self, ipSocketAddress() == nil else { return [self] }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, nil, &hints, &found)
        guard status == 0, found != nil else {
            throw StreamError("cannot resolve the host \"\(host)\": \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(found) }
        var addresses: [SocketAddress] = []
        var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var next = found
        while let entry = next {
            if getnameinfo(entry.pointee.ai_addr, entry.pointee.ai_addrlen, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) == 0 {
                let numeric = text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
                let address = SocketAddress.tcp(host: String(decoding: numeric, as: UTF8.self), port: port)
                if !addresses.contains(address) { addresses.append(address) }
            }
            next = entry.pointee.ai_next
        }
        guard !addresses.isEmpty else { throw StreamError("cannot resolve the host \"\(host)\"") }
        return addresses
    }
}
