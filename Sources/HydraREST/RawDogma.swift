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
    private static let jsonType = HTTPHeaderBlock.lowercased("application/json")
    /// The older name some servers still send (RFC 4627's time): JSON too.
    private static let textJSONType = HTTPHeaderBlock.lowercased("text/json")
    private static let jsonSuffix = HTTPHeaderBlock.lowercased("+json")
    private static let textPrefix = HTTPHeaderBlock.lowercased("text/")
    private static let xmlSuffixes = ["/xml", "+xml"].map(HTTPHeaderBlock.lowercased)
    private static let textualTypes = [
        "application/javascript", "application/x-javascript", "application/ecmascript",
        "application/x-www-form-urlencoded", "multipart/form-data",
    ].map(HTTPHeaderBlock.lowercased)

    /// True when the Content-Type says JSON (`application/json`, `…+json`, `text/json`).
    var isJSON: Bool {
        guard let range = headerBlock.contentTypeRange else { return false }
        return headerBlock.bytes[range].withUnsafeBufferPointer(Self.isJSONMediaType)
    }

    /// The dogma a response gets when neither the job, its api nor
    /// `defaults.dogma` names one (protocol §4): `json` for a JSON
    /// Content-Type, `text` for a textual one (`text/*`, XML, JavaScript, form
    /// data) or none, else `raw`.
    var impliedDogma: any Dogma {
        if isJSON { return JSONDogma() }
        guard let range = headerBlock.contentTypeRange else { return TextDogma() }
        return headerBlock.bytes[range].withUnsafeBufferPointer(Self.isTextualMediaType) ? TextDogma() : RawDogma()
    }

    /// True for a textual media type: `text/*`, XML (`…/xml`, `…+xml`), JavaScript, form data.
    static func isTextual(contentType: String) -> Bool {
        var value = contentType
        return value.withUTF8(isTextualMediaType)
    }

    /// True when a Content-Type value names JSON (`application/json`, `…+json`).
    static func isJSON(contentType: String) -> Bool {
        var value = contentType
        return value.withUTF8(isJSONMediaType)
    }

    // Compared as bytes, any ASCII case, without building strings: every
    // response without a dogma of its own passes here.

    private static func isTextualMediaType(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
        let media = mediaType(value)
        if media.isEmpty || hasPrefix(media, textPrefix) { return true }
        if xmlSuffixes.contains(where: { hasSuffix(media, $0) }) { return true }
        return textualTypes.contains { HTTPHeaderBlock.equalsLowered(media, $0) }
    }

    private static func isJSONMediaType(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
        let media = mediaType(value)
        return HTTPHeaderBlock.equalsLowered(media, jsonType) || HTTPHeaderBlock.equalsLowered(media, textJSONType)
            || (media.count > jsonSuffix.count && hasSuffix(media, jsonSuffix))
    }

    /// The media type of a Content-Type value: up to `;`, without surrounding spaces or tabs.
    private static func mediaType(_ value: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8> {
        var end = value.firstIndex(of: UInt8(ascii: ";")) ?? value.count
        while end > 0 && (value[end - 1] == 0x20 || value[end - 1] == 0x09) { end -= 1 }
        var start = 0
        while start < end && (value[start] == 0x20 || value[start] == 0x09) { start += 1 }
        return UnsafeBufferPointer(rebasing: value[start..<end])
    }

    private static func hasPrefix(_ media: UnsafeBufferPointer<UInt8>, _ lowered: [UInt8]) -> Bool {
        media.count >= lowered.count
            && HTTPHeaderBlock.equalsLowered(UnsafeBufferPointer(rebasing: media[..<lowered.count]), lowered)
    }

    private static func hasSuffix(_ media: UnsafeBufferPointer<UInt8>, _ lowered: [UInt8]) -> Bool {
        media.count >= lowered.count
            && HTTPHeaderBlock.equalsLowered(UnsafeBufferPointer(rebasing: media[(media.count - lowered.count)...]), lowered)
    }
}
