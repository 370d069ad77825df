/// A value that only its loop's thread may read or write.
///
/// The wrapper is `Sendable` so it can be stored in objects shared across
/// threads; every access checks the thread, which turns a confinement bug into
/// an immediate, named failure (the idea of swift-nio's `NIOLoopBound`).
public struct LoopBound<Value>: @unchecked Sendable {
    private let box: Box
    /// The loop that owns the value.
    public let loop: EventLoop

    /// Wraps `value` for `loop`. Loop thread only.
    public init(_ value: Value, loop: EventLoop) {
        loop.preconditionInEventLoop()
        self.loop = loop
        self.box = Box(value)
    }

    /// The value. Loop thread only.
    public var value: Value {
        get { loop.preconditionInEventLoop(); return box.value }
        nonmutating set { loop.preconditionInEventLoop(); box.value = newValue }
    }

    private final class Box {
        var value: Value
        init(_ value: Value) { self.value = value }
    }
}
