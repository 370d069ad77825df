import Crypto
import Foundation

/// The AES-GCM key of everything kept sealed at rest (`aes-gcm` shared
/// values, `aes-gcm` resources, auth sessions' tokens), derived from the
/// `HYDRA_SHARED_KEY` passphrase with HKDF-SHA256: one passphrase, one
/// derivation, in this one place. Sealed bytes are nonce + ciphertext + tag
/// (`AES.GCM.SealedBox.combined`). Immutable; any thread.
///
/// A module of its own because the store (shared data) and the managers
/// (resources, auth tokens) both seal, and neither layer imports the other.
public struct AtRestKey: @unchecked Sendable {
    // @unchecked: `SymmetricKey` is not declared `Sendable`; it is never written after init.
    private let key: SymmetricKey

    /// The shortest passphrase accepted.
    public static let minimumPassphraseLength = 16

    /// Nil for a missing or empty passphrase, or one shorter than 16 characters
    /// (a server refuses those at startup, naming HYDRA_SHARED_KEY).
    public init?(passphrase: String?) {
        guard let passphrase, passphrase.count >= Self.minimumPassphraseLength else { return nil }
        key = HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: Data(passphrase.utf8)),
                                     salt: Data("hydra-shared-v1".utf8), info: Data("shared".utf8),
                                     outputByteCount: 32)
    }

    public func seal(_ clear: [UInt8]) throws -> [UInt8] {
        guard let combined = try AES.GCM.seal(clear, using: key).combined else {
            throw CryptoKitError.incorrectParameterSize
        }
        return [UInt8](combined)
    }

    public func open(_ sealed: [UInt8]) throws -> [UInt8] {
        [UInt8](try AES.GCM.open(AES.GCM.SealedBox(combined: sealed), using: key))
    }
}
