import CUV

/// Names the calling thread so `top -H`, `perf` and debuggers tell Hydra's
/// threads apart (Linux keeps the first 15 bytes). Foundation's `Thread.name`
/// does not reach the kernel on Linux.
public func nameCurrentThread(_ name: String) {
    hydra_set_thread_name(name)
}
