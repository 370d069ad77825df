import CCurl

/// A request URL parsed once with curl's URL API, for every transfer that
/// fetches it. Loop thread only.
///
/// Why: given only `CURLOPT_URL`, libcurl 7.88 parses the URL string anew for
/// every request and prints its normalized form back byte by byte: ~12k
/// instructions of a small GET's ~81k. Given a parsed handle as well
/// (`CURLOPT_CURLU`) it copies the handle's parts instead. A transfer sets both:
/// the handle, and the normalized text curl would have made of the string
/// (`CURLOPT_URL`, what curl reports as the effective URL and follows
/// redirects from), so that curl sees exactly what it would have made itself.
///
/// The parse uses the flags curl 7.88 uses for `CURLOPT_URL`
/// (`CURLU_GUESS_SCHEME | CURLU_NON_SUPPORT_SCHEME`; the transfers set neither
/// `CURLOPT_PATH_AS_IS` nor `CURLOPT_DISALLOW_USERNAME_IN_URL`, which would add
/// flags). A URL the parser refuses gets no handle: the transfer passes the
/// string alone and curl refuses it with its own error, as before.
///
/// Ownership: the ``ParsedURLCache`` and every ``Transfer`` whose easy handle
/// points at it hold it; curl's handle is freed with the last of them, after
/// each easy handle was given another URL, reset or cleaned up.
final class ParsedURL {
    let handle: OpaquePointer
    /// curl's normalized form of the URL.
    let normalized: String

    init?(_ url: String) {
        guard let handle = curl_url() else { return nil }
        let flags = UInt32(CURLU_GUESS_SCHEME) | UInt32(CURLU_NON_SUPPORT_SCHEME)
        var text: UnsafeMutablePointer<CChar>?
        guard curl_url_set(handle, CURLUPART_URL, url, flags) == CURLUE_OK,
              curl_url_get(handle, CURLUPART_URL, &text, 0) == CURLUE_OK, let text else {
            curl_url_cleanup(handle)
            return nil
        }
        normalized = String(cString: text)
        curl_free(text)
        self.handle = handle
    }

    deinit { curl_url_cleanup(handle) }
}
