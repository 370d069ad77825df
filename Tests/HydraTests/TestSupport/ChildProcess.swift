import CSpawn
import Foundation
import HydraLoop

/// A child process of the tests (the `hydra` binary, the test servers,
/// tinyproxy, a shell): the part of Foundation's `Process` the tests use,
/// started with `posix_spawn` through `CSpawn`. Foundation's `Process.run()`
/// on this toolchain over-reads its `/proc/self/fd` listing
/// (swift-corelibs-foundation#5472) and took down about one test run in five.
///
/// Standard streams: a `Pipe` (the parent's copy of the child's end is closed
/// once the child runs, so reading to EOF works), a `FileHandle`, or nil to
/// inherit the test process's own; `FileHandle.nullDevice` is /dev/null.
/// Every other descriptor is closed in the child.
final class ChildProcess: @unchecked Sendable {
    var executableURL: URL?
    var arguments: [String] = []
    /// nil: the test process's environment.
    var environment: [String: String]?
    var currentDirectoryURL: URL?
    var standardInput: Any?
    var standardOutput: Any?
    var standardError: Any?

    private struct State {
        var pid: pid_t = 0
        /// The raw `waitpid` status once reaped.
        var status: Int32?
    }
    private let state = Locked(State())

    var processIdentifier: pid_t { state.withLock { $0.pid } }

    func run() throws {
        guard let path = executableURL?.path else { throw POSIXError(.ENOENT) }
        let env = (environment ?? ProcessInfo.processInfo.environment).map { "\($0.key)=\($0.value)" }
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = env.map { strdup($0) } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let status = hydra_test_spawn(&pid, path, argv, envp, currentDirectoryURL?.path,
                                      Self.descriptor(standardInput, reading: true, inherit: 0),
                                      Self.descriptor(standardOutput, reading: false, inherit: 1),
                                      Self.descriptor(standardError, reading: false, inherit: 2))
        guard status == 0 else { throw POSIXError(POSIXErrorCode(rawValue: status) ?? .EIO) }
        state.withLock { $0.pid = pid }
        if let pipe = standardInput as? Pipe { try? pipe.fileHandleForReading.close() }
        if let pipe = standardOutput as? Pipe { try? pipe.fileHandleForWriting.close() }
        if let pipe = standardError as? Pipe, standardError as AnyObject !== standardOutput as AnyObject {
            try? pipe.fileHandleForWriting.close()
        }
    }

    /// True until the child has exited (and been reaped here).
    var isRunning: Bool { reap(blocking: false) == nil }

    func waitUntilExit() { _ = reap(blocking: true) }

    /// The exit code, or the signal that ended the child (as `Process` reports it).
    var terminationStatus: Int32 {
        guard let status = reap(blocking: false) else { return 0 }
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : signal
    }

    /// SIGTERM.
    func terminate() {
        if isRunning { kill(processIdentifier, SIGTERM) }
    }

    /// The child's raw status once it has exited; blocks for it when asked.
    /// Waiting (`waitid` with `WNOWAIT`) leaves the child to be reaped under
    /// the lock, so threads polling `isRunning` and one waiting agree.
    private func reap(blocking: Bool) -> Int32? {
        let pid = processIdentifier
        guard pid > 0 else { return nil }
        if blocking {
            var info = siginfo_t()
            while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) == -1 && errno == EINTR {}
        }
        return state.withLock { s in
            if let status = s.status { return status }
            var status: Int32 = 0
            guard waitpid(pid, &status, WNOHANG) == pid else { return nil }
            s.status = status
            return status
        }
    }

    private static func descriptor(_ stream: Any?, reading: Bool, inherit: Int32) -> Int32 {
        switch stream {
        case let pipe as Pipe:
            return reading ? pipe.fileHandleForReading.fileDescriptor : pipe.fileHandleForWriting.fileDescriptor
        case let handle as FileHandle:
            return handle === FileHandle.nullDevice ? -1 : handle.fileDescriptor
        default:
            return inherit
        }
    }
}
