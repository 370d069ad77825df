import Foundation
import HydraAtRest
import HydraHTTP
import HydraCore

/// Encodes shared values at rest: plain JSON text, gzip of it, or AES-GCM of
/// it with the ``AtRestKey`` of the `HYDRA_SHARED_KEY` passphrase. Thread-safe: any thread may encode or decode.
///
/// Errors never contain the value, in clear or encoded.
struct SharedCodec: Sendable {
    private let key: AtRestKey?

    /// The environment variable the passphrase comes from, named in errors.
    static let keyVariable = "HYDRA_SHARED_KEY"

    /// Errors (naming `HYDRA_SHARED_KEY`) when a passphrase is given but
    /// shorter than 16 characters. An empty passphrase counts as none (an
    /// empty environment variable).
    init(passphrase: String?) throws(StoreError) {
        guard let passphrase, !passphrase.isEmpty else {
            key = nil
            return
        }
        guard let key = AtRestKey(passphrase: passphrase) else {
            throw StoreError("\(Self.keyVariable) must be a passphrase of at least \(AtRestKey.minimumPassphraseLength) characters")
        }
        self.key = key
    }

    /// The failure of `setShared` with aes-gcm and no key: nothing is stored.
    static let missingKey = StoreError("cipher: aes-gcm needs \(keyVariable) (a passphrase of 16+ characters)",
                                       invalidArgument: "cipher")

    /// Throws ``missingKey`` when `cipher` is aes-gcm and there is no key:
    /// what `encode` would refuse, asked before anything else is done.
    func check(_ cipher: SharedCipher) throws(StoreError) {
        if cipher == .aesGCM, key == nil { throw Self.missingKey }
    }

    /// The bytes to store for `value`.
    func encode(_ value: JSONValue, cipher: SharedCipher) throws(StoreError) -> [UInt8] {
        try check(cipher)
        let clear = JSONWriter.bytes(value)
        switch cipher {
        case .none: return clear
        case .gzip:
            do { return try Gzip.compress(clear) } catch { throw StoreError(error.description) }
        case .aesGCM:
            guard let key else { throw Self.missingKey }
            do { return try key.seal(clear) } catch {
                throw StoreError("aes-gcm: cannot encrypt: \(error)")
            }
        }
    }

    /// The value stored as `bytes` under `key` (named in errors) with `cipher`.
    func decode(_ bytes: [UInt8], cipher: SharedCipher, key name: String) throws(StoreError) -> JSONValue {
        let clear: [UInt8]
        switch cipher {
        case .none: clear = bytes
        case .gzip:
            do { clear = try Gzip.decompress(bytes) } catch { throw StoreError("shared key \"\(name)\" is corrupt in the store (\(error))") }
        case .aesGCM:
            guard let key else {
                throw StoreError("shared key \"\(name)\" is encrypted (aes-gcm): it cannot be read without \(Self.keyVariable)",
                                 invalidArgument: "key")
            }
            do {
                clear = try key.open(bytes)
            } catch {
                // The caller's reading, like a key without the variable: -32602, not an internal error.
                throw StoreError("shared key \"\(name)\" cannot be decrypted: \(Self.keyVariable) differs from the passphrase it was stored with",
                                 invalidArgument: "key")
            }
        }
        // Written by the engine: a value a job set may nest deeper than a request may.
        do { return try clear.withUnsafeBufferPointer { b throws(JSONParseError) in try JSONParser.parse(b, maxDepth: JSONParser.maxStoredDepth) } } catch {
            // The parser's message may quote a character of the value: not repeated here.
            throw StoreError("shared key \"\(name)\" is corrupt in the store (not JSON once decoded)")
        }
    }
}
