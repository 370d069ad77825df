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
            throw Self.notJSON(error)
        }
    }

    /// ``decode(_:)`` as a remote job's result keeps it: the body's bytes
    /// when they are the value's JSON as written (see ``JSONBody``).
    public func decodeBody(_ response: DogmaResponse) throws -> JSONBody {
        do {
            return try JSONBody(reading: response.body)
        } catch {
            throw Self.notJSON(error)
        }
    }

    private static func notJSON(_ error: JSONParseError) -> DecodeError { DecodeError("response body is not JSON: \(error)") }
}
