import Foundation

extension SaveAsPath {
    /// Why ``openFolder(in:creating:)`` stopped; the caller words the message.
    struct FolderFailure: Error {
        enum Reason {
            /// The state folder itself could not be opened.
            case stateFolder
            /// A component is a symbolic link or not a folder (`ELOOP`, `ENOTDIR`).
            case notAFolder
            /// A missing folder could not be created.
            case create
            /// A component could not be opened for another reason.
            case open
        }
        let reason: Reason
        /// The components walked so far, quoted (`"a/b"`), naming where it stopped.
        let shown: String
        /// The `errno` of the failed call.
        let code: Int32
    }

    /// Opens the folder that holds this path's last component under
    /// `stateDirectory`, one component at a time with `openat(O_NOFOLLOW)`:
    /// a symbolic link anywhere on the way (planted before the job or after
    /// its submit) is refused, never followed out of the state folder. With
    /// `creating`, missing folders are made with `mkdirat` (and a missing state
    /// folder, which an embedded engine may not have yet). The state folder
    /// itself is the operator's choice and is taken as it is. Returns the open
    /// folder, which the caller closes; nothing is left open on a throw.
    /// Blocking file I/O: the caller's thread.
    func openFolder(in stateDirectory: String, creating: Bool) throws(FolderFailure) -> Int32 {
        var current = Glibc.open(stateDirectory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if current < 0 && errno == ENOENT && creating {
            try? FileManager.default.createDirectory(atPath: stateDirectory, withIntermediateDirectories: true)
            current = Glibc.open(stateDirectory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        }
        guard current >= 0 else { throw FolderFailure(reason: .stateFolder, shown: "", code: errno) }
        for (i, component) in components.dropLast().enumerated() {
            let shown = components[...i].joined(separator: "/").debugDescription
            var next = openat(current, component, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if next < 0 && errno == ENOENT && creating {
                if mkdirat(current, component, 0o755) != 0 && errno != EEXIST {
                    let code = errno
                    Glibc.close(current)
                    throw FolderFailure(reason: .create, shown: shown, code: code)
                }
                next = openat(current, component, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            }
            let code = errno
            Glibc.close(current)
            guard next >= 0 else {
                throw FolderFailure(reason: code == ELOOP || code == ENOTDIR ? .notAFolder : .open, shown: shown, code: code)
            }
            current = next
        }
        return current
    }
}
