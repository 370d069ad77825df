// The server side of `make bench`: clients of a running `hydra serve`.
//
//   hydra-bench rpc-submit --connect ADDR --jobs N --clients C --batch B
//       acknowledged (durable) submits per second of a local echo job
//   hydra-bench rpc-remote --connect ADDR --url URL --jobs N --clients C --batch B [--poll-ms MS]
//       remote GET jobs submitted over RPC, from the first submit to the last result
//   hydra-bench fanout --connect ADDR --subscribers S --jobs N
//       events delivered per second to S subscribers of every event
import Dispatch
import Foundation
import Hydra
import HydraLoop
import HydraRPC
import Synchronization

enum RPCBench {
    static func address(_ text: String) -> SocketAddress {
        guard let address = SocketAddress(parsing: text) else {
            FileHandle.standardError.write(Data("--connect: not HOST:PORT or unix:PATH\n".utf8))
            exit(2)
        }
        return address
    }

    /// Runs `body(index)` on `count` threads at once; returns when all are done.
    static func parallel(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
        let group = DispatchGroup()
        for i in 0..<count {
            group.enter()
            let thread = Thread {
                body(i)
                group.leave()
            }
            thread.stackSize = 1 << 20
            thread.start()
        }
        group.wait()
    }

    /// Submits `jobs` copies of `job`, split over `clients` connections, `batch` per call.
    /// Returns the seconds taken and the number of failed submits.
    static func submitAll(_ address: SocketAddress, job: JSONValue, jobs: Int, clients: Int,
                          batch: Int) -> (seconds: Double, failed: Int) {
        let failed = Atomic<Int>(0)
        let start = HydraBench.now()
        parallel(clients) { index in
            let share = jobs / clients + (index < jobs % clients ? 1 : 0)
            guard let client = try? RPCClient(address: address) else {
                failed.add(share, ordering: .relaxed)
                return
            }
            var sent = 0
            while sent < share {
                let n = min(batch, share - sent)
                do {
                    if n == 1 {
                        _ = try client.call("job.submit", ["job": job])
                    } else {
                        let calls = Array(repeating: (method: "job.submit", params: ["job": job] as JSONValue), count: n)
                        for reply in try client.callBatch(calls, timeout: .seconds(60)) {
                            if case .failure = reply { failed.add(1, ordering: .relaxed) }
                        }
                    }
                } catch {
                    failed.add(n, ordering: .relaxed)
                }
                sent += n
            }
        }
        return (Double(HydraBench.now() - start) / 1e9, failed.load(ordering: .relaxed))
    }

    static func submit(connect: String, jobs: Int, clients: Int, batch: Int) {
        let job: JSONValue = ["type": "local", "name": "echo", "input": 1]
        let (seconds, failed) = submitAll(address(connect), job: job, jobs: jobs, clients: clients, batch: batch)
        print(#"{"name":"rpc-submit","clients":\#(clients),"batch":\#(batch),"jobs":\#(jobs),"failed":\#(failed),"seconds":\#(HydraBench.round3(seconds)),"rps":\#(Int(Double(jobs) / seconds))}"#)
    }

    /// Finished jobs (succeeded + failed + cancelled) according to `hydra.stats`.
    static func finished(_ client: RPCClient) -> Int {
        guard let jobs = try? client.call("hydra.stats")["jobs"] else { return 0 }
        return ["succeeded", "failed", "cancelled"].reduce(0) { $0 + (jobs[$1]?.intValue ?? 0) }
    }

    /// `pollMs`: how often `hydra.stats` is asked whether all are done (longer
    /// under callgrind, where each call would count as the server's work).
    static func remote(connect: String, url: String, jobs: Int, clients: Int, batch: Int, pollMs: Int = 2) throws {
        let address = address(connect)
        let monitor = try RPCClient(address: address)
        let before = finished(monitor)
        let failedBefore = try monitor.call("hydra.stats")["jobs"]?["failed"]?.intValue ?? 0
        let start = HydraBench.now()
        let job: JSONValue = ["type": "remote", "url": .string(url)]
        let (_, failedSubmits) = submitAll(address, job: job, jobs: jobs, clients: clients, batch: batch)
        while finished(monitor) - before < jobs - failedSubmits { usleep(UInt32(max(1, pollMs)) * 1000) }
        let seconds = Double(HydraBench.now() - start) / 1e9
        let failedJobs = (try monitor.call("hydra.stats")["jobs"]?["failed"]?.intValue ?? 0) - failedBefore
        print(#"{"name":"rpc-remote","clients":\#(clients),"batch":\#(batch),"requests":\#(jobs),"failed":\#(failedSubmits + failedJobs),"seconds":\#(HydraBench.round3(seconds)),"rps":\#(Int(Double(jobs) / seconds))}"#)
    }

    static func fanout(connect: String, subscribers: Int, jobs: Int) throws {
        let address = address(connect)
        // Each job's root emits queued, started and succeeded.
        let expected = jobs * 3
        let ready = DispatchSemaphore(value: 0)
        let go = DispatchSemaphore(value: 0)
        let delivered = Atomic<Int>(0)
        let lastDone = Atomic<UInt64>(0)
        let start = Atomic<UInt64>(0)
        let group = DispatchGroup()
        for _ in 0..<subscribers {
            group.enter()
            Thread {
                defer { group.leave() }
                guard let client = try? RPCClient(address: address),
                      (try? client.call("events.subscribe", ["events": ["job.queued", "job.started", "job.succeeded"]])) != nil
                else {
                    ready.signal()
                    return
                }
                ready.signal()
                go.wait()
                var seen = 0
                while seen < expected, let note = try? client.nextNotification(timeout: .seconds(30)) {
                    if note["method"] == "hydra.event" { seen += 1 }
                }
                delivered.add(seen, ordering: .relaxed)
                let now = HydraBench.now()
                var current = lastDone.load(ordering: .relaxed)
                while now > current {
                    let (exchanged, original) = lastDone.compareExchange(expected: current, desired: now, ordering: .relaxed)
                    if exchanged { break }
                    current = original
                }
            }.start()
        }
        for _ in 0..<subscribers { ready.wait() }
        start.store(HydraBench.now(), ordering: .relaxed)
        for _ in 0..<subscribers { go.signal() }
        _ = submitAll(address, job: ["type": "local", "name": "echo", "input": 1], jobs: jobs, clients: 1, batch: 500)
        group.wait()
        let seconds = Double(lastDone.load(ordering: .relaxed) - start.load(ordering: .relaxed)) / 1e9
        let total = delivered.load(ordering: .relaxed)
        print(#"{"name":"fanout","subscribers":\#(subscribers),"jobs":\#(jobs),"events":\#(total),"expected":\#(expected * subscribers),"seconds":\#(HydraBench.round3(seconds)),"eventsPerSecond":\#(Int(Double(total) / seconds))}"#)
    }
}
