import Glibc
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

    /// Where, in `buffer`, lies the text ``JSONWriter`` writes for the value
    /// ``parse(_:maxDepth:refusingRepeatedKeys:)`` reads from it, when the
    /// buffer holds that text byte for byte (around it only whitespace or a
    /// byte order mark); nil as soon as it does not (whitespace inside the
    /// value, an escape or a number written otherwise, a repeated key), the
    /// rest unread. Nothing is built. Throws what `parse` throws for a fault
    /// met before that point (the same grammar and limits); nil promises
    /// nothing about the rest (see ``JSONBody``).
    static func writtenRange(_ buffer: UnsafeBufferPointer<UInt8>) throws(JSONParseError) -> Range<Int>? {
        var reader = Reader(bytes: buffer, maxDepth: maxDepth, refusesRepeatedKeys: false)
        if buffer.count >= 3 && buffer[0] == 0xEF && buffer[1] == 0xBB && buffer[2] == 0xBF { reader.index = 3 }
        reader.skipWhitespace()
        let start = reader.index
        guard try reader.skipValue(depth: 0) else { return nil }
        let end = reader.index
        reader.skipWhitespace()
        guard reader.atEnd else { throw reader.error("unexpected text after the JSON value") }
        return start..<end
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

        /// True at a byte ``skipWhitespace()`` would skip (``JSONWriter`` writes none).
        var atWhitespace: Bool {
            guard index < bytes.count else { return false }
            let byte = bytes[index]
            return byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
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

        /// Reads past one value as ``readValue(depth:)`` reads it, without
        /// building it; false (reading stopped there) at the first byte
        /// ``JSONWriter`` would not write back as it is: whitespace, an escape
        /// it writes otherwise, a number it writes otherwise (`-0`, `1E2`,
        /// `1.50`), a repeated key (the value keeps one).
        mutating func skipValue(depth: Int) throws(JSONParseError) -> Bool {
            guard index < bytes.count else { throw error("unexpected end of input") }
            switch bytes[index] {
            case UInt8(ascii: "{"): return try skipObject(depth: depth + 1)
            case UInt8(ascii: "["): return try skipArray(depth: depth + 1)
            case UInt8(ascii: "\""): return try !scanString(keeping: false).rewritten
            case UInt8(ascii: "t"): try expectWord("true")
            case UInt8(ascii: "f"): try expectWord("false")
            case UInt8(ascii: "n"): try expectWord("null")
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                let start = index
                if let written = skipPlainInteger() { return written }
                let written: Bool
                switch try readNumber() {
                // The grammar allows no leading zeros: an `Int` is written as it came, but for -0.
                case .int(let number): written = number != 0 || bytes[start] != UInt8(ascii: "-")
                case .double(let number):
                    var text = JSONWriter.text(of: number)
                    written = text.withUTF8 { $0.count == index - start && memcmp($0.baseAddress!, bytes.baseAddress! + start, $0.count) == 0 }
                default: written = false
                }
                return written
            default: throw error("unexpected \(JSONParser.describe(byte: bytes[index]))")
            }
            return true
        }

        /// Reads past an integer of up to 18 digits (the grammar's: no leading
        /// zero, nothing after it that makes it a fraction or an exponent) and
        /// says whether it is written back as it is (all but `-0`); nil, having
        /// read nothing, for any other number or a fault (``readNumber()`` reads those).
        mutating func skipPlainInteger() -> Bool? {
            var end = index
            let negative = bytes[end] == UInt8(ascii: "-")
            if negative { end += 1 }
            let first = end
            while end < bytes.count && isDigit(bytes[end]) { end += 1 }
            let digits = end - first
            guard digits > 0, digits <= 18, digits == 1 || bytes[first] != UInt8(ascii: "0") else { return nil }
            if end < bytes.count {
                let next = bytes[end]
                if next == UInt8(ascii: ".") || next == UInt8(ascii: "e") || next == UInt8(ascii: "E") { return nil }
            }
            index = end
            return !(negative && digits == 1 && bytes[first] == UInt8(ascii: "0"))
        }

        /// ``readObject(depth:)`` without building, as ``skipValue(depth:)`` does.
        mutating func skipObject(depth: Int) throws(JSONParseError) -> Bool {
            guard depth <= maxDepth else { throw error("nesting too deep") }
            index += 1
            if index < bytes.count && bytes[index] == UInt8(ascii: "}") { index += 1; return true }
            // The keys so far, as they came (equal keys have equal bytes while every
            // escape is one written back as it is): the first few in place, the rest in a set.
            var keys = InlineArray<8, Int>(repeating: 0)
            var keyCount = 0
            var seen: Set<String>?
            while true {
                guard !atWhitespace else { return false }
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a string key") }
                let keyStart = index
                guard try !scanString(keeping: false).rewritten,
                      noteKey((keyStart + 1)..<(index - 1), in: &keys, count: &keyCount, seen: &seen) else { return false }
                guard !atWhitespace else { return false }
                guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
                index += 1
                guard !atWhitespace, try skipValue(depth: depth), !atWhitespace else { return false }
                guard index < bytes.count else { throw error("unexpected end of input") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "}") { index += 1; return true }
                throw error("expected ',' or '}'")
            }
        }

        /// Notes a key of an object whose first keys are `keys[..<count]` (each
        /// its offset and length, packed) and the rest in `seen`; false when it
        /// is one of them already, or too long to pack (the body is then parsed).
        private func noteKey(_ key: Range<Int>, in keys: inout InlineArray<8, Int>, count: inout Int,
                             seen: inout Set<String>?) -> Bool {
            let base = bytes.baseAddress!
            if count < keys.count {
                guard key.count < 1 << 24 else { return false }
                for i in 0..<count {
                    let earlier = keys[i]
                    if earlier & 0xFF_FFFF == key.count && memcmp(base + (earlier >> 24), base + key.lowerBound, key.count) == 0 {
                        return false
                    }
                }
                keys[count] = key.lowerBound << 24 | key.count
                count += 1
                return true
            }
            if seen == nil {
                // Past a few keys, a set (as the parser keeps positions): no scan per key.
                var set = Set<String>(minimumCapacity: 2 * keys.count)
                for i in 0..<keys.count {
                    let start = keys[i] >> 24
                    set.insert(String(decoding: UnsafeBufferPointer(start: base + start, count: keys[i] & 0xFF_FFFF), as: UTF8.self))
                }
                seen = set
            }
            return seen!.insert(String(decoding: UnsafeBufferPointer(rebasing: bytes[key]), as: UTF8.self)).inserted
        }

        /// ``readArray(depth:)`` without building, as ``skipValue(depth:)`` does.
        mutating func skipArray(depth: Int) throws(JSONParseError) -> Bool {
            guard depth <= maxDepth else { throw error("nesting too deep") }
            index += 1
            if index < bytes.count && bytes[index] == UInt8(ascii: "]") { index += 1; return true }
            while true {
                guard !atWhitespace, try skipValue(depth: depth), !atWhitespace else { return false }
                guard index < bytes.count else { throw error("unexpected end of input") }
                if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                if bytes[index] == UInt8(ascii: "]") { index += 1; return true }
                throw error("expected ',' or ']'")
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
            // `keeping: true` always gives the text.
            try scanString(keeping: true).text ?? ""
        }

        /// Reads a string from its opening quote: its text when `keeping`, and
        /// whether ``JSONWriter`` writes it otherwise than it came (`rewritten`:
        /// an escape it writes differently, `\/`, `\b`, `\f` or `\u`).
        mutating func scanString(keeping: Bool) throws(JSONParseError) -> (text: String?, rewritten: Bool) {
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
                    if ascii {
                        guard keeping else { return (nil, false) }
                        return (String(unsafeUninitializedCapacity: text.count) { _ = $0.initialize(from: text); return text.count }, false)
                    }
                    // Strict: text that is not UTF-8 is refused, not repaired (RFC 8259 §8.1).
                    guard let s = UTF8Text.string(validating: text) else {
                        index -= 1
                        throw error("invalid UTF-8 in string")
                    }
                    return (s, false)
                }
                if byte == UInt8(ascii: "\\") { break }
                if byte < 0x20 { throw error("control character in string") }
                if byte >= 0x80 { ascii = false }
                index += 1
            }
            var scalars = [UInt8](UnsafeBufferPointer(rebasing: bytes[start..<index]))
            var rewritten = false
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    guard let s = UTF8Text.string(validating: scalars) else { throw error("invalid UTF-8 in string") }
                    index += 1
                    return (s, rewritten)
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
                case UInt8(ascii: "/"): scalars.append(0x2F); rewritten = true
                case UInt8(ascii: "b"): scalars.append(0x08); rewritten = true
                case UInt8(ascii: "f"): scalars.append(0x0C); rewritten = true
                case UInt8(ascii: "n"): scalars.append(0x0A)
                case UInt8(ascii: "r"): scalars.append(0x0D)
                case UInt8(ascii: "t"): scalars.append(0x09)
                case UInt8(ascii: "u"):
                    rewritten = true
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
