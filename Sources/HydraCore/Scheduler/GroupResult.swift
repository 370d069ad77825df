import HydraLoop

/// A succeeded group's result, `{"results": […], "errors": […], "stopped": …}`,
/// kept unbuilt: a concurrent group of 50,000 remote steps then never builds
/// 50,000 result objects on the coordinator only to encode them once at the
/// end (`hydra run`, the journal), and holds the smaller unbuilt parts
/// meanwhile. Immutable, so any thread may build or encode it.
final class GroupResult: DeferredResult {
    let results: [StepResult?]
    let errors: [JobError?]
    let stopped: Bool
    /// The encoded length, or an upper bound of it when some results are
    /// unbuilt (their sizes are bounds: see ``DeferredResult/encodedSize(limit:)``).
    let size: Int

    init(results: [StepResult?], errors: [JobError?], stopped: Bool, size: Int) {
        self.results = results
        self.errors = errors
        self.stopped = stopped
        self.size = size
    }

    func build() -> JSONValue {
        ["results": .array(results.map { $0?.value ?? .null }),
         "errors": .array(errors.map { $0?.json ?? .null }),
         "stopped": .bool(stopped)]
    }

    func encodedSize(limit: Int) -> Int? { size <= limit ? size : nil }

    func encode(into out: inout [UInt8]) {
        out.reserveRoom(size)
        out.append(contentsOf: #"{"results":["#.utf8)
        let parts = size >= Self.bytesPerPart * 2 ? ParallelWork.parts(limit: min(8, size / Self.bytesPerPart)) : 1
        if parts > 1 {
            // A large group's results are written in parts at once: on two cores,
            // `hydra run` of the 50,000-step graph (20 MB of results) went from its
            // last response to its output in ~95 ms instead of ~125 ms.
            let count = results.count
            for part in ParallelWork.map(parts, { [self] part in
                var text: [UInt8] = []
                text.reserveCapacity(size / parts + 4096)
                writeResults(count * part / parts..<count * (part + 1) / parts, into: &text)
                return text
            }) {
                out.append(contentsOf: part)
            }
        } else {
            writeResults(results.indices, into: &out)
        }
        out.append(contentsOf: #"],"errors":["#.utf8)
        for (i, error) in errors.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            if let error { JSONWriter.write(error.json, into: &out) } else { out.append(contentsOf: "null".utf8) }
        }
        out.append(contentsOf: #"],"stopped":"#.utf8)
        out.append(contentsOf: (stopped ? "true" : "false").utf8)
        out.append(UInt8(ascii: "}"))
    }

    /// The encoded size above which ``encode(into:)`` writes the results in parts
    /// at once (per part: below it, starting a thread costs more than it saves).
    static let bytesPerPart = 1 << 20

    /// Writes `range` of the results, each preceded by a comma but the first of the group's.
    private func writeResults(_ range: Range<Int>, into out: inout [UInt8]) {
        for i in range {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            if let result = results[i] { result.encode(into: &out) } else { out.append(contentsOf: "null".utf8) }
        }
    }
}
