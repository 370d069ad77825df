import ArgumentParser
import Foundation
import Hydra
import HydraServer
import HydraLoop
import HydraRPC
import HydraStore

/// `hydra serve`: the long-running server (JSON-RPC control interface, durable state).
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run the Hydra server: JSON-RPC 2.0 control interface and durable job state.",
        discussion: """
            Reads the configuration (default: config/hydra.json when it exists) and
            names it on stderr, opens the state folder (SQLite in WAL mode), finishes
            the jobs a previous run left unfinished, and listens for JSON-RPC
            clients (one JSON message per line).

            Secrets come from the environment: HYDRA_RPC_SECRET (clients must call
            rpc.auth) and HYDRA_SHARED_KEY (the passphrase for shared values stored
            with aes-gcm).

            SIGTERM or SIGINT stops accepting work (-32005), lets running jobs
            finish within the grace period, keeps the rest for the next start, and
            exits 0.

            Exit status: 0 after a clean stop, 2 for a bad config file, a bad
            address or an address in use.

            --check-config runs the checks a start runs on the configuration (the
            file, the flags given with it, the listen address, HYDRA_RPC_SECRET and
            HYDRA_SHARED_KEY, the dogmas the apis name) and exits: 0 with a summary
            on stdout when the server would start with it, 2 with the reason. It
            starts nothing, binds no address and touches no file.

            Examples:
              hydra serve
              hydra serve --config config/hydra.json --listen 127.0.0.1:7401
              hydra serve --state /tmp/hydra --unix-socket /tmp/hydra.sock
              hydra serve --config /etc/hydra/hydra.json --check-config
            """)

    @Option(help: "Configuration file (default: config/hydra.json when it exists).")
    var config: String?

    @Option(help: "TCP address to listen on (HOST:PORT); overrides rpc.listen.")
    var listen: String?

    @Option(help: "Unix socket path to listen on as well; overrides rpc.unixSocket.")
    var unixSocket: String?

    @Option(help: "State folder; overrides state.path.")
    var state: String?

    @Option(parsing: .unconditional, help: "Seconds running jobs get to finish on SIGTERM/SIGINT (0 to 86400).")
    var grace: Double = 10

    @Flag(help: "Check the configuration as a start would, print a summary and exit (0: usable, 2: not).")
    var checkConfig = false

    func validate() throws {
        // A number the shutdown would turn into milliseconds: finite and bounded (nan or inf trapped there).
        guard grace.isFinite, (0...86_400).contains(grace) else {
            throw ArgumentParser.ValidationError("--grace: expected seconds from 0 to 86400, got \(grace)")
        }
    }

    func run() async throws {
        // What the server writes is its owner's alone: the database (shared values,
        // results, cached responses), the resource repository, downloads, the socket.
        umask(0o077)
        var configuration: Configuration
        do {
            configuration = try loadConfiguration(config)
        } catch {
            exitInvalid(error)
        }
        if let listen { configuration.rpc.listen = listen }
        // The flags get the checks the file's keys get, under their own names.
        if let unixSocket {
            // ("null" is the config file's way to say none; the flag is left out for that.)
            if unixSocket.isEmpty { exitInvalid("--unix-socket: must not be empty (a socket path; leave the option out for none)") }
            do { try Configuration.checkUnixSocket(unixSocket, path: "--unix-socket") } catch { exitInvalid(error) }
            configuration.rpc.unixSocket = unixSocket
        }
        if let state {
            guard !state.isEmpty else { exitInvalid("--state: must not be empty (a folder; \".\" for the current one)") }
            do { try Configuration.checkPlainText(state, path: "--state") } catch { exitInvalid(error) }
            configuration.state.path = state
        }
        if let secret = ProcessInfo.processInfo.environment["HYDRA_RPC_SECRET"] {
            // Set but empty is a mistake, not "no secret" (as an empty rpc.secret is refused).
            guard !secret.isEmpty else { exitInvalid("HYDRA_RPC_SECRET is set but empty: give the secret, or unset it to run without one") }
            configuration.rpc.secret = secret
        }

        // Where rpc.listen came from, for errors: the flag, else the configuration file.
        let listenSource = listen != nil ? "--listen" : "\(configurationSource(config)): rpc.listen"
        var addresses: [SocketAddress] = []
        guard let tcp = SocketAddress(parsing: configuration.rpc.listen), case .tcp = tcp else {
            exitInvalid("\(listenSource): \"\(configuration.rpc.listen)\" is not HOST:PORT")
        }
        if !tcp.isLoopback && configuration.rpc.secret == nil && !configuration.rpc.allowInsecure {
            exitInvalid("\(listenSource): \(tcp) is not a loopback address: set rpc.secret (or HYDRA_RPC_SECRET), or rpc.allowInsecure")
        }
        addresses.append(tcp)
        if let path = configuration.rpc.unixSocket {
            addresses.append(.unix(path: absolutePath(path)))
        }

        if checkConfig { checkOnly(configuration, addresses: addresses) }

        let statePath = absolutePath(configuration.state.path)
        let cleanMarker = statePath + "/" + Configuration.State.cleanShutdownName
        // Held until the process ends (see StateFolderLock).
        let folderLock: StateFolderLock
        do { folderLock = try StateFolderLock(folder: statePath, database: Configuration.State.databaseName) } catch {
            exitInvalid("state.path: \(error)")
        }
        defer { withExtendedLifetime(folderLock) {} }
        let sharedKey = ProcessInfo.processInfo.environment["HYDRA_SHARED_KEY"]
        if sharedKey?.isEmpty == true {
            exitInvalid("HYDRA_SHARED_KEY is set but empty: give a passphrase of 16+ characters, or unset it to run without one")
        }
        do { try SQLiteStore.checkSharedKey(sharedKey) } catch { exitInvalid(error) }
        let store: SQLiteStore
        do {
            store = try SQLiteStore(directory: statePath,
                                    sync: configuration.state.sync == .full ? .full : .normal,
                                    sharedKey: sharedKey)
        } catch {
            exitInvalid("state.path: \(error)")
        }
        // After a crash, events issued but not yet committed may have been seen
        // by clients: skip ahead so no seq is ever issued twice.
        let crashed = !FileManager.default.fileExists(atPath: cleanMarker) && ((try? store.lastSeq()) ?? 0) > 0
        try? FileManager.default.removeItem(atPath: cleanMarker)

        let service: HydraService
        let recovered: Int
        let server: RPCServer
        do {
            service = try HydraService(configuration: configuration, store: store, stateDirectory: statePath,
                                       seqReserve: crashed ? 100_000 : 0, sharedKey: sharedKey)
            do { try service.engine.rest.checkConfiguredDogmas() } catch {
                exitInvalid("\(configurationSource(config)): \(error)")
            }
            // The addresses first: a server that cannot have them stops here, before
            // it resumes (and sends again) any unfinished job. Clients wait until then.
            server = try RPCServer(service: service, addresses: addresses, options: configuration.rpc,
                                   accepting: false)
            do { recovered = try service.recover() } catch {
                server.shutdown()
                throw error
            }
        } catch {
            store.close()
            exitInvalid(error)
        }
        server.startAccepting()

        let retention = Double(configuration.retentionHours) * 3600
        store.prune(before: Date().timeIntervalSince1970 - retention)
        let signals = TerminationSignals(upkeepEvery: 3600) {
            store.prune(before: Date().timeIntervalSince1970 - retention)
        }
        // Named once startup succeeded: a startup failure stays one line (it names the file).
        announceConfiguration(config)
        writeLine("hydra \(HydraVersion.string) serving on \(server.listening.joined(separator: " and "))")
        writeLine("state: \(statePath)/\(Configuration.State.databaseName)\(recovered > 0 ? " (\(recovered) unfinished job\(recovered == 1 ? "" : "s") resumed)" : "")")

        let signal = await signals.wait()
        FileHandle.standardError.write(Data("hydra: \(signal): stopping (grace period \(grace) s; signal again to stop now)\n".utf8))
        signals.onRepeat { name in
            FileHandle.standardError.write(Data("hydra: \(name) again: stopping now\n".utf8))
            service.endGracePeriod()
        }
        // The listeners stay open through the grace period: a client that connects now
        // hears -32005 for new work and can still ask for status and results. (Closing
        // them would also reset connections the kernel had queued but the loop had not
        // yet accepted: those clients would see a bare reset instead of -32005.)
        let finished = await service.shutdown(gracePeriod: .milliseconds(Int(grace * 1000)))
        server.shutdown()
        signals.close()
        _ = FileManager.default.createFile(atPath: cleanMarker, contents: Data())
        FileHandle.standardError.write(Data(
            "hydra: stopped\(finished ? "" : "; unfinished jobs are kept and resume at the next start")\n".utf8))
    }
}

extension ServeCommand {
    /// `--check-config`: what a start would refuse in `configuration` (already
    /// read, with the flags applied and the addresses checked), then exits.
    func checkOnly(_ configuration: Configuration, addresses: [SocketAddress]) -> Never {
        let source = configurationSource(config)
        let sharedKey = ProcessInfo.processInfo.environment["HYDRA_SHARED_KEY"]
        if sharedKey?.isEmpty == true {
            exitInvalid("HYDRA_SHARED_KEY is set but empty: give a passphrase of 16+ characters, or unset it to run without one")
        }
        do { try SQLiteStore.checkSharedKey(sharedKey) } catch { exitInvalid(error) }
        do { try HydraEngine.check(configuration) } catch { exitInvalid("\(source): \(error)") }
        var isFolder: ObjCBool = false
        let statePath = absolutePath(configuration.state.path)
        if FileManager.default.fileExists(atPath: statePath, isDirectory: &isFolder), !isFolder.boolValue {
            exitInvalid("state.path: \(statePath) is not a folder")
        }
        func count(_ n: Int, _ noun: String) -> String { "\(n) \(noun)\(n == 1 ? "" : "s")" }
        writeLine("\(source): OK")
        writeLine("  \(count(configuration.workers.count, "worker")) (\(configuration.workers.map { "\($0.name): \($0.kind.rawValue)" }.joined(separator: ", "))), "
                  + "\(count(configuration.servers.count, "server")), \(count(configuration.apis.count, "api")), "
                  + "\(count(configuration.auth.count, "auth session"))")
        writeLine("  listen: \(addresses.map(\.description).joined(separator: " and "))\(configuration.rpc.secret == nil ? "" : " (secret set)")")
        writeLine("  state: \(statePath)")
        Foundation.exit(0)
    }
}

/// The configuration: `--config`, else config/hydra.json when present, else the defaults.
func loadConfiguration(_ path: String?) throws -> Configuration {
    if let path { return try Configuration.load(path: path) }
    if defaultConfigurationPresent {
        return try Configuration.load(path: "config/hydra.json")
    }
    return Configuration()
}

/// Whether anything is at config/hydra.json, a dangling symbolic link included:
/// a configuration on a volume that is not mounted must stop the server (the
/// read fails, naming the file), not start it on the defaults, without its
/// secret or its limits.
var defaultConfigurationPresent: Bool {
    var info = stat()
    return lstat("config/hydra.json", &info) == 0
}

/// Names the configuration in use on stderr once startup succeeded (`hydra: config PATH`, or
/// that none was found and the defaults apply), so a user who edits the wrong file,
/// or starts from another folder, sees it at once instead of guessing.
func announceConfiguration(_ path: String?) {
    let line: String
    if let path {
        line = "hydra: config \(path)"
    } else if defaultConfigurationPresent {
        line = "hydra: config config/hydra.json"
    } else {
        line = "hydra: no config file found (looked for config/hydra.json); using defaults"
    }
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

/// The file `loadConfiguration(path)` reads, or "the built-in defaults", for messages.
func configurationSource(_ path: String?) -> String {
    if let path { return path }
    return defaultConfigurationPresent ? "config/hydra.json" : "the built-in defaults"
}

/// `path` made absolute against the current directory.
func absolutePath(_ path: String) -> String {
    path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
}

/// Prints `hydra: MESSAGE` on stderr and exits with status 2 (invalid spec, input, config or address).
func exitInvalid(_ error: Any) -> Never {
    FileHandle.standardError.write(Data("hydra: \(TerminalText.safe("\(error)"))\n".utf8))
    Foundation.exit(2)
}
