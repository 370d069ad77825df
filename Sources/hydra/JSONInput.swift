import Foundation
import Hydra

/// JSON the user typed or wrote in a file (job specs, `--input`, values):
/// a syntax error names the source, line and column (`spec.json:3:14: not JSON:
/// expected ',' or '}'`), so the spot can be found without counting bytes.
enum JSONInput {
    /// Reads a JSON document from a file, or from standard input for `-`.
    static func read(path: String) throws(UsageError) -> JSONValue {
        let data: Data
        if path == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            guard let contents = FileManager.default.contents(atPath: path) else {
                throw UsageError("\(path): cannot read the file")
            }
            data = contents
        }
        return try parse([UInt8](data), source: path == "-" ? "stdin" : path)
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
