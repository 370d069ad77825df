import Foundation
import Synchronization

/// Job ids: a prefix unique per process start (time-based), then a counter,
/// so ids never repeat across restarts. The counter doubles as the
/// coordinator's integer key for the job, recovered by ``key(of:)``.
///
/// An id is `j`, the start time in milliseconds (8 base-36 digits), one random
/// digit, then the counter in base 36, at least ``counterDigits`` digits (led
/// by zeros): 15 bytes up to 60 million jobs per process. Fifteen bytes is
/// what Swift keeps inline in a `String`, so an id costs no allocation and no
/// reference counting wherever it is copied (the submitter, coordinator,
/// store and RPC threads each copy it several times per job); longer ids stay
/// correct, they are just heap strings.
///
/// Ids sort as they were made (up to 60 million per process): the store's
/// index of job ids then grows at its right end, one page per commit, its
/// leaves full. With the counter unpadded, `…o10` sorted before `…o2`: every
/// new id went in beside an older, shorter one in the middle of the index,
/// splitting leaves there (two pages and more per commit, leaves a third empty).
public enum JobIdentifier {
    private static let digits: [UInt8] = Array("0123456789abcdefghijklmnopqrstuvwxyz".utf8)
    private static let prefixBytes: [UInt8] = {
        let millis = UInt64(Date().timeIntervalSince1970 * 1000)
        return Array("j".utf8) + base36(millis) + [digits[Int.random(in: 0..<36)]]
    }()
    private static let counter = Atomic<UInt64>(0)
    /// The counter's digits in an id, at least: 36^5 is 60,466,176.
    static let counterDigits = 5

    /// A new id and its key.
    public static func next() -> (id: String, key: UInt64) {
        let key = nextKey()
        let length = digitCount(key)
        // Written as bytes in one go (up to 15 bytes: an inline string, no allocation);
        // appending scalars one by one cost ~1k instructions per id.
        let prefix = prefixBytes, digits = self.digits  // read once: each access to a static is a `swift_once` check
        let total = prefix.count + length
        let id = String(unsafeUninitializedCapacity: total) { out in
            for i in prefix.indices { out[i] = prefix[i] }
            var rest = key
            for i in stride(from: total - 1, through: prefix.count, by: -1) {
                out[i] = digits[Int(rest % 36)]
                rest /= 36
            }
            return total
        }
        return (id, key)
    }

    /// A new key for an id this process did not make.
    static func nextKey() -> UInt64 { counter.add(1, ordering: .relaxed).newValue }

    /// How many digits an id gives `key`: its base-36 digits, at least ``counterDigits``.
    private static func digitCount(_ key: UInt64) -> Int {
        var length = 1
        var left = key / 36
        while left > 0 {
            length += 1
            left /= 36
        }
        return max(length, counterDigits)
    }

    /// The key of an id made by this process, else nil.
    public static func key(of id: String) -> UInt64? {
        let bytes = id.utf8
        guard bytes.count > prefixBytes.count, bytes.count <= prefixBytes.count + 13,
              bytes.starts(with: prefixBytes) else { return nil }
        var key: UInt64 = 0
        for byte in bytes.dropFirst(prefixBytes.count) {
            let digit: UInt64
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt64(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "z"): digit = UInt64(byte - UInt8(ascii: "a")) + 10
            default: return nil
            }
            let (shifted, overflow) = key.multipliedReportingOverflow(by: 36)
            let (sum, carry) = shifted.addingReportingOverflow(digit)
            guard !overflow, !carry else { return nil }
            key = sum
        }
        // Only the id this process made for the key: `…o00010`, not `…o10` nor `…o000010`.
        guard bytes.count - prefixBytes.count == digitCount(key) else { return nil }
        return key
    }

    /// `value` in base 36, most significant digit first.
    private static func base36(_ value: UInt64) -> [UInt8] {
        var out: [UInt8] = []
        var rest = value
        repeat {
            out.append(digits[Int(rest % 36)])
            rest /= 36
        } while rest > 0
        return out.reversed()
    }
}
