/* cuBLAS loaded at run time (cublas_lazy.h). */
#include "base/fail.h"
#include "eval/cuda/gemm/cublas_lazy.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#define PC_CUBLAS_STR2(x) #x
#define PC_CUBLAS_STR(x) PC_CUBLAS_STR2(x)
#define PC_CUBLAS_SONAME "libcublas.so." PC_CUBLAS_STR(CUBLAS_VER_MAJOR)

static pc_cublas g_cublas;
static pc_status g_status = PC_OK;
static char g_error[512];

/* Resolves `name` into *fn; 0 when it is missing. */
template <class F> static int resolve(void *lib, const char *name, F *fn) {
    *fn = reinterpret_cast<F>(dlsym(lib, name));
    return *fn != nullptr;
}

static void load_once() {
    void *lib = dlopen(PC_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libcublas.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        g_status = PC_ERR_UNSUPPORTED;
        snprintf(g_error, sizeof g_error,
                 "backend 'gemm' needs cuBLAS: neither %s nor libcublas.so could be loaded (%s)",
                 PC_CUBLAS_SONAME, dlerror());
        return;
    }
    pc_cublas c;
    if (!resolve(lib, "cublasCreate_v2", &c.create) ||
        !resolve(lib, "cublasDestroy_v2", &c.destroy) ||
        !resolve(lib, "cublasSetMathMode", &c.set_math_mode) ||
        !resolve(lib, "cublasSetWorkspace_v2", &c.set_workspace) ||
        !resolve(lib, "cublasSetStream_v2", &c.set_stream) ||
        !resolve(lib, "cublasSgemmStridedBatched", &c.sgemm_strided_batched) ||
        !resolve(lib, "cublasGetStatusString", &c.status_string)) {
        g_status = PC_ERR_UNSUPPORTED;
        snprintf(g_error, sizeof g_error,
                 "backend 'gemm': the cuBLAS loaded lacks a function it needs (%s)", dlerror());
        return;
    }
    g_cublas = c;
}

pc_status pc_cublas_load(const pc_cublas **api) {
    /* pthread_once rather than std::call_once: the latter instantiates a libstdc++ template
     * with default visibility, which would leave the library as an exported C++ symbol. */
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, load_once);
    *api = nullptr;
    if (g_status) return pc_fail(g_status, "%s", g_error);
    *api = &g_cublas;
    return PC_OK;
}

const char *pc_cublas_string(cublasStatus_t status) {
    return g_cublas.status_string ? g_cublas.status_string(status) : "cuBLAS error";
}
