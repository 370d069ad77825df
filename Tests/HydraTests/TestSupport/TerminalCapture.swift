import Foundation
import HydraLoop

/// A pseudo-terminal for a child process's stderr, so the real binary draws
/// what it draws for a person (progress lines) while the test reads it.
/// The master side is read on a thread of its own into `text`.
final class TerminalCapture: Sendable {
    private let master: Int32
    /// The terminal side, to hand to the child; close it in the parent once the child runs.
    let terminal: FileHandle
    private let buffer = Locked(Data())
    private let finished = Locked(false)

    init() throws {
        // posix_openpt and friends are not visible from Swift on glibc: the same by
        // hand (Linux): open the multiplexer, unlock the new terminal, ask its number.
        master = open("/dev/ptmx", O_RDWR | O_NOCTTY)
        var unlock: Int32 = 0
        var number: UInt32 = 0
        guard master >= 0, ioctl(master, 0x4004_5431 /* TIOCSPTLCK */, &unlock) == 0,
              ioctl(master, 0x8004_5430 /* TIOCGPTN */, &number) == 0 else {
            throw CocoaError(.fileNoSuchFile)
        }
        let slave = open("/dev/pts/\(number)", O_RDWR | O_NOCTTY)
        guard slave >= 0 else { throw CocoaError(.fileNoSuchFile) }
        terminal = FileHandle(fileDescriptor: slave, closeOnDealloc: true)
        let thread = Thread { [self] in
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = read(master, &chunk, chunk.count)
                guard n > 0 else { break }  // EIO once every copy of the terminal side is closed
                buffer.withLock { $0.append(contentsOf: chunk[0..<n]) }
            }
            finished.withLock { $0 = true }
        }
        thread.start()
    }

    deinit { close(master) }

    /// What the child wrote so far (the terminal turns "\n" into "\r\n").
    var text: String { buffer.withLock { String(decoding: $0, as: UTF8.self) } }

    /// Waits until `condition(text)` holds or `timeout` passes; returns whether it held.
    @discardableResult
    func wait(timeout: Duration = .seconds(10), until condition: (String) -> Bool) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !condition(text) {
            guard ContinuousClock.now < deadline else { return false }
            Thread.sleep(forTimeInterval: 0.01)
        }
        return true
    }

    /// Waits for the child's side to close (the child exited), so `text` is complete.
    func waitForEnd(timeout: Duration = .seconds(10)) {
        let deadline = ContinuousClock.now + timeout
        while !finished.withLock({ $0 }) && ContinuousClock.now < deadline { Thread.sleep(forTimeInterval: 0.01) }
    }
}
