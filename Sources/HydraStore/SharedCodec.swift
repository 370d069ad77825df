import CZlib
import Crypto
import Foundation
import HydraCore

/// Encodes shared values at rest: plain JSON, gzip, or AES-GCM with a key
/// derived (HKDF-SHA256) from the `HYDRA_SHARED_KEY` passphrase. Thread-safe.
struct SharedCodec: Sendable {
    /// The derived AES-256 key's bytes (`SymmetricKey` is not `Sendable`).
    private let keyBytes: [UInt8]?

    /// Errors when a passphrase is given but shorter than 16 characters.
    init(passphrase: String?) throws(StoreError) {
        guard let passphrase, !passphrase.isEmpty else {
            keyBytes = nil
            return
        }
        guard passphrase.count >= 16 else {
            throw StoreError("HYDRA_SHARED_KEY must be a passphrase of at least 16 characters")
        }
        let key = HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: Data(passphrase.utf8)),
                                         salt: Data("hydra-shared-v1".utf8), info: Data("shared".utf8),
                                         outputByteCount: 32)
        keyBytes = key.withUnsafeBytes { Array($0) }
    }

    static let missingKey = StoreError("cipher aes-gcm needs HYDRA_SHARED_KEY (a passphrase of 16+ characters) on the server")

    func encode(_ value: JSONValue, cipher: SharedCipher) throws(StoreError) -> [UInt8] {
        let clear = JSONWriter.bytes(value)
        switch cipher {
        case .none: return clear
        case .gzip: return try Gzip.compress(clear)
        case .aesGCM:
            guard let keyBytes else { throw SharedCodec.missingKey }
            let key = SymmetricKey(data: keyBytes)
            do {
                guard let sealed = try AES.GCM.seal(clear, using: key).combined else {
                    throw StoreError("aes-gcm: cannot seal")
                }
                return [UInt8](sealed)
            } catch {
                throw StoreError("aes-gcm: \(error)")
            }
        }
    }

    func decode(_ bytes: [UInt8], cipher: SharedCipher) throws(StoreError) -> JSONValue {
        let clear: [UInt8]
        switch cipher {
        case .none: clear = bytes
        case .gzip: clear = try Gzip.decompress(bytes)
        case .aesGCM:
            guard let keyBytes else { throw StoreError("an aes-gcm value cannot be read without HYDRA_SHARED_KEY") }
            let key = SymmetricKey(data: keyBytes)
            do {
                clear = [UInt8](try AES.GCM.open(AES.GCM.SealedBox(combined: Data(bytes)), using: key))
            } catch {
                throw StoreError("an aes-gcm value cannot be decrypted: HYDRA_SHARED_KEY differs from the one it was stored with")
            }
        }
        do { return try JSONParser.parse(clear) } catch { throw StoreError("a shared value is corrupt: \(error)") }
    }
}

/// gzip through zlib (RFC 1952 framing).
enum Gzip {
    static func compress(_ input: [UInt8]) throws(StoreError) -> [UInt8] {
        var stream = z_stream()
        guard hydra_deflate_init_gzip(&stream, Z_DEFAULT_COMPRESSION) == Z_OK else { throw StoreError("gzip: init failed") }
        defer { deflateEnd(&stream) }
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, UInt(input.count))) + 32)
        var source = input
        let status = source.withUnsafeMutableBufferPointer { src in
            output.withUnsafeMutableBufferPointer { dst in
                stream.next_in = src.baseAddress
                stream.avail_in = UInt32(src.count)
                stream.next_out = dst.baseAddress
                stream.avail_out = UInt32(dst.count)
                return deflate(&stream, Z_FINISH)
            }
        }
        guard status == Z_STREAM_END else { throw StoreError("gzip: compression failed (\(status))") }
        return Array(output.prefix(Int(stream.total_out)))
    }

    static func decompress(_ input: [UInt8]) throws(StoreError) -> [UInt8] {
        var stream = z_stream()
        guard hydra_inflate_init_gzip(&stream) == Z_OK else { throw StoreError("gzip: init failed") }
        defer { inflateEnd(&stream) }
        var source = input
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var status: Int32 = Z_OK
        source.withUnsafeMutableBufferPointer { src in
            stream.next_in = src.baseAddress
            stream.avail_in = UInt32(src.count)
            repeat {
                let produced: Int = chunk.withUnsafeMutableBufferPointer { dst in
                    stream.next_out = dst.baseAddress
                    stream.avail_out = UInt32(dst.count)
                    status = inflate(&stream, Z_NO_FLUSH)
                    return dst.count - Int(stream.avail_out)
                }
                output.append(contentsOf: chunk[..<produced])
            } while status == Z_OK
        }
        guard status == Z_STREAM_END else { throw StoreError("gzip: a stored value is corrupt (\(status))") }
        return output
    }
}
