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
        !name.isEmpty && allBytes(of: name, satisfy: isTokenByte)
    }

    /// True when no byte is a control character other than horizontal tab
    /// (bytes of 0x80 and above, UTF-8 text, pass as HTTP's obs-text).
    public static func isValidValue(_ value: String) -> Bool {
        allBytes(of: value) { $0 >= 0x20 ? $0 != 0x7F : $0 == 0x09 }
    }

    private static func isTokenByte(_ b: UInt8) -> Bool {
        switch b {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true  // digits, letters
        case 0x21, 0x23...0x27, 0x2A, 0x2B, 0x2D, 0x2E, 0x5E...0x60, 0x7C, 0x7E: true  // !#$%&'*+-.^_`|~
        default: false
        }
    }

    /// Runs for every header of every request (at submit, and when the step
    /// runs): a scan of the contiguous UTF-8 bytes, a few instructions each,
    /// not the String view's index walk (measured: ~16 instructions a byte).
    @inline(__always)
    private static func allBytes(of text: String, satisfy test: (UInt8) -> Bool) -> Bool {
        if let result = text.utf8.withContiguousStorageIfAvailable({ bytes in
            for b in bytes where !test(b) { return false }
            return true
        }) { return result }
        return text.utf8.allSatisfy(test)
    }

    /// Checks every field of `headers`, naming a bad one as `path.NAME`.
    public static func check(_ headers: OrderedDictionary<String, String>, path: String) throws(ValidationError) {
        for (name, value) in headers {
            if !isValidName(name) { throw ValidationError(path: path + ".\(name)", nameProblem) }
            if !isValidValue(value) { throw ValidationError(path: path + ".\(name)", valueProblem) }
        }
    }
}
