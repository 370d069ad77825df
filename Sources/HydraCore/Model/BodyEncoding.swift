import OrderedCollections

/// How a remote job's `body` is sent.
public enum BodyEncoding: String, Sendable, CaseIterable {
    case json, form, text, base64
    /// `multipart/form-data` from `{"parts": [...]}` (rest.md §2); file parts are streamed from disk.
    case multipart
}

/// One part of a `multipart` body: a `value` (a string sent as it is, any
/// other JSON as JSON text) or a `file` under the state folder, streamed.
public struct MultipartPart: Sendable, Equatable {
    public enum Content: Sendable, Equatable {
        case value(JSONValue)
        case file(String)
    }
    public var name: String
    public var content: Content
    public var filename: String?
    public var contentType: String?

    public init(name: String, content: Content, filename: String? = nil, contentType: String? = nil) {
        self.name = name
        self.content = content
        self.filename = filename
        self.contentType = contentType
    }

    /// The parts of a multipart `body` (`{"parts": [...]}`), checked by shape;
    /// errors name the field under `path` (`body.parts[1].file`). For a body
    /// whose references are resolved (when the step runs).
    public static func parts(of body: JSONValue, path: String) throws(ValidationError) -> [MultipartPart] {
        var parts: [MultipartPart] = []
        for part in try shape(of: body, path: path, deferringReferences: false) ?? [] {
            if let part { parts.append(part) }
        }
        return parts
    }

    /// The parts of a multipart `body` as far as a submit can know them,
    /// checked by shape, by index: nil for the whole when the body or its
    /// `parts` is a reference, nil for a part that is itself a reference
    /// (those take their shape when the step runs). Each other part is
    /// checked on its own, so a literal `file` is checked at submit even when
    /// another part, or a value, holds a reference (rest.md §2).
    public static func partsKnownAtSubmit(of body: JSONValue, path: String) throws(ValidationError) -> [MultipartPart?]? {
        try shape(of: body, path: path, deferringReferences: true)
    }

    private static func isReference(_ value: JSONValue?) -> Bool {
        if case .string(let text)? = value { return Template.containsReference(text) }
        return false
    }

    private static func shape(of body: JSONValue, path: String,
                              deferringReferences deferring: Bool) throws(ValidationError) -> [MultipartPart?]? {
        if deferring && isReference(body) { return nil }
        var r = try FieldReader(body, path: path)
        if deferring && isReference(r.members["parts"]) { return nil }
        guard let items = try r.array("parts") else {
            throw ValidationError(path: r.path("parts"), "required for bodyEncoding multipart")
        }
        try r.rejectUnknownKeys()
        guard !items.isEmpty else { throw ValidationError(path: r.path("parts"), "must not be empty") }
        var parts: [MultipartPart?] = []
        for (i, item) in items.enumerated() {
            if deferring && isReference(item) {
                parts.append(nil)
                continue
            }
            var p = try FieldReader(item, path: r.path("parts") + "[\(i)]")
            let name = try p.requiredString("name")
            let value = p.value("value")
            let file = try p.string("file")
            let content: Content
            switch (value, file) {
            case (let value?, nil): content = .value(value)
            case (nil, let file?): content = .file(file)
            default: throw ValidationError(path: p.path("value"), "give exactly one of value and file")
            }
            let filename = try p.string("filename")
            let contentType = try p.string("contentType")
            for (key, text) in [("name", name), ("filename", filename ?? ""), ("contentType", contentType ?? "")]
            where text.utf8.contains(where: { $0 == 13 || $0 == 10 || $0 == 0 }) {
                throw ValidationError(path: p.path(key), "must not contain CR, LF or NUL")
            }
            try p.rejectUnknownKeys()
            parts.append(MultipartPart(name: name, content: content, filename: filename, contentType: contentType))
        }
        return parts
    }
}
