import CZlib
import Glibc

/// A request body read while it is sent instead of held whole in memory:
/// byte runs and open files, one after the other (a multipart form, a raw
/// `bodyFile`), optionally gzip-compressed on the way.
///
/// Files are given as open descriptors and read with `pread` from offset 0,
/// so a retry or a redirect starts the body over without seeking, and a
/// 1 GiB upload holds one 64 KiB buffer. The descriptors are the caller's:
/// opened before the transfer, closed after it (never here). Value type;
/// the reading is done by ``HTTPBodyReader``.
public struct HTTPBodyStream: Sendable {
    public enum Segment: Sendable {
        case bytes([UInt8])
        /// `length` bytes of an open file from its start.
        case file(descriptor: Int32, length: Int64)
    }

    public var segments: [Segment]
    /// Compress the body with gzip as it is read (sent with chunked framing: its length is not known first).
    public var gzip: Bool

    public init(_ segments: [Segment], gzip: Bool = false) {
        self.segments = segments
        self.gzip = gzip
    }

    /// The bytes sent, when known before sending (not for gzip).
    public var length: Int64? {
        guard !gzip else { return nil }
        return segments.reduce(0) { total, segment in
            switch segment {
            case .bytes(let bytes): total + Int64(bytes.count)
            case .file(_, let length): total + length
            }
        }
    }
}

/// Reads an ``HTTPBodyStream`` from its start, chunk by chunk: for curl's read
/// callback and for a digest of the body before it is sent. Confined to the
/// thread that reads (a transfer's loop, or the thread hashing the body).
public final class HTTPBodyReader {
    private let stream: HTTPBodyStream
    private var segment = 0
    private var offset: Int64 = 0
    /// Compressed bytes waiting to be handed out (gzip only).
    private var pending: [UInt8] = []
    private var pendingStart = 0
    private var deflater: UnsafeMutablePointer<z_stream>?
    private var finished = false
    private var raw = [UInt8](repeating: 0, count: 64 << 10)
    /// What one `deflate` call writes (gzip only; made once, not per chunk).
    private lazy var deflated = [UInt8](repeating: 0, count: 64 << 10)
    /// Why the last read failed (a file that shrank or could not be read).
    public private(set) var failure: String?
    /// The bytes handed out since the start (compressed ones for gzip).
    public private(set) var handedOut: Int64 = 0

    public init(_ stream: HTTPBodyStream) {
        self.stream = stream
    }

    deinit { endDeflate() }

    /// Back to the first byte (a retry, a redirect).
    public func rewind() {
        segment = 0
        offset = 0
        pending = []
        pendingStart = 0
        finished = false
        failure = nil
        handedOut = 0
        endDeflate()
    }

    /// Copies the next bytes into `buffer`: how many (0 at the end), or -1 on a failure (see ``failure``).
    public func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        let n = next(into: buffer)
        if n > 0 { handedOut += Int64(n) }
        return n
    }

    private func next(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard buffer.count > 0 else { return 0 }
        guard stream.gzip else { return readRaw(into: buffer) }
        while pendingStart == pending.count && !finished {
            guard compressMore() else { return -1 }
        }
        let n = min(buffer.count, pending.count - pendingStart)
        pending.withUnsafeBytes { source in
            buffer.baseAddress!.copyMemory(from: source.baseAddress! + pendingStart, byteCount: n)
        }
        pendingStart += n
        return n
    }

    /// The plain bytes, segment after segment.
    private func readRaw(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        while segment < stream.segments.count {
            switch stream.segments[segment] {
            case .bytes(let bytes):
                let left = bytes.count - Int(offset)
                if left > 0 {
                    let n = min(left, buffer.count)
                    bytes.withUnsafeBytes { buffer.baseAddress!.copyMemory(from: $0.baseAddress! + Int(offset), byteCount: n) }
                    offset += Int64(n)
                    return n
                }
            case .file(let descriptor, let length):
                let left = length - offset
                if left > 0 {
                    let want = Int(min(Int64(buffer.count), left))
                    var n: Int
                    repeat { n = pread(descriptor, buffer.baseAddress!, want, off_t(offset)) } while n < 0 && errno == EINTR
                    if n < 0 {
                        failure = "cannot read the file being uploaded: \(String(cString: strerror(errno)))"
                        return -1
                    }
                    if n == 0 {
                        failure = "the file being uploaded shrank while it was sent (\(offset) of \(length) bytes)"
                        return -1
                    }
                    offset += Int64(n)
                    return n
                }
            }
            segment += 1
            offset = 0
        }
        return 0
    }

    /// Compresses the next raw chunk (or finishes the gzip member) into `pending`.
    private func compressMore() -> Bool {
        if deflater == nil {
            let z = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
            z.initialize(to: z_stream())
            guard hydra_deflate_init_gzip(z, Z_DEFAULT_COMPRESSION) == Z_OK else {
                z.deallocate()
                failure = "gzip: init failed"
                return false
            }
            deflater = z
        }
        let z = deflater!
        let count = raw.withUnsafeMutableBytes { readRaw(into: $0) }
        guard count >= 0 else { return false }
        let flush = count == 0 ? Z_FINISH : Z_NO_FLUSH
        pending.removeAll(keepingCapacity: true)
        pendingStart = 0
        var status: Int32 = Z_OK
        raw.withUnsafeMutableBufferPointer { input in
            z.pointee.next_in = input.baseAddress
            z.pointee.avail_in = uInt(count)
            repeat {
                let produced: Int = deflated.withUnsafeMutableBufferPointer { dst in
                    z.pointee.next_out = dst.baseAddress
                    z.pointee.avail_out = uInt(dst.count)
                    status = deflate(z, flush)
                    return dst.count - Int(z.pointee.avail_out)
                }
                pending.append(contentsOf: deflated[..<produced])
            } while status == Z_OK && (z.pointee.avail_in > 0 || (flush == Z_FINISH && status != Z_STREAM_END) || z.pointee.avail_out == 0)
        }
        if flush == Z_FINISH {
            guard status == Z_STREAM_END else {
                failure = "gzip: compression failed (zlib status \(status))"
                return false
            }
            finished = true
            endDeflate()
        } else if status != Z_OK && status != Z_BUF_ERROR {
            failure = "gzip: compression failed (zlib status \(status))"
            return false
        }
        return true
    }

    private func endDeflate() {
        guard let z = deflater else { return }
        deflateEnd(z)
        z.deinitialize(count: 1)
        z.deallocate()
        deflater = nil
    }
}
