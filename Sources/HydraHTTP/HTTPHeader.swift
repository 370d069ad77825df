/// A header field: a name and a value.
public struct HTTPHeader: Sendable, Equatable {
    public var name: String
    public var value: String
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }

    /// Whether the name is `lowered` in any ASCII case (pass it lowercased);
    /// allocates nothing, unlike comparing `name.lowercased()`.
    public func hasName(_ lowered: String) -> Bool {
        name.utf8.count == lowered.utf8.count
            && zip(name.utf8, lowered.utf8).allSatisfy { HTTPHeaderBlock.lowercase($0) == $1 }
    }

    /// False when the field cannot go on the wire as one header line: an
    /// empty name, a name with a separator or a control character, or a value
    /// with CR, LF or NUL (which would end the line early and let the rest be
    /// read as another header or a request of its own). The layers above refuse
    /// such fields with a message naming them; the transfer refuses them too.
    public var isWellFormed: Bool {
        !name.isEmpty
            && !name.utf8.contains { $0 <= 0x20 || $0 == 0x7F || $0 == UInt8(ascii: ":") }
            && !value.utf8.contains { $0 == 0x0D || $0 == 0x0A || $0 == 0 }
    }
}
