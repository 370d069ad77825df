import Testing
@testable import HydraHTTP

/// The header lines a transfer reads as they arrive: which fields it
/// recognises, and the Content-Type value every response is judged by.
struct HeaderLinesTests {
    private func appending(_ lines: [String], to buffer: inout HeaderLines) -> [HeaderLines.KnownField?] {
        lines.map { line in Array(line.utf8).withUnsafeBufferPointer { buffer.append(line: $0) } }
    }

    @Test func knownFieldsAreRecognisedInAnyCaseAndOnlyWithTheirColon() {
        var lines = HeaderLines()
        let known = appending([
            "CONTENT-TYPE: text/plain\r\n", "content-length:12\r\n", "Content-Encoding: gzip\r\n",
            "Content-Types: nope\r\n", "Content-Language: en\r\n", "Connection: keep-alive\r\n", "X: content-type:\r\n",
            "Bontent-Type: x\r\n", "content-type\r\n",
        ], to: &lines)
        #expect(known == [.contentType, .contentLength, .contentEncoding, nil, nil, nil, nil, nil, nil])
    }

    @Test func theFirstContentTypeIsKeptTrimmed() throws {
        var lines = HeaderLines()
        _ = appending(["Server: x\r\n", "Content-Type: \t application/json; charset=utf-8 \r\n", "Content-Type: text/html\r\n"],
                      to: &lines)
        let block = lines.block
        let range = try #require(block.contentTypeRange)
        #expect(String(decoding: block.bytes[range], as: UTF8.self) == "application/json; charset=utf-8")
        #expect(block.first("content-type") == "application/json; charset=utf-8")
        #expect(block.contentTypeRange == HTTPHeaderBlock(raw: block.bytes).contentTypeRange)
    }

    /// Lines past the buffer's first size grow it, every byte kept; the next
    /// response starts empty, with nothing of the last one's noted field.
    @Test func largeHeadersGrowTheBufferAndTheNextResponseStartsEmpty() {
        var lines = HeaderLines()
        let long = (0..<300).map { "X-Field-\($0): " + String(repeating: "v", count: $0 % 50) + "\r\n" }
        _ = appending(long + ["Content-Type: text/csv\r\n"], to: &lines)
        let block = lines.block
        #expect(block.bytes == Array(long.joined().utf8) + Array("Content-Type: text/csv\r\n".utf8))
        #expect(block.first("x-field-299") == String(repeating: "v", count: 49))
        #expect(block.contentTypeRange.map { String(decoding: block.bytes[$0], as: UTF8.self) } == "text/csv")
        lines.removeAll()
        #expect(lines.isEmpty && lines.block.bytes.isEmpty && lines.block.contentTypeRange == nil)
        _ = appending(["Content-Type:\r\n"], to: &lines)
        #expect(lines.block.contentTypeRange?.isEmpty == true)
    }

    @Test func aBlockBuiltFromFieldsAgreesWithItsLines() {
        let block = HTTPHeaderBlock([HTTPHeader("X-A", "1"), HTTPHeader("content-type", "text/csv")])
        #expect(block.contentTypeRange.map { String(decoding: block.bytes[$0], as: UTF8.self) } == "text/csv")
        #expect(block.bytes == Array("X-A: 1\r\ncontent-type: text/csv\r\n".utf8))
    }
}

/// A response body is handed back in a buffer of about its size, whatever
/// room a peer's `Content-Length` made the transfer reserve.
@Suite(.ownThreads) struct ResponseBodyFitTests {
    @Test func aBodyFarSmallerThanItsBufferIsCopiedIntoOneItsSize() {
        var lied: [UInt8] = []
        lied.reserveCapacity(1 << 20)  // a declared length of a gzip body that decoded to 10 bytes
        lied.append(contentsOf: Array("0123456789".utf8))
        let fitted = Transfer.fitted(lied)
        #expect(fitted == lied && fitted.capacity < 4096)
        var grown: [UInt8] = []
        for _ in 0..<40 { grown.append(contentsOf: [UInt8](repeating: 7, count: 16_384)) }  // 640 KiB in a 1 MiB buffer
        #expect(grown.capacity >= 1 << 20)
        let trimmed = Transfer.fitted(grown)
        #expect(trimmed == grown && trimmed.capacity < grown.count + grown.count / 4)
    }

    @Test func aBodyThatFillsItsBufferIsNotCopied() {
        var exact: [UInt8] = []
        exact.reserveCapacity(65_536)
        exact.append(contentsOf: [UInt8](repeating: 1, count: 65_536))
        let fitted = Transfer.fitted(exact)
        #expect(fitted.withUnsafeBufferPointer { $0.baseAddress } == exact.withUnsafeBufferPointer { $0.baseAddress })
        #expect(Transfer.fitted([]).isEmpty)
    }
}
