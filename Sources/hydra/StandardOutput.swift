import Foundation

/// Writes to standard output, ending the process cleanly when it cannot: a
/// reader that went away (`hydra run … | head -1`) ends it as SIGPIPE would
/// (status 141, nothing printed: `hydra run` ignores SIGPIPE to cancel its job
/// on its own terms), a full disk or a closed descriptor with one line on
/// stderr and status 1. (Foundation's `FileHandle.write` stops the process
/// with a crash report on any write error.)
enum StandardOutput {
    static func write(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(STDOUT_FILENO, $0.baseAddress! + offset, $0.count - offset) }
            if n > 0 {
                offset += n
                continue
            }
            if n < 0 && errno == EINTR { continue }
            let error = n < 0 ? errno : EIO
            // `_exit`, not `exit`: this may run on any thread while the engine's
            // loops run, and tearing the process down under them can crash it.
            if error == EPIPE { _exit(141) }
            FileHandle.standardError.write(Data("hydra: cannot write to standard output: \(String(cString: strerror(error)))\n".utf8))
            _exit(1)
        }
    }
}

/// Writes a line to stdout at once.
func writeLine(_ line: String) {
    StandardOutput.write(Array((line + "\n").utf8))
}
