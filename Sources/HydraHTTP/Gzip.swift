import CZlib

/// Why gzip failed; the message never holds the data.
public struct GzipError: Error, Sendable, CustomStringConvertible {
    public let description: String
    /// The content would pass the limit once decompressed (a bomb), rather than being corrupt.
    public let isTooLarge: Bool
    init(_ description: String, isTooLarge: Bool = false) {
        self.description = description
        self.isTooLarge = isTooLarge
    }
}

/// gzip (RFC 1952 framing) through zlib, for shared values and resources at
/// rest and the `gunzip` remaker: the thin wrapper over zlib's raw pointers.
/// Thread-safe (no shared state).
public enum Gzip {
    /// The gzip member holding `input`.
    public static func compress(_ input: [UInt8]) throws(GzipError) -> [UInt8] {
        guard input.count < Int(UInt32.max) else { throw GzipError("gzip: \(input.count) bytes is too large") }
        var stream = z_stream()
        guard hydra_deflate_init_gzip(&stream, Z_DEFAULT_COMPRESSION) == Z_OK else { throw GzipError("gzip: init failed") }
        defer { deflateEnd(&stream) }
        // deflateBound covers the zlib wrapper; the gzip header and trailer take 18 more bytes.
        var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(input.count))) + 32)
        var source = input
        let status = source.withUnsafeMutableBufferPointer { src in
            output.withUnsafeMutableBufferPointer { dst in
                stream.next_in = src.baseAddress
                stream.avail_in = uInt(src.count)
                stream.next_out = dst.baseAddress
                stream.avail_out = uInt(dst.count)
                return deflate(&stream, Z_FINISH)
            }
        }
        guard status == Z_STREAM_END else { throw GzipError("gzip: compression failed (zlib status \(status))") }
        return Array(output.prefix(Int(stream.total_out)))
    }

    /// The bytes of the gzip member `input`; throws when truncated or corrupt,
    /// or (a bomb) when they would pass `limit` bytes.
    public static func decompress(_ input: [UInt8], limit: Int = .max) throws(GzipError) -> [UInt8] {
        guard input.count < Int(UInt32.max) else { throw GzipError("gzip: \(input.count) bytes is too large") }
        var stream = z_stream()
        guard hydra_inflate_init_gzip(&stream) == Z_OK else { throw GzipError("gzip: init failed") }
        defer { inflateEnd(&stream) }
        var source = input
        var output: [UInt8] = []
        output.reserveCapacity(input.count * 4)
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var status: Int32 = Z_OK
        source.withUnsafeMutableBufferPointer { src in
            stream.next_in = src.baseAddress
            stream.avail_in = uInt(src.count)
            repeat {
                let produced: Int = chunk.withUnsafeMutableBufferPointer { dst in
                    stream.next_out = dst.baseAddress
                    stream.avail_out = uInt(dst.count)
                    status = inflate(&stream, Z_NO_FLUSH)
                    return dst.count - Int(stream.avail_out)
                }
                output.append(contentsOf: chunk[..<produced])
            } while status == Z_OK && output.count <= limit
        }
        guard output.count <= limit else { throw GzipError("gzip: the content passes \(limit) bytes once decompressed", isTooLarge: true) }
        guard status == Z_STREAM_END else { throw GzipError("gzip: the data is truncated or corrupt (zlib status \(status))") }
        return output
    }
}
