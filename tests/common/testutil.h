/* Helpers shared by the cmocka test programs.
 *
 * Random numbers: every program draws from one generator, pc_test_rng(), seeded once from the
 * clock (or from the environment variable PC_TEST_SEED, to replay a failure) and printed to
 * stderr on first use as "test seed: N (replay with PC_TEST_SEED=N)". Local generators
 * (pc_rng_init) serve code that needs its own stream.
 *
 * Poison: fill outputs with NaN (or 0xFF bytes) before each call, so that an element the code
 * under test forgot to write fails the comparison.
 *
 * Conversions for test data: float to IEEE half and bfloat16 (round to nearest even, NaN and
 * inf kept) and back, nats to q10.6 (base-2 log, 6 fraction bits, INT16_MIN = -inf).
 *
 * GPU: pc_test_gpu_present() says whether CUDA tests can run; PC_TEST_REQUIRE_GPU() inside a
 * cmocka test skips that test without one; pc_test_require_gpu_or_exit() at the top of main()
 * exits with 77 (ctest: skipped) without one.
 */
#ifndef PC_TESTUTIL_H
#define PC_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>

#include "pc/rng.h"

/* The program's seed (clock or PC_TEST_SEED; printed on first call) and its shared generator. */
uint64_t pc_test_seed(void);
pc_rng *pc_test_rng(void);

/* Fill n floats / doubles with a quiet NaN; fill bytes with 0xFF (NaN in any float type). */
void pc_test_poison_f32(float *p, size_t n);
void pc_test_poison_f64(double *p, size_t n);
void pc_test_poison_bytes(void *p, size_t bytes);

/* The most a float conditional p(X_v = c | e) = sum_k post_k cond_k[c] may differ from the double
 * one when it is formed in float, as the GPU's output kernel does: each factor rounded once,
 * then K fused multiply-adds rounded once each, every term and every partial sum at most 1, so
 * at most (K + 2) roundings of 2^-24. (Rounding the double once gives 2^-25.) */
double pc_test_tol_f32_conditional(int64_t num_latents);

/* Allocation that fails the test program loudly (abort with a message) instead of returning
 * NULL, so test bodies stay short. */
void *pc_test_alloc(size_t bytes);

uint16_t pc_test_f32_to_f16(float f);
float pc_test_f16_to_f32(uint16_t h);
uint16_t pc_test_f32_to_bf16(float f);
float pc_test_bf16_to_f32(uint16_t b);
/* Nats to q10.6: round(x / ln2 * 64) saturated to [-32767, 32767]; -inf -> INT16_MIN;
 * NaN (which q10.6 cannot hold) -> 0. */
int16_t pc_test_nats_to_q10_6(double nats);

/* 1 when this build has CUDA and a GPU is usable (pc_cuda_available()). */
int pc_test_gpu_present(void);
/* Without a GPU: prints why and exits 77, which ctest counts as skipped. */
void pc_test_require_gpu_or_exit(const char *program);
/* Inside a cmocka test: skip the test when there is no GPU. */
#define PC_TEST_REQUIRE_GPU()                                                                      \
    do {                                                                                           \
        if (!pc_test_gpu_present())                                                                \
            skip();                                                                                \
    } while (0)

#endif
