import Foundation
import HydraCore

/// A remote job's `saveAs`, checked against protocol §4: a relative path
/// inside the state folder that never reaches a file the server owns and
/// never goes through a symbolic link.
///
/// The server owns, at the top of the state folder: the database and its
/// journals (every name starting with `hydra.db`: `-wal`, `-shm`,
/// `-journal`), the `clean-shutdown` marker, the resource repository
/// (`resources/`, or `resources.path`) and the Unix socket when it lives there. A path naming one
/// of them (in any letter case, for case-insensitive file systems) is refused
/// by its text, at submit when the path is literal and when the job runs when
/// it came from a reference. What is on disk is checked twice: at submit
/// (``checkExisting(in:)``) for a clear `-32602`, and again as the file is
/// opened (``DownloadFile``), since the folder may change in between. Value
/// type; thread-safe.
struct SaveAsPath: Sendable, Equatable {
    /// The components, without empty and `.` ones: never empty, never `..`.
    let components: [String]

    /// The path as given, normalized: components joined with `/`.
    var relative: String { components.joined(separator: "/") }

    /// Names at the top of the state folder the server owns, lowercased, beside
    /// its files (``Configuration/State/isOwned(_:)``): the resource repository.
    static let reservedNames: Set<String> = ["resources"]

    /// Why a path was refused, without the field's name (the caller adds it:
    /// a key path at submit, `saveAs:` in a step's error).
    struct Refusal: Error {
        let message: String
    }

    /// Checks `text` by its letters alone.
    /// - Parameter reserved: more relative paths the server owns, with
    ///   everything under them (the Unix socket's path inside the state
    ///   folder, the resource repository's folder), lowercased.
    init(_ text: String, reserved: Set<String> = []) throws(Refusal) {
        func refuse(_ why: String) -> Refusal { Refusal(message: why) }
        guard !text.utf8.contains(0) else { throw refuse("must not contain NUL") }
        guard !text.hasPrefix("/") else { throw refuse("must be a path relative to the state folder, not \(text.debugDescription)") }
        guard !text.hasSuffix("/") else { throw refuse("names a folder, not a file: \(text.debugDescription)") }
        let parts = text.split(separator: "/", omittingEmptySubsequences: true).filter { $0 != "." }.map(String.init)
        guard !parts.isEmpty else { throw refuse("names no file") }
        guard !parts.contains("..") else { throw refuse("must stay inside the state folder (no '..'): \(text.debugDescription)") }
        let top = parts[0].lowercased()
        let whole = parts.joined(separator: "/").lowercased()
        if Configuration.State.isOwned(top) || SaveAsPath.reservedNames.contains(top)
            || reserved.contains(where: { whole == $0 || whole.hasPrefix($0 + "/") }) {
            throw refuse("\(text.debugDescription) is a file the server owns (its database, journal, markers, resources or socket)")
        }
        // The name of a download's temporary file: the next start removes every one it finds.
        if parts[parts.count - 1].lowercased().hasPrefix(DownloadFile.temporaryPrefix) {
            throw refuse("\(text.debugDescription) starts with \(DownloadFile.temporaryPrefix), the server's temporary download files (removed at every start)")
        }
        components = parts
    }

    /// A path of a file the server owns (the resource repository's), built
    /// from checked components (each non-empty, without `/`, NUL or `..`).
    init?(owned components: [String]) {
        guard !components.isEmpty, components.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".."
            && !$0.contains("/") && !$0.utf8.contains(0) }) else { return nil }
        self.components = components
    }

    /// The Unix socket's path relative to `stateDirectory` (lowercased), when it lies inside it.
    static func reservedSocket(_ socket: String?, stateDirectory: String) -> Set<String> {
        guard let socket else { return [] }
        let folder = absolute(stateDirectory)
        let path = absolute(socket)
        guard path.hasPrefix(folder + "/") else { return [] }
        return [String(path.dropFirst(folder.count + 1)).lowercased()]
    }

    /// `path` made absolute against the current directory, with `.` and `..` resolved by their letters.
    static func absolute(_ path: String) -> String {
        let base = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        var out: [Substring] = []
        for part in base.split(separator: "/") where part != "." {
            if part == ".." { _ = out.popLast() } else { out.append(part) }
        }
        return "/" + out.joined(separator: "/")
    }

    /// Checks what exists now under `stateDirectory`: no component is a
    /// symbolic link, every folder is a folder, and the file, if there, is a
    /// regular file (not the socket, a folder or a device). A missing part is
    /// fine: it is created when the job runs.
    func checkExisting(in stateDirectory: String) throws(Refusal) {
        var path = stateDirectory
        for (i, name) in components.enumerated() {
            path += "/" + name
            var info = stat()
            guard lstat(path, &info) == 0 else { return }
            let type = info.st_mode & S_IFMT
            let shown = components[...i].joined(separator: "/")
            if type == S_IFLNK {
                throw Refusal(message: "\(shown.debugDescription) is a symbolic link (saveAs never follows one)")
            }
            if i < components.count - 1 ? type != S_IFDIR : type != S_IFREG {
                throw Refusal(message: "\(shown.debugDescription) is not a \(i < components.count - 1 ? "folder" : "regular file")")
            }
        }
    }
}
