import HydraCore
@_spi(Fuzzing) import HydraRPC

/// One thing the fuzzer feeds bytes to. Each target checks a property
/// beyond "does not crash" where there is one, and traps when it breaks:
/// libFuzzer then saves the input as a finding.
enum FuzzTarget: String, CaseIterable {
    /// The JSON parser: any bytes; what parses writes back to text that parses to the same value.
    case json
    /// Job specs: what parses as a spec encodes back to JSON that parses as the same spec.
    case spec
    /// Configuration files: any JSON is accepted or refused with a path, never a crash.
    case config
    /// The RPC server's line handler: batches split as parsed, ids echoed exactly, answers valid JSON-RPC.
    case rpc

    /// The value as the writer can express it: a number too large for a
    /// double (`1e400`) reads as infinity, which JSON writes as `null`.
    static func finite(_ value: JSONValue) -> JSONValue {
        switch value {
        case .double(let d) where !d.isFinite: return .null
        case .array(let items): return .array(items.map(finite))
        case .object(let members): return .object(members.mapValues(finite))
        default: return value
        }
    }

    func run(_ bytes: UnsafeBufferPointer<UInt8>) {
        switch self {
        case .json:
            guard let value = try? JSONParser.parse(bytes) else { return }
            let text = JSONWriter.bytes(value)
            guard let again = try? JSONParser.parse(text) else { fatalError("written JSON does not parse: \(text)") }
            guard again == Self.finite(value) else { fatalError("JSON round trip changed the value") }
            if let size = value.encodedSize(limit: .max), size != text.count {
                fatalError("encodedSize \(size) != written \(text.count)")
            }
        case .spec:
            guard let json = try? JSONParser.parse(bytes), let spec = try? JobSpec(json: json) else { return }
            _ = spec.summary
            guard let again = try? JobSpec(json: spec.json) else { fatalError("an encoded spec does not parse back") }
            guard JSONWriter.bytes(again.json) == JSONWriter.bytes(spec.json) else { fatalError("spec round trip changed it") }
        case .config:
            guard let json = try? JSONParser.parse(bytes) else { return }
            _ = try? Configuration(json: json)
        case .rpc:
            RPCLineFuzzing.run(ArraySlice(bytes))
        }
    }
}
