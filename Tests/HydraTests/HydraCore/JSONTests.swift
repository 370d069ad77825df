import OrderedCollections
import Testing

@testable import Hydra

@Suite(.ownThreads) struct JSONTests {
    /// Integers in decimal, after what the output already holds (event lines'
    /// seq and time, results' status, any `.int`): the text `String` gives.
    @Test func integersAreWrittenAsTheirText() {
        var random = SeededRandom(seed: 0x496E_7454_6578_7421)
        let values = [0, 7, -1, 9, 10, 99, 100, -305, 1_764_000_000_123_456, Int.max, Int.min, Int.min + 1]
            + (0..<500).map { _ in Int.random(in: Int.min...Int.max, using: &random) >> Int.random(in: 0..<63, using: &random) }
        for value in values {
            var out = Array("[x,".utf8)
            JSONWriter.writeInt(value, into: &out)
            #expect(out == Array("[x,\(value)".utf8), "\(value)")
            #expect(JSONWriter.bytes(.int(value)) == Array(String(value).utf8), "\(value)")
        }
    }

    /// A line inside a larger buffer parses in place; errors count from the line's start.
    /// `encodedSize` is the writer's length, for generated values full of what
    /// needs escaping, and nil one byte below it.
    @Test func encodedSizeIsTheWritersLength() {
        var random = SystemRandomNumberGenerator()
        let pieces = ["a", "é", "😀", "\"", "\\", "\n", "\r", "\t", "\u{01}", "\u{1F}", "\u{7F}", "/", " ", "\u{2028}"]
        func text() -> String { (0..<Int.random(in: 0...12, using: &random)).map { _ in pieces.randomElement(using: &random)! }.joined() }
        func value(_ depth: Int) -> JSONValue {
            switch Int.random(in: 0...(depth > 3 ? 4 : 6), using: &random) {
            case 0: return .null
            case 1: return .bool(Bool.random(using: &random))
            case 2: return .int(Int.random(in: Int.min...Int.max, using: &random))
            case 3: return .double(Double.random(in: -1e6...1e6, using: &random))
            case 4: return .string(text())
            case 5: return .array((0..<Int.random(in: 0...4, using: &random)).map { _ in value(depth + 1) })
            default:
                var members = OrderedDictionary<String, JSONValue>()
                for _ in 0..<Int.random(in: 0...4, using: &random) { members[text()] = value(depth + 1) }
                return .object(members)
            }
        }
        for _ in 0..<500 {
            let v = value(0)
            let length = JSONWriter.bytes(v).count
            #expect(v.encodedSize(limit: length) == length, "\(JSONWriter.string(v))")
            #expect(v.encodedSize(limit: length - 1) == nil, "\(JSONWriter.string(v))")
        }
    }

    @Test func aSliceParsesInPlace() throws {
        let buffer = Array(#"junk{"a":[1,"é"]}\n{"b":}"#.utf8)
        let first = buffer[4..<18], second = buffer[20...]
        #expect(try JSONParser.parse(first) == ["a": [1, "é"]])
        #expect(throws: JSONParseError.self) { try JSONParser.parse(second) }
        do { _ = try JSONParser.parse(second) } catch { #expect(error.offset == 5) }
    }

    @Test func roundTripKeepsOrderAndTypes() throws {
        let text = #"{"b":1,"a":[true,null,2.5,"x\n\"y\"",{"z":-3}],"c":"é"}"#
        let value = try JSONParser.parse(text)
        #expect(JSONWriter.string(value) == text)
        #expect(value["a"]?[2]?.doubleValue == 2.5)
        #expect(value["b"]?.intValue == 1)
    }

    @Test func unicodeEscapesAndSurrogates() throws {
        let value = try JSONParser.parse(#""\u00e9\ud83d\ude00""#)
        #expect(value.stringValue == "é😀")
    }

    @Test(arguments: ["{", "[1,]", "{\"a\" 1}", "tru", "\"abc", "01", "1.", "[1] 2", "\"\\x\""])
    func rejectsMalformedInput(_ text: String) {
        #expect(throws: JSONParseError.self) { try JSONParser.parse(text) }
    }

    /// Errors say where, for people: line and column (characters, 1-based) beside the byte offset.
    @Test func errorsNameLineAndColumn() {
        let cases: [(text: String, line: Int, column: Int, offset: Int)] = [
            ("{\"a\" 1}", 1, 6, 5),                        // at the 1
            ("{\n  \"a\": 1\n  \"b\": 2}", 3, 3, 13),   // the missing comma
            ("[\"é\", \"ü\" x]", 1, 11, 12),              // é and ü are two bytes, one column
            ("[1,\n", 2, 1, 4),                              // end of input
        ]
        for c in cases {
            do {
                _ = try JSONParser.parse(c.text)
                Issue.record("\(c.text) parsed")
            } catch {
                #expect((error.line, error.column, error.offset) == (c.line, c.column, c.offset), "\(c.text): \(error)")
                #expect(error.located(in: "f.json") == "f.json:\(c.line):\(c.column): not JSON: \(error.message)")
            }
        }
    }

    @Test func refusesHostileNesting() {
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(throws: JSONParseError.self) { try JSONParser.parse(deep) }
    }

    @Test func pathLookup() throws {
        let value = try JSONParser.parse(#"{"body":{"items":[{"id":7}]}}"#)
        #expect(value.value(atPath: "body.items.0.id") == 7)
        #expect(value.value(atPath: "body.items.1.id") == nil)
    }
}

@Suite(.ownThreads) struct JSONWriterEscapingTests {
    @Test func escapesWhatJSONRequiresAndCopiesTheRest() throws {
        let text = "plain \"quoted\" back\\slash\nnew\rret\ttab \u{01} é 😀 end"
        let written = JSONWriter.string(.string(text))
        #expect(written == #""plain \"quoted\" back\\slash\nnew\rret\ttab \u0001 é 😀 end""#)
        #expect(try JSONParser.parse(written) == .string(text))
        #expect(JSONWriter.string(.string("")) == #""""#)
        #expect(JSONWriter.string(.string("\"")) == #""\"""#)
        // A long string (not a small one stored inline).
        let long = String(repeating: "abc\"", count: 1000)
        #expect(try JSONParser.parse(JSONWriter.string(.string(long))) == .string(long))
    }

    /// The bytes writer skips eight bytes at a time past those that need no
    /// escape: every byte that needs one, at every position of every length
    /// around a word, is found; a byte above 0x7F stops an ASCII-only write.
    @Test func theBytesWriterFindsEveryByteToEscapeAtEveryPosition() {
        let specials: [UInt8] = [0x00, 0x01, 0x09, 0x0A, 0x1F, 0x22, 0x5C]
        let ordinary: [UInt8] = [0x20, 0x21, 0x23, 0x2F, 0x41, 0x5B, 0x5D, 0x7E, 0x7F]
        for length in 1...26 {
            for position in 0..<length {
                for special in specials + ordinary {
                    var bytes = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                    bytes[position] = special
                    var out: [UInt8] = []
                    JSONWriter.writeString(bytes: bytes[...], into: &out)
                    let expected = JSONWriter.string(.string(String(decoding: bytes, as: UTF8.self)))
                    #expect(String(decoding: out, as: UTF8.self) == expected, "length \(length), byte \(special) at \(position)")
                    var ascii: [UInt8] = []
                    #expect(JSONWriter.writeString(bytes: bytes[...], lowercase: false, asciiOnly: true, into: &ascii))
                    #expect(ascii == out)
                    // Lowered on the way (field names), capitals and escapes side by side, after text already written.
                    var upper = bytes.map { $0 == UInt8(ascii: "a") ? UInt8(ascii: "A") : $0 }
                    if position + 1 < length { upper[position + 1] = UInt8(ascii: "Z") }
                    var lowered = Array("x,".utf8)
                    #expect(JSONWriter.writeString(bytes: upper[...], lowercase: true, asciiOnly: true, into: &lowered))
                    let loweredText = String(decoding: upper, as: UTF8.self).lowercased()
                    #expect(String(decoding: lowered, as: UTF8.self) == "x," + JSONWriter.string(.string(loweredText)),
                            "lowered: length \(length), byte \(special) at \(position)")
                }
                var high = [UInt8](repeating: UInt8(ascii: "a"), count: length)
                high[position] = 0xC3
                var ignored: [UInt8] = []
                #expect(!JSONWriter.writeString(bytes: high[...], lowercase: false, asciiOnly: true, into: &ignored))
                #expect(!JSONWriter.writeString(bytes: high[...], lowercase: true, asciiOnly: true, into: &ignored))
            }
        }
        // A slice that does not start at 0 (a header value inside its block).
        let block = Array("Name: va\"lue-of-a-header\r\n".utf8)
        var out: [UInt8] = []
        JSONWriter.writeString(bytes: block[6..<24], into: &out)
        #expect(String(decoding: out, as: UTF8.self) == #""va\"lue-of-a-header""#)
    }

    /// Many small parts appended to one buffer that has no room to spare
    /// (each result of a group, encoded in turn): the buffer grows a few
    /// dozen times, not once per part, and keeps every byte.
    @Test func roomForAppendedPartsGrowsTheBufferGeometrically() {
        var out: [UInt8] = []
        var growths = 0
        for i in 0..<10_000 {
            let capacity = out.capacity
            out.reserveRoom(40)
            if out.capacity != capacity { growths += 1 }
            out.append(contentsOf: repeatElement(UInt8(truncatingIfNeeded: i), count: 40))
        }
        #expect(out.count == 400_000)
        #expect(growths < 40, "grew \(growths) times")
        #expect(out[399_999] == UInt8(truncatingIfNeeded: 9_999))
    }
}
