/// The syntax of an absolute `http://` or `https://` URL, checked where a
/// spec is submitted: a typo there is an error naming the field, not a job
/// that fails when it runs (libcurl's parser refuses the same URLs then).
package enum URLSyntax {
    /// What is wrong with `url`, for a message; nil when it reads as a URL.
    /// The scheme is checked by the caller. One pass over the bytes, in place
    /// (every remote job's literal URL is checked on the submitting thread).
    package static func problem(in url: String) -> String? {
        var url = url
        return url.withUTF8 { problem(in: $0) }
    }

    private static func problem(in bytes: UnsafeBufferPointer<UInt8>) -> String? {
        let colon = UInt8(ascii: ":"), slash = UInt8(ascii: "/")
        // Control bytes, spaces and DEL: eight bytes at a time past those without
        // any, then byte by byte from the first word that has one (~20
        // instructions a byte before, for every remote job's URL).
        let raw = UnsafeRawBufferPointer(bytes)
        var i = 0
        while i + 8 <= bytes.count, !mayHaveControl(raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)) { i += 8 }
        while i < bytes.count {
            let byte = bytes[i]
            if byte <= 0x20 || byte == 0x7F {
                switch byte {
                case 0: return "contains a NUL byte"
                case 0x20: return "contains a space (percent-encode it: %20)"
                default: return "contains a control character"
                }
            }
            i += 1
        }
        // The first "://" (right after the scheme, a few bytes in).
        var separator: Int?
        var k = 0
        while k + 2 < bytes.count {
            if bytes[k] == colon, bytes[k + 1] == slash, bytes[k + 2] == slash {
                separator = k
                break
            }
            k += 1
        }
        guard let separator else { return "expected SCHEME://HOST" }
        // The authority: up to the path, query or fragment; the user part (before the last @) aside.
        var start = separator + 3
        var end = start
        while end < bytes.count, bytes[end] != slash, bytes[end] != UInt8(ascii: "?"), bytes[end] != UInt8(ascii: "#") {
            if bytes[end] == UInt8(ascii: "@") { start = end + 1 }
            end += 1
        }
        var hostEnd = end
        var portStart = end
        if start < end, bytes[start] == UInt8(ascii: "[") {
            guard let close = (start..<end).first(where: { bytes[$0] == UInt8(ascii: "]") }) else {
                return "an IPv6 host without its closing ]"
            }
            if close + 1 < end {
                guard bytes[close + 1] == colon else { return "text after the IPv6 host that is not :PORT" }
                portStart = close + 2
            }
            start += 1
            hostEnd = close
        } else if let last = (start..<end).last(where: { bytes[$0] == colon }) {
            hostEnd = last
            portStart = last + 1
        }
        if hostEnd <= start { return "no host" }
        if portStart < end {
            var port = 0
            for i in portStart..<end {
                guard (0x30...0x39).contains(bytes[i]), i - portStart < 5 else { return "the port is not a number from 0 to 65535" }
                port = port * 10 + Int(bytes[i] - 0x30)
            }
            if port > 65535 { return "the port is not a number from 0 to 65535" }
        }
        return nil
    }

    /// True when one of the eight bytes of `word` is below 0x21 (a control
    /// byte or a space) or is DEL (0x7F): the "has a byte less than n" and
    /// "has a zero byte" tests on a 64-bit word, exact for these values.
    @inline(__always)
    private static func mayHaveControl(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let below = (word &- ones &* 0x21) & ~word & highs
        let del = word ^ (ones &* 0x7F)
        let isDel = (del &- ones) & ~del & highs
        return (below | isDel) != 0
    }
}
