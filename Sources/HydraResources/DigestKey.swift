/// A resource key (the 64 hex digits of a SHA-256, see ``ResourceKey``) as
/// the key of a dictionary: hashed by its first 16 bytes, compared whole.
///
/// Why: a memory hit looks its key up twice (the memory tier, the uses
/// waiting for the index), and hashing 64 characters cost ~600 instructions
/// each time, a sixth of the worker's work per hit. The key is already a
/// digest: its first 16 hex digits (64 bits) spread as well as the whole,
/// and finding two keys that share them is as hard as a 64-bit collision.
/// Any other string works too (hashed by its first 16 bytes).
struct DigestKey: Hashable, Sendable {
    let text: String
    private let head: (UInt64, UInt64)

    init(_ text: String) {
        var text = text
        head = text.withUTF8 { bytes in
            if bytes.count >= 16 {
                let raw = UnsafeRawBufferPointer(bytes)
                return (raw.loadUnaligned(as: UInt64.self), raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
            }
            var head: (UInt64, UInt64) = (0, 0)
            for (i, byte) in bytes.enumerated() {
                if i < 8 { head.0 |= UInt64(byte) << (8 * UInt64(i)) } else { head.1 |= UInt64(byte) << (8 * UInt64(i - 8)) }
            }
            return head
        }
        self.text = text
    }

    static func == (a: DigestKey, b: DigestKey) -> Bool { a.head == b.head && a.text == b.text }

    func hash(into hasher: inout Hasher) {
        hasher.combine(head.0)
        hasher.combine(head.1)
    }
}
