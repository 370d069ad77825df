import Foundation
import Testing

@testable import Hydra
@testable import HydraHTTP

/// TLS options and proxies (rest.md §7) against real peers: certificates made
/// with `openssl` at test time, the test server's routes over HTTPS
/// (Tests/Support/tlsserver.py, with and without a required client
/// certificate), and Debian's `tinyproxy` on a loopback port.
@Suite(.serialized, .ownThreads) struct TLSProxyTests {
    /// A CA, a server certificate for 127.0.0.1 and a client certificate, made once per test process.
    struct Certificates: Sendable {
        let folder: String
        var ca: String { folder + "/ca.pem" }
        var serverCert: String { folder + "/server.pem" }
        var serverKey: String { folder + "/server.key" }
        var clientCert: String { folder + "/client.pem" }
        var clientKey: String { folder + "/client.key" }
        let pin: String
    }

    static let certificates: Certificates = {
        let folder = NSTemporaryDirectory() + "hydra-tls-\(UUID().uuidString)"
        try! FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let script = """
            set -e
            cd '\(folder)'
            openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj '/CN=Hydra Test CA' 2>/dev/null
            printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > server.ext
            openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj '/CN=localhost' 2>/dev/null
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile server.ext 2>/dev/null
            printf 'extendedKeyUsage=clientAuth\\n' > client.ext
            openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj '/CN=hydra-client' 2>/dev/null
            openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2 -extfile client.ext 2>/dev/null
            openssl x509 -in server.pem -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64
            """
        let (status, out) = shell(script)
        precondition(status == 0, "openssl failed: \(out)")
        return Certificates(folder: folder, pin: "sha256//" + out.trimmingCharacters(in: .whitespacesAndNewlines))
    }()

    static func shell(_ script: String) -> (Int32, String) {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", script]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        try! process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// An engine whose server `s` is `server` (the JSON of a server entry).
    func engine(_ server: String) throws -> HydraEngine {
        try makeEngine(#", "servers": {"testsvr": "\#(TestServer.base)", "s": \#(server)}"#)
    }

    func run(_ engine: HydraEngine, _ path: String = "/items") async throws -> JobResult {
        try await engine.run(spec(#"{"type":"remote","server":"s","endpoint":"\#(path)","timeoutMs":5000}"#))
    }

    @Test func verificationCAFilesAndPins() async throws {
        let certs = Self.certificates
        let https = OwnTestServer(script: "tlsserver.py", arguments: ["--cert", certs.serverCert, "--key", certs.serverKey])
        let url = "https://127.0.0.1:\(https.port)"

        let unknown = try engine(#"{"url": "\#(url)"}"#)
        defer { unknown.shutdown() }
        let refused = try await run(unknown)
        #expect(refused.state == .failed && refused.error?.kind == .tls, "\(String(describing: refused.error))")
        #expect(refused.error?.message.lowercased().contains("certificate") == true)

        let trusted = try engine(#"{"url": "\#(url)", "caFile": "\#(certs.ca)"}"#)
        defer { trusted.shutdown() }
        let passed = try await run(trusted)
        #expect(passed.state == .succeeded && passed.result?["body"]?["count"] == 3, "\(String(describing: passed.error))")

        let pinned = try engine(#"{"url": "\#(url)", "caFile": "\#(certs.ca)", "pinnedPublicKey": "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= ; \#(certs.pin)"}"#)
        defer { pinned.shutdown() }
        #expect(try await run(pinned).state == .succeeded)

        let wrongPin = try engine(#"{"url": "\#(url)", "caFile": "\#(certs.ca)", "pinnedPublicKey": "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}"#)
        defer { wrongPin.shutdown() }
        let mismatch = try await run(wrongPin)
        #expect(mismatch.error?.kind == .tls && mismatch.error?.message.lowercased().contains("pinned") == true,
                "\(String(describing: mismatch.error))")

        let unverified = try engine(#"{"url": "\#(url)", "verifyTLS": false}"#)
        defer { unverified.shutdown() }
        #expect(try await run(unverified).state == .succeeded)

        // A CA file that is there but holds no certificate: kind `tls`, and the
        // message names the field, never the server's path (protocol.md §2).
        let notPEM = certs.folder + "/not-a-ca.pem"
        try Data("not a certificate\n".utf8).write(to: URL(fileURLWithPath: notPEM))
        let badCA = try engine(#"{"url": "\#(url)", "caFile": "\#(notPEM)"}"#)
        defer { badCA.shutdown() }
        let unusable = try await run(badCA)
        #expect(unusable.error?.kind == .tls, "\(String(describing: unusable.error))")
        #expect(unusable.error?.message.contains(certs.folder) == false, "\(String(describing: unusable.error))")
    }

    @Test func aServerThatDemandsAClientCertificate() async throws {
        let certs = Self.certificates
        let mtls = OwnTestServer(script: "tlsserver.py",
                                 arguments: ["--cert", certs.serverCert, "--key", certs.serverKey, "--client-ca", certs.ca])
        let url = "https://127.0.0.1:\(mtls.port)"
        let anonymous = try engine(#"{"url": "\#(url)", "caFile": "\#(certs.ca)"}"#)
        defer { anonymous.shutdown() }
        let refused = try await run(anonymous)
        #expect(refused.state == .failed, "\(String(describing: refused.result))")
        // curl reports the server's alert as a TLS failure or, with TLS 1.3, a send or read
        // failure on the new connection after the handshake: kind `tls` either way (rest.md §7).
        #expect(refused.error?.kind == .tls, "\(String(describing: refused.error))")

        let identified = try engine("""
            {"url": "\(url)", "caFile": "\(certs.ca)", "clientCert": "\(certs.clientCert)", "clientKey": "\(certs.clientKey)"}
            """)
        defer { identified.shutdown() }
        let passed = try await run(identified)
        #expect(passed.state == .succeeded, "\(String(describing: passed.error))")
    }

    @Test func requestsGoThroughTinyproxyWithCredentials() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/tinyproxy") else {
            Issue.record("tinyproxy is missing: make test installs it (apt-get install tinyproxy)")
            return
        }
        let port = Self.freePort()
        let folder = NSTemporaryDirectory() + "hydra-proxy-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try """
            Port \(port)
            Listen 127.0.0.1
            Timeout 30
            Allow 127.0.0.1
            BasicAuth user s3cr3t-proxy
            MaxClients 50
            LogLevel Info
            """.write(toFile: folder + "/tinyproxy.conf", atomically: true, encoding: .utf8)
        let proxy = try Self.startDaemon("/usr/bin/tinyproxy", ["-d", "-c", folder + "/tinyproxy.conf"], port: port)
        defer { Self.stop(proxy) }

        let through = try engine(#"{"url": "\#(TestServer.base)", "proxy": "http://user:s3cr3t-proxy@127.0.0.1:\#(port)"}"#)
        defer { through.shutdown() }
        let log = EventLog()
        _ = through.subscribe(sink: log)
        let echoed = try await run(through, "/echo/p")
        #expect(echoed.state == .succeeded, "\(String(describing: echoed.error))")
        #expect(echoed.result?["body"]?["headers"]?["via"]?.stringValue?.contains("tinyproxy") == true)

        let wrong = try engine(#"{"url": "\#(TestServer.base)", "proxy": "http://user:not-it@127.0.0.1:\#(port)"}"#)
        defer { wrong.shutdown() }
        let refused = try await run(wrong, "/echo/p")
        #expect(refused.state == .failed && refused.error?.kind == .http, "\(String(describing: refused.error))")

        // A proxy that is not there: a network failure whose message keeps the password out.
        let gone = try engine(#"{"url": "\#(TestServer.base)", "proxy": "http://user:s3cr3t-proxy@127.0.0.1:\#(TestServer.closedPort)"}"#)
        defer { gone.shutdown() }
        let unreachable = try await run(gone)
        #expect(unreachable.error?.kind == .network)
        let text = (log.all.map { JSONWriter.string($0.json) } + [unreachable.error?.message ?? ""]).joined()
        #expect(!text.contains("s3cr3t-proxy"))
    }

    /// Proxy credentials are secrets (rest.md §7): curl's messages show
    /// neither the password nor the user name, together or apart, as written
    /// or percent-decoded.
    @Test func proxyCredentialsAreMaskedWholeInCurlsMessages() {
        let proxy = "http://proxy-user%40corp:s3cr%3At@127.0.0.1:3128"
        let message = "Failed via proxy-user%40corp:s3cr%3At@127.0.0.1 (user proxy-user@corp, password s3cr:t, proxy-user%40corp)"
        let masked = Transfer.masking(proxy, in: message)
        for secret in ["proxy-user", "s3cr", "corp:"] {
            #expect(!masked.contains(secret), "\(secret) in \(masked)")
        }
        #expect(masked.contains("127.0.0.1"))
        // A user alone (no password) is masked too; a URL without credentials changes nothing.
        #expect(Transfer.masking("socks5h://lonely-user@10.0.0.1:1080", in: "auth for lonely-user failed") == "auth for *** failed")
        #expect(Transfer.masking("http://10.0.0.1:3128", in: "cannot reach 10.0.0.1") == "cannot reach 10.0.0.1")
    }

    /// rest.md §7: any certificate failure is kind `tls`; every TLS error code
    /// of libcurl 7.88 maps to it (a client certificate the server requires included).
    @Test func everyTLSErrorCodeOfCurlIsKindTLS() {
        // curl.h's numbers (stable ABI; the test target does not import the C module, whose socket
        // declarations would shadow Glibc's): SSL_CONNECT_ERROR 35, SSL_ENGINE_NOTFOUND 53,
        // SSL_ENGINE_SETFAILED 54, SSL_CERTPROBLEM 58, SSL_CIPHER 59, PEER_FAILED_VERIFICATION 60,
        // USE_SSL_FAILED 64, SSL_ENGINE_INITFAILED 66, SSL_CACERT_BADFILE 77, SSL_SHUTDOWN_FAILED 80,
        // SSL_CRL_BADFILE 82, SSL_ISSUER_ERROR 83, SSL_PINNEDPUBKEYNOTMATCH 90, SSL_INVALIDCERTSTATUS 91,
        // SSL_CLIENTCERT 98.
        for code in [35, 53, 54, 58, 59, 60, 64, 66, 77, 80, 82, 83, 90, 91, 98] {
            #expect(Transfer.kind(ofCurlCode: code) == .tls, "CURLcode \(code)")
        }
        #expect(Transfer.kind(ofCurlCode: 7) == .network)  // COULDNT_CONNECT
        // File paths in curl's reasons give way to the field's name, whole paths only.
        #expect(Transfer.replacingPath("/srv/certs/ca.pem", with: "(caFile)", in: "error setting certificate file: /srv/certs/ca.pem")
                == "error setting certificate file: (caFile)")
        #expect(Transfer.replacingPath("cert", with: "(clientCert)", in: "unable to use client certificate (no key found or wrong pass phrase?): cert.")
                == "unable to use client certificate (no key found or wrong pass phrase?): (clientCert).")
        #expect(Transfer.replacingPath("ca.pem", with: "(caFile)", in: "x /etc/ca.pem y") == "x /etc/ca.pem y")
        #expect(Transfer.isTLSAlert("OpenSSL SSL_read: error:0A00045C:SSL routines::tlsv13 alert certificate required, errno 0"))
        #expect(!Transfer.isTLSAlert("Recv failure: Connection reset by peer"))
        #expect(Transfer.kind(ofCurlCode: 28) == .timeout)  // OPERATION_TIMEDOUT
    }

    /// README: without `proxy`, the environment's proxy variables are not
    /// used either. A server started with `http_proxy` pointing at a closed
    /// port still reaches the test server directly.
    @Test func theEnvironmentsProxyVariablesAreNotUsed() throws {
        let nowhere = "http://127.0.0.1:\(TestServer.closedPort)"
        let server = try ServerProcess(environment: ["http_proxy": nowhere, "HTTPS_PROXY": nowhere, "https_proxy": nowhere,
                                                     "all_proxy": nowhere, "ALL_PROXY": nowhere, "no_proxy": "", "NO_PROXY": ""])
        defer { server.terminate() }
        let client = try server.client()
        let id = try client.call("job.submit", ["job": ["type": "remote", "endpoint": "/items"]])["jobId"]!
        let done = try client.call("job.result", ["jobId": id, "waitMs": 10_000])
        #expect(done["state"] == "succeeded", "\(done)")
    }

    /// A configured proxy is used for every request of its server: curl is not
    /// let read `no_proxy`/`NO_PROXY` either (it did, and a host listed there
    /// went around the proxy). The proxy here is a closed port: going through
    /// it fails with kind network, going around it succeeds.
    @Test func theEnvironmentsNoProxyDoesNotBypassAConfiguredProxy() throws {
        let nowhere = "http://127.0.0.1:\(TestServer.closedPort)"
        let server = try ServerProcess(config: #""servers": {"testsvr": "\#(TestServer.base)", "viaProxy": {"url": "\#(TestServer.base)", "proxy": "\#(nowhere)"}}"#,
                                       environment: ["no_proxy": "127.0.0.1,localhost", "NO_PROXY": "127.0.0.1,localhost"])
        defer { server.terminate() }
        let client = try server.client()
        let id = try client.call("job.submit", ["job": ["type": "remote", "server": "viaProxy", "endpoint": "/items"]])["jobId"]!
        let done = try client.call("job.result", ["jobId": id, "waitMs": 10_000])
        #expect(done["state"] == "failed" && done["error"]?["kind"] == "network", "\(done)")
        // The server without a proxy is reached directly, as before.
        let direct = try client.call("job.submit", ["job": ["type": "remote", "endpoint": "/items"]])["jobId"]!
        #expect(try client.call("job.result", ["jobId": direct, "waitMs": 10_000])["state"] == "succeeded")
    }

    /// rest.md §7: proxy credentials are secrets. A proxy (here the test
    /// server itself, which answers absolute-URI requests) that echoes the
    /// `Proxy-Authorization` it got shows `***` in the result and its events:
    /// neither the password nor the header's base64 of it.
    @Test func proxyCredentialsEchoedBackAreMasked() async throws {
        let echoingProxy = "http://puser:PROXYPW123@127.0.0.1:\(TestServer.port)"
        let through = try engine(#"{"url": "http://origin.invalid:81", "proxy": "\#(echoingProxy)"}"#)
        defer { through.shutdown() }
        let log = EventLog()
        _ = through.subscribe(sink: log)
        let echoed = try await run(through, "/echo/p")
        #expect(echoed.state == .succeeded, "\(String(describing: echoed.error))")
        #expect(echoed.result?["body"]?["headers"]?["proxy-authorization"] == "Basic ***",
                "\(String(describing: echoed.result?["body"]?["headers"]))")
        let basic = Data("puser:PROXYPW123".utf8).base64EncodedString()
        let text = (log.all.map { JSONWriter.string($0.json) } + [JSONWriter.string(echoed.result ?? .null)]).joined()
        #expect(!text.contains(basic) && !text.contains("PROXYPW123"))
        #expect(text.contains("Basic ***"))
    }

    /// README: `${env.NAME}` in a server's `proxy` reads the environment, so
    /// proxy credentials need not be written in the file; a missing variable
    /// is named, never a value.
    @Test func aProxyMayTakeItsCredentialsFromTheEnvironment() throws {
        let json = try JSONParser.parse(#"{"servers": {"s": {"url": "http://h", "proxy": "http://u:${env.HYDRA_TEST_PROXY_PW}@127.0.0.1:3128"}}}"#)
        let config = try Configuration(json: json, environment: ["HYDRA_TEST_PROXY_PW": "from-env-pw"])
        #expect(config.servers["s"]?.proxy == "http://u:from-env-pw@127.0.0.1:3128")
        do {
            _ = try Configuration(json: json, environment: [:])
            Issue.record("a proxy with an unset variable was accepted")
        } catch {
            #expect("\(error)".contains("servers.s.proxy") && "\(error)".contains("HYDRA_TEST_PROXY_PW is not set"), "\(error)")
        }
    }

    @Test func badTLSAndProxySettingsAreNamedAtLoad() throws {
        let certs = Self.certificates
        func error(_ server: String) -> String {
            do {
                _ = try Configuration(json: try JSONParser.parse(#"{"servers": {"s": \#(server)}}"#))
                return ""
            } catch {
                return "\(error)"
            }
        }
        #expect(error(#"{"url": "https://h", "pinnedPublicKey": "md5//abc"}"#).contains("servers.s.pinnedPublicKey"))
        #expect(error(#"{"url": "https://h", "pinnedPublicKey": "sha256//c2hvcnQ="}"#).contains("servers.s.pinnedPublicKey"))
        #expect(error(#"{"url": "https://h", "proxy": "ftp://p:21"}"#).contains("servers.s.proxy"))
        let secret = error(#"{"url": "https://h", "proxy": "gopher://u:hunter2@p"}"#)
        #expect(secret.contains("servers.s.proxy") && !secret.contains("hunter2"))
        // No host after the credentials, no port number, a port out of range, a space.
        for bad in ["http://u:pw@", "http://:8080", "http://u:pw@:3128", "http://u:pw@127.0.0.1:99999",
                    "http://h:port", "http://[::1", "http://h h:1", "http://::1:3128"] {
            let text = error(#"{"url": "https://h", "proxy": "\#(bad)"}"#)
            #expect(text.contains("servers.s.proxy") && !text.contains("pw@"), "\(bad): \(text)")
        }
        for good in ["http://u:p@ss@proxy:3128", "https://[::1]:8443", "socks5h://h"] {
            #expect(error(#"{"url": "https://h", "proxy": "\#(good)"}"#).isEmpty, "\(good)")
        }
        #expect(error(#"{"url": "https://h", "clientCert": "\#(certs.clientCert)"}"#).contains("servers.s.clientKey"))
        #expect(error(#"{"url": "https://h", "clientKey": "\#(certs.clientKey)"}"#).contains("servers.s.clientCert"))
        #expect(error(#"{"url": "https://h", "caFile": "/nonexistent/ca.pem"}"#).contains("servers.s.caFile"))
        #expect(error(#"{"url": "https://h", "caFile": "\#(certs.ca)", "pinnedPublicKey": "\#(certs.pin)", "proxy": "socks5h://127.0.0.1:1080"}"#).isEmpty)
    }

    /// Starts a server of the machine's (its output dropped) and waits up to
    /// 5 s until `port` accepts a connection. Stop it with ``stop(_:)``.
    static func startDaemon(_ path: String, _ arguments: [String], port: Int) throws -> ChildProcess {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(5)
        while !accepts(port) && Date() < deadline { usleep(20_000) }
        return process
    }

    /// SIGKILL: children of the test process may inherit a blocked SIGTERM.
    static func stop(_ process: ChildProcess) {
        kill(process.processIdentifier, SIGKILL)
        while process.isRunning { usleep(10_000) }
    }

    static func freePort() -> Int {
        let (fd, port) = localSocket(listening: false)
        close(fd)
        return port
    }

    static func accepts(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }
}
