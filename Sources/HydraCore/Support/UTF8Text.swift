import Glibc

/// Bytes as a `String` when they are valid UTF-8, else nil: what
/// `String(validating:as: UTF8.self)` answers, for less.
///
/// Why: that initializer is generic, and the standard library runs it
/// unspecialized, asking the runtime for type metadata on every call (~1k
/// instructions for a 33-byte body, on the remote worker's loop for every
/// `text` response). `String(decoding:as:)` has a fast path for arrays; it
/// repairs invalid bytes, and a repaired string never has the bytes it was
/// made from (an invalid sequence becomes U+FFFD, which is valid), so equal
/// bytes mean valid input.
public enum UTF8Text {
    public static func string(validating bytes: [UInt8]) -> String? {
        bytes.withUnsafeBufferPointer(string(validating:))
    }

    public static func string(validating bytes: ArraySlice<UInt8>) -> String? {
        bytes.withUnsafeBufferPointer(string(validating:))
    }

    public static func string(validating bytes: UnsafeBufferPointer<UInt8>) -> String? {
        var text = String(decoding: bytes, as: UTF8.self)
        // Compared with memcmp (`elementsEqual`, even of two buffers, walks them a byte at a time).
        let same = text.withUTF8 { made in
            guard made.count == bytes.count else { return false }
            guard let a = made.baseAddress, let b = bytes.baseAddress else { return true }
            return memcmp(a, b, made.count) == 0
        }
        return same ? text : nil
    }
}
