/// How a resource's copy is kept at rest (`cipher` of a `resource` job).
public enum ResourceCipher: String, Sendable, CaseIterable {
    case none
    /// Compressed with gzip; served decompressed.
    case gzip
    /// AES-GCM with the key derived from `HYDRA_SHARED_KEY` (as shared data):
    /// no byte of the content is ever stored or emitted in clear.
    case aesGCM = "aes-gcm"
}
