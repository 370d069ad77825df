import Testing

import HydraCore
@testable import HydraHTTP

/// The search behind masking is glibc's `memmem` for large inputs and a
/// first-byte scan for small ones (CCurl's `hydra_memmem`): both are checked
/// against a plain Swift search, on the cases glibc's own memmem tests stress
/// (empty and one-byte needles, matches at either end, near-misses that share
/// a long prefix, periodic text) and on generated ones either side of the limits.
@Suite(.ownThreads) struct SecretMaskingTests {
    /// `bytes` with every non-overlapping `secret`, left to right, replaced by `***`.
    static func expected(_ bytes: [UInt8], _ secret: [UInt8]) -> [UInt8]? {
        guard !secret.isEmpty, secret.count <= bytes.count else { return nil }
        var out: [UInt8] = []
        var i = 0
        var found = false
        while i < bytes.count {
            if i + secret.count <= bytes.count, bytes[i..<(i + secret.count)].elementsEqual(secret) {
                out += Array("***".utf8)
                i += secret.count
                found = true
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return found ? out : nil
    }

    static func masked(_ bytes: [UInt8], _ secret: [UInt8]) -> [UInt8]? {
        secret.withUnsafeBufferPointer { SecretMasking.masked(bytes, $0) }
    }

    @Test func edgeCases() {
        let cases: [(String, String)] = [
            ("", "a"), ("a", "a"), ("a", "ab"), ("ab", "b"), ("ba", "b"), ("aaa", "aa"), ("abcabc", "abc"),
            ("xxabcabd", "abd"), ("abababac", "ababac"), ("token", "token"), ("tokentoken", "token"),
            ("Authorization: Bearer tok", "tok"), ("tok Bearer", "tok"), ("to", "tok"),
        ]
        for (text, secret) in cases {
            #expect(Self.masked(Array(text.utf8), Array(secret.utf8)) == Self.expected(Array(text.utf8), Array(secret.utf8)),
                    "\(text) / \(secret)")
        }
    }

    /// Periodic haystacks over two letters make candidates at nearly every byte
    /// and long shared prefixes: the cases where a first-byte scan could go wrong.
    @Test func generatedAgainstAPlainSearch() {
        var rng = SeededRandom(seed: 0x5EC2E7)
        for round in 0..<3000 {
            let alphabet: [UInt8] = round % 3 == 0 ? [0x61, 0x62] : (round % 3 == 1 ? [0x61, 0x62, 0x63, 0x00] : Array(0x20...0x7E))
            // Haystacks on both sides of the 1 KiB limit, needles on both sides of 128 bytes.
            let length = [Int(rng.next() % 64), Int(rng.next() % 1100), 1000 + Int(rng.next() % 60), Int(rng.next() % 3000)][round % 4]
            let needleLength = 1 + Int(rng.next() % UInt64(round % 5 == 0 ? 140 : 12))
            var hay = (0..<length).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }
            var needle = (0..<needleLength).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }
            if round % 2 == 0, length >= needleLength {
                // Plant the needle (at the start, the end or inside), sometimes with its last byte changed.
                let at = [0, length - needleLength, Int(rng.next() % UInt64(length - needleLength + 1))][round % 3]
                hay.replaceSubrange(at..<(at + needleLength), with: needle)
                if round % 4 == 0 { needle[needleLength - 1] ^= 1 }
            }
            #expect(Self.masked(hay, needle) == Self.expected(hay, needle), "round \(round)")
        }
    }

    /// The one-pass check for credential parts in header names against a
    /// plain substring search, on names built from the parts' own letters.
    @Test func credentialNamePartsAgainstAPlainSearch() {
        var rng = SeededRandom(seed: 0x70CE2)
        let letters = Array("tokenapi-ky".utf8)
        for _ in 0..<5000 {
            let length = Int(rng.next() % 14)
            let name = String(decoding: (0..<length).map { _ in letters[Int(rng.next() % UInt64(letters.count))] }, as: UTF8.self)
            let plain = ["api-key", "apikey", "token"].contains { name.contains($0) }
            #expect(CredentialHeaders.hasCredentialPart(lowercased: name) == plain, "\(name)")
        }
        for name in ["x-api-key", "x-apikey", "x-auth-token", "token", "apikey", "user-agent", "tok", "api-ke", ""] {
            #expect(CredentialHeaders.hasCredentialPart(lowercased: name) == ["api-key", "apikey", "token"].contains { name.contains($0) })
        }
    }
}
