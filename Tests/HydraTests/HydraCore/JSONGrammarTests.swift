import Foundation
import Testing

@testable import Hydra

/// The JSON parser against RFC 8259's grammar, corner by corner: what it
/// accepts, what it refuses, and what each accepted text means.
@Suite(.ownThreads) struct JSONGrammarTests {
    @Test func everyEscape() throws {
        #expect(try JSONParser.parse(#""\"\\\/\b\f\n\r\t""#) == .string("\"\\/\u{08}\u{0C}\n\r\t"))
        #expect(try JSONParser.parse(#""\u0041\u00e9\u4E2D\u0000""#) == .string("Aé中\u{0}"))
        for bad in [#""\a""#, #""\u12""#, #""\u12G4""#, #""\U0041""#, #""\x41""#, "\"\\"] {
            #expect(throws: JSONParseError.self, "\(bad)") { try JSONParser.parse(bad) }
        }
    }

    @Test func surrogatePairsAndLoneSurrogates() throws {
        #expect(try JSONParser.parse(#""\ud83d\ude00""#) == .string("😀"))
        #expect(try JSONParser.parse(#""\uD834\uDD1E""#) == .string("𝄞"))
        // A lone surrogate has no Unicode scalar: refused rather than replaced.
        for bad in [#""\ud800""#, #""\udc00""#, #""\ud800x""#, #""\ud800\u0041""#, #""\ude00\ud83d""#] {
            #expect(throws: JSONParseError.self, "\(bad)") { try JSONParser.parse(bad) }
        }
    }

    @Test func numbers() throws {
        #expect(try JSONParser.parse("0") == .int(0))
        #expect(try JSONParser.parse("-0").doubleValue == 0)
        #expect(try JSONParser.parse("9223372036854775807") == .int(.max))
        #expect(try JSONParser.parse("-9223372036854775808") == .int(.min))
        // Past Int: a double, never a trap.
        #expect(try JSONParser.parse("9223372036854775808").doubleValue == 9.223372036854775808e18)
        #expect(try JSONParser.parse("1E2") == 100)
        #expect(try JSONParser.parse("1e-2").doubleValue == 0.01)
        #expect(try JSONParser.parse("-1.5E+3").doubleValue == -1500)
        #expect(try JSONParser.parse("1e400").doubleValue == .infinity)
        for bad in ["01", "-", "+1", "1.", ".5", "1e", "1e+", "0x10", "NaN", "Infinity", "-Infinity", "1_000", "--1", "1.e3"] {
            #expect(throws: JSONParseError.self, "\(bad)") { try JSONParser.parse(bad) }
        }
    }

    @Test func nestingAtAndPastTheLimit() throws {
        let depth = JSONParser.maxDepth
        let atLimit = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        #expect(throws: Never.self) { try JSONParser.parse(atLimit) }
        let past = String(repeating: "{\"a\":", count: depth + 1) + "1" + String(repeating: "}", count: depth + 1)
        #expect(throws: JSONParseError.self) { try JSONParser.parse(past) }
    }

    @Test func byteOrderMarkWhitespaceAndTrailingGarbage() throws {
        #expect(try JSONParser.parse([0xEF, 0xBB, 0xBF] + Array(#"{"a":1}"#.utf8)) == ["a": 1])
        #expect(try JSONParser.parse(" \t\r\n[ 1 ,\n2 ] \n") == [1, 2])
        for bad in ["", " ", "{} {}", "[1] x", "1 2", "\u{0B}1", "\u{A0}1", "[1,]", "{\"a\":1,}", "{,}", "[,1]"] {
            #expect(throws: JSONParseError.self, "\(bad.debugDescription)") { try JSONParser.parse(bad) }
        }
    }

    @Test func invalidUTF8IsRefusedNotRepaired() throws {
        #expect(try JSONParser.parse(Array("\"héllo 😀\"".utf8)) == .string("héllo 😀"))
        let bad: [[UInt8]] = [
            [0x22, 0xFF, 0x22],              // never valid
            [0x22, 0xC3, 0x22],              // truncated sequence
            [0x22, 0xC0, 0xAF, 0x22],        // overlong "/"
            [0x22, 0xED, 0xA0, 0x80, 0x22],  // an encoded surrogate
            [0x22, 0x5C, 0x6E, 0xFE, 0x22],  // after an escape (the slow path)
            [0x5B, 0xC3, 0xA9, 0x5D],        // non-ASCII outside a string
        ]
        for bytes in bad {
            #expect(throws: JSONParseError.self, "\(bytes)") { try JSONParser.parse(bytes) }
        }
    }

    @Test func controlCharactersAndLiterals() throws {
        #expect(throws: JSONParseError.self) { try JSONParser.parse("\"a\u{01}b\"") }
        #expect(throws: JSONParseError.self) { try JSONParser.parse("\"a\nb\"") }
        #expect(try JSONParser.parse("[true,false,null]") == [true, false, nil])
        for bad in ["True", "nul", "nulll", "[truefalse]", "{\"a\" : tru}", "{a:1}", "{'a':1}", "{\"a\":1 \"b\":2}"] {
            #expect(throws: JSONParseError.self, "\(bad)") { try JSONParser.parse(bad) }
        }
        // Duplicate keys: the last wins (RFC 8259 leaves it open) on the wire;
        // what a person wrote (a configuration, a job file) has them refused, named.
        #expect(try JSONParser.parse(#"{"a":1,"a":2}"#) == ["a": 2])
        let repeated = #expect(throws: JSONParseError.self) {
            try JSONParser.parse(Array(#"{"a":1,"b":{"c":1,"c":2}}"#.utf8), refusingRepeatedKeys: true)
        }
        #expect(repeated?.message.contains(#"the key "c" is repeated"#) == true, "\(String(describing: repeated))")
        #expect(try JSONParser.parse(Array(#"{"a":{"c":1},"b":{"c":2}}"#.utf8), refusingRepeatedKeys: true) == ["a": ["c": 1], "b": ["c": 2]])
        // A repeated key keeps its first place, with the last value: in a small
        // object and past the sixteen keys after which positions are indexed.
        guard case .object(let small) = try JSONParser.parse(#"{"a":1,"b":2,"a":3}"#) else { Issue.record("not an object"); return }
        #expect(Array(small.keys) == ["a", "b"] && small["a"] == 3)
        let many = (0..<20).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        guard case .object(let members) = try JSONParser.parse("{" + many + #","k3":33,"k18":38,"k20":20}"#) else {
            Issue.record("not an object")
            return
        }
        #expect(Array(members.keys) == (0...20).map { "k\($0)" })
        #expect(members["k3"] == 33 && members["k18"] == 38 && members["k19"] == 19 && members["k20"] == 20)
        for repeated in ["k2", "k17"] {
            #expect(throws: JSONParseError.self, "\(repeated)") {
                try JSONParser.parse(Array(("{" + many + ",\"\(repeated)\":1}").utf8), refusingRepeatedKeys: true)
            }
        }
    }
}
