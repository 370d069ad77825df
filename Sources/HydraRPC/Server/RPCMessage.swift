import HydraCore
import OrderedCollections

/// One JSON-RPC 2.0 request or notification, checked (protocol §1–2).
struct RPCRequest: Sendable {
    /// The request id (number or string); nil for a notification.
    var id: JSONValue?
    var method: String
    /// The `params` object (an absent `params` reads as `{}`).
    var params: RPCParams

    var isNotification: Bool { id == nil }

    /// Checks a decoded message; the error carries the id when one could be read.
    static func parse(_ value: JSONValue) -> Result<RPCRequest, RPCFailure> {
        guard case .object(let o) = value else {
            return .failure(RPCFailure(id: .null, code: -32600, "invalid request: expected an object"))
        }
        var id: JSONValue?
        if let given = o["id"] {
            switch given {
            case .string, .int, .double, .null: id = given
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
        let params: OrderedDictionary<String, JSONValue>
        switch o["params"] {
        case nil, .null?: params = [:]
        case .object(let p)?: params = p
        case .array(let a)? where a.isEmpty: params = [:]
        default:
            // JSON-RPC 2.0: params must be structured, or the object is not a valid
            // request (answered even without an id, as every invalid request is).
            return .failure(RPCFailure(id: replyID, code: -32600, "invalid request: params must be an object"))
        }
        return .success(RPCRequest(id: id, method: method, params: RPCParams(params)))
    }
}

/// An error response: the id to answer and the JSON-RPC error object.
struct RPCFailure: Error, Sendable {
    var id: JSONValue
    var code: Int
    var message: String
    var data: JSONValue?

    init(id: JSONValue, code: Int, _ message: String, data: JSONValue? = nil) {
        self.id = id
        self.code = code
        self.message = message
        self.data = data
    }

    init(id: JSONValue, _ error: ServiceError) {
        self.init(id: id, code: error.kind.code, error.message, data: error.data)
    }
}

/// Encodes responses and notifications (one object; the framing adds `\n`).
enum RPCEncoder {
    static func result(id: JSONValue, _ result: JSONValue) -> JSONValue {
        ["jsonrpc": "2.0", "id": id, "result": result]
    }

    static func error(_ failure: RPCFailure) -> JSONValue {
        var error: OrderedDictionary<String, JSONValue> = ["code": .int(failure.code), "message": .string(failure.message)]
        if let data = failure.data { error["data"] = data }
        return ["jsonrpc": "2.0", "id": failure.id, "error": .object(error)]
    }

    static func notification(_ method: String, _ params: JSONValue) -> JSONValue {
        ["jsonrpc": "2.0", "method": .string(method), "params": params]
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

/// Typed reads of a request's params; errors name the field (`jobId: expected string`).
struct RPCParams: Sendable {
    let values: OrderedDictionary<String, JSONValue>

    init(_ values: OrderedDictionary<String, JSONValue>) { self.values = values }

    subscript(key: String) -> JSONValue? {
        guard let value = values[key], !value.isNull else { return nil }
        return value
    }

    func string(_ key: String) throws(ServiceError) -> String? {
        guard let value = self[key] else { return nil }
        guard let s = value.stringValue else { throw invalid(key, "expected string") }
        return s
    }

    func requiredString(_ key: String) throws(ServiceError) -> String {
        guard let s = try string(key) else { throw invalid(key, "required") }
        guard !s.isEmpty else { throw invalid(key, "must not be empty") }
        return s
    }

    func int(_ key: String, min: Int = .min, max: Int = .max) throws(ServiceError) -> Int? {
        guard let value = self[key] else { return nil }
        guard let i = value.intValue else { throw invalid(key, "expected integer") }
        guard i >= min, i <= max else { throw invalid(key, "must be between \(min) and \(max)") }
        return i
    }

    func bool(_ key: String) throws(ServiceError) -> Bool? {
        guard let value = self[key] else { return nil }
        guard let b = value.boolValue else { throw invalid(key, "expected true or false") }
        return b
    }

    func stringSet(_ key: String) throws(ServiceError) -> Set<String>? {
        guard let value = self[key] else { return nil }
        guard let items = value.arrayValue else { throw invalid(key, "expected array of strings") }
        var out = Set<String>()
        for (i, item) in items.enumerated() {
            guard let s = item.stringValue else { throw invalid("\(key)[\(i)]", "expected string") }
            out.insert(s)
        }
        return out
    }

    func invalid(_ field: String, _ reason: String) -> ServiceError {
        ServiceError(.invalidParams, "\(field): \(reason)", data: ["field": .string(field), "reason": .string(reason)])
    }
}
