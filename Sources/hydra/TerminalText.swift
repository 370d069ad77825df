/// Text from elsewhere (a server's error message, an origin's bytes quoted in
/// one, a job's label or error in a `--pretty` line) made safe to print on a
/// terminal: control characters, which would be escape sequences there (a
/// cleared screen, a rewritten line, a title), are shown as `\u{1B}`-style
/// escapes instead. JSON output needs none of this: JSON escapes them itself.
enum TerminalText {
    static func safe(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if isControl(scalar) {
                out.append(contentsOf: "\\u{\(String(scalar.value, radix: 16, uppercase: true))}".unicodeScalars)
            } else {
                out.append(scalar)
            }
        }
        return String(out)
    }

    /// C0 (tab included: a message is one line), DEL and C1.
    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }
}
