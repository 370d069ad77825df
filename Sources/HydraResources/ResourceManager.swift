import Foundation
import HydraAtRest
import HydraCore
import HydraHTTP
import HydraLoop
import HydraREST
import OrderedCollections
import Synchronization

/// The resource manager (the HJResourceManager idea, resources.md): runs
/// `resource` jobs on the remote workers beside the REST client manager,
/// whose routing it reuses and whose per-worker connection pool its transfers
/// share. Copies live in the repository (`state.path/resources`, files named
/// by key) with their index in a ``ResourceIndexStore``, and in a memory LRU
/// per worker. Immutable after creation; thread-safe.
public final class ResourceManager: JobManager {
    public let name = "resources"
    public let kinds: Set<JobKind> = [.remote]
    public let jobTypes: Set<String> = ["resource"]
    let rest: RESTManager
    let index: any ResourceIndexStore
    let settings: Configuration.Resources
    /// The key of `aes-gcm` copies; nil without `HYDRA_SHARED_KEY`.
    let atRestKey: AtRestKey?
    /// The repository folder, absolute.
    public let repositoryPath: String
    /// The folders from the state folder down to the repository (`resources.path`'s components), as paths.
    let repositoryChain: [String]
    let statistics = ResourceStatistics()
    /// Where `resource.stored` / `resource.removed` go (the engine's bus, set once it exists).
    private let bus = Locked<EventBus?>(nil)
    /// Bumped by every removal: a worker's memory tier that sees a new value
    /// empties itself, so a removed copy is never served from memory.
    let removals = Atomic<Int>(0)
    /// Copies being put in place: a reader tells them from corrupt ones (see ``ReplacementWatch``).
    let replacements = ReplacementWatch()
    /// The bytes held by the memory tiers of every worker.
    let memoryBytes = Atomic<Int>(0)
    /// Remakers by name; `gunzip` built in.
    private let remakers: Locked<[String: Remaker]>
    /// Whether the purge timer runs (``startUpkeep()``).
    let upkeepRunning = Atomic<Bool>(false)
    /// Where removals and purges run.
    let chores = RepositoryChores()
    /// The keys being fetched, across the workers (one transfer per key).
    let transfers = TransferRegistry()
    /// Hits not yet written to the index's `lastUsedAt`.
    let uses = PendingUses()
    /// The bytes on disk as the last purge counted them plus every copy
    /// stored since: at least the true total (removals outside a purge only
    /// lower the truth; a purge subtracts only what it saw gone), so a store
    /// that takes it past `maxBytes` evicts at once (see ``copyStored(diskBytes:)``).
    /// Unknown at start (its first store has the purge count it).
    let diskEstimate = Atomic<Int>(Int.max / 2)
    /// Whether an eviction asked for by a store is queued or running.
    let evictionQueued = Atomic<Bool>(false)
    /// Every worker's memory tier, on its loop: removals empty them at once
    /// (``syncMemoryTiers()``), so `resource.stats` counts what they still hold.
    let memoryTiers = Locked<[LoopBound<MemoryTier>]>([])

    /// - Parameters:
    ///   - rest: the REST manager bound to the same workers (routing, pool).
    ///   - index: where the index lives (a server's state store; an embedded
    ///     engine's ``MemoryResourceIndex``).
    ///   - sharedKey: the `HYDRA_SHARED_KEY` passphrase, for `aes-gcm` copies.
    public init(rest: RESTManager, index: any ResourceIndexStore, stateDirectory: String, sharedKey: String? = nil) {
        self.rest = rest
        atRestKey = AtRestKey(passphrase: sharedKey)
        let limit = ResourceManager.inMemoryLimit(rest.configuration)
        remakers = Locked(["gunzip": { data, _ in
            // Made in memory: at most the in-memory limit (a bomb stops there).
            do { return Data(try Gzip.decompress([UInt8](data), limit: limit)) } catch { throw error }
        }])
        self.index = index
        settings = rest.configuration.resources
        let base = stateDirectory.hasSuffix("/") ? String(stateDirectory.dropLast()) : stateDirectory
        repositoryPath = base + "/" + settings.path
        var chain: [String] = []
        for folder in settings.path.split(separator: "/") { chain.append((chain.last ?? base) + "/" + folder) }
        repositoryChain = chain
    }

    /// The most bytes a copy made in memory (remade, compressed or sealed at rest)
    /// may have, fetched or remade: `defaults.maxBodyBytes`, the limit of a body
    /// kept in memory (protocol §4), or `resources.maxBytes` when smaller. A
    /// plain copy streams to disk and has only `resources.maxBytes`.
    var inMemoryLimit: Int { ResourceManager.inMemoryLimit(rest.configuration) }

    static func inMemoryLimit(_ configuration: Configuration) -> Int {
        min(configuration.resources.maxBytes, configuration.defaults.maxBodyBytes)
    }

    /// A remaker: derives the resource a job returns from the fetched content
    /// (`remakeOptions` as given, `{}` without). Runs on its worker's blocking
    /// pool (the worker's `threads`), never on a loop; a throw fails the job (kind `invalid`).
    public typealias Remaker = @Sendable (Data, JSONValue) throws -> Data

    /// Adds or replaces the remaker `name` (`"remaker": name` in specs).
    public func register(remaker name: String, _ body: @escaping Remaker) {
        remakers.withLock { $0[name] = body }
    }

    func remaker(named name: String) -> Remaker? { remakers.withLock { $0[name] } }

    /// Sets the bus events go to. Once, before jobs run.
    public func attach(bus: EventBus) { self.bus.withLock { $0 = bus } }

    func emit(_ name: String, _ fields: OrderedDictionary<String, JSONValue>) {
        guard let bus = bus.withLock({ $0 }) else { return }
        bus.emit(name, jobId: "", rootJobId: "", stepPath: "") { fields }
    }

    /// Counters since start.
    public var stats: ResourceStatistics.Snapshot { statistics.snapshot }

    /// The file of `key` relative to the state folder: `resources/5e/5e88….bin`.
    public func relativePath(of key: String) -> String { components(of: key).joined(separator: "/") }

    func components(of key: String) -> [String] {
        settings.path.split(separator: "/").map(String.init) + [String(key.prefix(2)), key + ".bin"]
    }

    /// The path of `key`'s copy when every folder on the way from the state
    /// folder is a folder and not a symbolic link: the repository's own writes
    /// never follow one (``RESTManager/writeStateFile(_:bytes:)``), so a link
    /// there was planted, and a copy is neither read nor removed through it
    /// (it would reach outside the state folder). nil otherwise. Blocking.
    ///
    /// `checkingRepository` false: only the key's own folder (`resources/5e`)
    /// is checked, as for a read: what is read is checked against the index's
    /// digest anyway, and a disk hit pays for each `lstat` (about 1 µs here).
    /// A removal checks the whole way.
    func plainPath(of key: String, checkingRepository: Bool = true) -> String? {
        if checkingRepository && !repositoryIsPlain { return nil }
        var path = repositoryPath
        path += "/"
        path += key.prefix(2)
        guard ResourceManager.isPlainFolder(path) else { return nil }
        path += "/"
        path += key
        path += ".bin"
        return path
    }

    /// True when every folder from the state folder down to the repository is a
    /// folder and not a symbolic link. Blocking.
    var repositoryIsPlain: Bool { repositoryChain.allSatisfy(ResourceManager.isPlainFolder) }

    /// True for a folder that is not a symbolic link (`lstat`). Blocking.
    static func isPlainFolder(_ path: String) -> Bool {
        var info = Glibc.stat()
        return lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }

    public func validate(_ spec: JobSpec, path: String) throws(ValidationError) {
        guard case .resource(let resource) = spec.body else { return }
        try rest.validateRequest(resource.request, path: path)
        func at(_ key: String) -> String { FieldReader.join(path, key) }
        switch resource.cipher {
        case .none: break
        case .aesGCM where atRestKey == nil:
            throw ValidationError(path: at("cipher"), "aes-gcm needs HYDRA_SHARED_KEY (a passphrase of 16+ characters)")
        case .aesGCM, .gzip: break
        }
        if let name = resource.remaker, remaker(named: name) == nil {
            throw ValidationError(path: at("remaker"), "unknown remaker '\(name)'")
        }
        // A resource is fetched with GET (its key says so): an api that sends another
        // method would be asked something else than it was configured for.
        if let name = resource.request.api, let api = rest.configuration.apis[name], api.method.uppercased() != "GET" {
            throw ValidationError(path: at("api"), "api '\(name)' sends \(api.method.uppercased()); a resource is fetched with GET")
        }
    }

    /// The memory tier of one executor: `resources.memoryBytes` shared by
    /// the remote workers (each worker's loop has its own tier, so a hit never
    /// crosses threads), so the process holds at most `memoryBytes` in all.
    /// A remote worker is one loop whatever its `threads` (which bounds a local
    /// worker's blocking work), so the share is per worker.
    var memoryBytesPerExecutor: Int {
        let workers = rest.configuration.workers.filter { $0.kind == .remote }.count
        return settings.memoryBytes / max(1, workers)
    }

    public func makeExecutor(for worker: WorkerContext) -> any JobExecutor {
        ResourceExecutor(manager: self, worker: worker)
    }
}
