/// A successful step's result that a worker hands back unbuilt: the
/// coordinator builds it when the report arrives (``TaskHandle/succeed(building:)``).
///
/// Why: a remote worker's loop is the engine's busiest thread, and building a
/// response's result object there (its headers as JSON members) cost it about
/// a sixth of its time per request, half of that in memory that the
/// coordinator then keeps and frees from another thread. Built on the
/// coordinator, the result is allocated where it lives. Only what cannot fail
/// may be deferred: the outcome is already known to be a success.
///
/// A single remote job's result may stay unbuilt even longer, until someone
/// reads it (see ``JobResult/result``): an embedding program that only looks at
/// the state never pays for it, and the finished jobs kept in memory stay small.
/// The journal gets it encoded straight to JSON (``encode(into:)``).
///
/// Class-bound: the reports, steps and jobs that hold one copy and drop it as
/// one reference (an existential of a struct was copied through its value
/// witnesses, about 120 instructions each, several times per job on the
/// coordinator). Conformers are immutable final classes.
public protocol DeferredResult: AnyObject, Sendable {
    /// The result. Pure: any thread, as often as asked.
    func build() -> JSONValue

    /// The built result's encoded length, or nil past `limit` (see
    /// ``JSONValue/encodedSize(limit:)``), ideally without building it.
    func encodedSize(limit: Int) -> Int?

    /// Appends the built result's JSON text (as ``JSONWriter`` writes it),
    /// ideally without building it.
    func encode(into out: inout [UInt8])
}

extension DeferredResult {
    public func encodedSize(limit: Int) -> Int? { build().encodedSize(limit: limit) }
    public func encode(into out: inout [UInt8]) { JSONWriter.write(build(), into: &out) }
}
