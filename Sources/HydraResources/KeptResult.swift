import HydraCore
import OrderedCollections

/// A memory hit's result as the memory tier keeps it: built, and its encoded
/// length counted, once when the copy was kept; every hit hands the same object
/// to the coordinator, which then neither copies nor measures it again. A
/// class: the report that carries it across threads retains one reference,
/// not each of the result's strings and buffers.
final class KeptResult: DeferredResult {
    let value: JSONValue
    /// `value`'s encoded length (``JSONValue/encodedSize(limit:)``).
    let size: Int

    init(_ fields: OrderedDictionary<String, JSONValue>) {
        value = .object(fields)
        size = value.encodedSize(limit: .max) ?? .max
    }

    func build() -> JSONValue { value }

    func encodedSize(limit: Int) -> Int? { size <= limit ? size : nil }
}
