/* cuBLAS for GPU EM (em_blas.h). */
#include "base/fail.h"
#include "learn/cuda/em_blas.h"

#include <dlfcn.h>
#include <pthread.h>

#define PC_EM_BLAS_STR2(x) #x
#define PC_EM_BLAS_STR(x) PC_EM_BLAS_STR2(x)

static pc_em_blas g_blas;
static pc_status g_status = PC_OK;

static void load_once() {
    if ((g_status = pc_cublas_load(&g_blas.base))) return;
    /* RTLD_NOLOAD: only a handle to the copy the engine's loader opened */
    void *lib = dlopen("libcublas.so." PC_EM_BLAS_STR(CUBLAS_VER_MAJOR), RTLD_NOW | RTLD_NOLOAD);
    if (!lib) lib = dlopen("libcublas.so", RTLD_NOW | RTLD_NOLOAD);
    void *fn = lib ? dlsym(lib, "cublasDgemmStridedBatched") : nullptr;
    if (!fn) {
        g_status = PC_ERR_UNSUPPORTED;
        return;
    }
    g_blas.dgemm_strided_batched = reinterpret_cast<decltype(&cublasDgemmStridedBatched)>(fn);
}

pc_status pc_em_blas_load(const pc_em_blas **api) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, load_once);
    *api = nullptr;
    if (g_status == PC_ERR_UNSUPPORTED && g_blas.base)
        return pc_fail(PC_ERR_UNSUPPORTED, "GPU EM: the cuBLAS loaded lacks "
                                           "cublasDgemmStridedBatched");
    if (g_status) return pc_cublas_load(&g_blas.base); /* its message again */
    *api = &g_blas;
    return PC_OK;
}
