import Foundation
import HydraCore

/// One owner per state folder: an exclusive `flock` on `STATE/hydra.lock`,
/// held until released or the process ends (the kernel releases it then,
/// `kill -9` included, so a crash never leaves a stale lock). `hydra serve`
/// holds it for its life: a second server on the same folder would run the
/// first one's unfinished jobs again and write its clean-shutdown marker while
/// the first still runs. An embedded ``HydraEngine`` with its resource index in
/// memory takes it before clearing what an earlier run left in the repository,
/// and clears nothing in a folder another process holds.
public final class StateFolderLock: Sendable {
    private let descriptor: Int32

    /// Why the lock could not be taken, for one line on stderr.
    public struct Refusal: Error, CustomStringConvertible {
        public let description: String
    }

    /// Takes the lock of `folder` (created if missing) or throws a refusal that
    /// names the folder and, when it can tell, the pid of the process holding it.
    public init(folder: String) throws(Refusal) {
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let path = folder + "/" + Configuration.State.lockName
        // Not through a link: a planted one would have the pid written over what it points at.
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            throw Refusal(description: "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let reason = errno
            let busy = reason == EWOULDBLOCK
            let holder = (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
            close(fd)
            throw Refusal(description: busy
                ? "\(folder) is in use by another hydra process\(holder.map { $0.isEmpty ? "" : " (pid \($0))" } ?? ""): one server per state folder"
                : "cannot lock \(path): \(String(cString: strerror(reason)))")
        }
        let pid = "\(getpid())\n"
        _ = ftruncate(fd, 0)
        _ = pid.withCString { write(fd, $0, strlen($0)) }
        descriptor = fd
    }

    deinit { close(descriptor) }
}
