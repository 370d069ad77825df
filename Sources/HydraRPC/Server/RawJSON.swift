import HydraCore

/// Finds the text of members and elements inside a JSON document that
/// ``HydraCore/JSONParser`` has already accepted, without decoding it.
///
/// The RPC server uses it to echo a request's `id` number byte for byte
/// (``RPCID``). It trusts its input to be valid JSON: on anything else it
/// returns nil or stops early, never traps. Pure functions; any thread.
enum RawJSON {
    /// The text of the value of the last top-level member `key` of the object
    /// at the start of `bytes` (the parser also keeps the last of duplicates).
    static func member(_ key: String, ofObject bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8>? {
        var i = skipSpace(bytes, from: bytes.startIndex)
        guard i < bytes.endIndex, bytes[i] == UInt8(ascii: "{") else { return nil }
        i += 1
        var found: ArraySlice<UInt8>?
        while true {
            i = skipSpace(bytes, from: i)
            guard i < bytes.endIndex else { return found }
            if bytes[i] == UInt8(ascii: "}") { return found }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            guard bytes[i] == UInt8(ascii: "\"") else { return found }
            let keyEnd = skipString(bytes, from: i)
            let matches = keyMatches(bytes[i..<keyEnd], key)
            i = skipSpace(bytes, from: keyEnd)
            guard i < bytes.endIndex, bytes[i] == UInt8(ascii: ":") else { return found }
            i = skipSpace(bytes, from: i + 1)
            let valueEnd = skipValue(bytes, from: i)
            if matches { found = bytes[i..<valueEnd] }
            guard valueEnd > i else { return found }
            i = valueEnd
        }
    }

    /// The text of each element of the array at the start of `bytes`, in order.
    static func elements(ofArray bytes: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
        var i = skipSpace(bytes, from: bytes.startIndex)
        guard i < bytes.endIndex, bytes[i] == UInt8(ascii: "[") else { return [] }
        i += 1
        var out: [ArraySlice<UInt8>] = []
        while true {
            i = skipSpace(bytes, from: i)
            guard i < bytes.endIndex, bytes[i] != UInt8(ascii: "]") else { return out }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            let end = skipValue(bytes, from: i)
            guard end > i else { return out }
            out.append(bytes[i..<end])
            i = end
        }
    }

    /// Whether a quoted key (with its quotes) spells `key`; escapes are decoded only when present.
    private static func keyMatches(_ quoted: ArraySlice<UInt8>, _ key: String) -> Bool {
        guard quoted.count >= 2 else { return false }
        let inner = quoted.dropFirst().dropLast()
        if !inner.contains(UInt8(ascii: "\\")) { return inner.elementsEqual(key.utf8) }
        guard case .string(let decoded)? = try? JSONParser.parse(Array(quoted)) else { return false }
        return decoded == key
    }

    private static func skipSpace(_ bytes: ArraySlice<UInt8>, from start: Int) -> Int {
        var i = start
        while i < bytes.endIndex {
            switch bytes[i] {
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"): i += 1
            default: return i
            }
        }
        return i
    }

    /// The index after the string that starts (with its quote) at `start`.
    private static func skipString(_ bytes: ArraySlice<UInt8>, from start: Int) -> Int {
        var i = start + 1
        while i < bytes.endIndex {
            switch bytes[i] {
            case UInt8(ascii: "\\"): i += 2
            case UInt8(ascii: "\""): return i + 1
            default: i += 1
            }
        }
        return bytes.endIndex
    }

    /// The index after the value that starts at `start`.
    private static func skipValue(_ bytes: ArraySlice<UInt8>, from start: Int) -> Int {
        guard start < bytes.endIndex else { return start }
        switch bytes[start] {
        case UInt8(ascii: "\""):
            return skipString(bytes, from: start)
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            var depth = 0
            var i = start
            while i < bytes.endIndex {
                switch bytes[i] {
                case UInt8(ascii: "\""): i = skipString(bytes, from: i); continue
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if depth == 0 { return i + 1 }
                default: break
                }
                i += 1
            }
            return bytes.endIndex
        default:
            // A number or a literal: up to the next delimiter.
            var i = start
            while i < bytes.endIndex {
                switch bytes[i] {
                case UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), UInt8(ascii: " "),
                     UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"): return i
                default: i += 1
                }
            }
            return i
        }
    }
}
