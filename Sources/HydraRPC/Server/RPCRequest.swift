import HydraCore
import HydraServer
import OrderedCollections

/// One JSON-RPC 2.0 request or notification, checked (protocol §1–2).
struct RPCRequest: Sendable {
    /// The request id (number or string, as sent); nil for a notification.
    var id: RPCID?
    var method: String
    /// The `params` object (an absent `params` reads as `{}`).
    var params: RPCParams

    var isNotification: Bool { id == nil }

    /// Checks a decoded message; the error carries the id when one could be read.
    /// `raw` gives the message's text, for the id's exact digits (``RPCID``):
    /// asked only for an id it needs.
    static func parse(_ value: JSONValue, raw: () -> ArraySlice<UInt8>?) -> Result<RPCRequest, RPCFailure> {
        guard case .object(let o) = value else {
            return .failure(RPCFailure(id: .null, code: -32600, "invalid request: expected an object"))
        }
        var id: RPCID?
        if let given = o["id"] {
            switch given {
            case .string, .int, .double, .null: id = RPCID(given) { raw().flatMap { RawJSON.member("id", ofObject: $0) } }
            default: return .failure(RPCFailure(id: .null, code: -32600, "invalid request: id must be a number, a string or null"))
            }
        }
        let replyID = id ?? .null
        guard o["jsonrpc"] == "2.0" else {
            return .failure(RPCFailure(id: replyID, code: -32600, "invalid request: jsonrpc must be \"2.0\""))
        }
        guard let method = o["method"]?.stringValue else {
            return .failure(RPCFailure(id: replyID, code: -32600, "invalid request: method must be a string"))
        }
        let params: RPCParams
        switch o["params"] {
        case nil, .null?: params = RPCParams([:])
        case .object(let p)?: params = RPCParams(p)
        // An empty list gives no value to misread: the same as no params.
        case .array(let a)? where a.isEmpty: params = RPCParams([:])
        // By position: a well-formed request, but every method here takes named
        // params; the method answers -32602 (RPCParams.only).
        case .array?: params = RPCParams([:], positional: true)
        default:
            // JSON-RPC 2.0: params must be structured, or the object is not a valid
            // request (answered even without an id, as every invalid request is).
            return .failure(RPCFailure(id: replyID, code: -32600, "invalid request: params must be an object"))
        }
        return .success(RPCRequest(id: id, method: method, params: params))
    }
}
