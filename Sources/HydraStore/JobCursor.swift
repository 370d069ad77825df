import Foundation

/// The `job.list` cursor: the last row's `createdAt` (exact bits, in hex) and
/// `jobId`. Opaque to clients.
enum JobCursor {
    static func encode(createdAt: Double, jobId: String) -> String {
        String(createdAt.bitPattern, radix: 16) + "|" + jobId
    }

    static func decode(_ cursor: String) -> (createdAt: Double, jobId: String)? {
        guard let bar = cursor.firstIndex(of: "|"), let bits = UInt64(cursor[..<bar], radix: 16) else { return nil }
        let createdAt = Double(bitPattern: bits)
        guard !createdAt.isNaN else { return nil }
        return (createdAt, String(cursor[cursor.index(after: bar)...]))
    }
}
