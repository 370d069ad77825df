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
        var separator: Int?
        for i in bytes.indices {
            let byte = bytes[i]
            if byte <= 0x20 || byte == 0x7F {
                switch byte {
                case 0: return "contains a NUL byte"
                case 0x20: return "contains a space (percent-encode it: %20)"
                default: return "contains a control character"
                }
            }
            if separator == nil, byte == colon, i + 2 < bytes.count, bytes[i + 1] == slash, bytes[i + 2] == slash {
                separator = i
            }
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
}
