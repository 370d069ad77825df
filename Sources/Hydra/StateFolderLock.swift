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
    /// The database file, `flock`ed too (see `init`); -1 when not.
    private let databaseDescriptor: Int32

    /// Why the lock could not be taken, for one line on stderr.
    public struct Refusal: Error, CustomStringConvertible {
        public let description: String
    }

    /// Takes the lock of `folder` (created if missing) or throws a refusal that
    /// names the folder and, when it can tell, the pid of the process holding it.
    /// With `database` (a file name in the folder), that file is locked as well,
    /// through any link to it: the folder's lock alone let a second server run
    /// on the same database once `hydra.lock` was removed, or from another
    /// folder whose database links to it. (`flock` and SQLite's own POSIX locks
    /// do not meet; the descriptor stays open until the lock ends, since closing
    /// any descriptor of a database file drops the process's POSIX locks on it.)
    ///
    /// A lock this process has just let go of can still be held for a moment
    /// by a child another of its threads is spawning: the fork shares the
    /// lock's open file until its `exec` closes it (`O_CLOEXEC`), measured at
    /// one immediate re-lock in three with a thread running `Process`es. With
    /// `settle`, a lock whose holder is this process's own pid is tried again
    /// for up to that long before the refusal.
    public init(folder: String, database: String? = nil, settle: Duration = .zero) throws(Refusal) {
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let path = folder + "/" + Configuration.State.lockName
        // Not through a link: a planted one would have the pid written over what it points at.
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            throw Refusal(description: "cannot open \(path): \(String(cString: strerror(errno)))")
        }
        guard StateFolderLock.lock(fd, path: path, settle: settle) else {
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
        // A database that does not open (a folder, or a dangling link, in its place) is
        // SQLite's to refuse, with its reason; a missing one is created here, not through a link.
        var db: Int32 = -1
        if let database {
            let path = folder + "/" + database
            db = open(path, O_RDWR | O_CLOEXEC)
            if db < 0 && errno == ENOENT { db = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600) }
        }
        if db >= 0, flock(db, LOCK_EX | LOCK_NB) != 0 {
            let reason = errno
            close(db)
            close(fd)
            throw Refusal(description: reason == EWOULDBLOCK
                ? "\(folder)/\(database!) is in use by another hydra process (through another folder, or since its hydra.lock was removed): one server per database"
                : "cannot lock \(folder)/\(database!): \(String(cString: strerror(reason)))")
        }
        databaseDescriptor = db
    }

    /// `flock`s `fd` at once, or, while the holder is this process within
    /// `settle`, every 2 ms until it is let go; errno says why on false.
    private static func lock(_ fd: Int32, path: String, settle: Duration) -> Bool {
        if flock(fd, LOCK_EX | LOCK_NB) == 0 { return true }
        guard errno == EWOULDBLOCK, settle > .zero else { return false }
        let deadline = ContinuousClock.now + settle
        let ownPid = "\(getpid())"
        while ContinuousClock.now < deadline {
            let holder = (try? String(contentsOfFile: path, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
            guard holder == ownPid else { errno = EWOULDBLOCK; return false }
            usleep(2_000)
            if flock(fd, LOCK_EX | LOCK_NB) == 0 { return true }
            guard errno == EWOULDBLOCK else { return false }
        }
        errno = EWOULDBLOCK
        return false
    }

    deinit {
        if databaseDescriptor >= 0 { close(databaseDescriptor) }
        close(descriptor)
    }
}
