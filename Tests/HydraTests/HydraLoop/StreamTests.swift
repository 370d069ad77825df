import Foundation
import Synchronization
import Testing

@testable import HydraLoop

/// TCP and Unix-socket line streams on a real loop, with the blocking client.
@Suite(.ownThreads) struct StreamTests {
    @Test func parsesAddresses() {
        #expect(SocketAddress(parsing: "127.0.0.1:7400") == .tcp(host: "127.0.0.1", port: 7400))
        #expect(SocketAddress(parsing: "localhost:1") == .tcp(host: "127.0.0.1", port: 1))
        #expect(SocketAddress(parsing: "[::1]:80") == .tcp(host: "::1", port: 80))
        #expect(SocketAddress(parsing: "unix:/tmp/x.sock") == .unix(path: "/tmp/x.sock"))
        #expect(SocketAddress(parsing: "127.0.0.1:0") == .tcp(host: "127.0.0.1", port: 0))
        // A port is plain digits (no sign, no leading zero); a host has no spaces.
        for bad in ["127.0.0.1", "host:99999", ":80", "unix:", "::1:80", "h:x", "127.0.0.1:+80", "127.0.0.1:080",
                    "127.0.0.1:", " 127.0.0.1:80", "127.0.0.1 :80", "h\u{0}x:80"] {
            #expect(SocketAddress(parsing: bad) == nil, "\(bad)")
        }
        #expect(SocketAddress(parsing: "0.0.0.0:1")?.isLoopback == false)
        #expect(SocketAddress(parsing: "127.0.0.2:1")?.isLoopback == true)
    }

    /// An echo server: each line comes back upper-cased; "big" answers 5 MB then closes.
    final class EchoServer: Sendable {
        let loop = EventLoop(name: "stream-test")
        let listener: LoopBound<StreamListener>
        let port: Int?

        init(_ address: SocketAddress, maxLineBytes: Int = 1 << 20) throws {
            let loop = self.loop
            let made: Result<LoopBound<StreamListener>, StreamError> = loop.submitAndWait {
                do throws(StreamError) {
                    let listener = try StreamListener(loop: loop, address: address) { connection in
                        connection.maxLineBytes = maxLineBytes
                        connection.onLine = { [unowned connection] line in
                            if Array(line) == Array("big".utf8) {
                                connection.write([UInt8](repeating: UInt8(ascii: "z"), count: 5_000_000) + [10])
                                connection.close()
                            } else {
                                connection.write(Array(String(decoding: line, as: UTF8.self).uppercased().utf8) + [10])
                            }
                        }
                        connection.onLineTooLong = { [unowned connection] in
                            connection.write(Array("too long\n".utf8))
                            connection.close()
                        }
                    }
                    return .success(LoopBound(listener, loop: loop))
                } catch {
                    return .failure(error)
                }
            }
            listener = try made.get()
            let bound = listener
            port = loop.submitAndWait { bound.value.port }
        }

        func stop() {
            let bound = listener
            loop.submitAndWait { bound.value.close() }
            loop.shutdown()
        }
    }

    @Test func framesLinesAcrossWritesAndFlushesOnClose() throws {
        let server = try EchoServer(.tcp(host: "127.0.0.1", port: 0))
        defer { server.stop() }
        let client = try LineClient(connectingTo: .tcp(host: "127.0.0.1", port: server.port!))
        try client.send(Array("hel".utf8) + [])  // "hel\n" (send adds the newline)
        #expect(try client.readLine(timeout: .seconds(5)) == Array("HEL".utf8))
        // Two lines in one write, one with \r\n.
        try client.send(Array("a\r\nb".utf8))
        #expect(try client.readLine(timeout: .seconds(5)) == Array("A".utf8))
        #expect(try client.readLine(timeout: .seconds(5)) == Array("B".utf8))
        try client.send(Array("big".utf8))
        #expect(try client.readLine(timeout: .seconds(10))?.count == 5_000_000)
        #expect(try client.readLine(timeout: .seconds(5)) == nil)  // closed after the flush
        // A line past the client's limit is an error, not its memory's end.
        let small = try LineClient(connectingTo: .tcp(host: "127.0.0.1", port: server.port!))
        small.maxLineBytes = 1_000_000
        try small.send(Array("big".utf8))
        #expect(throws: StreamError.self) { _ = try small.readLine(timeout: .seconds(10)) }
    }

    @Test func tooLongLineAndUnixSocketMode() throws {
        let path = NSTemporaryDirectory() + "hydra-stream-\(UUID().uuidString.prefix(8)).sock"
        let server = try EchoServer(.unix(path: path), maxLineBytes: 100)
        var info = stat()
        #expect(stat(path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        let client = try LineClient(connectingTo: .unix(path: path))
        try client.send([UInt8](repeating: UInt8(ascii: "x"), count: 500))
        #expect(try client.readLine(timeout: .seconds(5)) == Array("too long".utf8))
        #expect(try client.readLine(timeout: .seconds(5)) == nil)
        // A second server on the same live socket is refused.
        #expect(throws: StreamError.self) { try EchoServer(.unix(path: path)) }
        server.stop()
        #expect(stat(path, &info) != 0)  // removed on close
    }

    /// The limit is the line's: a line of exactly `maxLineBytes` ended by
    /// "\r\n" was refused as too long (its "\r" counted), one past it still is.
    @Test func aLineAtTheLimitMayEndWithCRLF() throws {
        let server = try EchoServer(.tcp(host: "127.0.0.1", port: 0), maxLineBytes: 100)
        defer { server.stop() }
        let client = try LineClient(connectingTo: .tcp(host: "127.0.0.1", port: server.port!))
        try client.send([UInt8](repeating: UInt8(ascii: "x"), count: 100) + [UInt8(ascii: "\r")])
        #expect(try client.readLine(timeout: .seconds(5)) == [UInt8](repeating: UInt8(ascii: "X"), count: 100))
        try client.send([UInt8](repeating: UInt8(ascii: "y"), count: 101) + [UInt8(ascii: "\r")])
        #expect(try client.readLine(timeout: .seconds(5)) == Array("too long".utf8))
    }

    @Test func clientErrorsNameTheAddress() throws {
        let port = TestServer.closedPort
        do {
            _ = try LineClient(connectingTo: .tcp(host: "127.0.0.1", port: port))
            Issue.record("connected to a closed port")
        } catch {
            #expect(error.description.contains("127.0.0.1:\(port)"))
        }
        let live = try EchoServer(.tcp(host: "127.0.0.1", port: 0))
        defer { live.stop() }
        let client = try LineClient(connectingTo: .tcp(host: "127.0.0.1", port: live.port!))
        #expect(throws: StreamError.self) { try client.readLine(timeout: .milliseconds(50)) }
        #expect(throws: StreamError.self) { try EchoServer(.tcp(host: "127.0.0.1", port: live.port!)) }
    }
}
