import Testing

@testable import HydraResources

@Suite(.ownThreads) struct DigestKeyTests {
    @Test func keysAreComparedWholeThoughHashedByTheirHead() {
        let a = String(repeating: "a", count: 16) + "0123"
        let b = String(repeating: "a", count: 16) + "0124"
        #expect(DigestKey(a) == DigestKey(a))
        #expect(DigestKey(a) != DigestKey(b))
        #expect(DigestKey(a).hashValue == DigestKey(b).hashValue)
        // Shorter than the head, empty, and not ASCII: still keys.
        var table: [DigestKey: Int] = [DigestKey(a): 1, DigestKey(b): 2, DigestKey("ab"): 3, DigestKey(""): 4, DigestKey("é"): 5]
        #expect(table[DigestKey(a)] == 1 && table[DigestKey(b)] == 2)
        #expect(table[DigestKey("ab")] == 3 && table[DigestKey("")] == 4 && table[DigestKey("é")] == 5)
        #expect(table[DigestKey("a")] == nil)
        table[DigestKey(b)] = nil
        #expect(table.count == 4 && table[DigestKey(a)] == 1)
    }

    @Test func realKeysSpreadOverTheirHeads() {
        let keys = (0..<1000).map { ResourceKey.make(url: "http://h/\($0)", remaker: nil, options: nil) }
        #expect(Set(keys.map { DigestKey($0).hashValue }).count == 1000)
        #expect(Set(keys.map(DigestKey.init)).count == 1000)
    }
}
