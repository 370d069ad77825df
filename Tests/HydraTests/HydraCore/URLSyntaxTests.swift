import Testing

@testable import HydraCore

/// `URLSyntax` checks every remote job's literal URL at submit, eight bytes at
/// a time where it can: each refused byte must be found wherever it stands
/// (in a word it reads whole, or in the tail it reads byte by byte).
@Suite struct URLSyntaxTests {
    @Test func aRefusedByteIsFoundAtEveryOffset() {
        let refused: [(UInt8, String)] = [(0x00, "NUL"), (0x01, "control"), (0x09, "control"), (0x0A, "control"),
                                          (0x1F, "control"), (0x20, "space"), (0x7F, "control")]
        let base = Array("http://example.com/a/b/c/d/e/f/g/h/i/j/k/l".utf8)
        for (byte, word) in refused {
            for offset in 0..<base.count {
                var bytes = base
                bytes[offset] = byte
                let url = String(decoding: bytes, as: UTF8.self)
                let problem = URLSyntax.problem(in: url)
                #expect(problem?.contains(word) == true, "byte \(byte) at \(offset): \(problem ?? "accepted")")
            }
        }
    }

    @Test func everyOtherByteReadsAsPartOfAURL() {
        // Printable ASCII (but for the separators that end the authority) and UTF-8 in the path.
        let path = (0x21...0x7E).map { UInt8($0) }.filter { $0 != UInt8(ascii: "#") && $0 != UInt8(ascii: "?") }
        let url = "http://example.com:8080/" + String(decoding: path, as: UTF8.self) + "/é/日本"
        #expect(URLSyntax.problem(in: url) == nil)
        for length in 0..<20 {
            #expect(URLSyntax.problem(in: "http://h/" + String(repeating: "x", count: length)) == nil)
        }
    }

    @Test func theRestOfTheGrammarStillHolds() {
        #expect(URLSyntax.problem(in: "http:/host") == "expected SCHEME://HOST")
        #expect(URLSyntax.problem(in: "http:///path") == "no host")
        #expect(URLSyntax.problem(in: "http://host:99999/") == "the port is not a number from 0 to 65535")
        #expect(URLSyntax.problem(in: "http://[::1/x") == "an IPv6 host without its closing ]")
        #expect(URLSyntax.problem(in: "http://user:pass@[::1]:8080/x") == nil)
    }
}
