import HydraCore

/// Collects the responses of a batch and sends them as one array once all
/// are in. RPC loop thread only.
///
/// The answer of a batch is at most `limit` bytes (`rpc.maxOutboundBytes`):
/// past it, the largest responses are replaced, one by one, by an error
/// `-32600` with the same id saying that response was too large for a batch
/// answer, until the array fits (the calls ran: a submitted job stays
/// submitted, and its small response is kept). The budget holds while the
/// responses come in, not only once all are in: a line of a few thousand
/// `job.result`s of a large result would otherwise hold gigabytes of answers
/// only to drop them. A batch whose calls could not all be answered within
/// the limit even that way is refused before any of them runs
/// (``refusal(of:raw:limit:)``): a client never loses the answers of calls
/// that took effect. Either way the client sees why, and the connection
/// stays open.
final class BatchReply {
    private var responses: [[UInt8]?]
    private var ids: [RPCID?]
    /// Responses already replaced by their error (or too small to be worth it).
    private var settled: [Bool]
    private var remaining: Int
    /// The bytes of the answer so far: the kept responses, their commas, `[` and `]`.
    private var total = 2
    private let limit: Int
    private let done: ([UInt8]) -> Void

    /// `done` gets the batch's JSON array (not called when every call was a notification).
    init(count: Int, limit: Int, done: @escaping ([UInt8]) -> Void) {
        responses = Array(repeating: nil, count: count)
        ids = Array(repeating: nil, count: count)
        settled = Array(repeating: false, count: count)
        remaining = count
        self.limit = limit
        self.done = done
    }

    /// The response of call `index` (nil for a notification); `id` is that call's id.
    func set(_ index: Int, id: RPCID?, _ response: [UInt8]?) {
        responses[index] = response
        ids[index] = id
        remaining -= 1
        if let response { total += response.count + 1 }
        while total > limit, let largest = largestUnsettled() {
            settled[largest] = true
            let size = responses[largest]!.count
            let error = BatchReply.tooLarge(id: ids[largest] ?? .null, size: size, limit: limit)
            guard error.count < size else { continue }
            total -= size - error.count
            responses[largest] = error
        }
        guard remaining == 0 else { return }
        let present = responses.compactMap { $0 }
        guard !present.isEmpty else { return }
        if total > limit {
            done(RPCEncoder.error(RPCFailure(
                id: .null, code: -32600,
                "batch answer too large: \(total) bytes, even with its largest responses left out; the limit is \(limit) bytes (rpc.maxOutboundBytes): send fewer calls per batch",
                data: ["size": .int(total), "limit": .int(limit)])))
            return
        }
        done(RPCEncoder.batch(present))
    }

    /// The largest response in so far and not yet replaced.
    private func largestUnsettled() -> Int? {
        var best: Int?
        for i in responses.indices where !settled[i] {
            guard let size = responses[i]?.count else { continue }
            if best.map({ size > responses[$0]!.count }) ?? true { best = i }
        }
        return best
    }

    /// The error that stands for a response too large for the batch's answer.
    private static func tooLarge(id: RPCID, size: Int, limit: Int) -> [UInt8] {
        RPCEncoder.error(RPCFailure(id: id, code: -32600,
                                    "response too large for a batch answer (rpc.maxOutboundBytes): send this call on its own",
                                    data: ["size": .int(size), "limit": .int(limit)]))
    }

    /// The error that refuses `items` (a batch; `raw`: an element's text, when
    /// known) before any call runs, or nil when the answer surely fits in
    /// `limit` bytes: every response could at worst be replaced by
    /// ``tooLarge(id:size:limit:)`` (a notification has none).
    static func refusal(of items: [JSONValue], raw: (Int) -> ArraySlice<UInt8>?, limit: Int) -> [UInt8]? {
        // The replacement with id `null` and the longest size, and its comma.
        let base = tooLarge(id: .null, size: .max, limit: limit).count + 1
        // Most batches are far below the limit whatever their calls answer.
        guard items.count * (base + 64) > limit else { return nil }
        var worst = 2
        for (i, item) in items.enumerated() {
            guard case .object(let members) = item else {
                worst += base  // an invalid request: answered with a short error, id null
                continue
            }
            guard let id = members["id"] else { continue }  // a notification: no response
            let text = RPCID(id) { raw(i).flatMap { RawJSON.member("id", ofObject: $0) } }.text
            worst += base - 4 + text.count
        }
        guard worst > limit else { return nil }
        return RPCEncoder.error(RPCFailure(
            id: .null, code: -32600,
            "batch too large: the answers of its \(items.count) calls could pass rpc.maxOutboundBytes (\(limit) bytes); nothing was run: send fewer calls per batch",
            data: ["calls": .int(items.count), "limit": .int(limit)]))
    }
}
