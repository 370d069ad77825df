/// Writes ``JSONValue`` as compact JSON text (no spaces, keys in stored order,
/// `/` not escaped, non-ASCII kept as UTF-8).
public enum JSONWriter {
    /// The JSON text of `value`.
    public static func string(_ value: JSONValue) -> String {
        String(decoding: bytes(value), as: UTF8.self)
    }

    /// The JSON text of `value` as UTF-8 bytes.
    public static func bytes(_ value: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(128)
        write(value, into: &out)
        return out
    }

    /// Appends the JSON text of `value` to `out`.
    public static func write(_ value: JSONValue, into out: inout [UInt8]) {
        switch value {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .int(let i): writeInt(i, into: &out)
        case .double(let d): writeDouble(d, into: &out)
        case .string(let s): writeString(s, into: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                write(item, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            var first = true
            for (key, item) in members {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                writeString(key, into: &out)
                out.append(UInt8(ascii: ":"))
                write(item, into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Appends an integer in decimal, as ``write(_:into:)`` writes `.int(value)`,
    /// without making a string of it: the digits are written from the last
    /// into a buffer on the stack, then appended at once. (`String(value)`
    /// cost ~200 instructions an integer; appended one by one and reversed
    /// through a slice of the array, the two numbers of each event line cost
    /// the coordinator 6–8% of its time per remote job over RPC.)
    public static func writeInt(_ value: Int, into out: inout [UInt8]) {
        if value < 0 { out.append(UInt8(ascii: "-")) }
        var rest = value.magnitude
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var first = digits.count
            repeat {
                first -= 1
                digits[first] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            } while rest > 0
            out.append(contentsOf: UnsafeBufferPointer(rebasing: digits[first...]))
        }
    }

    /// Appends a number as ``write(_:into:)`` writes `.double(d)`.
    public static func writeDouble(_ d: Double, into out: inout [UInt8]) {
        out.append(contentsOf: text(of: d).utf8)
    }

    /// The text ``writeDouble(_:into:)`` writes: a whole number below 10^15
    /// as an integer, any other finite one as Swift's shortest round-trip
    /// form, `null` for what JSON has no number for.
    static func text(of d: Double) -> String {
        guard d.isFinite else { return "null" }
        return d.rounded() == d && abs(d) < 1e15 ? String(Int(d)) : "\(d)"
    }

    static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends a string as ``write(_:into:)`` writes `.string(s)`: quoted and escaped.
    public static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Fast path: copy runs of bytes that need no escaping in bulk.
        let done: Void? = s.utf8.withContiguousStorageIfAvailable { bytes in
            var runStart = 0
            for i in 0..<bytes.count {
                let byte = bytes[i]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                if runStart < i { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<i])) }
                writeEscaped(byte, into: &out)
                runStart = i + 1
            }
            if runStart < bytes.count { out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...])) }
        }
        if done == nil {
            for byte in s.utf8 {
                if byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                    writeEscaped(byte, into: &out)
                } else {
                    out.append(byte)
                }
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    /// Appends `bytes` (ASCII, or valid UTF-8) as a JSON string, as
    /// ``writeString(_:into:)`` writes the same text; `lowercase` lowers ASCII
    /// letters on the way (HTTP field names).
    public static func writeString(bytes: ArraySlice<UInt8>, lowercase: Bool = false, into out: inout [UInt8]) {
        _ = writeString(bytes: bytes, lowercase: lowercase, asciiOnly: false, into: &out)
    }

    /// As ``writeString(bytes:lowercase:into:)``; with `asciiOnly`, writes
    /// nothing and returns false when a byte is above 0x7F.
    public static func writeString(bytes: ArraySlice<UInt8>, lowercase: Bool, asciiOnly: Bool, into out: inout [UInt8]) -> Bool {
        bytes.withUnsafeBufferPointer { writeString(bytes: $0, lowercase: lowercase, asciiOnly: asciiOnly, into: &out) }
    }

    /// As the `ArraySlice` variant above, for bytes a caller already holds in
    /// place. Counted first, then written in place (``escapedLength(_:asciiOnly:)``,
    /// `writeQuoted`: the escapes of ``asciiObject(_:members:lowercaseNames:)`` too).
    public static func writeString(bytes: UnsafeBufferPointer<UInt8>, lowercase: Bool, asciiOnly: Bool, into out: inout [UInt8]) -> Bool {
        guard let length = escapedLength(bytes, asciiOnly: asciiOnly) else { return false }
        let start = out.count
        out.reserveRoom(length + 2)
        out.append(contentsOf: repeatElement(0, count: length + 2))
        out.withUnsafeMutableBufferPointer { written in
            _ = writeQuoted(bytes, escapedLength: length, lowercase: lowercase, into: written, at: start)
        }
        return true
    }

    /// True when one of the eight bytes of `word` must be escaped (below
    /// 0x20, `"` or `\\`), or is above 0x7F when `asciiOnly`: the classic
    /// "has a zero byte" and "has a byte less than n" tests on a 64-bit word.
    /// Measured on the 50,000-step graph's result: its header values were
    /// written byte by byte, ~20 instructions per byte.
    @inline(__always)
    static func needsWork(_ word: UInt64, asciiOnly: Bool) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        func hasZero(_ v: UInt64) -> UInt64 { (v &- ones) & ~v & highs }
        let control = (word &- ones &* 0x20) & ~word & highs
        let quote = hasZero(word ^ (ones &* 0x22))
        let backslash = hasZero(word ^ (ones &* 0x5C))
        return (control | quote | backslash | (asciiOnly ? word & highs : 0)) != 0
    }

    private static func writeEscaped(_ byte: UInt8, into out: inout [UInt8]) {
        switch byte {
        case UInt8(ascii: "\""): out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "\""))
        case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "\\"))
        case 0x0A: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "n"))
        case 0x0D: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "r"))
        case 0x09: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "t"))
        case 0..<0x20:
            out.append(contentsOf: "\\u00".utf8)
            out.append(hexDigits[Int(byte >> 4)])
            out.append(hexDigits[Int(byte & 0xF)])
        default: out.append(byte)
        }
    }
}
