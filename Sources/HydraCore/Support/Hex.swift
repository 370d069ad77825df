/// Lower-case hexadecimal text of bytes (digests, random names): two digits a
/// byte, written directly (Foundation's `String(format: "%02x")` costs about
/// 6 µs a call here).
public enum Hex {
    private static let digits: StaticString = "0123456789abcdef"

    /// `bytes` as `0a1b…`.
    public static func string<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.underestimatedCount * 2)
        digits.withUTF8Buffer { digits in
            for byte in bytes {
                out.append(digits[Int(byte >> 4)])
                out.append(digits[Int(byte & 15)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
