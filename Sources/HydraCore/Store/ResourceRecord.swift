/// One entry of the resource repository's index: what the repository knows
/// about a stored copy (resources.md §1). The content itself lives in a file
/// of the repository named by ``key``; the index holds no byte of it, so an
/// `aes-gcm` copy has nothing in clear here. Times are Unix seconds.
public struct ResourceRecord: Sendable, Equatable {
    /// The SHA-256 (hex) of the canonical request (method, resolved URL with
    /// sorted query, remaker and its options).
    public var key: String
    /// The resolved URL the content came from.
    public var url: String
    /// The size of the content (as served to readers, before any cipher).
    public var bytes: Int
    /// The size of the file at rest (after gzip or aes-gcm); what `maxBytes` counts.
    public var diskBytes: Int
    public var contentType: String?
    /// The SHA-256 (hex) of the content, checked on every load from disk.
    public var sha256: String
    /// Validators for revalidation (`If-None-Match`, `If-Modified-Since`).
    public var etag: String?
    public var lastModified: String?
    /// When the copy was fetched or last revalidated: freshness counts from here.
    public var storedAt: Double
    /// When a job last used the copy: the disk LRU evicts the oldest first.
    public var lastUsedAt: Double
    public var cipher: ResourceCipher
    /// The HTTP status the content came with: a job serves a copy only when
    /// this is a status it expects (a 404 kept for `expect: [404]` is no answer
    /// to a job expecting 2xx).
    public var status: Int
    /// The file's identity when it was put in place (its inode): a copy renamed
    /// into place just before a crash, its entry not committed, is another file
    /// under the same name, which startup reconciliation then removes with the
    /// entry (a file of the same size passed for the entry's). Nil: not known
    /// (entries written before it was kept).
    public var fileID: UInt64?

    public init(key: String, url: String, bytes: Int, diskBytes: Int, contentType: String?, sha256: String,
                etag: String?, lastModified: String?, storedAt: Double, lastUsedAt: Double, cipher: ResourceCipher,
                status: Int = 200, fileID: UInt64? = nil) {
        self.key = key
        self.url = url
        self.bytes = bytes
        self.diskBytes = diskBytes
        self.contentType = contentType
        self.sha256 = sha256
        self.etag = etag
        self.lastModified = lastModified
        self.storedAt = storedAt
        self.lastUsedAt = lastUsedAt
        self.cipher = cipher
        self.status = status
        self.fileID = fileID
    }
}
