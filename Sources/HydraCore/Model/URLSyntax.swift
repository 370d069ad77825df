/// The syntax of an absolute `http://` or `https://` URL, checked where a
/// spec is submitted: a typo there is an error naming the field, not a job
/// that fails when it runs (libcurl's parser refuses the same URLs then).
package enum URLSyntax {
    /// What is wrong with `url`, for a message; nil when it reads as a URL.
    /// The scheme is checked by the caller (``URLScheme``).
    package static func problem(in url: String) -> String? {
        if let bad = url.utf8.first(where: { $0 <= 0x20 || $0 == 0x7F }) {
            switch bad {
            case 0: return "contains a NUL byte"
            case 0x20: return "contains a space (percent-encode it: %20)"
            default: return "contains a control character"
            }
        }
        guard let separator = url.range(of: "://") else { return "expected SCHEME://HOST" }
        let rest = url[separator.upperBound...]
        var authority = rest[..<(rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex)]
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        let host: Substring
        var port: Substring = ""
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return "an IPv6 host without its closing ]" }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { return "text after the IPv6 host that is not :PORT" }
                port = after.dropFirst()
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            port = authority[authority.index(after: colon)...]
        } else {
            host = authority
        }
        if host.isEmpty { return "no host" }
        if !port.isEmpty {
            guard port.utf8.count <= 5, port.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
                  let number = Int(port), number <= 65535 else {
                return "the port is not a number from 0 to 65535"
            }
        }
        return nil
    }
}
