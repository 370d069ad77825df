import Foundation
import Testing

@testable import Hydra
@testable import HydraRPC

/// Custom events (rest.md §6): `events.emit` and the `emit` local job, over the real server.
@Suite(.ownThreads) struct CustomEventTests {
    @Test func emitReachesMatchingSubscribersAndRefusesBadNames() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        let client = try server.client()
        // A finished job, for a subscription that matches no event from here on.
        let finished = try #require(client.call("job.submit", ["job": ["type": "local", "name": "echo", "input": 1]])["jobId"])
        _ = try client.call("job.result", ["jobId": finished, "waitMs": 10_000])
        let watcher = try server.client()
        _ = try watcher.call("events.subscribe", ["events": ["custom.deploy"]])
        let jobWatcher = try server.client()
        // Every matching subscriber (rest.md §6): one with no filter too, not one for a job or a shared key.
        let everything = try server.client()
        // From the bus's last seq: none of the finished job's events (one may still be on its way live).
        let after = try #require(client.call("hydra.stats")["events"]?["lastSeq"])
        _ = try everything.call("events.subscribe", ["fromSeq": after])
        let otherJob = try server.client()
        _ = try otherJob.call("events.subscribe", ["jobId": finished])
        _ = try otherJob.call("events.subscribe", ["shared": ["k"]])

        let sent = try client.call("events.emit", ["event": "custom.deploy", "fields": ["version": "1.2", "ok": true]])
        let seq = try #require(sent["seq"]?.intValue)
        let note = try #require(try watcher.nextNotification(timeout: .seconds(10)))
        #expect(note["params"]?["event"] == "custom.deploy")
        #expect(note["params"]?["seq"] == .int(seq))
        #expect(note["params"]?["version"] == "1.2" && note["params"]?["ok"] == true)
        #expect(note["params"]?["jobId"] == "")
        #expect(try everything.nextNotification(timeout: .seconds(10))?["params"]?["seq"] == .int(seq))
        #expect(try otherJob.nextNotification(timeout: .milliseconds(300)) == nil)
        // And it is replayed as any event is.
        let late = try server.client()
        _ = try late.call("events.subscribe", ["events": ["custom.deploy"], "fromSeq": .int(seq - 1)])
        #expect(try late.nextNotification(timeout: .seconds(10))?["params"]?["version"] == "1.2")

        func error(_ params: JSONValue) -> (Int?, String) {
            do { _ = try client.call("events.emit", params); return (nil, "") } catch { return (error.code, error.message) }
        }
        #expect(error(["event": "job.succeeded"]).0 == -32602)
        #expect(error(["event": "custom."]).1.contains("event"))
        #expect(error(["event": "custom.x y"]).0 == -32602)
        #expect(error(["event": "custom.ok", "fields": ["seq": 1]]).1.contains("fields.seq"))
        // The notification's own member: a client would read one or the other.
        #expect(error(["event": "custom.ok", "fields": ["subscription": "s1"]]).1.contains("fields.subscription"))
        #expect(error(["event": "custom.ok", "fields": [1, 2]]).1.contains("fields"))
        #expect(error(["event": "custom.ok", "other": 1]).0 == -32602)

        // From inside a graph: the job's ids, so a subscription to the job gets it too.
        let job = try client.call("job.submit", ["job": ["type": "serial", "steps": [
            ["type": "local", "name": "echo", "input": 1],
            ["type": "local", "name": "emit", "input": ["event": "custom.step", "fields": ["n": "${prev}"]]],
        ]]])["jobId"]!
        _ = try jobWatcher.call("events.subscribe", ["jobId": job, "events": ["custom.step"], "fromSeq": 0])
        let result = try client.call("job.result", ["jobId": job, "waitMs": 10_000])
        #expect(result["state"] == "succeeded", "\(result)")
        #expect(result["result"]?["results"]?[1]?["seq"]?.intValue != nil)
        let fromJob = try #require(try jobWatcher.nextNotification(timeout: .seconds(10)))
        #expect(fromJob["params"]?["event"] == "custom.step")
        #expect(fromJob["params"]?["jobId"] == job && fromJob["params"]?["stepPath"] == "1")
        #expect(fromJob["params"]?["n"] == 1)
        // A bad name from the local job fails the step, naming the field.
        let bad = try client.call("job.submit", ["job": ["type": "local", "name": "emit", "input": ["event": "nope"]]])["jobId"]!
        let failed = try client.call("job.result", ["jobId": bad, "waitMs": 10_000])
        #expect(failed["state"] == "failed")
        #expect(failed["error"]?["message"]?.stringValue?.contains("input.event") == true)
    }

    /// Protocol §6: a job's events in causal order. An `emit` step's custom
    /// event is one of that step's events: after its `job.started`, before its
    /// `job.succeeded`, and the step's result names the event's seq.
    @Test func anEmitStepsEventComesBetweenItsStartAndItsEnd() throws {
        let server = try ServerProcess()
        defer { server.terminate() }
        let client = try server.client()
        let watcher = try server.client()
        for round in 0..<5 {
            let job = try client.call("job.submit", ["job": ["type": "serial", "steps": [
                ["type": "local", "name": "echo", "input": .int(round)],
                ["type": "local", "name": "emit", "input": ["event": "custom.order", "fields": ["round": "${prev}"]]],
            ]]])["jobId"]!
            let subscription = try watcher.call("events.subscribe", ["jobId": job, "fromSeq": 0])["subscription"]!
            let result = try client.call("job.result", ["jobId": job, "waitMs": 10_000])
            #expect(result["state"] == "succeeded", "\(result)")
            var ofStep: [(name: String, seq: Int)] = []
            var customSeq: Int?
            while let note = try watcher.nextNotification(timeout: .seconds(10)) {
                guard let params = note["params"], params["subscription"] == subscription else { continue }
                let name = params["event"]?.stringValue ?? ""
                if params["stepPath"] == "1" { ofStep.append((name, params["seq"]?.intValue ?? -1)) }
                if name == "custom.order" {
                    customSeq = params["seq"]?.intValue
                    #expect(params["round"] == .int(round))
                }
                if name == "job.succeeded" && params["stepPath"] == "" { break }
            }
            #expect(ofStep.map(\.name) == ["job.queued", "job.started", "custom.order", "job.succeeded"], "round \(round): \(ofStep)")
            #expect(ofStep.map(\.seq) == ofStep.map(\.seq).sorted())
            #expect(customSeq != nil && result["result"]?["results"]?[1]?["seq"]?.intValue == customSeq)
            _ = try watcher.call("events.unsubscribe", ["subscription": subscription])
        }
    }
}
