import CUV

/// Casts between the concrete libuv handle types and `uv_handle_t`.
/// libuv handle structs all begin with the `uv_handle_t` fields, so the
/// conversion is a pointer reinterpretation, as in C.
@inline(__always)
package func uvHandle<T>(_ pointer: UnsafeMutablePointer<T>) -> UnsafeMutablePointer<uv_handle_t> {
    UnsafeMutablePointer<uv_handle_t>(OpaquePointer(pointer))
}

/// Closes a heap-allocated handle and frees its memory in the close callback
/// (libuv may only free a handle's memory once the close callback has run).
/// Loop thread only.
package func uvCloseAndFree<T>(_ pointer: UnsafeMutablePointer<T>) {
    let handle = uvHandle(pointer)
    if uv_is_closing(handle) != 0 { return }
    uv_close(handle) { handle in
        handle?.deallocate()
    }
}

/// The libuv error message for a status code.
package func uvErrorString(_ status: Int32) -> String {
    String(cString: uv_strerror(status))
}
