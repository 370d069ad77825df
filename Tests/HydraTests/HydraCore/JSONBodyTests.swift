import Foundation
import Testing

@testable import HydraCore

/// A body kept as its bytes must stand for exactly what the parser reads
/// from them: the same acceptance and errors, the same value, and the JSON
/// ``JSONWriter`` would write for that value, byte for byte.
@Suite(.ownThreads) struct JSONBodyTests {
    /// Everything `JSONBody(reading:)` says about `bytes` agrees with `JSONParser.parse`.
    private func checkAgainstParser(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
        let label = String(decoding: bytes, as: UTF8.self).debugDescription
        let parsed = Result { () throws(JSONParseError) in try JSONParser.parse(bytes) }
        let body = Result { () throws(JSONParseError) in try JSONBody(reading: bytes) }
        switch (parsed, body) {
        case (.success(let value), .success(let body)):
            #expect(body.value == value, "\(label)", sourceLocation: sourceLocation)
            let written = JSONWriter.bytes(value)
            var encoded: [UInt8] = []
            body.encode(into: &encoded)
            #expect(encoded == written, "\(label)", sourceLocation: sourceLocation)
            #expect(body.encodedSize(limit: written.count) == written.count, "\(label)", sourceLocation: sourceLocation)
            #expect(body.encodedSize(limit: written.count - 1) == nil, "\(label)", sourceLocation: sourceLocation)
        case (.failure(let expected), .failure(let error)):
            #expect(error.description == expected.description, "\(label)", sourceLocation: sourceLocation)
        case (.failure, .success(let body)):
            // Only the empty text: a response without a body is `null`.
            #expect(bytes.isEmpty && body.value == .null, "\(label) read, not parsed", sourceLocation: sourceLocation)
        case (.success, .failure(let error)):
            Issue.record("\(label) parsed, not read: \(error)", sourceLocation: sourceLocation)
        }
    }

    private func isKept(_ text: String) throws -> Bool {
        try JSONBody(reading: Array(text.utf8)).keptText != nil
    }

    @Test func compactJSONIsKeptAsItsBytes() throws {
        let body = try JSONBody(reading: Array("{\"hello\":\"world\",\"n\":1234567890}\n".utf8))
        let kept = try #require(body.keptText, "parsed, not kept")
        #expect(String(decoding: kept, as: UTF8.self) == #"{"hello":"world","n":1234567890}"#)
        for text in [#"[1,-2,"a\"b\\c\n\r\t",true,false,null,{},[]]"#, #""é✓😀""#, "0", "-7", "12.5", "1e-05",
                     #"{"a":{"a":{"a":1}},"b":[{"a":2},{"a":3}]}"#, "\u{FEFF} [] \r\n",
                     "{" + (0..<40).map { "\"k\($0)\":\($0)" }.joined(separator: ",") + "}"] {
            #expect(try isKept(text), "\(text)")
            checkAgainstParser(Array(text.utf8))
        }
    }

    /// Text the writer writes otherwise is parsed: whitespace inside, escapes
    /// written another way, numbers written another way, a repeated key (in a
    /// small object and past the sixteen keys where a set takes over).
    @Test func textWrittenOtherwiseIsParsed() throws {
        let many = (0..<20).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        for text in ["[1, 2]", "{ }", "{\"a\" :1}", "{\"a\": 1}", "[1 ]", #""a\/b""#, #""\u0041""#, #""\b\f""#,
                     "1.0", "1.50", "-0", "1E2", "1e2", "100000000000000000000", "0.1e1", "-0.0", "1e400",
                     #"{"a":1,"a":2}"#, #"{"a":1,"b":{"c":1,"c":2}}"#, "{" + many + #","k3":33}"#,
                     "{" + many + #","k19":1}"#] {
            #expect(try !isKept(text), "\(text)")
            checkAgainstParser(Array(text.utf8))
        }
    }

    @Test func faultsAreTheParsersFaults() {
        let deep = String(repeating: "[", count: JSONParser.maxDepth + 1) + String(repeating: "]", count: JSONParser.maxDepth + 1)
        let atLimit = String(repeating: "[", count: JSONParser.maxDepth) + String(repeating: "]", count: JSONParser.maxDepth)
        var texts = ["", " ", "{} {}", "[1] x", "1 2", "[1,]", "{\"a\":1,}", "{,}", "[,1]", "01", "-", "1.", ".5", "1e",
                     "NaN", "nul", "[truefalse]", "{a:1}", "{\"a\" 1}", "\"a\u{01}b\"", #""\a""#, #""\ud800""#,
                     #""\u12G4""#, "\"abc", "[1,2", "{\"a\":", deep, atLimit, "[1,2]x", "[1,2] x"]
        texts += texts.map { $0.replacingOccurrences(of: ",", with: ", ") }
        for text in texts { checkAgainstParser(Array(text.utf8)) }
        for bytes: [UInt8] in [[0x22, 0xFF, 0x22], [0x22, 0xC3, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22], [0x5B, 0xC3, 0xA9, 0x5D],
                               [0xEF, 0xBB, 0xBF], [0xEF, 0xBB]] {
            checkAgainstParser(bytes)
        }
    }

    /// Generated values written compactly (kept), then the same texts cut,
    /// spaced and with bytes changed: the body agrees with the parser on each.
    @Test func generatedTextsAndTheirMutations() {
        var random = SeededRandom(seed: 0x4A53_4F4E)
        let atoms: [String] = ["0", "-1", "42", "9223372036854775807", "-9223372036854775808", "3.25", "-0.5", "1e-07",
                               "true", "false", "null", #""""#, #""plain""#, #""q\"b\\s\n\t\r""#, #""é😀""#, #""\/\u00e9""#]
        func value(_ depth: Int) -> String {
            let pick = Int.random(in: 0..<10, using: &random)
            if depth > 4 || pick < 5 { return atoms.randomElement(using: &random)! }
            let count = Int.random(in: 0..<5, using: &random)
            if pick < 7 { return "[" + (0..<count).map { _ in value(depth + 1) }.joined(separator: ",") + "]" }
            let keys = ["a", "b", "c", "a", "é", #"k\"q"#]
            return "{" + (0..<count).map { _ in "\"\(keys.randomElement(using: &random)!)\":" + value(depth + 1) }
                .joined(separator: ",") + "}"
        }
        var kept = 0
        for _ in 0..<400 {
            let text = Array(value(0).utf8)
            checkAgainstParser(text)
            if (try? JSONBody(reading: text))?.keptText != nil { kept += 1 }
            for _ in 0..<6 {
                var mutated = text
                let at = Int.random(in: 0...mutated.count, using: &random)
                switch Int.random(in: 0..<4, using: &random) {
                case 0: mutated.removeSubrange(at...)
                case 1: mutated.insert([0x20, 0x0A, 0x09].randomElement(using: &random)!, at: at)
                case 2: if at < mutated.count { mutated[at] = Array(#"{}[]",:\0e.-x "#.utf8).randomElement(using: &random)! }
                default: if at < mutated.count { mutated.remove(at: at) }
                }
                checkAgainstParser(mutated)
            }
        }
        // Most generated texts are compact and without repeats, escapes or numbers written otherwise.
        #expect(kept > 100, "\(kept) of 400 kept")
    }
}
