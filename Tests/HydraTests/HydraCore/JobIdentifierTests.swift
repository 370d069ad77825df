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
        #expect(JobIdentifier.key(of: prefix + "10") == 36)
    }
}
