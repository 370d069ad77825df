/// Keeps `job.succeeded` events small: a remote result's body is left out above 64 KiB.
enum EventTrimming {
    static let maxBodyBytes = 64 * 1024

    static func trimmed(_ result: JSONValue) -> JSONValue {
        guard case .object(var o) = result, let body = o["body"], o["status"] != nil else { return result }
        if body.encodedSize(limit: maxBodyBytes) == nil {
            o["body"] = nil
            o["bodyOmitted"] = true
        }
        return .object(o)
    }
}
