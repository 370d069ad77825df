import Foundation
import HydraAtRest
import HydraCore
import HydraHTTP
import HydraREST

/// Keeps a copy that is not streamed to disk as it arrives (it is remade,
/// kept gzip-compressed or aes-gcm-sealed, or a plain one small enough to be
/// received in memory: ``ResourceExecutor/spoolBytes``): remakes the fetched body, checks
/// the job's `sha256`, applies the cipher and writes the file at rest through
/// a temporary file. Blocking work, for the thread pool (see
/// ``HydraLoop/EventLoop/offload(_:then:)``); a value, so it travels there as it is.
struct CopyWriter: Sendable {
    /// What was kept: the clear content (for the memory tier and `as`), the
    /// size of the file at rest, and the digest the index keeps: the clear
    /// bytes', except for `aes-gcm` (the sealed file's: nothing derived from
    /// its clear bytes is indexed).
    struct Copy: Sendable {
        let content: [UInt8]
        let diskBytes: Int
        let sha256: String
        /// The file's identity (``ResourceRecord/fileID``).
        let fileID: UInt64?
    }

    let manager: ResourceManager
    let components: [String]
    let body: [UInt8]
    let remake: (name: String, remaker: ResourceManager.Remaker, options: JSONValue)?
    let cipher: ResourceCipher
    /// The digests the content may have (the jobs' `sha256`s); nil: any.
    let accepted: Set<String>?

    /// The failure of content whose digest no job gave (resources.md: kind `invalid`).
    /// For an `aes-gcm` copy the content's own digest is left out: the job's error
    /// is stored, and nothing derived from its clear bytes may be.
    static func mismatch(_ digest: String, _ accepted: Set<String>, cipher: ResourceCipher) -> JobError {
        let expected = accepted.sorted().joined(separator: " or ")
        if cipher == .aesGCM { return JobError(.invalid, "sha256: the content's digest is not \(expected)") }
        return JobError(.invalid, "sha256: the content's digest is \(digest), expected \(expected)")
    }

    func run() -> Result<Copy, JobError> {
        var content = body
        if let remake {
            do {
                content = [UInt8](try remake.remaker(Data(body), remake.options))
            } catch {
                // A bomb is too large, like a derived copy past the limit below; anything else is invalid input.
                let kind: JobError.Kind = (error as? GzipError)?.isTooLarge == true ? .tooLarge : .invalid
                return .failure(JobError(kind, "remaker: \(remake.name) failed: \(error)"))
            }
            guard content.count <= manager.inMemoryLimit else {
                return .failure(JobError(.tooLarge, "remaker: the derived resource is larger than \(manager.inMemoryLimit) bytes (a remade copy is made in memory: defaults.maxBodyBytes, or resources.maxBytes when smaller)"))
            }
        }
        let digest = ResourceKey.sha256(content)
        if let accepted, !accepted.contains(digest) {
            return .failure(CopyWriter.mismatch(digest, accepted, cipher: cipher))
        }
        var stored = content
        switch cipher {
        case .none: break
        case .gzip:
            guard let packed = try? Gzip.compress(content) else { return .failure(JobError(.internal, "cipher: gzip failed")) }
            stored = packed
        case .aesGCM:
            guard let key = manager.atRestKey, let sealed = try? key.seal(content) else {
                return .failure(JobError(.invalid, "cipher: aes-gcm needs HYDRA_SHARED_KEY"))
            }
            stored = sealed
        }
        let fileID: UInt64?
        do {
            fileID = try manager.rest.writeStateFile(components, bytes: stored)
        } catch {
            return .failure(error)
        }
        return .success(Copy(content: content, diskBytes: stored.count,
                             sha256: cipher == .aesGCM ? ResourceKey.sha256(stored) : digest, fileID: fileID))
    }
}
