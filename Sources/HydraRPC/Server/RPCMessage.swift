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
    /// `raw` is the message's text, for the id's exact digits (``RPCID``).
    static func parse(_ value: JSONValue, raw: ArraySlice<UInt8>?) -> Result<RPCRequest, RPCFailure> {
        guard case .object(let o) = value else {
            return .failure(RPCFailure(id: .null, code: -32600, "invalid request: expected an object"))
        }
        var id: RPCID?
        if let given = o["id"] {
            switch given {
            case .string, .int, .double, .null: id = RPCID(given, raw: raw.flatMap { RawJSON.member("id", ofObject: $0) })
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

/// An error response: the id to answer and the JSON-RPC error object.
struct RPCFailure: Error, Sendable {
    var id: RPCID
    var code: Int
    var message: String
    var data: JSONValue?

    init(id: RPCID, code: Int, _ message: String, data: JSONValue? = nil) {
        self.id = id
        self.code = code
        self.message = message
        self.data = data
    }

    init(id: RPCID, _ error: ServiceError) {
        self.init(id: id, code: error.kind.code, error.message, data: error.data)
    }
}

/// Encodes responses and notifications as JSON text, one object without its
/// newline (``RPCSession`` frames them). Responses are built as bytes so the
/// id goes out exactly as it came in (``RPCID``).
enum RPCEncoder {
    static func result(id: RPCID, _ result: JSONValue) -> [UInt8] {
        var out = prefix(id)
        out.append(contentsOf: #","result":"#.utf8)
        JSONWriter.write(result, into: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    static func error(_ failure: RPCFailure) -> [UInt8] {
        var error: OrderedDictionary<String, JSONValue> = ["code": .int(failure.code), "message": .string(failure.message)]
        if let data = failure.data { error["data"] = data }
        var out = prefix(failure.id)
        out.append(contentsOf: #","error":"#.utf8)
        JSONWriter.write(.object(error), into: &out)
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// `{"jsonrpc":"2.0","id":ID`
    private static func prefix(_ id: RPCID) -> [UInt8] {
        var out = Array(#"{"jsonrpc":"2.0","id":"#.utf8)
        out.append(contentsOf: id.text)
        return out
    }

    /// The responses of a batch as one JSON array.
    static func batch(_ responses: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "[")]
        out.reserveCapacity(responses.reduce(2) { $0 + $1.count + 1 })
        for (i, response) in responses.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: response)
        }
        out.append(UInt8(ascii: "]"))
        return out
    }

    static func notification(_ method: String, _ params: JSONValue) -> [UInt8] {
        JSONWriter.bytes(["jsonrpc": "2.0", "method": .string(method), "params": params])
    }

    /// `{"jsonrpc":"2.0","method":"hydra.event","params":{"subscription":ID,` + the event's fields + `}`,
    /// built from the event's encoded object so fan-out encodes each event once.
    static func eventNotification(subscription: String, event encoded: [UInt8], into out: inout [UInt8]) {
        out.append(contentsOf: #"{"jsonrpc":"2.0","method":"hydra.event","params":{"subscription":"#.utf8)
        JSONWriter.write(.string(subscription), into: &out)
        if encoded.count > 2 {
            out.append(UInt8(ascii: ","))
            out.append(contentsOf: encoded[1...])  // the event object without its `{`, `}` included
        } else {
            out.append(UInt8(ascii: "}"))
        }
        out.append(contentsOf: "}\n".utf8)
    }
}
