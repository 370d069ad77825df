/// The scheme a URL starts with, `http://` or `https://`, read from its bytes:
/// every request is checked on a worker's loop, where the generic
/// `hasPrefix` cost ~400 instructions a test.
package enum URLScheme {
    case http, https

    /// The scheme of `url` (lowercase, as requests are built), or nil when it is neither.
    package init?(of url: String) {
        let scheme = url.utf8.withContiguousStorageIfAvailable { b -> URLScheme? in
            // "http", an optional "s", then "://".
            guard b.count >= 7, b[0] == 0x68, b[1] == 0x74, b[2] == 0x74, b[3] == 0x70 else { return nil }
            let secure = b[4] == 0x73
            let colon = secure ? 5 : 4
            guard b.count >= colon + 3, b[colon] == 0x3A, b[colon + 1] == 0x2F, b[colon + 2] == 0x2F else { return nil }
            return secure ? .https : .http
        } ?? (url.hasPrefix("https://") ? .https : url.hasPrefix("http://") ? .http : nil)
        guard let scheme else { return nil }
        self = scheme
    }
}
