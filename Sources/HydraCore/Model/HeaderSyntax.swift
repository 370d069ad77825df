import OrderedCollections

/// What a request header field may hold (RFC 9110 §5.1, §5.5), checked
/// wherever one enters: a job's `headers` at submit (literal values) and when
/// the step runs (values built from references), and the `headers` of the
/// configuration's servers, apis and defaults at startup.
///
/// A name is a token; a value holds no control character but tab. A CR or LF
/// would end the header line early: the rest would reach the peer as headers
/// (or a request) of the sender's choosing. Pure; thread-safe.
public enum HeaderSyntax {
    /// Why a name was refused, for messages.
    public static let nameProblem = "invalid header name (letters, digits and !#$%&'*+-.^_`|~ only)"
    /// Why a value was refused, for messages.
    public static let valueProblem = "a header value must not contain CR, LF or other control characters"

    /// True for an RFC 9110 token: `!#$%&'*+-.^_`|~`, digits and letters, at least one.
    public static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b | 0x20 >= 0x61 && b | 0x20 <= 0x7A)
                || "!#$%&'*+-.^_`|~".utf8.contains(b)
        }
    }

    /// True when no byte is a control character other than horizontal tab
    /// (bytes of 0x80 and above, UTF-8 text, pass as HTTP's obs-text).
    public static func isValidValue(_ value: String) -> Bool {
        !value.utf8.contains { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }
    }

    /// Checks every field of `headers`, naming a bad one as `path.NAME`.
    public static func check(_ headers: OrderedDictionary<String, String>, path: String) throws(ValidationError) {
        for (name, value) in headers {
            if !isValidName(name) { throw ValidationError(path: path + ".\(name)", nameProblem) }
            if !isValidValue(value) { throw ValidationError(path: path + ".\(name)", valueProblem) }
        }
    }
}
