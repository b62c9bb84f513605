/* CPU feature detection, the one place that asks: the LSE dispatcher (lse/lse_cpu.c), the
 * cpu-fuse and cpu backends (eval/cpu, through pc_cpu_eval_isa) and the EM kernels
 * (learn/learn_em.c) all take pc_cpu_best_isa() (declared in pc/lse.h).
 *
 * Each level checks every feature that src/CMakeLists.txt enables for the files of that
 * level (*_avx2.c: -mavx2 -mfma -mf16c; *_avx512.c: those and -mavx512f/bw/vl/dq), so code
 * built for a level never meets an instruction the CPU lacks. */
#include "pc/lse.h"

pc_isa pc_cpu_best_isa(void) {
#if defined(__x86_64__) || defined(__i386__)
    /* __builtin_cpu_supports also checks (xgetbv) that the OS saves the wide registers. */
    __builtin_cpu_init();
    const int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                     __builtin_cpu_supports("f16c");
    if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return PC_ISA_AVX512;
    if (avx2)
        return PC_ISA_AVX2;
#endif
    return PC_ISA_SCALAR;
}
