import Foundation

/// How a shared value is kept at rest.
public enum SharedCipher: String, Sendable, CaseIterable {
    case none
    /// AES-GCM with a key derived from `HYDRA_SHARED_KEY`: never stored or emitted in clear.
    case aesGCM = "aes-gcm"
    case gzip
}
