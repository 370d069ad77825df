// swift-tools-version:6.0
// Hydra: a worker-pool job scheduler. Layers, lowest first:
//   CUV, CCurl, CSQLite, CZlib  C bindings (system libraries + shims for variadic C)
//   CSQLiteWAL            SQLite's VFS, each commit's WAL frames written with one pwrite (C)
//   HydraLoop             one libuv loop per thread, inboxes, timers, TCP/Unix streams
//   HydraHTTP             libcurl multi driven by a HydraLoop
//   HydraCore             job model, workers, dispatcher, graphs, events, the StateStore protocol
//   HydraREST, HydraLocal managers bound to workers by the dispatcher
//   HydraResources        the resource manager: a repository of remote files, beside HydraREST
//   Hydra                 the embeddable engine (wires the layers above)
//   HydraStore            SQLiteStore: the StateStore on SQLite (writer thread, group commit)
//   HydraServer           the durable service of `hydra serve` over the store: submit, recovery,
//                         queries, shared data; transport-free
//   HydraRPC              the JSON-RPC 2.0 wire: framing, sessions, subscriptions, the client
//   hydra                 the command-line tool
//   HydraFuzz (+CLibFuzzer) libFuzzer targets (`make fuzz`); built plain it replays saved inputs
// Each target imports only targets listed before it.
import PackageDescription

let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]

/// The release `hydra` allocates through tcmalloc (gperftools, Debian's
/// libgoogle-perftools-dev): its threads hand memory to each other all day
/// (a worker's response is freed by the coordinator, a submit's spec by the
/// store writer), which glibc's per-thread arenas serve through their slow
/// paths. Measured in the same runs: a 50,000-step graph 18-21% faster,
/// remote jobs over RPC 5-10%, durable submits 5-10%. Debug builds (the
/// tests, the sanitizers, whose runtimes replace malloc) keep the system
/// allocator; an embedding program chooses its own.
let allocator: [LinkerSetting] = [.linkedLibrary("tcmalloc_minimal", .when(configuration: .release))]

let package = Package(
    name: "Hydra",
    products: [
        .library(name: "Hydra", targets: ["Hydra"]),
        .executable(name: "hydra", targets: ["hydra"]),
        .executable(name: "hydra-bench", targets: ["HydraBench"]),
        .executable(name: "hydra-quickstart", targets: ["QuickStart"]),
        .executable(name: "hydra-fuzz", targets: ["HydraFuzz"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CUV", pkgConfig: "libuv",
            providers: [.apt(["libuv1-dev"])]),
        .systemLibrary(
            name: "CCurl", pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]),
        .systemLibrary(
            name: "CSQLite", pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]),
        // C, not Swift: a VFS is a table of C callbacks over SQLite's own. No unsafe
        // flags (they would bar embedders from depending on the package): `make
        // test` first compiles it with -Wall -Wextra -Werror.
        .target(name: "CSQLiteWAL", dependencies: ["CSQLite"]),
        .systemLibrary(
            name: "CZlib", pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]),
        .target(
            name: "HydraLoop",
            dependencies: ["CUV", .product(name: "DequeModule", package: "swift-collections")],
            swiftSettings: strict),
        .target(
            name: "HydraHTTP",
            dependencies: ["HydraLoop", "CUV", "CCurl", "CZlib"],
            swiftSettings: strict),
        .target(
            name: "HydraAtRest",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: strict),
        .target(
            name: "HydraCore",
            dependencies: [
                "HydraLoop",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "OrderedCollections", package: "swift-collections"),
            ],
            swiftSettings: strict),
        .target(
            name: "HydraREST",
            dependencies: ["HydraCore", "HydraHTTP", "HydraLoop", "HydraAtRest", .product(name: "Crypto", package: "swift-crypto"),
                           .product(name: "OrderedCollections", package: "swift-collections")],
            swiftSettings: strict),
        .target(
            name: "HydraResources",
            dependencies: ["HydraCore", "HydraREST", "HydraHTTP", "HydraLoop", "HydraAtRest", .product(name: "Crypto", package: "swift-crypto"),
                           .product(name: "OrderedCollections", package: "swift-collections")],
            swiftSettings: strict),
        .target(
            name: "HydraLocal",
            dependencies: ["HydraCore", "HydraLoop"],
            swiftSettings: strict),
        .target(
            name: "Hydra",
            dependencies: ["HydraCore", "HydraREST", "HydraResources", "HydraLocal", "HydraHTTP", "HydraLoop",
                           .product(name: "OrderedCollections", package: "swift-collections")],
            swiftSettings: strict),
        .target(
            name: "HydraStore",
            dependencies: ["HydraCore", "HydraLoop", "HydraHTTP", "HydraAtRest", "CSQLite", "CSQLiteWAL", "CZlib",
                           .product(name: "OrderedCollections", package: "swift-collections")],
            swiftSettings: strict),
        .target(
            name: "HydraServer",
            dependencies: ["Hydra", "HydraCore", "HydraLoop",
                           .product(name: "OrderedCollections", package: "swift-collections")],
            swiftSettings: strict),
        .target(
            name: "HydraRPC",
            dependencies: ["HydraServer", "Hydra", "HydraCore", "HydraLoop",
                           .product(name: "DequeModule", package: "swift-collections"),
                           .product(name: "OrderedCollections", package: "swift-collections")],
            swiftSettings: strict),
        .executableTarget(
            name: "hydra",
            dependencies: ["Hydra", "HydraCore", "HydraStore", "HydraServer", "HydraRPC", "HydraLoop",
                           .product(name: "ArgumentParser", package: "swift-argument-parser"),
                           .product(name: "OrderedCollections", package: "swift-collections")],
            swiftSettings: strict,
            linkerSettings: allocator),
        .executableTarget(
            name: "HydraBench",
            dependencies: ["Hydra", "HydraServer", "HydraStore", "HydraRPC", "HydraLoop"],
            path: "Benchmarks/HydraBench",
            swiftSettings: strict),
        .executableTarget(
            name: "QuickStart",
            dependencies: ["Hydra"],
            path: "Examples/QuickStart",
            swiftSettings: strict),
        // libFuzzer targets (`make fuzz`); built plain, it replays saved inputs (`make test`).
        .target(name: "CLibFuzzer", path: "Fuzz/CLibFuzzer"),
        .executableTarget(
            name: "HydraFuzz",
            dependencies: ["HydraCore", "HydraRPC", "CLibFuzzer"],
            path: "Fuzz/HydraFuzz",
            swiftSettings: strict),
        // posix_spawn for the tests' child processes (see its header for why not Foundation's Process).
        .target(name: "CSpawn", path: "Tests/CSpawn"),
        .testTarget(
            name: "HydraTests",
            dependencies: ["CSpawn", "Hydra", "HydraCore", "HydraHTTP", "HydraREST", "HydraResources", "HydraStore", "HydraServer", "HydraRPC",
                           "HydraLoop"],
            swiftSettings: strict),
    ]
)
