import Foundation
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
            self.init(.invalidParams, error.message,
                      data: ["field": .string(error.path), "reason": .string(error.fullReason)])
        case .notFound:
            self.init(.notFound, error.message,
                      data: ["field": .string(error.path), "reason": .string(error.fullReason)])
        case .overloaded: self.init(.overloaded, error.description)
        case .shuttingDown: self.init(.shuttingDown, error.description)
        }
    }

    /// A store failure: a server-side problem, named but not the caller's fault.
    /// The database's path, which store errors start with, is left out
    /// (protocol §2: errors never carry the server's file system paths).
    /// A store closed because the server is stopping (the end of its grace
    /// period, before the listeners close) is `-32005`, as for new jobs then.
    public init(_ error: StoreError) {
        if error.isClosed {
            self.init(.shuttingDown, "shutting down: the state store is closed")
            return
        }
        self.init(.internalError, "state store: \(ServiceError.withoutPath(error.description))")
    }

    /// A refused `auth.*` call: `-32602` naming the field for missing or
    /// unusable credentials (an unknown name is `-32002`, checked before);
    /// `-32602` with `data.kind` `auth` when the token endpoint refused the
    /// credentials or could not be reached (the message says which, never
    /// what was sent).
    public static func auth(_ error: JobError) -> ServiceError {
        switch error.kind {
        case .invalid:
            let field = error.message.prefix { $0 != ":" }
            let reason = error.message.dropFirst(field.count + 1).trimmingCharacters(in: .whitespaces)
            return ServiceError(.invalidParams, error.message, data: ["field": .string(String(field)), "reason": .string(reason)])
        case .cancelled:
            return ServiceError(.shuttingDown, error.message)
        default:
            return ServiceError(.invalidParams, error.message, data: ["kind": .string(error.kind.rawValue), "reason": .string(error.message)])
        }
    }

    /// `-32602` naming the offending field (protocol §2): `after: expected …`,
    /// with `data` `{"field", "reason"}`.
    public static func invalidParams(field: String, _ reason: String) -> ServiceError {
        ServiceError(.invalidParams, "\(field): \(reason)", data: ["field": .string(field), "reason": .string(reason)])
    }

    /// `-32002` naming the field that named the missing thing, as `-32602` does:
    /// `jobId: no job 'j9'`, with `data` `{"field", "reason"}`.
    public static func notFound(field: String, _ reason: String) -> ServiceError {
        ServiceError(.notFound, "\(field): \(reason)", data: ["field": .string(field), "reason": .string(reason)])
    }

    /// `jobId: no job 'ID'`.
    public static func noJob(_ jobId: String) -> ServiceError {
        notFound(field: "jobId", "no job '\(clip(jobId))'")
    }

    /// A client's value to quote in a message: at most 100 characters (a
    /// 100 KB job id is not echoed whole).
    public static func clip(_ value: String) -> String {
        value.count <= 100 ? value : String(value.prefix(100)) + "…"
    }

    /// `description` without a leading `/path: ` (SQLite errors start with the database's path).
    static func withoutPath(_ description: String) -> String {
        guard description.hasPrefix("/"), let colon = description.range(of: ": ") else { return description }
        return String(description[colon.upperBound...])
    }

    public var description: String { message }
}
