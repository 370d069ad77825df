import Glibc

/// The header lines of the response in flight, in a buffer its ``Transfer``
/// keeps from one request to the next. Loop thread only; owned by the
/// transfer (noncopyable: one owner frees it).
///
/// Why: curl hands the lines over one call each, and appending each to an
/// array cost ~100 instructions (a growth check and a generic copy), plus a
/// fresh array per response: about a thousand instructions per response on
/// the worker's loop, where raw C copies them into a fixed buffer. Here a line
/// is one `memcpy`, and the response gets its ``HTTPHeaderBlock`` as one
/// copy of its exact size.
struct HeaderLines: ~Copyable {
    /// What is kept between responses: a buffer a response with larger headers
    /// grew is given back at the next one.
    private static let keptCapacity = 1024

    private var storage: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    private(set) var count = 0
    /// Where the first `Content-Type` value lies (see ``HTTPHeaderBlock/contentTypeRange``).
    private var contentTypeRange: Range<Int>?

    init() {
        capacity = Self.keptCapacity
        storage = .allocate(capacity: capacity)
    }

    deinit { storage.deallocate() }

    var isEmpty: Bool { count == 0 }

    /// Forgets the lines (a new response, or the next request).
    mutating func removeAll() {
        count = 0
        contentTypeRange = nil
        if capacity > Self.keptCapacity {
            storage.deallocate()
            capacity = Self.keptCapacity
            storage = .allocate(capacity: capacity)
        }
    }

    /// The lines as a block of their own.
    var block: HTTPHeaderBlock {
        HTTPHeaderBlock(raw: Array(UnsafeBufferPointer(start: storage, count: count)), contentTypeRange: contentTypeRange)
    }

    /// A field the transfer reads as the lines arrive.
    enum KnownField { case contentType, contentLength, contentEncoding }

    /// Appends one raw line (CRLF included) and says which ``KnownField`` it
    /// is, if any; the first `Content-Type` value is noted.
    mutating func append(line: UnsafeBufferPointer<UInt8>) -> KnownField? {
        guard let source = line.baseAddress, !line.isEmpty else { return nil }
        if count + line.count > capacity {
            // curl bounds a response's headers (300 KB in 7.88), so this ends.
            capacity = max(2 * capacity, count + line.count)
            let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
            memcpy(grown, storage, count)
            storage.deallocate()
            storage = grown
        }
        let start = count
        memcpy(storage + start, source, line.count)
        count += line.count
        // Every known field starts "content-" (one test for the rest of the lines).
        guard line.count > 13, line[0] | 0x20 == UInt8(ascii: "c"), HTTPHeaderBlock.hasName(line, "content-") else { return nil }
        if HTTPHeaderBlock.hasName(line, "content-type:") {
            if contentTypeRange == nil {
                let value = HTTPHeaderBlock.valueRange(line, after: 13)
                contentTypeRange = (value.lowerBound + start)..<(value.upperBound + start)
            }
            return .contentType
        }
        if HTTPHeaderBlock.hasName(line, "content-length:") { return .contentLength }
        if HTTPHeaderBlock.hasName(line, "content-encoding:") { return .contentEncoding }
        return nil
    }
}
