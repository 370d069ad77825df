import Foundation

/// The header fields of a response as they arrived: raw `Name: value` lines.
///
/// Kept as bytes and read on demand, because most responses are judged by
/// status and a header or two, and turning every field into strings on the
/// worker's loop costs more than the request itself for small responses.
public struct HTTPHeaderBlock: Sendable, Equatable {
    /// The lines, CRLF-terminated, without the status line.
    public private(set) var bytes: [UInt8] = []
    /// Where the first `Content-Type` value lies in ``bytes``: noted as the
    /// lines arrive, because every response is judged by it (its dogma).
    public private(set) var contentTypeRange: Range<Int>?

    public init() {}

    /// A block of `headers`, in order.
    public init(_ headers: [HTTPHeader]) {
        for header in headers {
            bytes.append(contentsOf: header.name.utf8)
            bytes.append(contentsOf: ": ".utf8)
            bytes.append(contentsOf: header.value.utf8)
            bytes.append(contentsOf: "\r\n".utf8)
        }
        contentTypeRange = firstRange(Self.contentTypeName)
    }

    /// A block of raw CRLF-terminated lines (a block's ``bytes``, rewritten).
    init(raw: [UInt8]) {
        bytes = raw
        contentTypeRange = firstRange(Self.contentTypeName)
    }

    /// A block of raw lines whose first `Content-Type` value was noted as they arrived (``HeaderLines``).
    init(raw: [UInt8], contentTypeRange: Range<Int>?) {
        bytes = raw
        self.contentTypeRange = contentTypeRange
    }

    /// True when `line` starts with `name` (lowercase ASCII) in any case.
    @inline(__always)
    static func hasName(_ line: UnsafeBufferPointer<UInt8>, _ name: StaticString) -> Bool {
        let count = name.utf8CodeUnitCount
        guard line.count >= count else { return false }
        let expected = name.utf8Start
        for i in 0..<count where lowercase(line[i]) != expected[i] { return false }
        return true
    }

    /// The value of a field line whose name and colon take `nameLength` bytes, trimmed, as offsets into the line.
    static func valueRange(_ line: UnsafeBufferPointer<UInt8>, after nameLength: Int) -> Range<Int> {
        var lower = nameLength, upper = line.count
        while lower < upper && isSpace(line[lower]) { lower += 1 }
        while upper > lower && isSpace(line[upper - 1]) { upper -= 1 }
        return lower..<upper
    }

    private static let contentTypeName = lowercased("content-type")

    /// Calls `body` with each field: its name lowercased and its value trimmed.
    public func forEach(_ body: (_ name: String, _ value: String) throws -> Void) rethrows {
        try bytes.withUnsafeBufferPointer { buffer in
            try Self.scan(buffer) { name, value in
                try body(Self.loweredName(name), Self.string(value))
            }
        }
    }

    /// Calls `body` with each field as ranges of ``bytes``: its name as sent
    /// and its trimmed value. For readers that copy the bytes themselves (the
    /// JSON of a result) without making a string per field.
    public func forEachRange(_ body: (_ name: Range<Int>, _ value: Range<Int>) throws -> Void) rethrows {
        try bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            try Self.scan(buffer) { name, value in
                let nameStart = name.baseAddress.map { $0 - base } ?? 0
                let valueStart = value.baseAddress.map { $0 - base } ?? nameStart
                try body(nameStart..<(nameStart + name.count), valueStart..<(valueStart + value.count))
            }
        }
    }

    /// The fields in order, names lowercased.
    public var fields: [HTTPHeader] {
        var out: [HTTPHeader] = []
        forEach { out.append(HTTPHeader($0, $1)) }
        return out
    }

    /// The value of the first field named `name` (any case), or nil.
    public func first(_ name: String) -> String? {
        guard let range = firstRange(Self.lowercased(name)) else { return nil }
        return bytes.withUnsafeBufferPointer { Self.string(UnsafeBufferPointer(rebasing: $0[range])) }
    }

    /// Where the value of the first field whose name is `loweredName` in any
    /// case (pass it lowercased) lies in ``bytes``, or nil.
    public func firstRange(_ loweredName: [UInt8]) -> Range<Int>? {
        bytes.withUnsafeBufferPointer { Self.firstRange(loweredName, in: $0) }
    }

    /// ``firstRange(_:)`` in the lines of `buffer`, as offsets into it.
    private static func firstRange(_ loweredName: [UInt8], in buffer: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        guard let base = buffer.baseAddress else { return nil }
        var found: Range<Int>?
        scan(buffer) { field, value in
            guard found == nil, equalsLowered(field, loweredName) else { return }
            let start = value.baseAddress.map { $0 - base } ?? 0
            found = start..<(start + value.count)
        }
        return found
    }

    /// A value as a string (invalid UTF-8 repaired). ASCII, nearly every
    /// value, is copied without the generic decoder's cost.
    private static func string(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        for byte in bytes where byte >= 0x80 { return String(decoding: bytes, as: UTF8.self) }
        return String(unsafeUninitializedCapacity: bytes.count) { _ = $0.initialize(from: bytes); return bytes.count }
    }

    /// The field name lowercased.
    private static func loweredName(_ name: UnsafeBufferPointer<UInt8>) -> String {
        String(unsafeUninitializedCapacity: name.count) { out in
            for i in 0..<name.count { out[i] = lowercase(name[i]) }
            return name.count
        }
    }

    /// `name` as lowercased bytes, for ``firstRange(_:)``.
    public static func lowercased(_ name: String) -> [UInt8] { name.utf8.map(lowercase) }

    /// True when `bytes` equals `lowered` ignoring ASCII case (`lowered` is lowercase).
    public static func equalsLowered(_ bytes: UnsafeBufferPointer<UInt8>, _ lowered: [UInt8]) -> Bool {
        guard bytes.count == lowered.count else { return false }
        return lowered.withUnsafeBufferPointer { want in
            for i in 0..<want.count where lowercase(bytes[i]) != want[i] { return false }
            return true
        }
    }

    /// Splits `buffer` into fields (name, trimmed value); lines without a colon are skipped.
    private static func scan(_ buffer: UnsafeBufferPointer<UInt8>,
                             _ field: (UnsafeBufferPointer<UInt8>, UnsafeBufferPointer<UInt8>) throws -> Void) rethrows {
        guard let base = buffer.baseAddress else { return }
        var start = 0
        let end = buffer.count
        while start < end {
            let lineEnd = memchr(base + start, 0x0A, end - start).map { UnsafeRawPointer($0) - UnsafeRawPointer(base) } ?? end
            if let colonPointer = memchr(base + start, Int32(UInt8(ascii: ":")), lineEnd - start) {
                let colon = UnsafeRawPointer(colonPointer) - UnsafeRawPointer(base)
                if colon > start {
                    var lower = colon + 1, upper = lineEnd
                    while lower < upper && isSpace(base[lower]) { lower += 1 }
                    while upper > lower && isSpace(base[upper - 1]) { upper -= 1 }
                    try field(UnsafeBufferPointer(start: base + start, count: colon - start),
                              UnsafeBufferPointer(start: base + lower, count: upper - lower))
                }
            }
            start = lineEnd + 1
        }
    }

    @inline(__always) private static func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0D || b == 0x0A }
    /// ASCII lowercase of one byte (field names and media types are ASCII).
    @inline(__always) public static func lowercase(_ b: UInt8) -> UInt8 { b >= 65 && b <= 90 ? b + 32 : b }
}
