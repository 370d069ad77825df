/// The syntax of an absolute `http://` or `https://` URL, checked where a
/// spec is submitted: a typo there is an error naming the field, not a job
/// that fails when it runs (libcurl's parser refuses the same URLs then).
package enum URLSyntax {
    /// What is wrong with `url`, for a message; nil when it reads as a URL.
    /// The scheme is checked by the caller. One pass over the bytes (every
    /// remote job's literal URL is checked on the submitting thread).
    package static func problem(in url: String) -> String? {
        let bytes = Array(url.utf8)
        if let bad = bytes.first(where: { $0 <= 0x20 || $0 == 0x7F }) {
            switch bad {
            case 0: return "contains a NUL byte"
            case 0x20: return "contains a space (percent-encode it: %20)"
            default: return "contains a control character"
            }
        }
        let colon = UInt8(ascii: ":"), slash = UInt8(ascii: "/")
        guard let separator = bytes.indices.first(where: {
            $0 + 2 < bytes.count && bytes[$0] == colon && bytes[$0 + 1] == slash && bytes[$0 + 2] == slash
        }) else { return "expected SCHEME://HOST" }
        let start = separator + 3
        let end = bytes[start...].firstIndex(where: { $0 == slash || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) ?? bytes.count
        var authority = bytes[start..<end]
        if let at = authority.lastIndex(of: UInt8(ascii: "@")) { authority = authority[(at + 1)...] }
        var host = authority
        var port: ArraySlice<UInt8> = []
        if authority.first == UInt8(ascii: "[") {
            guard let close = authority.firstIndex(of: UInt8(ascii: "]")) else { return "an IPv6 host without its closing ]" }
            host = authority[(authority.startIndex + 1)..<close]
            let after = authority[(close + 1)...]
            if !after.isEmpty {
                guard after.first == colon else { return "text after the IPv6 host that is not :PORT" }
                port = after.dropFirst()
            }
        } else if let last = authority.lastIndex(of: colon) {
            host = authority[..<last]
            port = authority[(last + 1)...]
        }
        if host.isEmpty { return "no host" }
        if !port.isEmpty {
            guard port.count <= 5, port.allSatisfy({ (0x30...0x39).contains($0) }),
                  port.reduce(0, { $0 * 10 + Int($1 - 0x30) }) <= 65535 else {
                return "the port is not a number from 0 to 65535"
            }
        }
        return nil
    }
}
