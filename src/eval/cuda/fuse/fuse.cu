/* `fuse`: its choice of strategy per forward pass (gpu_choice.h) over the persistent strategy,
 * which takes every circuit, and the tile and warp strategies where they take it; and each
 * strategy forced, for tests and benchmarks (gpu_hooks.h). */
#include <stdlib.h>
#include <string.h>

#include "base/fail.h"
#include "eval/cuda/fuse_persistent/persistent.cuh"
#include "eval/cuda/fuse_tile/tile.cuh"
#include "eval/cuda/fuse_warp/warp.cuh"
#include "eval/cuda/gpu_choice.h"
#include "eval/cuda/gpu_hooks.h"

/* The strategies fuse chooses from; tile and warp NULL where they do not take the circuit. */
typedef struct fuse_state {
    pc_persistent *persistent;
    pc_tile *tile;
    pc_warp *warp;
} fuse_state;

static fuse_state *fuse_of(const pc_gpu_state *s) { return (fuse_state *)s->strategy; }

/* Warp where it takes the circuit and fuse's rule says so (and at K <= 64 wherever the tile
 * strategy cannot take the circuit); else tile where it takes it and its rule says so; else
 * persistent. */
static const char *fuse_strategy(const pc_gpu_state *s, int64_t n) {
    const fuse_state *f = fuse_of(s);
    const pc_gpu_tuning *t = s->tuning;
    if (f->warp && ((!f->tile && s->K <= 64) || pc_gpu_fuse_takes_warp(t, s->K, n, s->dev.sms)))
        return "warp";
    return f->tile && pc_gpu_fuse_takes_tile(t, s->K, n, s->dev.sms) ? "tile" : "persistent";
}

/* The persistent kernel's tiles and buffers, plus the tile and warp kernels' where they take
 * the circuit. The counters run over the persistent (and warp) strategy's 16-sample runs. */
static pc_status fuse_configure(pc_gpu_state *s) {
    pc_status st = PC_OK;
    fuse_state *f = (fuse_state *)calloc(1, sizeof(fuse_state));
    s->strategy = f;
    if (!f) return pc_fail(PC_ERR_NOMEM, "backend 'fuse': out of host memory");
    s->bm = PC_PERSISTENT_TILE;
    if ((st = pc_persistent_configure(s, &f->persistent))) return st;
    if (pc_tile_fits(s->tuning, s->circuit) && (st = pc_tile_configure(s, &f->tile))) return st;
    if (pc_warp_takes(s)) st = pc_warp_configure(s, &f->warp);
    return st;
}

static pc_status fuse_plan(pc_gpu_state *s) {
    const fuse_state *f = fuse_of(s);
    return f->warp ? pc_warp_plan(s, f->warp) : PC_OK;
}

static size_t fuse_bytes(const pc_gpu_state *s, int64_t chunk) {
    const fuse_state *f = fuse_of(s);
    (void)chunk;
    return pc_persistent_bytes(s) + (f->tile ? pc_tile_bytes(s) : 0) +
           (f->warp ? pc_warp_bytes(s, f->warp) : 0);
}

static pc_status fuse_upload(pc_gpu_state *s) {
    fuse_state *f = fuse_of(s);
    pc_status st = pc_persistent_upload(s, f->persistent);
    if (st == PC_OK && f->tile) st = pc_tile_upload(s, f->tile);
    if (st == PC_OK && f->warp) st = pc_warp_upload(s, f->warp);
    return st;
}

static pc_status fuse_enqueue(pc_gpu_state *s, const pc_gpu_args *a, cudaStream_t stream) {
    fuse_state *f = fuse_of(s);
    const char *strategy = fuse_strategy(s, a->n);
    if (!strcmp(strategy, "warp")) return pc_warp_enqueue(s, f->warp, a, stream);
    if (!strcmp(strategy, "tile")) return pc_tile_enqueue(s, f->tile, a, stream);
    return pc_persistent_enqueue(s, f->persistent, a, stream);
}

static void fuse_release(pc_gpu_state *s) {
    fuse_state *f = fuse_of(s);
    if (!f) return;
    pc_persistent_release(s, f->persistent);
    pc_tile_release(s, f->tile);
    pc_warp_release(s, f->warp);
    free(f);
    s->strategy = NULL;
}

static const pc_gpu_impl fuse_impl = {
    .backend = PC_BACKEND_FUSE,
    .strategy_for = fuse_strategy,
    .configure = fuse_configure,
    .plan = fuse_plan,
    .bytes = fuse_bytes,
    .upload = fuse_upload,
    .enqueue = fuse_enqueue,
    .release = fuse_release,
};

static pc_status fuse_create(const pc_circuit *c, const pc_eval_opts *o, void **state) {
    return pc_gpu_create(&fuse_impl, c, o, state);
}

extern "C" const pc_backend_ops pc_backend_fuse_ops = PC_GPU_OPS(fuse_create);

/* ---- forced strategies (gpu_hooks.h) ------------------------------------------------------*/

static pc_status tile_create(const pc_circuit *c, const pc_eval_opts *o, void **state) {
    return pc_gpu_create(&pc_gpu_tile_impl, c, o, state);
}
static pc_status persistent_create(const pc_circuit *c, const pc_eval_opts *o, void **state) {
    return pc_gpu_create(&pc_gpu_persistent_impl, c, o, state);
}
static pc_status warp_create(const pc_circuit *c, const pc_eval_opts *o, void **state) {
    return pc_gpu_create(&pc_gpu_warp_impl, c, o, state);
}

static const pc_backend_ops forced_tile = PC_GPU_OPS(tile_create);
static const pc_backend_ops forced_persistent = PC_GPU_OPS(persistent_create);
static const pc_backend_ops forced_warp = PC_GPU_OPS(warp_create);

extern "C" const pc_backend_ops *pc_gpu_fuse_forced_ops(const char *strategy) {
    if (!strategy) return NULL;
    if (!strcmp(strategy, "tile")) return &forced_tile;
    if (!strcmp(strategy, "persistent")) return &forced_persistent;
    if (!strcmp(strategy, "warp")) return &forced_warp;
    return NULL;
}
