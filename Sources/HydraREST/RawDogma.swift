import Foundation
import HydraCore
import HydraHTTP

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
        guard let range = headerBlock.firstRange(Self.contentTypeName) else { return false }
        return headerBlock.bytes[range].withUnsafeBufferPointer(Self.isJSONMediaType)
    }

    /// The dogma a response gets when neither the job, its api nor
    /// `defaults.dogma` names one (protocol §4): `json` for a JSON
    /// Content-Type, `text` for a textual one (`text/*`, XML, JavaScript, form
    /// data) or none, else `raw`.
    var impliedDogma: any Dogma {
        if isJSON { return JSONDogma() }
        guard let range = headerBlock.firstRange(Self.contentTypeName) else { return TextDogma() }
        let contentType = String(decoding: headerBlock.bytes[range], as: UTF8.self)
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
