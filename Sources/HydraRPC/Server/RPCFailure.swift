import HydraCore
import HydraServer
import OrderedCollections

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
