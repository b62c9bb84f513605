/* The tile strategy's host side (tile.cuh): its kernel for (K, samples per block), its
 * schedules and its launch. */
#include <stdlib.h>

#include "base/fail.h"
#include "eval/cuda/fuse_tile/tile_kernel.cuh"

/* exp(w) in the quads form and the schedules, one per block size T = 4 2^i (T <= 32). */
struct pc_tile {
    float *d_wt;
    int32_t *d_sched;
    size_t sched_at[4]; /* where T = 4 2^i's starts in d_sched (int32s) */
};

static_assert(4 << 3 == TILE_MAX_T, "one schedule per block size 4, 8, 16, 32 (sched_at)");

typedef void (*tile_fn)(pc_gpu_args, int, const int32_t *);

/* Samples per unit: as many as the block has up to 16 for K <= 16, else 4 (so that a lane
 * holds at most 8 elements of the product and 8 accumulators); more samples per unit spread
 * its fixed costs (plan lookups, the max, the exp(w) loads) over more outputs. */
static int tile_tw(int K, int T) { return K > 16 ? 4 : T < 16 ? (T < 8 ? 4 : 8) : 16; }

/* JW: the smallest power of two >= K, at least 4 and 32 / tw (SG = 32 / JW <= TW), at most
 * 32 (K > 32 takes NJ = 2). */
static int tile_jw(int K, int tw) {
    int jw = 32 / tw < 4 ? 4 : 32 / tw;
    while (jw < K && jw < 32) jw *= 2;
    return jw;
}

/* Parts of a split slice for the kernel tile_pick() chooses (a lane holds tw JW / 32 samples
 * of the slice). */
static int tile_parts(int K, int tw) { return tile_parts_of(tw * tile_jw(K, tw) / 32); }

/* The kernel of shape (TW, JW, NJ) for K: its KX form where K fills the padded row, the only
 * form for rows of 64 (fuse runs 32 < K < 64 as 64, pc_gpu_fuse_states). */
template <int TW, int JW, int NJ> static tile_fn tile_fn_for(int K) {
    if constexpr (JW * NJ == 64)
        return tile_kernel<TW, JW, NJ, true>;
    else
        return K == JW * NJ ? tile_kernel<TW, JW, NJ, true> : tile_kernel<TW, JW, NJ, false>;
}

static tile_fn tile_pick(int K, int tw) {
    const int jw = tile_jw(K, tw);
    if (tw == 16) return jw == 4 ? tile_fn_for<16, 4, 1>(K) : jw == 8 ? tile_fn_for<16, 8, 1>(K)
                                                                      : tile_fn_for<16, 16, 1>(K);
    if (tw == 8) return jw == 4 ? tile_fn_for<8, 4, 1>(K) : jw == 8 ? tile_fn_for<8, 8, 1>(K)
                                                                    : tile_fn_for<8, 16, 1>(K);
    if (jw == 8) return tile_fn_for<4, 8, 1>(K);
    if (jw == 16) return tile_fn_for<4, 16, 1>(K);
    return K <= 32 ? tile_fn_for<4, 32, 1>(K) : K <= 64 ? tile_fn_for<4, 32, 2>(K)
                                                         : tile_fn_for<4, 32, 4>(K);
}

/* The most shared memory any launch for this circuit takes (its codes grow with T). */
static size_t tile_smem_max(const pc_circuit *c) {
    size_t most = 0;
    for (int T = 4; T <= TILE_MAX_T; T *= 2) {
        const size_t b = tile_smem(c->num_groups, c->num_vars, c->num_latents, T,
                                   tile_tw(c->num_latents, T));
        most = b > most ? b : most;
    }
    return most;
}

int pc_tile_fits(const pc_gpu_tuning *t, const pc_circuit *c) {
    return c->num_latents <= TILE_MAX_K && tile_smem_max(c) <= (size_t)t->tile_smem_cap;
}

/* Checks the circuit and sets the kernels' shared-memory limit. */
pc_status pc_tile_configure(const pc_gpu_state *s, pc_tile **out) {
    pc_status st = PC_OK;
    const size_t smem = tile_smem_max(s->circuit);
    *out = NULL;
    if (!pc_tile_fits(s->tuning, s->circuit))
        return pc_fail(PC_ERR_UNSUPPORTED,
                       "fuse tile strategy: takes K <= %d and %d KiB of shared memory per block; "
                       "K = %d, V = %d need %zu bytes", TILE_MAX_K, s->tuning->tile_smem_cap / 1024,
                       s->K, s->V, smem);
    if (smem > (size_t)s->dev.max_smem)
        return pc_fail(PC_ERR_UNSUPPORTED,
                       "fuse tile strategy: needs %zu bytes of shared memory per block, the GPU "
                       "has %d", smem, s->dev.max_smem);
    for (int T = 4; T <= TILE_MAX_T; T *= 2)
        PC_CUDA_CHECK(cudaFuncSetAttribute(tile_pick(s->K, tile_tw(s->K, T)),
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    *out = (pc_tile *)calloc(1, sizeof(pc_tile));
    if (!*out) return pc_fail(PC_ERR_NOMEM, "fuse tile strategy: out of host memory");
fail:
    return st;
}

pc_status pc_tile_enqueue(const pc_gpu_state *s, const pc_tile *p, const pc_gpu_args *a,
                          cudaStream_t stream) {
    pc_status st = PC_OK;
    const int T = pc_gpu_tile_samples(s->tuning, a->n, s->dev.sms), tw = tile_tw(s->K, T);
    const unsigned grid = (unsigned)((a->n + T - 1) / T);
    const size_t smem = tile_smem(s->G, s->V, s->K, T, tw);
    int ti = 0;
    while ((4 << ti) < T) ti++;
    pc_gpu_args ta = *a;
    ta.wt = p->d_wt;
    tile_pick(s->K, tw)<<<grid, TILE_THREADS, smem, stream>>>(ta, T, p->d_sched + p->sched_at[ti]);
    PC_CUDA_CHECK(cudaGetLastError());
fail:
    return st;
}

/* The schedules' int32s: per block size T, warps + 1 ranges and at most (T / tw) G parts
 * units. */
static size_t tile_sched_ints(const pc_gpu_state *s, int ti) {
    const int T = 4 << ti, tw = tile_tw(s->K, T);
    return TILE_WARPS + 1 + (size_t)s->G * (T / tw) * tile_parts(s->K, tw);
}

static size_t tile_sched_bytes(const pc_gpu_state *s) {
    size_t n = 0;
    for (int ti = 0; 4 << ti <= TILE_MAX_T; ti++) n += tile_sched_ints(s, ti);
    return n * sizeof(int32_t);
}

/* The warps' units per block size (gpu_tile_schedule.h), one array; the slices of layers that
 * would keep at most t->tile_thin_slices of the block's warps busy split into parts. */
static pc_status tile_upload_sched(pc_gpu_state *s, pc_tile *p) {
    pc_status st = PC_OK;
    const size_t bytes = tile_sched_bytes(s);
    int32_t *h = (int32_t *)malloc(bytes);
    uint8_t *split = (uint8_t *)malloc((size_t)s->G);
    size_t at = 0;
    if (!h || !split) {
        st = pc_fail(PC_ERR_NOMEM, "GPU upload: out of host memory for the tile schedules");
        goto fail;
    }
    for (int ti = 0; 4 << ti <= TILE_MAX_T; ti++) {
        const int T = 4 << ti, tw = tile_tw(s->K, T);
        p->sched_at[ti] = at;
        pc_gpu_tile_thin_layers(s->circuit, T / tw, s->tuning->tile_thin_slices, split);
        if ((st = pc_gpu_tile_schedule(s->circuit, s->h_groups, s->tuning, T / tw,
                                       tile_parts(s->K, tw), split, TILE_WARPS,
                                       h + at + TILE_WARPS + 1, h + at)))
            goto fail;
        at += tile_sched_ints(s, ti);
    }
    st = pc_gpu_upload(s, (void **)&p->d_sched, h, bytes, "tile schedules");
fail:
    free(h), free(split);
    return st;
}

/* exp(w) in the padded quads form (PC_GPU_W_QUADS) and the schedules. */
pc_status pc_tile_upload(pc_gpu_state *s, pc_tile *p) {
    const pc_status st = pc_gpu_upload_padded_w(s, PC_GPU_W_QUADS, &p->d_wt);
    return st == PC_OK ? tile_upload_sched(s, p) : st;
}

size_t pc_tile_bytes(const pc_gpu_state *s) {
    return pc_gpu_padded_w_bytes(s, PC_GPU_W_QUADS) + tile_sched_bytes(s);
}

void pc_tile_release(pc_gpu_state *s, pc_tile *p) {
    if (!p) return;
    PC_TRACED(tile_trace_write(s));
    pc_gpu_release(s, p->d_wt, pc_gpu_padded_w_bytes(s, PC_GPU_W_QUADS));
    pc_gpu_release(s, p->d_sched, tile_sched_bytes(s));
    free(p);
}

/* ---- the strategy forced (fuse/fuse.cu) ---------------------------------------------------*/

static const char *tile_strategy(const pc_gpu_state *s, int64_t n) {
    (void)s, (void)n;
    return "tile";
}

/* Chunks are cut at multiples of TILE_MAX_T; there are no counters to size. */
static pc_status tile_configure(pc_gpu_state *s) {
    s->bm = TILE_MAX_T;
    return pc_tile_configure(s, (pc_tile **)&s->strategy);
}

static size_t tile_bytes(const pc_gpu_state *s, int64_t chunk) {
    (void)chunk;
    return pc_tile_bytes(s);
}

static pc_status tile_upload(pc_gpu_state *s) { return pc_tile_upload(s, (pc_tile *)s->strategy); }

static pc_status tile_enqueue(pc_gpu_state *s, const pc_gpu_args *a, cudaStream_t stream) {
    return pc_tile_enqueue(s, (const pc_tile *)s->strategy, a, stream);
}

static void tile_release(pc_gpu_state *s) {
    pc_tile_release(s, (pc_tile *)s->strategy);
    s->strategy = NULL;
}

const pc_gpu_impl pc_gpu_tile_impl = {
    .backend = PC_BACKEND_FUSE,
    .strategy_for = tile_strategy,
    .configure = tile_configure,
    .plan = NULL,
    .bytes = tile_bytes,
    .upload = tile_upload,
    .enqueue = tile_enqueue,
    .release = tile_release,
};
