// The libuv C API as the HydraLoop layer sees it. Nothing above HydraLoop and
// HydraHTTP imports this module.
#ifndef HYDRA_CUV_SHIM_H
#define HYDRA_CUV_SHIM_H
#include <uv.h>
#include <sys/prctl.h>

/// Names the calling thread (Linux keeps the first 15 bytes) so `top -H`,
/// `perf` and debuggers tell the loops apart. `prctl` is variadic: Swift
/// cannot call it directly.
static inline void hydra_set_thread_name(const char *name) {
    prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}
#endif
