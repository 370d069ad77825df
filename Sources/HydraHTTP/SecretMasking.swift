import CCurl
import Foundation

/// Replacing secret byte strings (a token, an api key) with `***` in what a
/// server sent back, before anything is decoded or reported: a server that
/// echoes a request's credentials must not put them in a result or an event.
public enum SecretMasking {
    static let replacement = Array("***".utf8)

    /// `bytes` with each of `secrets` (UTF-8 texts) replaced by `***`; the same
    /// bytes, nothing copied, when none occurs.
    public static func masked(_ bytes: [UInt8], secrets: [String]) -> [UInt8] {
        var out = bytes
        for var secret in secrets {
            secret.makeContiguousUTF8()
            secret.utf8.withContiguousStorageIfAvailable { needle in
                if let replaced = masked(out, needle) { out = replaced }
            }
        }
        return out
    }

    /// `bytes` with every occurrence of `secret` replaced; nil when it does not
    /// occur (the common case: one `memmem`, nothing copied).
    static func masked(_ bytes: [UInt8], _ secret: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        guard secret.count > 0, secret.count <= bytes.count, let first = find(secret, in: bytes, from: 0) else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var start = 0
        var hit: Int? = first
        while let at = hit {
            out.append(contentsOf: bytes[start..<at])
            out.append(contentsOf: replacement)
            start = at + secret.count
            hit = find(secret, in: bytes, from: start)
        }
        out.append(contentsOf: bytes[start...])
        return out
    }

    private static func find(_ needle: UnsafeBufferPointer<UInt8>, in haystack: [UInt8], from start: Int) -> Int? {
        guard start < haystack.count else { return nil }
        return haystack.withUnsafeBytes { hay in
            guard let found = hydra_memmem(hay.baseAddress! + start, hay.count - start, needle.baseAddress!, needle.count) else {
                return nil
            }
            return hay.baseAddress!.distance(to: UnsafeRawPointer(found))
        }
    }
}

extension HTTPResponse {
    /// Replaces each of `secrets` (UTF-8 texts) with `***` in the body and the
    /// header fields. Cheap when none occurs.
    public mutating func mask(_ secrets: [String]) {
        for secret in secrets { mask(secret) }
    }

    /// Replaces `secret` (a UTF-8 text) with `***` in the body and the header
    /// fields: one `memmem` over each when it does not occur. (Not generic over
    /// a sequence: it runs for every response of a request with credentials,
    /// and an unspecialized call from another module looks up witnesses per element.)
    public mutating func mask(_ secret: String) {
        var secret = secret
        secret.makeContiguousUTF8()
        secret.utf8.withContiguousStorageIfAvailable { needle in
            if let body = SecretMasking.masked(body, needle) { self.body = body }
            if let bytes = SecretMasking.masked(headers.bytes, needle) { headers = HTTPHeaderBlock(raw: bytes) }
        }
    }
}
