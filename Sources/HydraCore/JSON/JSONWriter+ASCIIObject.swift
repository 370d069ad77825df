extension JSONWriter {
    /// The JSON text of an object of string members whose names and values
    /// are the byte ranges `members` of `source` (names lowered when
    /// `lowercaseNames`), as ``writeString(_:into:)`` would write each; nil
    /// when a byte of them is above 0x7F (the caller decodes such text itself).
    ///
    /// Counted first, then written into one array of the exact size: written
    /// string by string through `append`, a response's header fields (16
    /// strings) cost the coordinator ~9.4k instructions per remote job over
    /// RPC, about a sixth of its work; 8.5k this way (callgrind).
    public static func asciiObject(_ source: UnsafeBufferPointer<UInt8>,
                                   members: [(name: Range<Int>, value: Range<Int>)],
                                   lowercaseNames: Bool) -> [UInt8]? {
        withUnsafeTemporaryAllocation(of: Int.self, capacity: 2 * members.count) { lengths -> [UInt8]? in
            var length = 2  // the braces
            for (i, member) in members.enumerated() {
                guard let name = escapedLength(UnsafeBufferPointer(rebasing: source[member.name]), asciiOnly: true),
                      let value = escapedLength(UnsafeBufferPointer(rebasing: source[member.value]), asciiOnly: true)
                else { return nil }
                lengths[2 * i] = name
                lengths[2 * i + 1] = value
                length += name + value + 5 + (i > 0 ? 1 : 0)  // four quotes and a colon, a comma between
            }
            return [UInt8](unsafeUninitializedCapacity: length) { out, count in
                var at = 0
                out[at] = UInt8(ascii: "{")
                at += 1
                for (i, member) in members.enumerated() {
                    if i > 0 {
                        out[at] = UInt8(ascii: ",")
                        at += 1
                    }
                    at = writeQuoted(UnsafeBufferPointer(rebasing: source[member.name]), escapedLength: lengths[2 * i],
                                     lowercase: lowercaseNames, into: out, at: at)
                    out[at] = UInt8(ascii: ":")
                    at += 1
                    at = writeQuoted(UnsafeBufferPointer(rebasing: source[member.value]), escapedLength: lengths[2 * i + 1],
                                     lowercase: false, into: out, at: at)
                }
                out[at] = UInt8(ascii: "}")
                count = at + 1
            }
        }
    }

    /// How many bytes `bytes` take inside a JSON string as ``writeString(_:into:)``
    /// writes them (quotes not counted); with `asciiOnly`, nil when one is
    /// above 0x7F (otherwise such bytes, UTF-8, stay as they are).
    static func escapedLength(_ bytes: UnsafeBufferPointer<UInt8>, asciiOnly: Bool) -> Int? {
        let raw = UnsafeRawBufferPointer(bytes)
        var length = bytes.count
        var i = 0
        while i < bytes.count {
            if i + 8 <= bytes.count, !needsWork(raw.loadUnaligned(fromByteOffset: i, as: UInt64.self), asciiOnly: asciiOnly) {
                i += 8
                continue
            }
            let byte = bytes[i]
            i += 1
            if byte >= 0x20 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\") {
                if byte >= 0x80 && asciiOnly { return nil }
                continue
            }
            length += escapeLength(byte) - 1
        }
        return length
    }

    /// `bytes` quoted and escaped at `out[at...]` (room counted by
    /// ``escapedLength(_:asciiOnly:)``, `escapedLength`, plus two); returns where the text ends.
    static func writeQuoted(_ bytes: UnsafeBufferPointer<UInt8>, escapedLength: Int, lowercase: Bool,
                                    into out: UnsafeMutableBufferPointer<UInt8>, at start: Int) -> Int {
        var at = start
        out[at] = UInt8(ascii: "\"")
        at += 1
        if escapedLength == bytes.count, let from = bytes.baseAddress, let to = out.baseAddress {
            // Nothing to escape (nearly every field): copied at once, names lowered in place.
            (to + at).initialize(from: from, count: bytes.count)
            if lowercase {
                for k in at..<(at + bytes.count) where out[k] &- 65 < 26 { out[k] += 32 }
            }
            at += bytes.count
        } else {
            for byte in bytes {
                switch escapeLength(byte) {
                case 1:
                    out[at] = lowercase && byte &- 65 < 26 ? byte + 32 : byte
                    at += 1
                case 2:
                    out[at] = UInt8(ascii: "\\")
                    out[at + 1] = switch byte {
                    case 0x0A: UInt8(ascii: "n")
                    case 0x0D: UInt8(ascii: "r")
                    case 0x09: UInt8(ascii: "t")
                    default: byte  // `"` and `\`
                    }
                    at += 2
                default:
                    for (k, digit) in "\\u00".utf8.enumerated() { out[at + k] = digit }
                    out[at + 4] = hexDigits[Int(byte >> 4)]
                    out[at + 5] = hexDigits[Int(byte & 0xF)]
                    at += 6
                }
            }
        }
        out[at] = UInt8(ascii: "\"")
        return at + 1
    }

    /// The bytes `byte` takes inside a JSON string (as `writeEscaped` writes it).
    @inline(__always)
    private static func escapeLength(_ byte: UInt8) -> Int {
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), 0x0A, 0x0D, 0x09: return 2
        case 0..<0x20: return 6
        default: return 1
        }
    }
}
