/// Keeps `job.succeeded` events small: a remote result's body is left out
/// above 64 KiB (protocol §6).
enum EventTrimming {
    static let maxBodyBytes = 64 * 1024

    static func trimmed(_ result: JSONValue) -> JSONValue {
        guard case .object(var o) = result, let body = o["body"], o["status"] != nil else { return result }
        if !fits(body) {
            o["body"] = nil
            o["bodyOmitted"] = true
        }
        return .object(o)
    }

    /// Whether `body` is at most 64 KiB: a text body by its bytes (not its
    /// JSON, whose quotes and escapes made a body of 65,535 bytes count as
    /// more), a decoded one by its encoded JSON.
    static func fits(_ body: JSONValue) -> Bool {
        if case .string(let text) = body { return text.utf8.count <= maxBodyBytes }
        return body.encodedSize(limit: maxBodyBytes) != nil
    }
}
