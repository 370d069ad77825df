import HydraCore

/// The `id` of a request, kept as the JSON text to echo (protocol §2: "the
/// `id` of a request is echoed exactly as sent").
///
/// A number id is kept as the bytes the client sent, so `1e400` or a
/// 30-digit integer comes back with every digit (``JSONValue`` would turn
/// them into a `Double`: infinity, or a rounded value). A string id is
/// re-encoded from its value (the same string, whatever escapes it used).
/// Immutable; built on the RPC loop, read anywhere.
struct RPCID: Sendable, Equatable {
    /// The JSON text of the id: a number, a string or `null`.
    let text: [UInt8]

    static let null = RPCID(text: Array("null".utf8))

    private init(text: [UInt8]) { self.text = text }

    /// The id for a decoded `id` member; `raw` finds that member's text in the
    /// message, asked only for a number that may have been spelled otherwise.
    init(_ value: JSONValue, raw: () -> ArraySlice<UInt8>?) {
        switch value {
        case .int(let number) where number != 0:
            // JSON spells an integer one way (no `+`, no leading zero), and the
            // parser makes `.int` only of that spelling: its text is its own.
            // (Finding the raw text scanned the whole request again: ~3k
            // instructions per call on the RPC thread, callgrind.) Zero may
            // have come as `-0`.
            text = JSONWriter.bytes(value)
        case .int, .double:
            if let raw = raw(), !raw.isEmpty { text = Array(raw) } else { text = JSONWriter.bytes(value) }
        default:
            text = JSONWriter.bytes(value)
        }
    }
}
