// The rows of rest.md's benchmarks (issue 14), in the same `make bench` run as the rest:
//
//   hydra-bench auth --url URL [--requests N --concurrency C --pairs P]
//       remote jobs with a bearer session vs the same jobs without auth, in pairs
//   hydra-bench merged --url URL --log FILE [--jobs N]
//       N identical GETs at once with `coalesce`, vs N without; FILE is the
//       server's access log of that URL (its lines count the requests that reached it)
//   hydra-bench upload --file PATH --state DIR --url SINK
//       one `bodyFile` upload of PATH (under DIR) to a sink; MB/s and peak RSS growth
import Dispatch
import Foundation
import Hydra

enum RESTBench {
    /// Remote GETs through the engine's one remote worker (thread `thread`),
    /// `concurrency` in flight: jobs per second, and that thread's CPU µs per job.
    static func throughput(_ engine: HydraEngine, _ spec: JobSpec, requests: Int, concurrency: Int,
                           thread: String) throws -> (Double, Double) {
        let countdown = HydraBench.Countdown(requests)
        let cpuBefore = HydraBench.threadCPU()[thread] ?? 0
        let start = HydraBench.now()
        for _ in 0..<requests { try engine.submit(spec) { countdown.tick(failed: $0.state != .succeeded) } }
        countdown.wait()
        precondition(countdown.failures.load(ordering: .relaxed) == 0, "failed jobs in the auth bench")
        let cpu = Double((HydraBench.threadCPU()[thread] ?? 0) - cpuBefore) / 1000 / Double(requests)
        return (Double(requests) / (Double(HydraBench.now() - start) / 1e9), cpu)
    }

    /// An engine with one remote worker named `worker` (its thread: `hydra-<worker>`).
    static func engine(worker: String, concurrency: Int, auth: Bool) throws -> HydraEngine {
        var config = HydraBench.scratchConfiguration()
        config.defaults.headers = [:]
        config.workers = [Configuration.Worker(name: worker, kind: .remote, maxConnections: concurrency,
                                               maxHostConnections: concurrency, maxActive: concurrency)]
        if auth { config.auth["ci"] = .bearer(token: "bench-token-0123456789abcdef0123456789abcdef") }
        return try HydraEngine(configuration: config)
    }

    /// The jobs of one side of the auth row, on their own warm engine.
    struct Side {
        let engine: HydraEngine
        let spec: JobSpec
        let thread: String

        init(worker: String, concurrency: Int, auth: Bool, spec: JobSpec) throws {
            engine = try RESTBench.engine(worker: worker, concurrency: concurrency, auth: auth)
            self.spec = spec
            thread = "hydra-" + worker
            // Warm: threads up, `concurrency` connections open.
            _ = try throughput(engine, spec, requests: concurrency * 4, concurrency: concurrency, thread: thread)
        }

        func run(requests: Int, concurrency: Int) throws -> (Double, Double) {
            try throughput(engine, spec, requests: requests, concurrency: concurrency, thread: thread)
        }
    }

    /// Auth on vs off: both engines built and warmed once, then `8 × pairs`
    /// rounds that run the same number of jobs on each, alternating which goes
    /// first (ABBA); the median of the per-round ratios. One process, warm engines,
    /// short interleaved rounds: drift of the machine (this VM's speed moves by
    /// 10% over minutes) falls on both sides alike. A third engine whose jobs
    /// set the same `Authorization` header themselves (no session) runs in each
    /// round too: what the header alone costs curl and the server.
    static func auth(url: String, requests: Int, concurrency: Int, pairs: Int) throws {
        let token = "bench-token-0123456789abcdef0123456789abcdef"
        var authed = RemoteSpec.get(url)
        authed.auth = "ci"
        var headed = RemoteSpec.get(url)
        headed.headers["Authorization"] = .string("Bearer " + token)
        let plain = try Side(worker: "plain", concurrency: concurrency, auth: false, spec: .remote(.get(url)))
        let auth = try Side(worker: "auth", concurrency: concurrency, auth: true, spec: .remote(authed))
        let header = try Side(worker: "header", concurrency: concurrency, auth: false, spec: .remote(headed))
        defer { [plain, auth, header].forEach { $0.engine.shutdown() } }
        // Rounds of a quarter of `requests` each side, eight times as many rounds as pairs:
        // per-round ratios spread by ±5% here, so the median needs that many to settle within 1%.
        let rounds = pairs * 8, perRound = max(requests / 4, concurrency * 8)
        var ratios: [Double] = []
        var plainRates: [Double] = [], authRates: [Double] = []
        var plainCPU: [Double] = [], authCPU: [Double] = [], headerCPU: [Double] = []
        for round in 0..<rounds {
            let authFirst = round % 2 == 1
            let first = try (authFirst ? auth : plain).run(requests: perRound, concurrency: concurrency)
            let second = try (authFirst ? plain : auth).run(requests: perRound, concurrency: concurrency)
            let (plainRate, plainUs) = authFirst ? second : first
            let (authRate, authUs) = authFirst ? first : second
            headerCPU.append(try header.run(requests: perRound, concurrency: concurrency).1)
            plainRates.append(plainRate)
            authRates.append(authRate)
            ratios.append(authRate / plainRate)
            plainCPU.append(plainUs)
            authCPU.append(authUs)
        }
        func median(_ xs: [Double]) -> Double { xs.sorted()[xs.count / 2] }
        let list = ratios.map { String(HydraBench.round3($0)) }.joined(separator: ",")
        print(#"{"name":"auth-bearer","concurrency":\#(concurrency),"requests":\#(perRound),"rounds":\#(rounds),"plainRps":\#(Int(median(plainRates))),"authRps":\#(Int(median(authRates))),"ratio":\#(HydraBench.round3(median(ratios))),"ratios":[\#(list)],"plainWorkerUs":\#(HydraBench.round3(median(plainCPU))),"authWorkerUs":\#(HydraBench.round3(median(authCPU))),"headerOnlyWorkerUs":\#(HydraBench.round3(median(headerCPU)))}"#)
    }

    /// `jobs` identical GETs submitted at once, merged, then as many unmerged.
    static func merged(url: String, log: String, jobs: Int) throws {
        func lines() -> Int {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").count
        }
        func run(coalesce: Bool) throws -> (seconds: Double, reached: Int) {
            var config = HydraBench.scratchConfiguration()
            config.defaults.headers = [:]
            config.workers = [Configuration.Worker(name: "rest", kind: .remote, maxConnections: 64,
                                                   maxHostConnections: 64, maxActive: jobs)]
            let engine = try HydraEngine(configuration: config)
            defer { engine.shutdown() }
            var spec = RemoteSpec.get(url)
            spec.coalesce = coalesce
            let before = lines()
            let countdown = HydraBench.Countdown(jobs)
            let start = HydraBench.now()
            try engine.submit(batch: Array(repeating: JobSpec.remote(spec), count: jobs)) {
                countdown.tick(failed: $0.state != .succeeded)
            }
            countdown.wait()
            let seconds = Double(HydraBench.now() - start) / 1e9
            precondition(countdown.failures.load(ordering: .relaxed) == 0, "failed jobs in the merged bench")
            usleep(200_000)  // nginx writes its log line after the response
            return (seconds, lines() - before)
        }
        let merged = try run(coalesce: true)
        let plain = try run(coalesce: false)
        print(#"{"name":"merged","jobs":\#(jobs),"reached":\#(merged.reached),"reachedPercent":\#(HydraBench.round3(Double(merged.reached) * 100 / Double(jobs))),"seconds":\#(HydraBench.round3(merged.seconds)),"unmergedReached":\#(plain.reached),"unmergedSeconds":\#(HydraBench.round3(plain.seconds))}"#)
    }

    /// The resident set of this process now and at its peak, in KiB (Linux `/proc/self/status`).
    static func memory() -> (rss: Int, peak: Int) { ResourceBench.memory(of: Int(getpid())) }

    /// One raw `bodyFile` upload of `file` (relative to `state`) to `url`.
    static func upload(file: String, state: String, url: String) throws {
        var config = Configuration()
        config.defaults.headers = [:]
        config.defaults.timeoutMs = 600_000
        let engine = try HydraEngine(configuration: config, stateDirectory: state)
        defer { engine.shutdown() }
        // Warm the engine (threads, a connection) before the memory reading.
        var warm = RemoteSpec(method: "POST", url: url)
        warm.body = "warm"
        let ready = HydraBench.Countdown(1)
        try engine.submit(.remote(warm)) { ready.tick(failed: $0.state != .succeeded) }
        ready.wait()
        let before = memory()
        var spec = RemoteSpec(method: "PUT", url: url)
        spec.bodyFile = file
        let size = (try FileManager.default.attributesOfItem(atPath: state + "/" + file)[.size] as? NSNumber)?.intValue ?? 0
        let countdown = HydraBench.Countdown(1)
        let start = HydraBench.now()
        try engine.submit(.remote(spec)) { result in
            if result.state != .succeeded { FileHandle.standardError.write(Data("upload: \(String(describing: result.error))\n".utf8)) }
            countdown.tick(failed: result.state != .succeeded)
        }
        countdown.wait()
        let seconds = Double(HydraBench.now() - start) / 1e9
        let after = memory()
        print(#"{"name":"upload","bytes":\#(size),"failed":\#(countdown.failures.load(ordering: .relaxed)),"seconds":\#(HydraBench.round3(seconds)),"mbps":\#(HydraBench.round3(Double(size) / 1_048_576 / seconds)),"rssBeforeKiB":\#(before.rss),"peakGrowthKiB":\#(max(0, after.peak - before.rss))}"#)
    }
}
