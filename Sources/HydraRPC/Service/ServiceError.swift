import HydraCore

/// Why the service refused or failed a call; each kind has its JSON-RPC code (protocol §2).
public struct ServiceError: Error, Sendable, CustomStringConvertible {
    public enum Kind: Sendable {
        case invalidParams, methodNotFound, unauthorized, notFound, conflict, overloaded, shuttingDown, internalError

        /// The JSON-RPC error code.
        public var code: Int {
            switch self {
            case .invalidParams: -32602
            case .methodNotFound: -32601
            case .internalError: -32603
            case .unauthorized: -32001
            case .notFound: -32002
            case .conflict: -32003
            case .overloaded: -32004
            case .shuttingDown: -32005
            }
        }
    }

    public var kind: Kind
    public var message: String
    /// `error.data`: for invalid params, `{"field", "reason"}`.
    public var data: JSONValue?

    public init(_ kind: Kind, _ message: String, data: JSONValue? = nil) {
        self.kind = kind
        self.message = message
        self.data = data
    }

    /// A refused spec or submission: the message names the field by path.
    public init(_ error: ValidationError) {
        switch error.kind {
        case .invalid:
            self.init(.invalidParams, error.description,
                      data: ["field": .string(error.path), "reason": .string(error.reason)])
        case .notFound: self.init(.notFound, error.description)
        case .overloaded: self.init(.overloaded, error.description)
        case .shuttingDown: self.init(.shuttingDown, error.description)
        }
    }

    /// A store failure: a server-side problem, named but not the caller's fault.
    public init(_ error: StoreError) {
        self.init(.internalError, "state store: \(error.description)")
    }

    public var description: String { message }
}
