import Crypto
import Foundation

/// The AES-GCM key of what is kept at rest sealed (`aes-gcm` resources, auth
/// sessions' tokens), derived from the `HYDRA_SHARED_KEY` passphrase exactly
/// as shared data's (HKDF-SHA256, same salt and info), so one passphrase
/// protects them all. Sealed files are
/// nonce + ciphertext + tag (`AES.GCM.SealedBox.combined`). Immutable; any thread.
public struct AtRestKey: @unchecked Sendable {
    // @unchecked: `SymmetricKey` is not declared `Sendable`; it is never written after init.
    private let key: SymmetricKey

    /// Nil for a missing or empty passphrase, or one shorter than 16 characters
    /// (a server refuses those at startup, naming HYDRA_SHARED_KEY).
    public init?(passphrase: String?) {
        guard let passphrase, passphrase.count >= 16 else { return nil }
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
