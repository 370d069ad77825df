import Dispatch
import Foundation
import Hydra
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
                                               maxActive: 1 << 30)]
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

    /// resources.md's memory row: `files` distinct resources through a memory tier of `memoryBytes`;
    /// the process's RSS once the engine is up and warm (idle), and at its peak.
    static func memoryHeld(prefix: String, files: Int, memoryBytes: Int) throws {
        let state = NSTemporaryDirectory() + "hydra-bench-mem-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: state) }
        let engine = try engine(state: state, concurrency: 16, memoryBytes: memoryBytes)
        defer { engine.shutdown() }
        _ = try fetchAll(engine, prefix: prefix + "warm-", files: 16)
        let idle = RESTBench.memory().rss
        let (seconds, bytes) = try fetchAll(engine, prefix: prefix, files: files)
        let after = RESTBench.memory()
        print(#"{"name":"resource-memory","files":\#(files),"bytes":\#(bytes),"seconds":\#(HydraBench.round3(seconds)),"memoryBytes":\#(memoryBytes),"idleRssKiB":\#(idle),"peakRssKiB":\#(after.peak),"rssKiB":\#(after.rss)}"#)
    }
}
