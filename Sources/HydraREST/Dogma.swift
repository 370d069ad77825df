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
    /// ``decode(_:)`` as a remote job's result keeps it: by default the
    /// decoded value; `json` keeps a compact body as its bytes (``JSONBody``).
    func decodeBody(_ response: DogmaResponse) throws -> JSONBody
}

extension Dogma {
    public func encode(body: JSONValue) throws -> (bytes: [UInt8], contentType: String)? { nil }
    public func decodeBody(_ response: DogmaResponse) throws -> JSONBody { JSONBody(try decode(response)) }
}
