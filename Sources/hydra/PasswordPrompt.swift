import Foundation

/// Reads a password: from the terminal with echo off (the prompt on stderr),
/// else the first line of stdin (for scripts: `echo "$PW" | hydra auth login ...`).
enum PasswordPrompt {
    /// The terminal's settings while echo is off, for the signal handler to put back.
    /// Written before the handler is installed and read only by it (one prompt at a time).
    /// On the heap with room to spare: the C library writes its whole `struct termios`
    /// (60 bytes on glibc), more than the 57 a Swift global of the imported type has
    /// (AddressSanitizer caught the overflow).
    nonisolated(unsafe) private static let saved = settings()
    /// The settings with echo off (the same room to spare).
    nonisolated(unsafe) private static let quiet = settings()

    private static func settings() -> UnsafeMutablePointer<termios> {
        let size = max(MemoryLayout<termios>.stride, 128)
        return UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
            .initializeMemory(as: UInt8.self, repeating: 0, count: size)
            .withMemoryRebound(to: termios.self, capacity: 1) { $0 }
    }

    static func read(_ prompt: String) -> String {
        guard isatty(STDIN_FILENO) == 1 else { return readLine(strippingNewline: true) ?? "" }
        let haveTerminal = tcgetattr(STDIN_FILENO, saved) == 0
        var previous: [Int32: sighandler_t?] = [:]
        if haveTerminal {
            // Ctrl-C (or a kill) at the prompt must not leave the terminal without echo:
            // the settings are put back, then the signal does what it would have done.
            for number in [SIGINT, SIGTERM, SIGHUP, SIGQUIT] {
                previous[number] = signal(number) { number in
                    tcsetattr(STDIN_FILENO, TCSAFLUSH, PasswordPrompt.saved)
                    _ = Glibc.write(STDERR_FILENO, "\n", 1)
                    signal(number, SIG_DFL)
                    raise(number)
                }
            }
            UnsafeMutableRawPointer(quiet).copyMemory(from: saved, byteCount: max(MemoryLayout<termios>.stride, 128))
            quiet.pointee.c_lflag &= ~tcflag_t(ECHO)
            tcsetattr(STDIN_FILENO, TCSAFLUSH, quiet)
        }
        // Shown once echo is off: nothing typed after it appears.
        FileHandle.standardError.write(Data(prompt.utf8))
        let line = readLine(strippingNewline: true) ?? ""
        if haveTerminal {
            tcsetattr(STDIN_FILENO, TCSAFLUSH, saved)
            for (number, handler) in previous { signal(number, handler) }
            FileHandle.standardError.write(Data("\n".utf8))
        }
        return line
    }
}
