import Crypto
import HydraHTTP

/// The SHA-256 of a copy as its body is written to the repository
/// (``HTTPBodyDigest``), so a large copy is never read back to be hashed.
/// Confined to the worker's loop thread that runs the transfer; `Sendable`
/// only to travel in the request.
final class StreamedDigest: HTTPBodyDigest, @unchecked Sendable {
    private var hash = SHA256()

    func update(_ bytes: UnsafeRawBufferPointer) { hash.update(bufferPointer: bytes) }

    func reset() { hash = SHA256() }

    /// The digest of what was seen, in hex.
    func hex() -> String { ResourceKey.hex(hash.finalize()) }
}
