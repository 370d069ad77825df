import Foundation
import HydraCore

/// The file a `saveAs` download is written to: a temporary file in the target's
/// folder, renamed over the target only once the response is judged a success,
/// so the target is never half-written and a failed download leaves nothing.
///
/// Opening walks the path from the state folder with
/// ``SaveAsPath/openFolder(in:creating:)`` (`O_NOFOLLOW`, creating missing
/// folders): a symbolic link anywhere on the way is refused, never followed
/// out of the state folder. The target, if it exists,
/// must be a regular file; `renameat` replaces its directory entry and never
/// writes through a link. The state folder itself is the operator's choice
/// and is taken as it is.
///
/// Ownership: created, used and closed on the worker's loop thread by the call
/// it belongs to (see ``RESTExecutor``); it owns its descriptors.
final class DownloadFile {
    /// Names of the temporary files; what a crash leaves is removed at the next start.
    static let temporaryPrefix = ".hydra-download-"

    /// Removes the temporary files of downloads a crash interrupted, anywhere
    /// under `stateDirectory` (links are not followed). Returns how many.
    /// Call before any job runs: a download in flight has one too.
    static func removeLeftovers(in stateDirectory: String) -> Int {
        guard let walk = FileManager.default.enumerator(atPath: stateDirectory) else { return 0 }
        var removed = 0
        while let relative = walk.nextObject() as? String {
            let name = (relative as NSString).lastPathComponent
            guard name.hasPrefix(temporaryPrefix) else { continue }
            if (try? FileManager.default.removeItem(atPath: stateDirectory + "/" + relative)) != nil { removed += 1 }
        }
        return removed
    }
    /// The temporary file the transfer writes (see ``HydraHTTP/HTTPRequest/saveToFile``).
    let descriptor: Int32
    /// The target's folder, open.
    private let folder: Int32
    private let name: String
    private let temporaryName: String
    private var open = true

    /// Opens a new temporary file next to `path`'s target under `stateDirectory`.
    /// Throws kind `invalid` naming the problem, after `field` (what named the
    /// path: `saveAs`, or the server's own `state.path` for its files); nothing
    /// is left open on a throw.
    init(_ path: SaveAsPath, stateDirectory: String, field: String = "saveAs") throws(JobError) {
        func failure(_ what: String, _ code: Int32 = errno) -> JobError {
            JobError(.invalid, "\(field): \(what): \(String(cString: strerror(code)))")
        }
        let current: Int32
        do throws(SaveAsPath.FolderFailure) {
            current = try path.openFolder(in: stateDirectory, creating: true)
        } catch {
            switch error.reason {
            case .stateFolder: throw failure("cannot open the state folder", error.code)
            case .create: throw failure("cannot create the folder \(error.shown)", error.code)
            case .notAFolder:
                throw JobError(.invalid, "\(field): \(error.shown) is a symbolic link or not a folder (never followed)")
            case .open: throw failure("cannot open the folder \(error.shown)", error.code)
            }
        }
        let name = path.components[path.components.count - 1]
        var info = stat()
        if fstatat(current, name, &info, AT_SYMLINK_NOFOLLOW) == 0 && info.st_mode & S_IFMT != S_IFREG {
            close(current)
            throw JobError(.invalid, "\(field): \(path.relative.debugDescription) exists and is not a regular file (a link, folder, socket or device)")
        }
        var random = SystemRandomNumberGenerator()
        let temporaryName = Self.temporaryPrefix + String(random.next() as UInt64, radix: 16)
        let descriptor = openat(current, temporaryName, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            let code = errno
            close(current)
            throw failure("cannot create a file in the folder of \(path.relative.debugDescription)", code)
        }
        self.descriptor = descriptor
        folder = current
        self.name = name
        self.temporaryName = temporaryName
    }

    deinit { discard() }

    /// Puts the downloaded file in place of the target. Throws kind `invalid` when it cannot.
    func commit() throws(JobError) {
        guard open else { return }
        open = false
        defer {
            close(descriptor)
            close(folder)
        }
        if renameat(folder, temporaryName, folder, name) != 0 {
            let code = errno
            unlinkat(folder, temporaryName, 0)
            throw JobError(.invalid, "saveAs: cannot put the file in place: \(String(cString: strerror(code)))")
        }
    }

    /// What the transfer wrote, when it is at most `limit` bytes (else, or
    /// once committed or discarded, nil): the body of an answer whose status
    /// the job does not expect, for its error (protocol §4).
    func contents(upTo limit: Int) -> [UInt8]? {
        var info = stat()
        guard open, fstat(descriptor, &info) == 0, info.st_size >= 0, Int(info.st_size) <= limit else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var read = 0
        while read < bytes.count {
            let n = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress! + read, $0.count - read, off_t(read)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return nil }
            read += n
        }
        return bytes
    }

    /// Removes the temporary file, leaving the target as it was. Idempotent.
    func discard() {
        guard open else { return }
        open = false
        unlinkat(folder, temporaryName, 0)
        close(descriptor)
        close(folder)
    }
}
