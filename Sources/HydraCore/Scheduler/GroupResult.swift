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
        out.reserveCapacity(out.count + size)
        out.append(contentsOf: #"{"results":["#.utf8)
        for (i, result) in results.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            if let result { result.encode(into: &out) } else { out.append(contentsOf: "null".utf8) }
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
}
