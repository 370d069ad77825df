import CCurl
import Foundation

/// Replacing secret byte strings (a token, an api key) with `***` in what a
/// server sent back, before anything is decoded or reported: a server that
/// echoes a request's credentials must not put them in a result or an event.
enum SecretMasking {
    static let replacement = Array("***".utf8)

    /// `bytes` with every occurrence of each secret replaced; nil when none occurs
    /// (the common case: one `memmem` per secret, nothing copied).
    static func masked(_ bytes: [UInt8], _ secrets: [[UInt8]]) -> [UInt8]? {
        var current = bytes
        var changed = false
        for secret in secrets where !secret.isEmpty && secret.count <= current.count {
            guard let first = find(secret, in: current, from: 0) else { continue }
            var out: [UInt8] = []
            out.reserveCapacity(current.count)
            var start = 0
            var hit: Int? = first
            while let at = hit {
                out.append(contentsOf: current[start..<at])
                out.append(contentsOf: replacement)
                start = at + secret.count
                hit = find(secret, in: current, from: start)
            }
            out.append(contentsOf: current[start...])
            current = out
            changed = true
        }
        return changed ? current : nil
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard start < haystack.count else { return nil }
        return haystack.withUnsafeBytes { hay in
            needle.withUnsafeBytes { n in
                guard let found = hydra_memmem(hay.baseAddress! + start, hay.count - start, n.baseAddress!, n.count) else { return nil }
                return hay.baseAddress!.distance(to: UnsafeRawPointer(found))
            }
        }
    }
}

extension HTTPResponse {
    /// Replaces each of `secrets` (UTF-8 texts) with `***` in the body and the
    /// header fields. Cheap when none occurs.
    public mutating func mask(_ secrets: [String]) {
        let needles = secrets.map { Array($0.utf8) }
        if let body = SecretMasking.masked(body, needles) { self.body = body }
        if let headerBytes = SecretMasking.masked(headers.bytes, needles) { headers = HTTPHeaderBlock(raw: headerBytes) }
    }
}
