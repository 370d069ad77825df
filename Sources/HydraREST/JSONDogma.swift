import Foundation
import HydraCore
import HydraHTTP

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
