import Foundation
import Synchronization
import Testing
import HydraLoop

@testable import Hydra

/// The state folder's lock as another thread of the process spawns children:
/// each fork shares the lock's open file until its `exec`, so a lock just let
/// go of was refused about one time in three (CI saw it as an engine dropped
/// without `shutdown()` that "kept" its folder).
@Suite struct StateFolderLockTests {
    private func folder() -> String { NSTemporaryDirectory() + "hydra-lock-\(UUID().uuidString)" }

    /// With `settle`, a lock this process let go of is taken again every time,
    /// children being spawned all along.
    @Test func aLockLetGoOfIsTakenAgainWhileChildrenAreSpawned() throws {
        let state = folder()
        defer { try? FileManager.default.removeItem(atPath: state) }
        let stop = Atomic<Bool>(false)
        let spawned = Atomic<Int>(0)
        let spawner = Thread {
            while !stop.load(ordering: .relaxed) {
                let child = ChildProcess()
                child.executableURL = URL(fileURLWithPath: "/bin/true")
                guard (try? child.run()) != nil else { continue }
                child.waitUntilExit()
                spawned.add(1, ordering: .relaxed)
            }
        }
        spawner.start()
        defer { stop.store(true, ordering: .relaxed) }
        var refused = 0
        for _ in 0..<1000 {
            var held: StateFolderLock? = try StateFolderLock(folder: state, settle: .seconds(2))
            #expect(held != nil)
            held = nil
            if (try? StateFolderLock(folder: state, settle: .seconds(2))) == nil { refused += 1 }
        }
        #expect(refused == 0)
        #expect(spawned.load(ordering: .relaxed) > 0, "no child was spawned: the race was never run")
    }

    /// A holder that is not this process is refused at once, settle or not,
    /// and the refusal says the folder is in use.
    @Test func anotherProcesssLockIsRefusedWithoutWaiting() throws {
        let state = folder()
        defer { try? FileManager.default.removeItem(atPath: state) }
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        let path = state + "/hydra.lock"
        try Data("1\n".utf8).write(to: URL(fileURLWithPath: path))  // the pid a hydra holder would have written
        let holder = ChildProcess()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/flock")
        holder.arguments = ["--exclusive", "--close", path, "sleep", "10"]
        try holder.run()
        defer { holder.terminate(); holder.waitUntilExit() }
        // Wait for flock(1) to hold it (probing with flock itself: a StateFolderLock would write its pid).
        let deadline = ContinuousClock.now + .seconds(10)
        while true {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            let free = flock(fd, LOCK_EX | LOCK_NB) == 0
            close(fd)
            if !free { break }
            try #require(ContinuousClock.now < deadline, "flock(1) never took the lock")
            usleep(10_000)
        }
        let started = ContinuousClock.now
        let refusal = #expect(throws: StateFolderLock.Refusal.self) { _ = try StateFolderLock(folder: state, settle: .seconds(5)) }
        #expect(ContinuousClock.now - started < .seconds(2))
        #expect(refusal?.description.contains("in use by another hydra process (pid 1)") == true)
    }
}
