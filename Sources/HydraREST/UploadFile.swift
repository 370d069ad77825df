import Foundation
import HydraCore

/// A file under the state folder opened for an upload (`bodyFile`, a
/// multipart `file` part, rest.md §2): the path is checked by its letters as
/// `saveAs` is (relative, no `..`, never a file the server owns) and opened
/// one component at a time with `openat(O_NOFOLLOW)` (the walk `saveAs` uses,
/// ``SaveAsPath/openFolder(in:creating:)``), so a symbolic link
/// anywhere on the way is refused and nothing outside the state folder, nor
/// the server's database, can be sent. It must be a regular file.
///
/// Ownership: the call that opened it closes it (``close()``) once its
/// transfer is over; the transfer reads it with `pread` meanwhile.
final class UploadFile {
    let descriptor: Int32
    let length: Int64
    /// The last component, the default `filename` of a multipart part.
    let name: String
    private var isOpen = true

    /// Opens `text` under `stateDirectory`. Throws the reason without a field name (the caller adds it).
    init(_ text: String, stateDirectory: String, reserved: Set<String>) throws(SaveAsPath.Refusal) {
        let path = try SaveAsPath(text, reserved: reserved)
        func refuse(_ what: String, _ code: Int32 = errno) -> SaveAsPath.Refusal {
            SaveAsPath.Refusal(message: "\(what): \(String(cString: strerror(code)))")
        }
        let current: Int32
        do throws(SaveAsPath.FolderFailure) {
            current = try path.openFolder(in: stateDirectory, creating: false)
        } catch {
            switch error.reason {
            case .stateFolder: throw refuse("cannot open the state folder", error.code)
            case .notAFolder:
                throw SaveAsPath.Refusal(message: "\(error.shown) is not a folder inside the state folder (links are never followed)")
            case .open, .create: throw refuse("cannot open \(error.shown)", error.code)
            }
        }
        let file = openat(current, path.components.last!, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        let code = errno
        Glibc.close(current)
        guard file >= 0 else {
            if code == ENOENT { throw SaveAsPath.Refusal(message: "no file \(path.relative.debugDescription) in the state folder") }
            if code == ELOOP { throw SaveAsPath.Refusal(message: "\(path.relative.debugDescription) is a symbolic link (never followed)") }
            throw refuse("cannot open \(path.relative.debugDescription)", code)
        }
        var info = stat()
        guard fstat(file, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            Glibc.close(file)
            throw SaveAsPath.Refusal(message: "\(path.relative.debugDescription) is not a regular file")
        }
        descriptor = file
        length = Int64(info.st_size)
        name = path.components.last!
    }

    func close() {
        guard isOpen else { return }
        isOpen = false
        Glibc.close(descriptor)
    }

    deinit { close() }
}
