// The libuv C API as the HydraLoop layer sees it. Nothing above HydraLoop and
// HydraHTTP imports this module.
#ifndef HYDRA_CUV_SHIM_H
#define HYDRA_CUV_SHIM_H
#include <uv.h>
#endif
