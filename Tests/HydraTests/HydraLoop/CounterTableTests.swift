import Testing

@testable import HydraLoop

@Suite(.ownThreads) struct CounterTableTests {
    final class Box {
        let n: UInt64
        init(_ n: UInt64) { self.n = n }
    }

    @Test func consecutiveKeysComeAndGo() {
        var table = CounterTable<Box>(capacity: 64)
        for key in UInt64(1)...200 {
            table.insert(Box(key), forKey: key)
            // A sliding window of 50 live keys, oldest removed first.
            if key > 50 { #expect(table.removeValue(forKey: key - 50)?.n == key - 50) }
        }
        #expect(table.count == 50)
        #expect(table[150] == nil)
        #expect(table[151]?.n == 151)
        #expect(table[200]?.n == 200)
        #expect(table[201] == nil)
        #expect(table.removeValue(forKey: 10) == nil)
        #expect(Set(table.allValues.map(\.n)) == Set(151...200))
    }

    @Test func keysATableApartShareASlotCorrectly() {
        var table = CounterTable<Box>(capacity: 16)
        // 3, 19, 35 all map to slot 3 of 16.
        for key: UInt64 in [3, 19, 35] { table.insert(Box(key), forKey: key) }
        #expect(table.count == 3)
        #expect([3, 19, 35].map { table[$0]?.n } == [3, 19, 35])
        #expect(table.removeValue(forKey: 3)?.n == 3)
        #expect(table[3] == nil)
        #expect(table[19]?.n == 19)
        // Replacing an entry does not add one.
        table.insert(Box(190), forKey: 19)
        #expect(table[19]?.n == 190)
        #expect(table.count == 2)
        table.insert(Box(3), forKey: 3)
        #expect(table.count == 3)
        #expect(Set(table.allValues.map(\.n)) == [3, 190, 35])
    }

    @Test func longLivedKeysMakeItGrowWithoutLosingAny() {
        var table = CounterTable<Box>(capacity: 16)
        // Every key stays: the window outgrows the slots many times over.
        for key in UInt64(1)...5000 { table.insert(Box(key), forKey: key) }
        #expect(table.count == 5000)
        #expect((1...5000).allSatisfy { table[UInt64($0)]?.n == UInt64($0) })
        for key in stride(from: UInt64(1), through: 5000, by: 2) { table.removeValue(forKey: key) }
        #expect(table.count == 2500)
        #expect(table[4999] == nil)
        #expect(table[5000]?.n == 5000)
        #expect(table.allValues.count == 2500)
    }
}
