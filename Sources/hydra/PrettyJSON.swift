import Hydra

/// Indented JSON for people (`--pretty`): two spaces per level, one member or
/// item per line, keys in stored order. Scripts get the compact one-line form
/// (`JSONWriter`), which stays the default.
enum PrettyJSON {
    static func string(_ value: JSONValue) -> String {
        var out = ""
        write(value, indent: "", into: &out)
        return out
    }

    private static func write(_ value: JSONValue, indent: String, into out: inout String) {
        let inner = indent + "  "
        switch value {
        case .array(let items) where !items.isEmpty:
            out += "[\n"
            for (i, item) in items.enumerated() {
                out += inner
                write(item, indent: inner, into: &out)
                out += i == items.count - 1 ? "\n" : ",\n"
            }
            out += indent + "]"
        case .object(let members) where !members.isEmpty:
            out += "{\n"
            for (i, (key, item)) in members.enumerated() {
                out += inner + JSONWriter.string(.string(key)) + ": "
                write(item, indent: inner, into: &out)
                out += i == members.count - 1 ? "\n" : ",\n"
            }
            out += indent + "}"
        default:
            out += JSONWriter.string(value)
        }
    }
}

/// Writes one JSON value as a line: compact (for scripts), or indented with `--pretty`.
func writeJSON(_ value: JSONValue, pretty: Bool) {
    writeLine(pretty ? PrettyJSON.string(value) : JSONWriter.string(value))
}
