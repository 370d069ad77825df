import Testing

@testable import HydraCore

@Suite(.ownThreads) struct JobIdentifierTests {
    @Test func idsAreShortAndGiveTheirKeyBack() {
        var seen = Set<String>()
        for _ in 0..<2000 {
            let (id, key) = JobIdentifier.next()
            #expect(JobIdentifier.key(of: id) == key)
            #expect(id.hasPrefix("j"))
            // Inline in a String (no allocation) until the counter passes five base-36 digits.
            if key < 36 * 36 * 36 * 36 * 36 { #expect(id.utf8.count <= 15, "\(id)") }
            seen.insert(id)
        }
        #expect(seen.count == 2000)
    }

    @Test func idsFromElsewhereHaveNoKey() {
        let (id, _) = JobIdentifier.next()
        // `j`, 8 digits of start time, 1 random digit.
        let prefix = String(id.prefix(10))
        #expect(JobIdentifier.key(of: "job-1") == nil)
        #expect(JobIdentifier.key(of: prefix) == nil)
        #expect(JobIdentifier.key(of: prefix + "-") == nil)
        #expect(JobIdentifier.key(of: prefix + "A") == nil)
        // More digits than a UInt64 holds.
        #expect(JobIdentifier.key(of: prefix + String(repeating: "z", count: 13)) == nil)
        #expect(JobIdentifier.key(of: prefix + "00010") == 36)
        // One id per key: the same number written otherwise is not one of ours.
        #expect(JobIdentifier.key(of: prefix + "10") == nil)
        #expect(JobIdentifier.key(of: prefix + "000010") == nil)
        #expect(JobIdentifier.key(of: prefix + "100000") == 36 * 36 * 36 * 36 * 36)
        #expect(JobIdentifier.key(of: prefix + "0100000") == nil)
    }

    /// Ids sort in the order they were made: the store's index of job ids
    /// grows at its end (see ``JobIdentifier``).
    @Test func idsSortAsTheyWereMade() {
        let ids = (0..<5000).map { _ in JobIdentifier.next().id }
        #expect(ids == ids.sorted())
        #expect(ids.allSatisfy { $0.utf8.count == ids[0].utf8.count })
    }
}
