import Foundation
import HydraCore
import HydraHTTP

/// `text`: the body as a UTF-8 string.
public struct TextDogma: Dogma {
    public let name = "text"
    public init() {}
    public func decode(_ response: DogmaResponse) throws -> JSONValue {
        guard let text = UTF8Text.string(validating: response.body) else {
            throw DecodeError("response body is not UTF-8 text")
        }
        return .string(text)
    }
}
