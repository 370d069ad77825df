import Foundation

/// Percent-encoding of a text for a URL's path segment, query or a form body
/// (RFC 3986: all but the unreserved characters), as requests are built;
/// also what secret masking looks for, since a secret sent in a query comes
/// back encoded in the request's URL.
public enum PercentEncoding {
    private static let unreserved = CharacterSet(charactersIn:
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")

    /// `text` with every byte outside the unreserved set as `%XX` (uppercase hex).
    public static func encode(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
    }
}
