/* Random HCLT models and data for the engine's tests (hclt, eval, pcinfer).
 *
 * Trees: variable perm[0] is the root, every later variable hangs below a random earlier one,
 * and a non-root variable shares its parent's latent with probability `share`. Parameters are
 * random normalised log-distributions; with `zeros` set, about one entry in eight of each
 * distribution is -inf (but never a whole row), so zero probabilities are exercised.
 *
 * The random stream is the program's shared generator of testutil.h (pc_test_rng: seeded from
 * the clock or PC_TEST_SEED, the seed printed once), so a failure can be replayed. */
#ifndef PC_TEST_HCLT_RANDOM_H
#define PC_TEST_HCLT_RANDOM_H

#include <stdint.h>

#include "pc/hclt.h"

/* The program's seed (pc_test_seed: printed to stderr on first use). */
uint64_t pc_hr_seed(void);
/* Uniform integer in [lo, hi] and uniform double in [0, 1) from the program's stream. */
int64_t pc_hr_int(int64_t lo, int64_t hi);
double pc_hr_unit(void);

/* A random valid model; aborts the program on allocation failure. */
pc_hclt *pc_hr_model(int32_t V, int32_t C, int32_t K, double share, int zeros);

/* A random model whose tree is two paths from the root (V >= 3), every non-root variable with
 * its own latent: each layer below the root holds two groups (the last maybe one), the shape of
 * the MNIST tree's top, where GPU EM runs chains (src/learn/cuda/em_plan.h). */
pc_hclt *pc_hr_two_branches(int32_t V, int32_t C, int32_t K, int zeros);

/* n random samples [n, V] of values < C; with missing != NULL also a mask where about
 * `missing_rate` of the entries are 1 (their values are then set to 255 to prove they are
 * ignored). Both malloc'ed. */
uint8_t *pc_hr_data(int64_t n, int32_t V, int32_t C, double missing_rate, uint8_t **missing);

/* A fresh temporary directory (mkdtemp under TMPDIR or /tmp) and its removal with its files. */
char *pc_hr_tempdir(void);
void pc_hr_rmdir(char *dir);
/* "dir/name" in one of 64 static buffers used in turn, so that a few paths can be held at once
 * (a call reuses the buffer of the call 64 before it). */
const char *pc_hr_path(const char *dir, const char *name);

#endif
