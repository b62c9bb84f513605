/* FMA and streaming stores for the query kernels built for AVX-512 (query_sp_*_avx512.c,
 * called only when pc_cpu_eval_isa() reports AVX-512). A streaming store writes a whole
 * 64-byte line without reading it first; QSP_STREAM_END orders those weakly ordered stores. */
#include <immintrin.h>
#include <stdint.h>

#define QSP_HAVE_FMA 1
#define QSP_STREAM_F32(dst, src) _mm512_stream_ps((dst), _mm512_loadu_ps(src))
#define QSP_STREAM_F64(dst, src) _mm512_stream_pd((dst), _mm512_loadu_pd(src))
#define QSP_STREAM_END() _mm_sfence()
