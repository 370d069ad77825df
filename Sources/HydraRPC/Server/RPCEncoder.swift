import HydraCore
import HydraServer
import OrderedCollections

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
