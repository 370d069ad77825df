/// A successful step's result that a worker hands back unbuilt: the
/// coordinator builds it when the report arrives (``TaskHandle/succeed(building:)``).
///
/// Why: a remote worker's loop is the engine's busiest thread, and building a
/// response's result object there (its headers as JSON members) cost it about
/// a sixth of its time per request, half of that in memory that the
/// coordinator then keeps and frees from another thread. Built on the
/// coordinator, the result is allocated where it lives. Only what cannot fail
/// may be deferred: the outcome is already known to be a success.
public protocol DeferredResult: Sendable {
    /// The result. Coordinator thread; called once.
    func build() -> JSONValue
}
