import HydraLoop
import Foundation
import Synchronization
import Testing

@testable import Hydra

/// The real local HTTP server the tests talk to (Tests/Support/testserver.py),
/// started once per test process. Its stdin is a pipe we keep open: when the
/// test process dies, the server sees EOF and exits.
enum TestServer {
    private static let state = Locked<(port: Int, process: ChildProcess?, stdin: Pipe?)>((0, nil, nil))

    static var port: Int {
        state.withLock { s in
            if s.port != 0 { return s.port }
            let (port, process, input) = start()
            s.port = port
            s.process = process
            s.stdin = input
            return s.port
        }
    }

    /// Starts a test server process (`script` in Tests/Support with `arguments`);
    /// returns its port, the process and its stdin pipe.
    static func start(script name: String = "testserver.py", arguments: [String] = []) -> (Int, ChildProcess, Pipe) {
        let process = ChildProcess()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        let script = PackageRoot.path("Tests/Support/\(name)")
        process.arguments = ["python3", script] + arguments
        let output = Pipe(), input = Pipe()
        process.standardOutput = output
        process.standardInput = input
        try! process.run()
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            precondition(!chunk.isEmpty, "test server did not start")
            line.append(chunk)
        }
        let text = String(decoding: line, as: UTF8.self)
        return (Int(text.split(separator: " ")[1].trimmingCharacters(in: .whitespacesAndNewlines))!, process, input)
    }

    static var base: String { "http://127.0.0.1:\(port)" }

    static func url(_ path: String) -> String { base + path }

    /// A port where nothing listens: bound and never listened on, for the
    /// whole test process. Held rather than closed, so no server a test
    /// starts in parallel (on port 0) can be given it: connecting is refused.
    static let closedPort: Int = {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }()
}

/// A test server of one test's own, for tests that take it away (its
/// listening socket closed) while the engine still has its responses.
final class OwnTestServer: @unchecked Sendable {
    let port: Int
    private let process: ChildProcess
    private let stdin: Pipe

    init(script: String = "testserver.py", arguments: [String] = []) {
        (port, process, stdin) = TestServer.start(script: script, arguments: arguments)
    }

    var base: String { "http://127.0.0.1:\(port)" }

    /// Ends the server and waits: from now on, connections to its port are refused.
    func stop() {
        guard process.isRunning else { return }
        // EOF on its stdin ends it (os._exit); SIGKILL if it has not gone within 5 s.
        try? stdin.fileHandleForWriting.close()
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        while process.isRunning { usleep(10_000) }
    }

    deinit { stop() }
}

/// An engine configured for the test server; shut down by the caller.
/// `environment` is what `${env.NAME}` reads: tests never `setenv`, which
/// races with other tests starting processes (starting a child copies
/// `environ`; Foundation's `Process.run` crashed on it).
func makeEngine(_ extra: String = "", jobs: String? = nil, state: String? = nil,
                environment: [String: String] = ProcessInfo.processInfo.environment) throws -> HydraEngine {
    let base = """
        {"servers": {"testsvr": "\(TestServer.base)"},
         "apis": {"items": {"server": "testsvr", "endpoint": "/items"},
                  "echo": {"server": "testsvr", "endpoint": "/echo/:name", "method": "POST", "headers": {"X-Api": "echo"}}},
         "defaults": {"server": "testsvr", "timeoutMs": 10000}}
        """
    let config = try Configuration(json: try mergedConfiguration(base, extra), environment: environment)
    // A state folder of its own: an engine starts by clearing what an earlier
    // one left in its repository (its index is in memory).
    return try HydraEngine(configuration: config, stateDirectory: state ?? NSTemporaryDirectory() + "hydra-tests-\(UUID().uuidString)",
                           jobsDirectory: jobs)
}

/// The configuration `base` (a JSON object) with the members `extra` lists
/// (`, "auth": {…}`, the leading comma optional): a member `base` has too is
/// replaced whole (the parser refuses a repeated key).
func mergedConfiguration(_ base: String, _ extra: String) throws -> JSONValue {
    let members = extra.drop { $0 == "," || $0.isWhitespace }
    guard case .object(var merged) = try JSONParser.parse(base),
          case .object(let added) = try JSONParser.parse("{" + members + "}") else {
        throw ValidationError(path: "", "not an object")
    }
    merged.merge(added) { _, new in new }
    return .object(merged)
}

/// Parses a JSON spec literal.
func spec(_ text: String) throws -> JobSpec {
    try JobSpec(json: try JSONParser.parse(text))
}

/// Collects every event of an engine in order.
final class EventLog: EventSink {
    private let events = Locked<[HydraEvent]>([])
    func receive(_ event: HydraEvent) { events.withLock { $0.append(event) } }
    var all: [HydraEvent] { events.withLock { $0 } }
    func names(job: String) -> [String] { all.filter { $0.rootJobId == job }.map { "\($0.name)@\($0.stepPath)" } }
}

extension HydraEngine {
    /// The field path and reason of the `ValidationError` that preparing the
    /// spec `json` throws (what `job.submit` would answer with `-32602`), or
    /// nil when it is accepted.
    func refusal(_ json: String) -> (String, String)? {
        do {
            _ = try prepare(spec(json))
            return nil
        } catch let error as ValidationError {
            return (error.path, error.reason)
        } catch {
            return ("?", "\(error)")
        }
    }
}
