import Foundation
import HydraCore

/// Named job graphs from a folder: `{"type": "job", "name": "x"}` runs the
/// spec in `FOLDER/x.json`. Files are read at submit time, so edits apply to
/// the next submission. Errors name the file by its name in the folder, never
/// by its path (they reach clients: protocol §2). Thread-safe.
public struct FileJobLibrary: JobLibrary {
    public let folder: String

    public init(folder: String) { self.folder = folder }

    public func spec(named name: String, path: String) throws(ValidationError) -> JobSpec {
        guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || "-_.".contains($0) }),
              !name.hasPrefix(".") else {
            throw ValidationError(path: path, "invalid job name '\(name)'")
        }
        let file = folder + "/" + name + ".json"
        guard let data = FileManager.default.contents(atPath: file) else {
            throw ValidationError(path: path, "no job named '\(name)' in the jobs folder", notFound: true)
        }
        let json: JSONValue
        switch Result(catching: { () throws(JSONParseError) in try JSONParser.parse([UInt8](data), refusingRepeatedKeys: true) }) {
        case .success(let parsed): json = parsed
        // Named by its place in the jobs folder: errors never carry the server's paths.
        case .failure(let error): throw ValidationError(path: path, "jobs folder: " + error.located(in: name + ".json"))
        }
        do {
            return try JobSpec(json: json)
        } catch {
            throw ValidationError(path: path, "jobs folder: \(name).json: \(error)")
        }
    }

    /// The names of the jobs in the folder.
    public var names: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [])
            .filter { $0.hasSuffix(".json") }.map { String($0.dropLast(5)) }.sorted()
    }
}
