import OrderedCollections

/// How a remote job's `body` is sent.
public enum BodyEncoding: String, Sendable, CaseIterable {
    case json, form, text, base64
}
