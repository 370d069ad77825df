import HydraCore

/// A memory hit's result as the memory tier keeps it: built, and its encoded
/// length counted, once when the copy was kept; every hit hands the same value
/// to the coordinator, which then neither copies nor measures it again.
struct KeptResult: DeferredResult {
    let value: JSONValue
    /// `value`'s encoded length (``JSONValue/encodedSize(limit:)``).
    let size: Int

    func build() -> JSONValue { value }

    func encodedSize(limit: Int) -> Int? { size <= limit ? size : nil }
}
