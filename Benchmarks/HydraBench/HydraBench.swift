// hydra-bench: the engine's side of `make bench` (Benchmarks/run.sh).
//
//   hydra-bench remote --url URL --requests N --concurrency C
//   hydra-bench local --jobs N
//   hydra-bench rpc-submit | rpc-remote | fanout ...   (clients of `hydra serve`, RPCBench.swift)
//
// Each prints one JSON line (see Benchmarks/README.md).
import Dispatch
import Foundation
import Hydra
import Synchronization

@main
struct HydraBench {
    /// The state folder of the engines this process makes (not `./var`, where
    /// `make run` keeps a server's state); removed when the run ends.
    static let scratchState = NSTemporaryDirectory() + "hydra-bench-\(ProcessInfo.processInfo.processIdentifier)"

    /// The default configuration, its state in ``scratchState``.
    static func scratchConfiguration() -> Configuration {
        var config = Configuration()
        config.state.path = scratchState
        return config
    }

    static func main() async throws {
        defer { try? FileManager.default.removeItem(atPath: scratchState) }
        let args = Array(CommandLine.arguments.dropFirst())
        func option(_ name: String, _ fallback: Int) -> Int {
            guard let i = args.firstIndex(of: name), i + 1 < args.count, let v = Int(args[i + 1]) else { return fallback }
            return v
        }
        func text(_ name: String) -> String? {
            guard let i = args.firstIndex(of: name), i + 1 < args.count else { return nil }
            return args[i + 1]
        }
        switch args.first {
        case "remote":
            guard let i = args.firstIndex(of: "--url"), i + 1 < args.count else { usage() }
            try remote(url: args[i + 1], requests: option("--requests", 20000), concurrency: option("--concurrency", 64),
                       workers: option("--workers", 1))
        case "local":
            try local(jobs: option("--jobs", 1_000_000))
        case "rpc-submit":
            RPCBench.submit(connect: text("--connect") ?? "127.0.0.1:7400", jobs: option("--jobs", 100_000),
                            clients: option("--clients", 1), batch: option("--batch", 1))
        case "rpc-remote":
            guard let url = text("--url") else { usage() }
            try RPCBench.remote(connect: text("--connect") ?? "127.0.0.1:7400", url: url,
                                jobs: option("--jobs", 20_000), clients: option("--clients", 1),
                                batch: option("--batch", 500), pollMs: option("--poll-ms", 2))
        case "resource-hits":
            guard let url = text("--url") else { usage() }
            try ResourceBench.hits(url: url, jobs: option("--jobs", 200_000), memory: option("--memory", 1) != 0)
        case "auth":
            guard let url = text("--url") else { usage() }
            try RESTBench.auth(url: url, requests: option("--requests", 20000), concurrency: option("--concurrency", 64),
                               pairs: option("--pairs", 3))
        case "resource-download":
            guard let prefix = text("--prefix") else { usage() }
            try ResourceBench.download(prefix: prefix, files: option("--files", 2000), concurrency: option("--concurrency", 16),
                                       memoryBytes: text("--memory-bytes").flatMap { Int($0) })
        case "resource-memory":
            guard let prefix = text("--prefix"), let connect = text("--connect"), let pid = text("--pid").flatMap({ Int($0) })
            else { usage() }
            try ResourceBench.serverMemory(connect: connect, pid: pid, prefix: prefix, files: option("--files", 20_000))
        case "auth-only":
            // One variant alone (for a profiler): auth, plain.
            guard let url = text("--url") else { usage() }
            let authed = text("--variant") == "auth"
            var spec = RemoteSpec.get(url)
            if authed { spec.auth = "ci" }
            if text("--variant") == "xheader" { spec.headers["X-Tag"] = .string("Bearer bench-token-0123456789abcdef0123456789abcdef") }
            if text("--variant") == "header" { spec.headers["Authorization"] = .string("Bearer bench-token-0123456789abcdef0123456789abcdef") }
            let side = try RESTBench.Side(worker: "rest", concurrency: 64, auth: authed, spec: .remote(spec))
            let (rate, us) = try side.run(requests: option("--requests", 200_000), concurrency: 64)
            side.engine.shutdown()
            print(#"{"name":"auth-only","rps":\#(Int(rate)),"workerUs":\#(us)}"#)
        case "merged":
            guard let url = text("--url"), let log = text("--log") else { usage() }
            try RESTBench.merged(url: url, log: log, jobs: option("--jobs", 10_000))
        case "upload":
            guard let file = text("--file"), let state = text("--state"), let url = text("--url") else { usage() }
            try RESTBench.upload(file: file, state: state, url: url)
        case "serve":
            guard let path = text("--config") else { usage() }
            try ServeBench.serve(configPath: path)
        case "fanout":
            try RPCBench.fanout(connect: text("--connect") ?? "127.0.0.1:7400",
                                subscribers: option("--subscribers", 100), jobs: option("--jobs", 2000))
        default:
            usage()
        }
    }

    static func usage() -> Never {
        FileHandle.standardError.write(Data("usage: hydra-bench remote --url URL [--requests N] [--concurrency C] [--workers W] | local [--jobs N] | rpc-submit --connect ADDR [--jobs N --clients C --batch B] | rpc-remote --connect ADDR --url URL [--jobs N --clients C --batch B --poll-ms MS] | fanout --connect ADDR [--subscribers S --jobs N] | resource-hits --url URL [--jobs N --memory 1|0] | auth --url URL [--requests N --concurrency C --pairs P] | merged --url URL --log FILE [--jobs N] | upload --file PATH --state DIR --url URL | resource-download --prefix URL [--files N --concurrency C --memory-bytes B] | resource-memory --connect ADDR --pid PID --prefix URL [--files N] | serve --config FILE\n".utf8))
        exit(2)
    }

    /// Completes when `count` completions were counted.
    final class Countdown: Sendable {
        private let remaining: Atomic<Int>
        private let total: Int
        private let done = DispatchSemaphore(value: 0)
        let failures = Atomic<Int>(0)
        init(_ count: Int) { remaining = Atomic(count); total = count }
        var completed: Int { total - remaining.load(ordering: .relaxed) }
        func tick(failed: Bool) {
            if failed { failures.add(1, ordering: .relaxed) }
            if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { done.signal() }
        }
        func wait() { done.wait() }
    }

    static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// Remote-job throughput: N GETs with C in flight through one remote worker,
    /// or shared by W workers (the jobs alternate between them by name).
    static func remote(url: String, requests: Int, concurrency: Int, workers: Int = 1) throws {
        var config = scratchConfiguration()
        config.defaults.headers = [:]
        let share = max(1, concurrency / max(1, workers))
        config.workers = (0..<max(1, workers)).map { index in
            Configuration.Worker(name: index == 0 ? "rest" : "rest\(index)", kind: .remote, maxConnections: share,
                                 maxHostConnections: share, maxActive: share)
        }
        let engine = try HydraEngine(configuration: config)
        defer { engine.shutdown() }
        // One worker: the spec names none (the default worker), as this row always measured.
        let specs = workers <= 1 ? [JobSpec.remote(.get(url))] : config.workers.map { JobSpec(worker: $0.name, .remote(.get(url))) }
        // Warm-up: open the connections.
        let warm = Countdown(concurrency)
        for n in 0..<concurrency { try engine.submit(specs[n % specs.count]) { warm.tick(failed: $0.state != .succeeded) } }
        warm.wait()

        let countdown = Countdown(requests)
        let cpuBefore = threadCPU()
        let start = now()
        if let only = specs.count == 1 ? specs[0] : nil {
            // (A spec read from the array per submit would cost the loop a copy of it each time.)
            for _ in 0..<requests { try engine.submit(only) { countdown.tick(failed: $0.state != .succeeded) } }
        } else {
            for n in 0..<requests {
                try engine.submit(specs[n % specs.count]) { countdown.tick(failed: $0.state != .succeeded) }
            }
        }
        countdown.wait()
        let seconds = Double(now() - start) / 1e9
        let cpu = cpuPerJob(from: cpuBefore, to: threadCPU(), jobs: requests)
        print(#"{"name":"hydra","concurrency":\#(concurrency),"requests":\#(requests),"failed":\#(countdown.failures.load(ordering: .relaxed)),"seconds":\#(round3(seconds)),"rps":\#(Int(Double(requests) / seconds)),"cpuUsPerJob":\#(cpu)}"#)
    }

    /// Local no-op jobs on one local worker: throughput, then unloaded submit-to-start latency.
    static func local(jobs: Int) throws {
        var config = scratchConfiguration()
        config.workers = [Configuration.Worker(name: "local", kind: .local, maxActive: Configuration.Worker.maxLimit)]
        let engine = try HydraEngine(configuration: config)
        defer { engine.shutdown() }
        let startedAt = Atomic<UInt64>(0)
        engine.register(localJob: "noop", .inline { _ in .null })
        engine.register(localJob: "stamp", .inline { _ in
            startedAt.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed)
            return .null
        })
        let noop = JobSpec.local("noop")

        // Single submissions (one hand-over per job).
        let singles = min(jobs, 200_000)
        let single = Countdown(singles)
        var start = now()
        for _ in 0..<singles {
            try engine.submit(noop) { single.tick(failed: $0.state != .succeeded) }
        }
        single.wait()
        let singleSeconds = Double(now() - start) / 1e9

        // Batches of 1000 (how the RPC server hands over a burst of submits), with
        // at most `window` jobs in flight: a steady state, not a million-job backlog.
        let countdown = Countdown(jobs)
        let batch = Array(repeating: noop, count: 1000)
        let window = 20_000
        let cpuBefore = threadCPU()
        start = now()
        for i in 0..<(jobs / 1000) {
            while (i * 1000) - countdown.completed > window { usleep(20) }
            try engine.submit(batch: batch) { countdown.tick(failed: $0.state != .succeeded) }
        }
        countdown.wait()
        let seconds = Double(now() - start) / 1e9
        let cpu = cpuPerJob(from: cpuBefore, to: threadCPU(), jobs: jobs)

        var latencies: [Double] = []
        let stamp = JobSpec.local("stamp")
        for _ in 0..<20_000 {
            let one = Countdown(1)
            let submitted = now()
            try engine.submit(stamp) { one.tick(failed: $0.state != .succeeded) }
            one.wait()
            latencies.append(Double(startedAt.load(ordering: .relaxed) - submitted) / 1000)
        }
        latencies.sort()
        let p50 = latencies[latencies.count / 2], p99 = latencies[latencies.count * 99 / 100]
        print(#"{"name":"local-noop","jobs":\#(jobs),"failed":\#(countdown.failures.load(ordering: .relaxed)),"seconds":\#(round3(seconds)),"rps":\#(Int(Double(jobs) / seconds)),"singleSubmitRps":\#(Int(Double(singles) / singleSeconds)),"p50us":\#(round3(p50)),"p99us":\#(round3(p99)),"cpuUsPerJob":\#(cpu)}"#)
    }

    static func round3(_ x: Double) -> Double { (x * 1000).rounded() / 1000 }

    /// CPU time by thread name so far, in nanoseconds (Linux `schedstat`; threads of
    /// the same name summed). The loops name their threads `hydra-<worker>`.
    static func threadCPU() -> [String: UInt64] {
        var out: [String: UInt64] = [:]
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        for task in tasks {
            guard let name = try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8),
                  let stat = try? String(contentsOfFile: "/proc/self/task/\(task)/schedstat", encoding: .utf8),
                  let ns = stat.split(separator: " ").first.flatMap({ UInt64($0) }) else { continue }
            out[name.trimmingCharacters(in: .whitespacesAndNewlines), default: 0] += ns
        }
        return out
    }

    /// CPU microseconds per job by thread between two `threadCPU()` readings, as JSON.
    static func cpuPerJob(from before: [String: UInt64], to after: [String: UInt64], jobs: Int) -> String {
        let fields = after.keys.sorted().compactMap { name -> String? in
            let used = after[name]! - (before[name] ?? 0)
            guard used > 0 else { return nil }
            return "\"\(name)\":\(round3(Double(used) / 1000 / Double(jobs)))"
        }
        return "{" + fields.joined(separator: ",") + "}"
    }
}
