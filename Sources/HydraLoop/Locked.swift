import Glibc

/// A value guarded by a lock: the engine's one way to share mutable state
/// between threads outside a loop's confinement (mailboxes, the event bus,
/// registries, the store's caches). Any thread.
///
/// Why not `Synchronization.Mutex`: its lock and unlock run inside the
/// toolchain's uninstrumented library, so ThreadSanitizer cannot see them and
/// reports every guarded access as a race (a two-thread counter shows it).
/// A pthread mutex is intercepted by the sanitizers and costs the same: both
/// take the uncontended path with one atomic operation in a call.
public final class Locked<Value>: @unchecked Sendable {
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    /// Touched only inside ``withLock(_:)``: the mutex makes each access
    /// exclusive, so the runtime's own check (~76 instructions) is left out.
    @exclusivity(unchecked) @usableFromInline var value: Value

    public init(_ value: Value) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        self.value = value
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with the value while holding the lock. Not reentrant.
    @inlinable
    public func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}

#if HYDRA_TSAN
/// The lock of the two hottest cross-thread paths (mailboxes, the event bus):
/// ``Locked`` under ThreadSanitizer (`make test-tsan` builds with
/// `-DHYDRA_TSAN`), so the sanitizer sees their ordering.
public typealias FastLocked<Value> = Locked<Value>
#else
import Synchronization

/// The lock of the two hottest cross-thread paths (mailboxes, the event bus):
/// `Synchronization.Mutex`, whose uncontended path is an inlined atomic
/// (measured: local no-op jobs 5–8% faster than with ``Locked``). Under
/// ThreadSanitizer it is ``Locked`` instead, which the sanitizer can see.
public typealias FastLocked<Value> = Mutex<Value>
#endif
