import Dispatch
import Foundation
import Hydra
import HydraRPC
import HydraServer
import Synchronization

/// Resource jobs served from the repository on one remote worker (issue 13's
/// bench rows): fetch `url` once, then `jobs` jobs of it, from the memory tier
/// (`memory` true) or from disk (`resources.memoryBytes` 0). Prints one JSON line.
enum ResourceBench {
    static func hits(url: String, jobs: Int, memory: Bool) throws {
        let state = NSTemporaryDirectory() + "hydra-bench-res-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: state) }
        var config = Configuration()
        config.workers = [Configuration.Worker(name: "rest", kind: .remote, maxConnections: 16, maxHostConnections: 16,
                                               maxActive: Configuration.Worker.maxLimit)]
        if !memory { config.resources.memoryBytes = 0 }
        let engine = try HydraEngine(configuration: config, stateDirectory: state)
        defer { engine.shutdown() }
        let spec = JobSpec(.resource(ResourceSpec(RemoteSpec(url: url))))
        let warm = HydraBench.Countdown(1)
        try engine.submit(spec) { warm.tick(failed: $0.state != .succeeded) }
        warm.wait()

        let countdown = HydraBench.Countdown(jobs)
        let batch = Array(repeating: spec, count: 1000)
        let window = 20_000
        let cpuBefore = HydraBench.threadCPU()
        let start = HydraBench.now()
        for i in 0..<(jobs / 1000) {
            while (i * 1000) - countdown.completed > window { usleep(20) }
            try engine.submit(batch: batch) { countdown.tick(failed: $0.state != .succeeded) }
        }
        countdown.wait()
        let seconds = Double(HydraBench.now() - start) / 1e9
        let cpu = HydraBench.cpuPerJob(from: cpuBefore, to: HydraBench.threadCPU(), jobs: jobs)
        let name = memory ? "resource-memory-hits" : "resource-disk-hits"
        print(#"{"name":"\#(name)","jobs":\#(jobs),"failed":\#(countdown.failures.load(ordering: .relaxed)),"seconds":\#(HydraBench.round3(seconds)),"rps":\#(Int(Double(jobs) / seconds)),"cpuUsPerJob":\#(cpu)}"#)
    }

    /// An engine for `files` downloads: `concurrency` in flight on one remote worker.
    static func engine(state: String, concurrency: Int, memoryBytes: Int?) throws -> HydraEngine {
        var config = Configuration()
        config.defaults.headers = [:]
        config.workers = [Configuration.Worker(name: "rest", kind: .remote, maxConnections: concurrency,
                                               maxHostConnections: concurrency, maxActive: concurrency)]
        if let memoryBytes { config.resources.memoryBytes = memoryBytes }
        config.resources.maxBytes = 4 << 30
        // Finished jobs kept in memory as `hydra serve` keeps them (the embedded default keeps 100,000).
        return try HydraEngine(configuration: config, stateDirectory: state, retainFinished: HydraService.finishedInMemory)
    }

    /// Fetches `prefix` + 0 ..< `files` (distinct URLs) through `engine`; returns
    /// the seconds taken and the bytes kept.
    static func fetchAll(_ engine: HydraEngine, prefix: String, files: Int) throws -> (Double, Int) {
        let countdown = HydraBench.Countdown(files)
        let bytes = Atomic<Int>(0)
        let start = HydraBench.now()
        let specs = (0..<files).map { JobSpec(.resource(ResourceSpec(RemoteSpec(url: prefix + String($0))))) }
        try engine.submit(batch: specs) { result in
            bytes.add(result.result?["bytes"]?.intValue ?? 0, ordering: .relaxed)
            countdown.tick(failed: result.state != .succeeded)
        }
        countdown.wait()
        precondition(countdown.failures.load(ordering: .relaxed) == 0, "failed downloads in the resource bench")
        return (Double(HydraBench.now() - start) / 1e9, bytes.load(ordering: .relaxed))
    }

    /// resources.md's download row: `files` distinct files, `concurrency` in flight, each kept in the repository.
    static func download(prefix: String, files: Int, concurrency: Int, memoryBytes: Int? = nil) throws {
        let state = NSTemporaryDirectory() + "hydra-bench-dl-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: state) }
        let engine = try engine(state: state, concurrency: concurrency, memoryBytes: memoryBytes)
        defer { engine.shutdown() }
        let (seconds, bytes) = try fetchAll(engine, prefix: prefix, files: files)
        print(#"{"name":"resource-download","files":\#(files),"concurrency":\#(concurrency),"bytes":\#(bytes),"seconds":\#(HydraBench.round3(seconds)),"mbps":\#(HydraBench.round3(Double(bytes) / 1_048_576 / seconds))}"#)
    }

    /// resources.md's memory row, on the real server: `hydra serve` (process
    /// `pid`, listening on `connect`, its `resources.memoryBytes` set by the
    /// caller) fetches `files` distinct resources, at most `window` jobs
    /// outstanding; its RSS once warm (idle) and at its peak (`VmHWM`), from `/proc`.
    static func serverMemory(connect: String, pid: Int, prefix: String, files: Int, window: Int = 2_000) throws {
        let address = RPCBench.address(connect)
        let client = try RPCClient(address: address)
        let before = RPCBench.finished(client)
        func job(_ name: String) -> JSONValue { ["type": "resource", "url": .string(prefix + name)] }
        func submit(_ names: [String]) throws {
            for reply in try client.callBatch(names.map { (method: "job.submit", params: ["job": job($0)] as JSONValue) },
                                             timeout: .seconds(60)) {
                if case .failure(let error) = reply { throw error }
            }
        }
        func waitUntil(_ done: Int) { while RPCBench.finished(client) - before < done { usleep(5_000) } }
        try submit((0..<16).map { "warm-\($0)" })
        waitUntil(16)
        usleep(200_000)
        let idle = memory(of: pid).rss
        let start = HydraBench.now()
        var sent = 0
        while sent < files {
            while sent - (RPCBench.finished(client) - before - 16) > window { usleep(2_000) }
            let n = min(500, files - sent)
            try submit((sent..<(sent + n)).map(String.init))
            sent += n
        }
        waitUntil(16 + files)
        let seconds = Double(HydraBench.now() - start) / 1e9
        let after = memory(of: pid)
        let failed = try client.call("hydra.stats")["jobs"]?["failed"]?.intValue ?? -1
        print(#"{"name":"resource-memory","files":\#(files),"failed":\#(failed),"seconds":\#(HydraBench.round3(seconds)),"idleRssKiB":\#(idle),"peakRssKiB":\#(after.peak),"rssKiB":\#(after.rss)}"#)
    }

    /// `VmRSS` and `VmHWM` (KiB) of process `pid`.
    static func memory(of pid: Int) -> (rss: Int, peak: Int) {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        func field(_ name: String) -> Int {
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return 0 }
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "0") ?? 0
        }
        return (field("VmRSS"), field("VmHWM"))
    }
}
