import Testing

@testable import HydraCore

/// `UTF8Text` against the standard library's validating initializer.
@Suite(.ownThreads) struct UTF8TextTests {
    @Test func answersAsTheStandardLibraryDoes() {
        let cases: [[UInt8]] = [
            [], Array("plain ascii".utf8), Array("é, 日本, 🐉".utf8),
            [0xFF], [0xC3], [0xE2, 0x82], [0xC0, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80],
            Array("ok".utf8) + [0x80] + Array("ok".utf8), Array("\u{FFFD}".utf8), [0xEF, 0xBF, 0xBD, 0xFF],
        ]
        for bytes in cases {
            #expect(UTF8Text.string(validating: bytes) == String(validating: bytes, as: UTF8.self), "\(bytes)")
            #expect(UTF8Text.string(validating: bytes[...]) == String(validating: bytes, as: UTF8.self), "\(bytes)")
            #expect(bytes.withUnsafeBufferPointer(UTF8Text.string(validating:)) == String(validating: bytes, as: UTF8.self), "\(bytes)")
        }
        // Random bytes, mostly ASCII with some high ones: every answer the same.
        var random = SeededRandom(seed: 7)
        for _ in 0..<2000 {
            let bytes = (0..<Int(random.next() % 12)).map { _ -> UInt8 in
                let r = random.next()
                return r % 3 == 0 ? UInt8(truncatingIfNeeded: r >> 8) | 0x80 : UInt8(truncatingIfNeeded: r >> 8) & 0x7F
            }
            #expect(UTF8Text.string(validating: bytes) == String(validating: bytes, as: UTF8.self), "\(bytes)")
        }
    }
}
