import Foundation
import HydraCore
import HydraHTTP

/// A codec between request/response bodies and values (the HJRestClientDogma
/// idea): it may encode a request body and name its content type, decodes the
/// response body, and sees every response it decodes.
public protocol Dogma: Sendable {
    /// The name specs use (`"dogma": "json"`).
    var name: String { get }
    /// Encodes a request body; nil lets the spec's `bodyEncoding` decide.
    func encode(body: JSONValue) throws -> (bytes: [UInt8], contentType: String)?
    /// Decodes a response body. Throwing makes the job fail with kind `decode`.
    func decode(_ response: DogmaResponse) throws -> JSONValue
}

extension Dogma {
    public func encode(body: JSONValue) throws -> (bytes: [UInt8], contentType: String)? { nil }
}

/// What a dogma sees of a response.
public struct DogmaResponse: Sendable {
    public var status: Int
    let headerBlock: HTTPHeaderBlock
    public var body: [UInt8]

    init(status: Int, headers: HTTPHeaderBlock, body: [UInt8]) {
        self.status = status
        self.headerBlock = headers
        self.body = body
    }

    /// Header names lowercased, in arrival order.
    public var headers: [(name: String, value: String)] { headerBlock.fields.map { ($0.name, $0.value) } }
    /// The first value of header `name` (any case), or nil.
    public func header(_ name: String) -> String? { headerBlock.first(name) }
    public var contentType: String? { headerBlock.first("content-type") }
}

/// A body the dogma could not read.
public struct DecodeError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// `json`: the body parsed to a JSON value (an empty body is `null`).
public struct JSONDogma: Dogma {
    public let name = "json"
    public init() {}
    public func decode(_ response: DogmaResponse) throws -> JSONValue {
        if response.body.isEmpty { return .null }
        do {
            return try JSONParser.parse(response.body)
        } catch {
            throw DecodeError("response body is not JSON: \(error)")
        }
    }
}

/// `text`: the body as a UTF-8 string.
public struct TextDogma: Dogma {
    public let name = "text"
    public init() {}
    public func decode(_ response: DogmaResponse) throws -> JSONValue {
        guard let text = String(validating: response.body, as: UTF8.self) else {
            throw DecodeError("response body is not UTF-8 text")
        }
        return .string(text)
    }
}

/// `raw`: the body as a base64 string.
public struct RawDogma: Dogma {
    public let name = "raw"
    public init() {}
    public func decode(_ response: DogmaResponse) throws -> JSONValue {
        .string(Data(response.body).base64EncodedString())
    }
}

extension DogmaResponse {
    private static let contentTypeName = HTTPHeaderBlock.lowercased("content-type")
    private static let jsonType = HTTPHeaderBlock.lowercased("application/json")
    private static let jsonSuffix = HTTPHeaderBlock.lowercased("+json")

    /// True when the Content-Type says JSON (`application/json`, `…+json`).
    var isJSON: Bool {
        headerBlock.withFirst(Self.contentTypeName) { $0.map(Self.isJSONMediaType) ?? false }
    }

    /// The dogma a response gets when neither the job, its api nor
    /// `defaults.dogma` names one (protocol §4): `json` for a JSON
    /// Content-Type, `text` for a textual one (`text/*`, XML, JavaScript, form
    /// data) or none, else `raw`.
    var impliedDogma: any Dogma {
        if isJSON { return JSONDogma() }
        guard let contentType = headerBlock.first("content-type") else { return TextDogma() }
        return Self.isTextual(contentType: contentType) ? TextDogma() : RawDogma()
    }

    /// True for a textual media type: `text/*`, XML (`…/xml`, `…+xml`), JavaScript, form data.
    static func isTextual(contentType: String) -> Bool {
        let media = contentType.split(separator: ";", maxSplits: 1).first.map {
            $0.trimmingCharacters(in: .whitespaces).lowercased()
        } ?? ""
        if media.isEmpty || media.hasPrefix("text/") { return true }
        if media.hasSuffix("/xml") || media.hasSuffix("+xml") { return true }
        return ["application/javascript", "application/x-javascript", "application/ecmascript",
                "application/x-www-form-urlencoded", "multipart/form-data"].contains(media)
    }

    /// True when a Content-Type value names JSON (`application/json`, `…+json`).
    static func isJSON(contentType: String) -> Bool {
        var value = contentType
        return value.withUTF8(isJSONMediaType)
    }

    private static func isJSONMediaType(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
        // The media type: up to ';', without surrounding spaces, any case.
        var end = value.firstIndex(of: UInt8(ascii: ";")) ?? value.count
        while end > 0 && (value[end - 1] == 0x20 || value[end - 1] == 0x09) { end -= 1 }
        var start = 0
        while start < end && (value[start] == 0x20 || value[start] == 0x09) { start += 1 }
        let media = UnsafeBufferPointer(rebasing: value[start..<end])
        if HTTPHeaderBlock.equalsLowered(media, jsonType) { return true }
        let suffix = jsonSuffix.count
        return media.count > suffix
            && HTTPHeaderBlock.equalsLowered(UnsafeBufferPointer(rebasing: media[(media.count - suffix)...]), jsonSuffix)
    }
}
