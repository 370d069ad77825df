import OrderedCollections

/// Why a text is not JSON, with where reading stopped: the byte offset (for
/// programs) and the line and column (for people editing the file).
public struct JSONParseError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var offset: Int
    /// 1-based line of `offset` (lines end at LF).
    public var line: Int
    /// 1-based column of `offset` in characters (Unicode scalars), not bytes.
    public var column: Int

    public init(message: String, offset: Int, line: Int = 1, column: Int = 1) {
        self.message = message
        self.offset = offset
        self.line = line
        self.column = column
    }

    public var description: String { "\(message) at byte \(offset)" }

    /// `SOURCE:LINE:COLUMN: not JSON: MESSAGE`, the form editors and compilers
    /// use, so a person can jump to the spot (`spec.json:3:14: not JSON: expected ',' or '}'`).
    public func located(in source: String) -> String { "\(source):\(line):\(column): not JSON: \(message)" }
}

/// A strict RFC 8259 JSON reader producing ``JSONValue``.
/// Integers that fit `Int` stay exact; other numbers become `Double`.
public enum JSONParser {
    /// Nesting deeper than this is refused, so hostile input cannot exhaust the stack.
    public static let maxDepth = 512

    /// The nesting of what the engine itself wrote and reads back (the state
    /// store, a client reading its server): results nest deeper than any one
    /// request (groups wrap their steps' results, `${prev}` chains wrap theirs),
    /// up to ``maxResultDepth``, and stored records wrap those in a few levels more.
    public static let maxStoredDepth = 4 * maxDepth

    /// The deepest result a step may have (deeper fails it, kind `tooLarge`):
    /// below ``maxStoredDepth`` by the levels records and answers wrap around it.
    public static let maxResultDepth = maxStoredDepth - 32

    public static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        var text = text
        return try text.withUTF8 { buffer in Result { () throws(JSONParseError) in try parse(buffer) } }.get()
    }

    /// `refusingRepeatedKeys`: what a person wrote (a configuration, a job
    /// file), where a key given twice is a mistake to name, not to resolve.
    public static func parse(_ bytes: [UInt8], refusingRepeatedKeys: Bool = false) throws(JSONParseError) -> JSONValue {
        try bytes.withUnsafeBufferPointer { buffer in
            Result { () throws(JSONParseError) in try parse(buffer, refusingRepeatedKeys: refusingRepeatedKeys) }
        }.get()
    }

    /// Parses a slice in place (a line of a larger read buffer), without copying it.
    public static func parse(_ bytes: ArraySlice<UInt8>) throws(JSONParseError) -> JSONValue {
        try bytes.withUnsafeBufferPointer { buffer in Result { () throws(JSONParseError) in try parse(buffer) } }.get()
    }

    /// Parses `buffer`, refusing nesting deeper than `maxDepth` (default ``maxDepth``;
    /// ``maxStoredDepth`` for what the engine wrote itself). Of a key repeated
    /// in one object the last value counts (RFC 8259 leaves it open; JSON-RPC
    /// peers and HTTP origins may send them), unless `refusingRepeatedKeys`.
    public static func parse(_ buffer: UnsafeBufferPointer<UInt8>, maxDepth: Int = JSONParser.maxDepth,
                             refusingRepeatedKeys: Bool = false) throws(JSONParseError) -> JSONValue {
        var reader = Reader(bytes: buffer, maxDepth: maxDepth, refusesRepeatedKeys: refusingRepeatedKeys)
        // RFC 8259 §8.1: a parser may ignore a byte order mark; editors still write one.
        if buffer.count >= 3 && buffer[0] == 0xEF && buffer[1] == 0xBB && buffer[2] == 0xBF { reader.index = 3 }
        reader.skipWhitespace()
        let value = try reader.readValue(depth: 0)
        reader.skipWhitespace()
        guard reader.atEnd else { throw reader.error("unexpected text after the JSON value") }
        return value
    }

    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        let maxDepth: Int
        let refusesRepeatedKeys: Bool
        var index = 0

        var atEnd: Bool { index >= bytes.count }

        /// The error at the current index. Line and column are counted here, on
        /// the error path only, so parsing valid JSON costs nothing extra.
        func error(_ message: String) -> JSONParseError {
            let end = min(index, bytes.count)
            var line = 1
            var lineStart = 0
            for i in 0..<end where bytes[i] == 0x0A {
                line += 1
                lineStart = i + 1
            }
            var column = 1
            for i in lineStart..<end where bytes[i] & 0xC0 != 0x80 { column += 1 }
            return JSONParseError(message: message, offset: index, line: line, column: column)
        }

        mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x0A, 0x0D, 0x09: index += 1
                default: return
                }
            }
        }

        mutating func readValue(depth: Int) throws(JSONParseError) -> JSONValue {
            guard index < bytes.count else { throw error("unexpected end of input") }
            switch bytes[index] {
            case UInt8(ascii: "{"): return try readObject(depth: depth + 1)
            case UInt8(ascii: "["): return try readArray(depth: depth + 1)
            case UInt8(ascii: "\""): return .string(try readString())
            case UInt8(ascii: "t"): try expectWord("true"); return .bool(true)
            case UInt8(ascii: "f"): try expectWord("false"); return .bool(false)
            case UInt8(ascii: "n"): try expectWord("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try readNumber()
            default: throw error("unexpected \(JSONParser.describe(byte: bytes[index]))")
            }
        }

        mutating func expectWord(_ word: StaticString) throws(JSONParseError) {
            let count = word.utf8CodeUnitCount
            guard index + count <= bytes.count else { throw error("unexpected end of input") }
            let start = word.utf8Start
            for i in 0..<count where bytes[index + i] != start[i] {
                throw error("invalid literal")
            }
            index += count
        }

        mutating func readObject(depth: Int) throws(JSONParseError) -> JSONValue {
            guard depth <= maxDepth else { throw error("nesting too deep") }
            index += 1
            skipWhitespace()
            if index < bytes.count && bytes[index] == UInt8(ascii: "}") { index += 1; return .object([:]) }
            // Keys and values gathered in two plain arrays, the dictionary made
            // from them at the end: an ordered dictionary reserved up front cost
            // ~1.1k instructions of bookkeeping per object (a response's body is
            // parsed on the worker's loop). A repeated key keeps its first place
            // and takes the last value, as `updateValue` does.
            var keys: [String] = []
            var values: [JSONValue] = []
            keys.reserveCapacity(4)
            values.reserveCapacity(4)
            // Past a few keys, where each one is, to find a repeated key without a scan.
            var positions: [String: Int]?
            while true {
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a string key") }
                let keyStart = index
                let key = try readString()
                skipWhitespace()
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
                index += 1
                skipWhitespace()
                let value = try readValue(depth: depth)
                let earlier = positions.map { $0[key] } ?? keys.firstIndex(of: key)
                if let earlier {
                    if refusesRepeatedKeys {
                        index = keyStart
                        throw error("the key \"\(ValidationError.clip(key))\" is repeated in this object")
                    }
                    values[earlier] = value
                } else {
                    keys.append(key)
                    values.append(value)
                    if positions != nil {
                        positions![key] = keys.count - 1
                    } else if keys.count == 16 {
                        positions = Dictionary(uniqueKeysWithValues: zip(keys, keys.indices))
                    }
                }
                skipWhitespace()
                guard index < bytes.count else { throw error("unexpected end of input") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "}") {
                    index += 1
                    return .object(OrderedDictionary(uncheckedUniqueKeys: keys, values: values))
                }
                throw error("expected ',' or '}'")
            }
        }

        mutating func readArray(depth: Int) throws(JSONParseError) -> JSONValue {
            guard depth <= maxDepth else { throw error("nesting too deep") }
            index += 1
            skipWhitespace()
            if index < bytes.count && bytes[index] == UInt8(ascii: "]") { index += 1; return .array([]) }
            var items: [JSONValue] = []
            items.reserveCapacity(4)
            while true {
                skipWhitespace()
                items.append(try readValue(depth: depth))
                skipWhitespace()
                guard index < bytes.count else { throw error("unexpected end of input") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "]") { index += 1; return .array(items) }
                throw error("expected ',' or ']'")
            }
        }

        mutating func readString() throws(JSONParseError) -> String {
            index += 1  // opening quote
            let start = index
            // Fast path: no escapes.
            var ascii = true
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    let text = UnsafeBufferPointer(rebasing: bytes[start..<index])
                    index += 1
                    // ASCII (keys, most values) needs no validation: copied as is,
                    // without the generic validating initializer's cost.
                    if ascii { return String(unsafeUninitializedCapacity: text.count) { _ = $0.initialize(from: text); return text.count } }
                    // Strict: text that is not UTF-8 is refused, not repaired (RFC 8259 §8.1).
                    guard let s = UTF8Text.string(validating: text) else {
                        index -= 1
                        throw error("invalid UTF-8 in string")
                    }
                    return s
                }
                if byte == UInt8(ascii: "\\") { break }
                if byte < 0x20 { throw error("control character in string") }
                if byte >= 0x80 { ascii = false }
                index += 1
            }
            var scalars = [UInt8](UnsafeBufferPointer(rebasing: bytes[start..<index]))
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    guard let s = UTF8Text.string(validating: scalars) else { throw error("invalid UTF-8 in string") }
                    index += 1
                    return s
                }
                if byte < 0x20 { throw error("control character in string") }
                if byte != UInt8(ascii: "\\") {
                    scalars.append(byte)
                    index += 1
                    continue
                }
                index += 1
                guard index < bytes.count else { break }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): scalars.append(0x22)
                case UInt8(ascii: "\\"): scalars.append(0x5C)
                case UInt8(ascii: "/"): scalars.append(0x2F)
                case UInt8(ascii: "b"): scalars.append(0x08)
                case UInt8(ascii: "f"): scalars.append(0x0C)
                case UInt8(ascii: "n"): scalars.append(0x0A)
                case UInt8(ascii: "r"): scalars.append(0x0D)
                case UInt8(ascii: "t"): scalars.append(0x09)
                case UInt8(ascii: "u"):
                    var code = try readHex4()
                    if (0xD800...0xDBFF).contains(code) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                              bytes[index + 1] == UInt8(ascii: "u") else { throw error("unpaired surrogate") }
                        index += 2
                        let low = try readHex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw error("unpaired surrogate") }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(code) {
                        throw error("unpaired surrogate")
                    }
                    scalars.append(contentsOf: String(Character(Unicode.Scalar(code)!)).utf8)
                default:
                    throw error("invalid escape")
                }
            }
            throw error("unterminated string")
        }

        mutating func readHex4() throws(JSONParseError) -> UInt32 {
            guard index + 4 <= bytes.count else { throw error("invalid \\u escape") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let b = bytes[index]
                let digit: UInt32
                switch b {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(b - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(b - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(b - UInt8(ascii: "A") + 10)
                default: throw error("invalid \\u escape")
                }
                value = value << 4 | digit
                index += 1
            }
            return value
        }

        mutating func readNumber() throws(JSONParseError) -> JSONValue {
            let start = index
            var integral = true
            if bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw error("invalid number") }
            if bytes[index] == UInt8(ascii: "0") {
                index += 1
            } else {
                while index < bytes.count && isDigit(bytes[index]) { index += 1 }
            }
            if index < bytes.count && bytes[index] == UInt8(ascii: ".") {
                integral = false
                index += 1
                guard index < bytes.count, isDigit(bytes[index]) else { throw error("invalid number") }
                while index < bytes.count && isDigit(bytes[index]) { index += 1 }
            }
            if index < bytes.count && (bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E")) {
                integral = false
                index += 1
                if index < bytes.count && (bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-")) { index += 1 }
                guard index < bytes.count, isDigit(bytes[index]) else { throw error("invalid number") }
                while index < bytes.count && isDigit(bytes[index]) { index += 1 }
            }
            // An integer of up to 18 digits always fits: read without a string.
            if integral {
                let negative = bytes[start] == UInt8(ascii: "-")
                let first = negative ? start + 1 : start
                if index - first <= 18 {
                    var value = 0
                    for i in first..<index { value = value * 10 + Int(bytes[i] - UInt8(ascii: "0")) }
                    return .int(negative ? -value : value)
                }
            }
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
            if integral, let value = Int(text) { return .int(value) }
            guard let value = Double(text) else { throw error("invalid number") }
            return .double(value)
        }

        func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
    }

    /// A byte named for a message a terminal shows: a printable ASCII
    /// character as itself, anything else (a control character, which would
    /// be an escape sequence there, or part of a multi-byte one) by its value.
    static func describe(byte: UInt8) -> String {
        (0x21...0x7E).contains(byte) ? "character '\(Character(Unicode.Scalar(byte)))'" : "byte 0x" + (byte < 0x10 ? "0" : "") + String(byte, radix: 16, uppercase: true)
    }
}
