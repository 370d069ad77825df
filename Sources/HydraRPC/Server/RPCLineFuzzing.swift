import HydraCore

/// The RPC server's front, as the fuzzer drives it (`make fuzz`, target
/// `rpc`): one line in, the answers the server would write for what fails
/// before a method runs, with the invariants the server relies on checked.
/// A broken invariant traps, so libFuzzer keeps the line as a finding.
///
/// Checked: the line handler's JSON and batch splitting agree with the parser
/// (``RawJSON`` finds each element and `id` the parser saw); every request or
/// failure becomes an answer that is itself valid JSON-RPC; a number id is
/// echoed with exactly the digits sent. Pure; any thread.
@_spi(Fuzzing)
public enum RPCLineFuzzing {
    public static func run(_ line: ArraySlice<UInt8>) {
        guard let message = try? JSONParser.parse(Array(line)) else { return }
        guard case .array(let items) = message else {
            check(message, raw: line)
            return
        }
        let texts = RawJSON.elements(ofArray: line)
        guard texts.count == items.count else { fatalError("batch split into \(texts.count) texts, parsed \(items.count)") }
        for (item, text) in zip(items, texts) {
            guard let again = try? JSONParser.parse(Array(text)), same(again, item) else {
                fatalError("a batch element's text does not parse to the element")
            }
            check(item, raw: text)
        }
    }

    private static func check(_ value: JSONValue, raw: ArraySlice<UInt8>) {
        let answer: [UInt8]
        switch RPCRequest.parse(value, raw: { raw }) {
        case .success(let request):
            if case .object(let o) = value, let id = o["id"], id.intValue != nil || id.doubleValue != nil {
                guard let text = RawJSON.member("id", ofObject: raw), request.id?.text == Array(text) else {
                    fatalError("a number id is not echoed as sent")
                }
            }
            answer = RPCEncoder.result(id: request.id ?? .null, .null)
        case .failure(let failure):
            answer = RPCEncoder.error(failure)
        }
        guard case .object(let reply)? = try? JSONParser.parse(Array(answer)), reply["jsonrpc"] == "2.0",
              reply["id"] != nil else {
            fatalError("an answer that is not JSON-RPC: \(String(decoding: answer, as: UTF8.self))")
        }
    }

    /// Equal, reading a number too large for a double as the parser does either way.
    private static func same(_ a: JSONValue, _ b: JSONValue) -> Bool {
        if case .double(let x) = a, case .double(let y) = b, x.isNaN && y.isNaN { return true }
        return a == b
    }
}
