/* FMA and streaming stores for the query kernels built for AVX2 (query_sp_*_avx2.c, called
 * only when pc_cpu_eval_isa() reports AVX2). A streaming store writes a whole 64-byte line
 * without reading it first; QSP_STREAM_END orders those weakly ordered stores. */
#include <immintrin.h>
#include <stdint.h>

#define QSP_HAVE_FMA 1
#define QSP_STREAM_F32(dst, src)                                                                 \
    (_mm256_stream_ps((dst), _mm256_loadu_ps(src)),                                              \
     _mm256_stream_ps((dst) + 8, _mm256_loadu_ps((src) + 8)))
#define QSP_STREAM_F64(dst, src)                                                                 \
    (_mm256_stream_pd((dst), _mm256_loadu_pd(src)),                                              \
     _mm256_stream_pd((dst) + 4, _mm256_loadu_pd((src) + 4)))
#define QSP_STREAM_END() _mm_sfence()
