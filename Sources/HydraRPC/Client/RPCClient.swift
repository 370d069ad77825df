import HydraCore
import HydraLoop
import OrderedCollections

/// A blocking JSON-RPC client for `hydra serve` (the CLI's transport; usable
/// from one thread at a time; it may move between threads). Notifications that arrive while waiting for
/// a response are kept for ``nextNotification(timeout:)``.
public final class RPCClient: @unchecked Sendable {
    private let connection: LineClient
    private var nextID = 1
    private var notifications: [JSONValue] = []
    public let address: SocketAddress
    /// How long ``call(_:_:timeout:)`` and ``callBatch(_:timeout:)`` wait for
    /// an answer when given no timeout of their own (nil: for ever). A peer
    /// that takes the connection and never answers fails them with "timed out".
    public let callTimeout: Duration?

    /// Connects (within `timeout`), and authenticates with `secret` when one is given.
    public init(address: SocketAddress, secret: String? = nil, timeout: Duration = .seconds(5),
                callTimeout: Duration? = nil) throws(RPCClientError) {
        self.address = address
        self.callTimeout = callTimeout
        do {
            connection = try LineClient(connectingTo: address, timeout: timeout)
        } catch {
            throw RPCClientError(code: nil, message: error.description)
        }
        if let secret {
            // A peer that takes the connection and never answers is not a server to wait for.
            _ = try call("rpc.auth", ["token": .string(secret)], timeout: callTimeout ?? timeout + .seconds(5))
        }
    }

    /// Calls `method` and waits for its result; a JSON-RPC error is thrown with its code.
    public func call(_ method: String, _ params: JSONValue = .object([:]),
                     timeout: Duration? = nil) throws(RPCClientError) -> JSONValue {
        let id = nextID
        nextID += 1
        let request: JSONValue = ["jsonrpc": "2.0", "id": .int(id), "method": .string(method), "params": params]
        do {
            try connection.send(JSONWriter.bytes(request))
        } catch {
            throw RPCClientError(code: nil, message: error.description)
        }
        while true {
            let message = try readMessage(timeout: timeout ?? callTimeout)
            if message["method"] != nil, message["id"] == nil {
                notifications.append(message)
                continue
            }
            // An error with a null id answers a request the server could not read (a line
            // past rpc.maxMessageBytes): this one, the only call waiting here.
            guard message["id"] == .int(id) || (message["id"] == .null && message["error"] != nil) else { continue }
            if let error = message["error"] {
                throw RPCClientError(code: error["code"]?.intValue, message: error["message"]?.stringValue ?? "error",
                                     data: error["data"])
            }
            return message["result"] ?? .null
        }
    }

    /// Sends several calls as one JSON-RPC batch (one line) and returns their
    /// outcomes in the order given.
    public func callBatch(_ calls: [(method: String, params: JSONValue)],
                          timeout: Duration? = nil) throws(RPCClientError) -> [Result<JSONValue, RPCClientError>] {
        guard !calls.isEmpty else { return [] }
        let first = nextID
        nextID += calls.count
        let requests: [JSONValue] = calls.enumerated().map { i, call in
            ["jsonrpc": "2.0", "id": .int(first + i), "method": .string(call.method), "params": call.params]
        }
        do {
            try connection.send(JSONWriter.bytes(.array(requests)))
        } catch {
            throw RPCClientError(code: nil, message: error.description)
        }
        while true {
            let message = try readMessage(timeout: timeout ?? callTimeout)
            guard case .array(let replies) = message else {
                if message["method"] != nil { notifications.append(message) }
                if let error = message["error"], message["id"] == .null {
                    throw RPCClientError(code: error["code"]?.intValue, message: error["message"]?.stringValue ?? "error")
                }
                continue
            }
            var results = [Result<JSONValue, RPCClientError>](
                repeating: .failure(RPCClientError(code: nil, message: "no reply")), count: calls.count)
            for reply in replies {
                guard let id = reply["id"]?.intValue, id >= first, id < first + calls.count else { continue }
                if let error = reply["error"] {
                    results[id - first] = .failure(RPCClientError(code: error["code"]?.intValue,
                                                                  message: error["message"]?.stringValue ?? "error",
                                                                  data: error["data"]))
                } else {
                    results[id - first] = .success(reply["result"] ?? .null)
                }
            }
            return results
        }
    }

    /// The next notification (`hydra.event`, `hydra.dropped`), or nil after `timeout`.
    public func nextNotification(timeout: Duration? = nil) throws(RPCClientError) -> JSONValue? {
        if !notifications.isEmpty { return notifications.removeFirst() }
        do {
            let message = try readMessage(timeout: timeout)
            return message
        } catch let error where error.isTimeout {
            return nil
        }
    }

    public func close() { connection.close() }

    private func readMessage(timeout: Duration?) throws(RPCClientError) -> JSONValue {
        let line: [UInt8]?
        do {
            line = try connection.readLine(timeout: timeout)
        } catch {
            throw RPCClientError(code: nil, message: error.description,
                                 isTimeout: error.description.contains("timed out"))
        }
        guard let line else { throw RPCClientError(code: nil, message: "\(address): the server closed the connection") }
        do {
            // The server's answers carry results, which may nest deeper than a request.
            return try line.withUnsafeBufferPointer { buffer throws(JSONParseError) in
                try JSONParser.parse(buffer, maxDepth: JSONParser.maxStoredDepth)
            }
        } catch {
            throw RPCClientError(code: nil, message: "\(address): the server sent a line that is not JSON: \(error)")
        }
    }
}

/// A failed call: a JSON-RPC error (with its `code`) or a transport problem (`code` nil).
public struct RPCClientError: Error, Sendable, CustomStringConvertible {
    public var code: Int?
    public var message: String
    public var data: JSONValue?
    public var isTimeout = false

    public init(code: Int?, message: String, data: JSONValue? = nil, isTimeout: Bool = false) {
        self.code = code
        self.message = message
        self.data = data
        self.isTimeout = isTimeout
    }

    public var description: String { code.map { "\(message) (\($0))" } ?? message }
}
