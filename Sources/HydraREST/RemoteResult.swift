import HydraCore
import HydraHTTP
import OrderedCollections

/// A remote job's successful result before it is built: the response's status,
/// raw header block and decoded body, plus the call's figures. The worker's
/// loop makes it; the coordinator builds the `{status, headers, body, …}`
/// object of protocol §4 from it (see ``DeferredResult``).
struct RemoteResult: DeferredResult {
    let status: Int
    let headers: HTTPHeaderBlock
    let body: JSONValue
    /// Where the body was saved (`saveAs`), and its size.
    let file: (path: String, bytes: Int)?
    let attempts: Int
    let elapsedMs: Double
    /// Where the body came from, after redirects (protocol §4 `url`).
    let url: String

    /// The members of a remote job's result, in order (protocol §4).
    static let keys = ["status", "headers", "body", "fromCache", "attempts", "elapsedMs", "url"]
    static let savedKeys = ["status", "headers", "body", "file", "bytes", "fromCache", "attempts", "elapsedMs", "url"]

    func build() -> JSONValue {
        var values: [JSONValue] = []
        values.reserveCapacity(8)
        values.append(.int(status))
        values.append(.object(Self.headerObject(headers)))
        values.append(body)
        if let file {
            values.append(.string(file.path))
            values.append(.int(file.bytes))
        }
        values.append(false)
        values.append(.int(attempts))
        values.append(.double(elapsedMs))
        values.append(.string(url))
        return .object(OrderedDictionary(uncheckedUniqueKeys: file == nil ? Self.keys : Self.savedKeys, values: values))
    }

    /// Bounded by the body: the header block's raw bytes and 200 bytes for the
    /// figures stand for the rest (their JSON is about as long), so a plain
    /// response is checked without building its headers object.
    func encodedSize(limit: Int) -> Int? {
        let rest = headers.bytes.count + (file.map { $0.path.utf8.count + 40 } ?? 0) + url.utf8.count + 200
        guard rest <= limit, let body = body.encodedSize(limit: limit - rest) else { return nil }
        return body + rest
    }

    /// Every header field as a member: names lowercased, a repeated field's values joined.
    static func headerObject(_ headers: HTTPHeaderBlock) -> OrderedDictionary<String, JSONValue> {
        // Keys and values are collected first and handed over as unique keys:
        // cheaper than inserting field by field. A repeated field is rare; its
        // values are joined, as HTTP allows.
        var names: [String] = []
        var values: [JSONValue] = []
        names.reserveCapacity(16)
        values.reserveCapacity(16)
        headers.forEach { name, value in
            if let i = names.firstIndex(of: name), case .string(let existing) = values[i] {
                values[i] = .string(existing + ", " + value)
            } else {
                names.append(name)
                values.append(.string(value))
            }
        }
        return OrderedDictionary(uncheckedUniqueKeys: names, values: values)
    }
}
