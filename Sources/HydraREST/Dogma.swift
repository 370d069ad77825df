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
    let headerFields: [HTTPHeader]
    public var body: [UInt8]

    init(status: Int, headers: [HTTPHeader], body: [UInt8]) {
        self.status = status
        self.headerFields = headers
        self.body = body
    }

    /// Header names lowercased, in arrival order.
    public var headers: [(name: String, value: String)] { headerFields.map { ($0.name, $0.value) } }
    public var contentType: String? { headerFields.first { $0.name == "content-type" }?.value }
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
    /// True when the Content-Type says JSON (`application/json`, `…+json`).
    var isJSON: Bool {
        guard let type = contentType else { return false }
        // The media type: up to ';', without surrounding spaces, lowercased.
        var media = Array(type.utf8.prefix { $0 != UInt8(ascii: ";") })
        while let last = media.last, last == 0x20 || last == 0x09 { media.removeLast() }
        let start = media.firstIndex { $0 != 0x20 && $0 != 0x09 } ?? media.endIndex
        let lower = media[start...].map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }
        return lower.elementsEqual("application/json".utf8) || lower.reversed().starts(with: "nosj+".utf8)
    }
}
