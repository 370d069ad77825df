/// A JSON text read from the wire: kept as its bytes when ``JSONWriter``
/// writes its value as those very bytes, else parsed.
///
/// Why: a remote job's response body is read on its worker's loop, the
/// engine's busiest thread, and most APIs answer compact JSON. Checking such a
/// body costs a fraction of building its value (no allocation per object,
/// array or long string), the coordinator that keeps the result then frees
/// one array instead of a tree, and the result's JSON (journal, events,
/// answers, a group's result) copies the bytes instead of writing the tree
/// again. The value is built only if someone reads it (a reference, a
/// condition, an embedding program): the same value the parser would have
/// given, because the text went through the same grammar and limits.
public struct JSONBody: Sendable {
    private enum Storage {
        /// A value built by the parser (the text was not as ``JSONWriter`` writes it).
        case value(JSONValue)
        /// A text that parses, in `bytes[range]`, written by ``JSONWriter`` exactly so.
        case text([UInt8], Range<Int>)
    }

    private let storage: Storage

    /// A value already built (a dogma's, or `null` for a body saved to a file).
    public init(_ value: JSONValue) {
        storage = .value(value)
    }

    /// Reads `bytes` (an empty text is `null`): kept as they are when they
    /// can be, else parsed. Throws what ``JSONParser/parse(_:refusingRepeatedKeys:)`` throws.
    public init(reading bytes: [UInt8]) throws(JSONParseError) {
        if bytes.isEmpty {
            storage = .value(.null)
            return
        }
        let range = try bytes.withUnsafeBufferPointer { buffer in
            Result { () throws(JSONParseError) in try JSONParser.writtenRange(buffer) }
        }.get()
        if let range {
            storage = .text(bytes, range)
        } else {
            storage = .value(try JSONParser.parse(bytes))
        }
    }

    /// The kept text (the value's JSON as ``JSONWriter`` writes it), or nil for a parsed value.
    public var keptText: ArraySlice<UInt8>? {
        guard case .text(let bytes, let range) = storage else { return nil }
        return bytes[range]
    }

    /// The value (built now from a kept text: pure, any thread).
    public var value: JSONValue {
        switch storage {
        case .value(let value): return value
        case .text(let bytes, let range):
            do {
                return try bytes.withUnsafeBufferPointer { buffer in
                    Result { () throws(JSONParseError) in try JSONParser.parse(UnsafeBufferPointer(rebasing: buffer[range])) }
                }.get()
            } catch {
                // `writtenRange` read the same bytes through the same grammar.
                assertionFailure("a kept JSON text no longer parses: \(error)")
                return .null
            }
        }
    }

    /// The value's compact JSON length, or nil past `limit` (see ``JSONValue/encodedSize(limit:)``).
    public func encodedSize(limit: Int) -> Int? {
        switch storage {
        case .value(let value): return value.encodedSize(limit: limit)
        case .text(_, let range): return range.count <= limit ? range.count : nil
        }
    }

    /// Appends the value's JSON text, as ``JSONWriter`` writes it.
    public func encode(into out: inout [UInt8]) {
        switch storage {
        case .value(let value): JSONWriter.write(value, into: &out)
        case .text(let bytes, let range): out.append(contentsOf: bytes[range])
        }
    }
}
