import HydraCore
import Testing

@testable import HydraResources

/// The memory tier's order of use and byte budget, driven directly (the
/// resource job suites exercise it through real transfers).
@Suite(.ownThreads) struct MemoryTierTests {
    private func record(_ key: String, bytes: Int) -> ResourceRecord {
        ResourceRecord(key: key, url: "http://h/\(key)", bytes: bytes, diskBytes: bytes, contentType: nil,
                       sha256: String(repeating: "a", count: 64), etag: nil, lastModified: nil,
                       storedAt: 0, lastUsedAt: 0, cipher: .none)
    }

    private func put(_ tier: MemoryTier, _ key: String, bytes: Int) {
        tier.put(record(key, bytes: bytes), content: [UInt8](repeating: 7, count: bytes), result: ["key": .string(key)])
    }

    @Test func evictsTheLeastRecentlyUsedPastItsBytes() {
        var accounted = 0
        let tier = MemoryTier(capacity: 100) { accounted += $0 }
        for key in ["a", "b", "c", "d"] { put(tier, key, bytes: 25) }
        #expect(tier.keysByUse == ["a", "b", "c", "d"] && tier.bytes == 100 && accounted == 100)
        #expect(tier.get("b")?.fields["key"] == "b")  // b is now the newest
        #expect(tier.get("d") != nil)                  // the newest stays the newest
        #expect(tier.keysByUse == ["a", "c", "b", "d"])
        put(tier, "e", bytes: 40)                      // 140 bytes: a and c go
        #expect(tier.keysByUse == ["b", "d", "e"] && tier.bytes == 90 && accounted == 90)
        #expect(tier.get("a") == nil && tier.get("c") == nil)
        put(tier, "d", bytes: 10)                      // replaced, and now the newest
        #expect(tier.keysByUse == ["b", "e", "d"] && tier.bytes == 75)
        put(tier, "huge", bytes: 101)                  // never fits: nothing else goes
        #expect(tier.keysByUse == ["b", "e", "d"] && tier.get("huge") == nil)
        tier.remove("e")
        tier.remove("e")
        #expect(tier.keysByUse == ["b", "d"] && tier.bytes == 35)
        tier.removeAll()
        #expect(tier.keysByUse.isEmpty && tier.count == 0 && tier.bytes == 0 && accounted == 0)
        put(tier, "f", bytes: 5)
        #expect(tier.keysByUse == ["f"] && tier.get("f")?.content.count == 5)
    }

    /// Many entries, touched in a generated order, against a plain model of an LRU.
    @Test func agreesWithAModelUnderGeneratedUse() {
        var random = SystemRandomNumberGenerator()
        let tier = MemoryTier(capacity: 1000) { _ in }
        var model: [(key: String, bytes: Int)] = []  // least recently used first
        for _ in 0..<5000 {
            let key = "k\(Int.random(in: 0..<60, using: &random))"
            if Bool.random(using: &random) {
                let bytes = Int.random(in: 1...120, using: &random)
                put(tier, key, bytes: bytes)
                model.removeAll { $0.key == key }
                model.append((key, bytes))
                while model.reduce(0, { $0 + $1.bytes }) > 1000 { model.removeFirst() }
            } else {
                let hit = tier.get(key)
                if let at = model.firstIndex(where: { $0.key == key }) {
                    #expect(hit?.content.count == model[at].bytes)
                    model.append(model.remove(at: at))
                } else {
                    #expect(hit == nil)
                }
            }
            #expect(tier.keysByUse == model.map(\.key))
            #expect(tier.bytes == model.reduce(0) { $0 + $1.bytes })
        }
    }
}
