import Foundation
import Glibc
import Hydra

/// JSON the user typed or wrote in a file (job specs, `--input`, values):
/// a syntax error names the source, line and column (`spec.json:3:14: not JSON:
/// expected ',' or '}'`), so the spot can be found without counting bytes.
enum JSONInput {
    /// The most a spec or value read from a file or stdin may hold (a file
    /// of gigabytes was read whole before anything was said).
    static let maxBytes = 256 << 20

    /// Reads a JSON document from a file (a pipe, a fifo and a process
    /// substitution too), or from standard input for `-`. A file that cannot
    /// be read is an error that says why (missing, a folder, stdin closed):
    /// Foundation's read trapped on stdin that was a folder or closed.
    static func read(path: String) throws(UsageError) -> JSONValue {
        let source = path == "-" ? "stdin" : path
        func failure(_ reason: String) -> UsageError { UsageError("\(source): cannot read: \(reason)") }
        let fd = path == "-" ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw failure(String(cString: strerror(errno))) }
        defer { if fd != STDIN_FILENO { close(fd) } }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw failure(String(cString: strerror(errno))) }
        if info.st_mode & S_IFMT == S_IFDIR { throw failure("it is a folder") }
        // A closed stdin's number is soon another descriptor of the process's own (an epoll's, no file type).
        if info.st_mode & S_IFMT == 0 { throw failure(path == "-" ? "standard input is closed" : "not a file") }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw failure(String(cString: strerror(errno)))
            }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
            if bytes.count > maxBytes { throw failure("more than \(maxBytes >> 20) MiB: not a spec or value to read whole") }
        }
        return try parse(bytes, source: source)
    }

    /// Parses JSON text given on the command line; `source` names it in errors (`--input`).
    static func parse(_ text: String, source: String) throws(UsageError) -> JSONValue {
        try parse(Array(text.utf8), source: source)
    }

    private static func parse(_ bytes: [UInt8], source: String) throws(UsageError) -> JSONValue {
        switch Result(catching: { () throws(JSONParseError) in try JSONParser.parse(bytes, refusingRepeatedKeys: true) }) {
        case .success(let value):
            // As the server refuses them: such a number would turn into null.
            if let path = value.firstNonFiniteNumber() {
                throw UsageError("\(source): \(path.isEmpty ? "the value" : path): number out of range (a JSON number must fit a 64-bit float)")
            }
            return value
        case .failure(let error): throw UsageError(error.located(in: source))
        }
    }
}
