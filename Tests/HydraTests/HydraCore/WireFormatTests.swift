import Foundation
import Testing

@testable import Hydra

/// The hand-written formatters of wire text (times, hex digests) against
/// Foundation's `String(format:)`, which they replace on hot paths.
@Suite(.ownThreads) struct WireFormatTests {
    /// The reference: what ``HydraEvent/format(_:)`` wrote with `String(format:)`.
    private static func reference(_ time: Double) -> String {
        let time = time.isNaN ? 0 : min(max(time, 0), 253_402_300_799.999)
        var seconds = time_t(time.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let millis = Int((time - time.rounded(.down)) * 1000)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1,
                      Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), millis)
    }

    @Test func timesAreWrittenAsFoundationWroteThem() {
        let edges: [Double] = [0, 0.0005, 0.999, 0.9999, 1, 59.999, 951_782_400, 1_764_140_800.123,
                               253_402_300_799.999, 253_402_300_800, 1e300, .infinity, -1, -.infinity, .nan]
        for time in edges {
            #expect(HydraEvent.format(time) == Self.reference(time), "\(time)")
        }
        #expect(HydraEvent.format(1e300).hasPrefix("9999-12-31T23:59:59."))
        #expect(HydraEvent.format(-5) == "1970-01-01T00:00:00.000Z")
        var random = SeededRandom(seed: 0x7_1e5_eed)
        for _ in 0..<20_000 {
            let time = Double.random(in: 0...253_402_300_800, using: &random)
            #expect(HydraEvent.format(time) == Self.reference(time), "\(time)")
        }
    }

    @Test func hexIsTwoLowerCaseDigitsAByte() {
        #expect(Hex.string([UInt8]()) == "")
        #expect(Hex.string([0, 1, 15, 16, 127, 128, 254, 255]) == "00010f107f80feff")
        var random = SeededRandom(seed: 16)
        for _ in 0..<200 {
            let bytes = (0..<Int.random(in: 0...64, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            #expect(Hex.string(bytes) == bytes.map { String(format: "%02x", $0) }.joined())
            #expect(Hex.string(bytes[...]) == Hex.string(bytes))
        }
    }
}
