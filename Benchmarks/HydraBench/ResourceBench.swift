import Dispatch
import Foundation
import Hydra

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
}
