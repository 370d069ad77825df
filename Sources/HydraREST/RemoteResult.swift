import HydraCore
import HydraHTTP
import OrderedCollections

/// A remote job's successful result before it is built: the response's status,
/// raw header block and decoded body (JSON kept as its bytes where it can be:
/// ``JSONBody``), plus the call's figures. The worker's loop makes it; the
/// coordinator builds the `{status, headers, body, …}` object of protocol §4
/// from it (see ``DeferredResult``).
final class RemoteResult: DeferredResult {
    let status: Int
    let headers: HTTPHeaderBlock
    let body: JSONBody
    /// Where the body was saved (`saveAs`), and its size.
    let file: (path: String, bytes: Int)?
    let attempts: Int
    let elapsedMs: Double
    /// Where the body came from, after redirects (protocol §4 `url`).
    let url: String

    init(status: Int, headers: HTTPHeaderBlock, body: JSONBody, file: (path: String, bytes: Int)?, attempts: Int,
         elapsedMs: Double, url: String) {
        self.status = status
        self.headers = headers
        self.body = body
        self.file = file
        self.attempts = attempts
        self.elapsedMs = elapsedMs
        self.url = url
    }

    /// The members of a remote job's result, in order (protocol §4).
    static let keys = ["status", "headers", "body", "fromCache", "attempts", "elapsedMs", "url"]
    static let savedKeys = ["status", "headers", "body", "file", "bytes", "fromCache", "attempts", "elapsedMs", "url"]

    func build() -> JSONValue {
        var values: [JSONValue] = []
        values.reserveCapacity(8)
        values.append(.int(status))
        values.append(.object(Self.headerObject(headers)))
        values.append(body.value)
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

    /// Appends the JSON of ``build()`` without building it: the journal's copy of a
    /// remote job's result, encoded on the coordinator.
    func encode(into out: inout [UInt8]) {
        out.reserveRoom(headers.bytes.count + url.utf8.count + 160)
        out.append(contentsOf: #"{"status":"#.utf8)
        JSONWriter.writeInt(status, into: &out)
        out.append(contentsOf: #","headers":"#.utf8)
        if !writeHeaderBytes(into: &out) {
            out.append(UInt8(ascii: "{"))
            let fields = Self.headerFields(headers)
            for i in fields.names.indices {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSONWriter.writeString(fields.names[i], into: &out)
                out.append(UInt8(ascii: ":"))
                JSONWriter.writeString(fields.values[i], into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
        out.append(contentsOf: #","body":"#.utf8)
        body.encode(into: &out)
        if let file {
            out.append(contentsOf: #","file":"#.utf8)
            JSONWriter.writeString(file.path, into: &out)
            out.append(contentsOf: #","bytes":"#.utf8)
            JSONWriter.writeInt(file.bytes, into: &out)
        }
        out.append(contentsOf: #","fromCache":false,"attempts":"#.utf8)
        JSONWriter.writeInt(attempts, into: &out)
        out.append(contentsOf: #","elapsedMs":"#.utf8)
        JSONWriter.writeDouble(elapsedMs, into: &out)
        out.append(contentsOf: #","url":"#.utf8)
        JSONWriter.writeString(url, into: &out)
        out.append(UInt8(ascii: "}"))
    }

    /// Writes the headers object straight from the block's bytes, as the
    /// strings of ``headerObject(_:)`` would be written, when that is the same
    /// text: every byte ASCII and no field repeated (nearly every response).
    /// Returns false, having written nothing, otherwise.
    private func writeHeaderBytes(into out: inout [UInt8]) -> Bool {
        var members: [(name: Range<Int>, value: Range<Int>)] = []
        members.reserveCapacity(16)
        var plain = true
        let text: [UInt8]? = headers.bytes.withUnsafeBufferPointer { bytes in
            // The block read in place: a slice of the array per field (retained and
            // released each time) and a generic `zip` per comparison cost the
            // coordinator a tenth of its time per remote job over RPC.
            headers.forEachRange { nameRange, valueRange in
                guard plain else { return }
                let name = UnsafeBufferPointer(rebasing: bytes[nameRange])
                // A repeated field (in any case) has its values joined: the slow path's work.
                for earlier in members where Self.sameLowered(UnsafeBufferPointer(rebasing: bytes[earlier.name]), name) {
                    plain = false
                    return
                }
                members.append((nameRange, valueRange))
            }
            return plain ? JSONWriter.asciiObject(bytes, members: members, lowercaseNames: true) : nil
        }
        guard let text else { return false }
        out.append(contentsOf: text)
        return true
    }

    private static func sameLowered(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        for i in 0..<a.count where HTTPHeaderBlock.lowercase(a[i]) != HTTPHeaderBlock.lowercase(b[i]) { return false }
        return true
    }

    /// Every header field as a member: names lowercased, a repeated field's values joined.
    static func headerObject(_ headers: HTTPHeaderBlock) -> OrderedDictionary<String, JSONValue> {
        let fields = headerFields(headers)
        return OrderedDictionary(uncheckedUniqueKeys: fields.names, values: fields.values.map(JSONValue.string))
    }

    /// The header fields in order, names lowercased and unique (a repeated
    /// field's values joined with ", ", as HTTP allows; a repeat is rare).
    private static func headerFields(_ headers: HTTPHeaderBlock) -> (names: [String], values: [String]) {
        var names: [String] = []
        var values: [String] = []
        names.reserveCapacity(16)
        values.reserveCapacity(16)
        headers.forEach { name, value in
            if let i = names.firstIndex(of: name) {
                values[i] += ", " + value
            } else {
                names.append(name)
                values.append(value)
            }
        }
        return (names, values)
    }
}
