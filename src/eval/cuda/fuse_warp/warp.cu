/* The warp strategy's host side (warp.cuh): its kernel per K and form, chain plans, the
 * inputs' linear form, and the launch. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/fail.h"
#include "eval/cuda/fuse_warp/warp_chain.cuh"
#include "eval/cuda/gpu_choice.h"

/* One chain plan on the device. */
typedef struct warp_chain_dev {
    int32_t *begin, *groups, *child; /* [chains + 1], [G], [G] */
    int32_t *vb, *vars;              /* [G + 1], [V]: each chain's variables in one range */
    int32_t *queue;                  /* [2][chains], the queue orders (plan order, by path) */
} warp_chain_dev;

struct pc_warp {
    pc_gpu_chains chains[PC_GPU_CHAIN_PLANS]; /* host, planned with the slots */
    warp_chain_dev d_chains[PC_GPU_CHAIN_PLANS];
    int32_t grid[PC_GPU_WARP_FORMS]; /* resident blocks per form */
    float *d_wf, *d_in_lin;
    double *d_in_max, *d_root_wexp;
    int last_plan; /* the chain plan of the last pass queued (traces) */
};

typedef void (*warp_fn)(pc_gpu_args, int);

/* The kernel for K and a form, and how it is launched: threads per block, samples per item,
 * dynamic shared memory. */
struct warp_launch {
    warp_fn fn;
    int threads, samples;
    size_t smem;
};
template <int KP, int S> static warp_launch warp_launch_of(warp_fn fn) {
    return {fn, warp_threads<S>(), S, warp_smem_bytes<KP, S>()};
}

/* The kernel for K and a form: rows padded to 16, 32, 64, then to a multiple of 16 (80, 96,
 * 112, 128: shorter rows than 128 at 64 < K <= 112, tuning.md#warp-rows); at K = 64 its KX
 * form (no column checks, constant row strides; fuse runs 32 < K < 64 as 64), not at K = 16,
 * where that form's loads spill, nor at 32 (tuning.md#warp-kx). Blocks per SM as in
 * warp_kernel's notes; at KP = 80 and 96 THREE has 3 blocks (168 registers) instead of 2
 * (250-254). EIGHT at KP >= 64 (168 registers), and only it at KP = 128; other forms fall back
 * to TWO. pc_gpu_warp_form (gpu_choice.c) picks the form. */
template <int KP> static warp_launch warp_pick_kp(int form) {
    if constexpr (KP == 128) {
        return warp_launch_of<KP, 8>(warp_kernel<KP, false, 2, 8>);
    } else {
        if constexpr (KP >= 64) {
            if (form == PC_GPU_WARP_EIGHT)
                return warp_launch_of<KP, 8>(warp_kernel<KP, false, 2, 8>);
        }
        if constexpr (KP == 64)
            return warp_launch_of<KP, 16>(warp_kernel<KP, true, 3, 16>);
        else if constexpr (KP == 80 || KP == 96)
            return warp_launch_of<KP, 16>(form == PC_GPU_WARP_THREE
                                              ? warp_kernel<KP, false, 3, 16>
                                              : warp_kernel<KP, false, 2, 16>);
        else
            return warp_launch_of<KP, 16>(warp_kernel<KP, false, KP >= 112 ? 2 : 5, 16>);
    }
}

static warp_launch warp_pick(int K, int form) {
    return K <= 16    ? warp_pick_kp<16>(form)
           : K <= 32  ? warp_pick_kp<32>(form)
           : K <= 64  ? warp_pick_kp<64>(form)
           : K <= 80  ? warp_pick_kp<80>(form)
           : K <= 96  ? warp_pick_kp<96>(form)
           : K <= 112 ? warp_pick_kp<112>(form)
                      : warp_pick_kp<128>(form);
}

int pc_warp_takes(const pc_gpu_state *s) {
    return pc_gpu_fuse_warp_k(s->K) && (int64_t)s->V * (s->C + 1) <= INT32_MAX;
}

/* The kernels' shared memory and resident grid of each form (the tiles and counters are the
 * caller's: 16-sample runs, as the persistent strategy's). */
pc_status pc_warp_configure(const pc_gpu_state *s, pc_warp **out) {
    pc_status st = PC_OK;
    *out = NULL;
    if (s->K > PC_GPU_WARP_MAX_K)
        return pc_fail(PC_ERR_UNSUPPORTED, "fuse warp strategy: takes K <= %d, not K = %d",
                       PC_GPU_WARP_MAX_K, s->K);
    if (!pc_warp_takes(s))
        return pc_fail(PC_ERR_UNSUPPORTED,
                       "fuse warp strategy: %d variables of %d values make more input rows "
                       "than an int32 counts", s->V, s->C + 1);
    pc_warp *p = (pc_warp *)calloc(1, sizeof(pc_warp));
    *out = p;
    if (!p) return pc_fail(PC_ERR_NOMEM, "fuse warp strategy: out of host memory");
    for (int form = 0; form < PC_GPU_WARP_FORMS; form++) {
        const warp_launch l = warp_pick(s->K, form);
        if ((st = pc_gpu_kernel_grid(s, (const void *)l.fn, l.threads, l.smem, 0,
                                     "fuse warp strategy", &p->grid[form])))
            return st;
    }
    return PC_OK;
}

/* The chain plans, each chain with a slot of its own. */
pc_status pc_warp_plan(pc_gpu_state *s, pc_warp *p) {
    pc_status st = PC_OK;
    const pc_gpu_tuning *t = s->tuning;
    const int32_t longest[PC_GPU_CHAIN_PLANS] = {t->chain_short, t->chain_long};
    for (int i = 0; i < PC_GPU_CHAIN_PLANS; i++) {
        if ((st = pc_gpu_chain_plan(s->circuit, t, longest[i], PC_GPU_CHAIN_WINDOW_VARS,
                                    &p->chains[i])))
            return st;
        if (p->chains[i].num_chains > s->num_slots) s->num_slots = p->chains[i].num_chains;
    }
    return PC_OK;
}

/* Chain plan i (p->chains[i], planned with the slots) into p->d_chains[i], with the variables
 * in chain order (vb, vars), so that an item finds all of its chain's in one range, and the two
 * queue orders (pc_gpu_warp_queue_by_path picks one): the plan's, then by path. */
static pc_status warp_upload_chains(pc_gpu_state *s, pc_warp *p, int i) {
    pc_status st = PC_OK;
    const pc_gpu_chains *ch = &p->chains[i];
    warp_chain_dev *d = &p->d_chains[i];
    const pc_circuit *c = s->circuit;
    const size_t nb = sizeof(int32_t) * ((size_t)ch->num_chains + 1);
    const size_t nq = sizeof(int32_t) * 2 * (size_t)ch->num_chains;
    const size_t ng = sizeof(int32_t) * (size_t)s->G, nv = sizeof(int32_t) * (size_t)s->V;
    int32_t *vb = (int32_t *)malloc(ng + sizeof(int32_t)), *vars = (int32_t *)malloc(nv);
    int32_t *queue = (int32_t *)malloc(nq);
    if (!vb || !vars || !queue) {
        st = pc_fail(PC_ERR_NOMEM, "GPU upload: out of host memory for the chains' variables");
        goto fail;
    }
    vb[0] = 0;
    for (int32_t m = 0; m < s->G; m++) {
        const int32_t g = ch->groups[m], n = c->var_start[g + 1] - c->var_start[g];
        memcpy(vars + vb[m], c->group_vars + c->var_start[g], sizeof(int32_t) * (size_t)n);
        vb[m + 1] = vb[m] + n;
    }
    for (int32_t i = 0; i < ch->num_chains; i++)
        queue[i] = i, queue[ch->num_chains + i] = ch->by_path[i];
    if ((st = pc_gpu_alloc(s, (void **)&d->begin, nb, "chains"))) goto fail;
    if ((st = pc_gpu_alloc(s, (void **)&d->groups, ng, "chain groups"))) goto fail;
    if ((st = pc_gpu_alloc(s, (void **)&d->child, ng, "chain children"))) goto fail;
    if ((st = pc_gpu_alloc(s, (void **)&d->vb, ng + sizeof(int32_t), "chain variables")))
        goto fail;
    if ((st = pc_gpu_alloc(s, (void **)&d->vars, nv, "chain variables"))) goto fail;
    if ((st = pc_gpu_alloc(s, (void **)&d->queue, nq, "chain queue orders"))) goto fail;
    PC_CUDA_CHECK(cudaMemcpy(d->begin, ch->begin, nb, cudaMemcpyHostToDevice));
    PC_CUDA_CHECK(cudaMemcpy(d->groups, ch->groups, ng, cudaMemcpyHostToDevice));
    if (s->G > 1)
        PC_CUDA_CHECK(cudaMemcpy(d->child, ch->child_chain, ng - sizeof(int32_t),
                                cudaMemcpyHostToDevice));
    PC_CUDA_CHECK(cudaMemcpy(d->vb, vb, ng + sizeof(int32_t), cudaMemcpyHostToDevice));
    PC_CUDA_CHECK(cudaMemcpy(d->vars, vars, nv, cudaMemcpyHostToDevice));
    PC_CUDA_CHECK(cudaMemcpy(d->queue, queue, nq, cudaMemcpyHostToDevice));
fail:
    free(vb), free(vars), free(queue);
    return st;
}

static size_t warp_chain_bytes(const pc_gpu_state *s, const pc_warp *p, int i) {
    return sizeof(int32_t) *
           (3 * (size_t)p->chains[i].num_chains + 1 + 3 * (size_t)s->G + 1 + (size_t)s->V);
}

/* The inputs in the linear form of warp_link (rows [V][C + 1], row C the marginal; KP floats
 * each, 16-byte aligned) and exp(root_logw), computed in FP64 from the model's FP64 values;
 * values below FLT_MIN become 0, as the FP32 exp of the log domain would flush them. */
static size_t warp_in_rows(const pc_gpu_state *s) { return (size_t)s->V * ((size_t)s->C + 1); }
static size_t warp_in_bytes(const pc_gpu_state *s) {
    const size_t KP = (size_t)pc_gpu_kp(s->K, PC_GPU_W_ROWS);
    return warp_in_rows(s) * (KP * sizeof(float) + sizeof(double)) + KP * sizeof(double);
}

static pc_status warp_upload_inputs(pc_gpu_state *s, pc_warp *p) {
    pc_status st = PC_OK;
    const pc_circuit *c = s->circuit;
    const int K = s->K, KP = pc_gpu_kp(K, PC_GPU_W_ROWS), C = s->C;
    const size_t rows = warp_in_rows(s);
    float *lin = (float *)calloc(rows * KP, sizeof(float));
    double *mx = (double *)malloc(rows * sizeof(double));
    double *in = (double *)malloc(K * sizeof(double)), *rw = (double *)calloc(KP, sizeof(double));
    if (!lin || !mx || !in || !rw) {
        st = pc_fail(PC_ERR_NOMEM, "GPU upload: out of host memory for %zu input rows", rows);
        goto fail;
    }
    for (size_t row = 0; row < rows; row++) {
        const int v = (int)(row / (C + 1)), x = (int)(row % (C + 1));
        double m = -INFINITY;
        for (int k = 0; k < K; k++) {
            const double *p = c->input_logp + ((size_t)v * K + k) * C;
            if (x < C) {
                in[k] = p[x];
            } else { /* the marginal: LSE over the values */
                double pm = -INFINITY, sum = 0.0;
                for (int y = 0; y < C; y++) pm = p[y] > pm ? p[y] : pm;
                for (int y = 0; y < C && pm != -INFINITY; y++) sum += exp(p[y] - pm);
                in[k] = pm == -INFINITY ? -INFINITY : pm + log(sum);
            }
            m = in[k] > m ? in[k] : m;
        }
        mx[row] = m;
        for (int k = 0; k < K && m != -INFINITY; k++) {
            const double e = exp(in[k] - m);
            lin[row * KP + k] = e < FLT_MIN ? 0.0f : (float)e;
        }
    }
    for (int k = 0; k < K; k++) rw[k] = exp(c->root_logw[k]);
    if ((st = pc_gpu_upload(s, (void **)&p->d_in_lin, lin, rows * KP * sizeof(float),
                            "linear inputs")) ||
        (st = pc_gpu_upload(s, (void **)&p->d_in_max, mx, rows * sizeof(double),
                            "input maxima")) ||
        (st = pc_gpu_upload(s, (void **)&p->d_root_wexp, rw, KP * sizeof(double),
                            "exp(root_logw)")))
        goto fail;
fail:
    free(lin), free(mx), free(in), free(rw);
    return st;
}

/* exp(trans_logw) per group (PC_GPU_W_ROWS), the inputs' linear form, and the chain plans. */
pc_status pc_warp_upload(pc_gpu_state *s, pc_warp *p) {
    pc_status st = pc_gpu_upload_padded_w(s, PC_GPU_W_ROWS, &p->d_wf);
    if (st == PC_OK) st = warp_upload_inputs(s, p);
    for (int i = 0; i < PC_GPU_CHAIN_PLANS && st == PC_OK; i++) st = warp_upload_chains(s, p, i);
    return st;
}

/* The chains' slots are the common message buffer's (their plans raised s->num_slots). */
size_t pc_warp_bytes(const pc_gpu_state *s, const pc_warp *p) {
    size_t bytes = pc_gpu_padded_w_bytes(s, PC_GPU_W_ROWS) + warp_in_bytes(s);
    for (int i = 0; i < PC_GPU_CHAIN_PLANS; i++) bytes += warp_chain_bytes(s, p, i);
    return bytes;
}

void pc_warp_release(pc_gpu_state *s, pc_warp *p) {
    if (!p) return;
    PC_TRACED(warp_trace_write(s, &p->chains[p->last_plan]));
    const size_t KP = (size_t)pc_gpu_kp(s->K, PC_GPU_W_ROWS), rows = warp_in_rows(s);
    pc_gpu_release(s, p->d_wf, pc_gpu_padded_w_bytes(s, PC_GPU_W_ROWS));
    pc_gpu_release(s, p->d_in_lin, rows * KP * sizeof(float));
    pc_gpu_release(s, p->d_in_max, rows * sizeof(double));
    pc_gpu_release(s, p->d_root_wexp, KP * sizeof(double));
    for (int i = 0; i < PC_GPU_CHAIN_PLANS; i++) {
        warp_chain_dev *d = &p->d_chains[i];
        const size_t chains = (size_t)p->chains[i].num_chains;
        pc_gpu_release(s, d->begin, sizeof(int32_t) * (chains + 1));
        pc_gpu_release(s, d->groups, sizeof(int32_t) * (size_t)s->G);
        pc_gpu_release(s, d->child, sizeof(int32_t) * (size_t)s->G);
        pc_gpu_release(s, d->vb, sizeof(int32_t) * ((size_t)s->G + 1));
        pc_gpu_release(s, d->vars, sizeof(int32_t) * (size_t)s->V);
        pc_gpu_release(s, d->queue, sizeof(int32_t) * 2 * chains);
        pc_gpu_chains_free(&p->chains[i]);
    }
    free(p);
}

/* The pass's kernel args: the common ones, then the weights, the inputs' linear form and the
 * chain plan with its queue order. */
static pc_gpu_args pc_gpu_args_for(const pc_warp *p, const pc_gpu_args *a, int plan, bool by_path) {
    const warp_chain_dev *d = &p->d_chains[plan];
    pc_gpu_args b = *a;
    b.wf = p->d_wf, b.in_lin = p->d_in_lin, b.in_max = p->d_in_max, b.root_wexp = p->d_root_wexp;
    b.chain_begin = d->begin, b.chain_groups = d->groups, b.chain_child = d->child;
    b.chain_vb = d->vb, b.chain_vars = d->vars;
    b.chain_queue = d->queue + (by_path ? p->chains[plan].num_chains : 0);
    return b;
}

pc_status pc_warp_enqueue(const pc_gpu_state *s, pc_warp *p, const pc_gpu_args *a,
                          cudaStream_t stream) {
    pc_status st = PC_OK;
    const int form = pc_gpu_warp_form(s->tuning, s->K, a->n, s->dev.sms);
    const int plan = pc_gpu_warp_chains(s->tuning, s->K, a->n, s->dev.sms);
    const int32_t chains = p->chains[plan].num_chains;
    const warp_launch l = warp_pick(s->K, form);
    const int64_t tiles = (int64_t)a->tiles * (WARP_TILE / l.samples), nw = l.threads / 32;
    const int64_t total = (int64_t)chains * ((tiles + nw - 1) / nw);
    if (total > INT32_MAX)
        return pc_fail(PC_ERR_UNSUPPORTED,
                       "fuse warp strategy: %d chains make %lld work gangs for %d samples, more "
                       "than the queue counts (2^31 - 1)", chains, (long long)total, a->n);
    const int resident = p->grid[form];
    const int grid = total < resident ? (int)total : resident;
    const pc_gpu_args b =
        pc_gpu_args_for(p, a, plan, pc_gpu_warp_queue_by_path(s->tuning, total, grid));
    p->last_plan = plan;
    if ((st = pc_gpu_reset_counters(a, stream))) return st;
    l.fn<<<grid, l.threads, l.smem, stream>>>(b, (int)total);
    PC_CUDA_CHECK(cudaGetLastError());
fail:
    return st;
}

/* ---- the strategy forced (fuse/fuse.cu) ---------------------------------------------------*/

static const char *warp_strategy(const pc_gpu_state *s, int64_t n) {
    (void)s, (void)n;
    return "warp";
}

static pc_status warp_configure(pc_gpu_state *s) {
    s->bm = WARP_TILE;
    return pc_warp_configure(s, (pc_warp **)&s->strategy);
}

static pc_status warp_plan(pc_gpu_state *s) { return pc_warp_plan(s, (pc_warp *)s->strategy); }

static size_t warp_bytes(const pc_gpu_state *s, int64_t chunk) {
    (void)chunk;
    return pc_warp_bytes(s, (const pc_warp *)s->strategy);
}

static pc_status warp_upload(pc_gpu_state *s) { return pc_warp_upload(s, (pc_warp *)s->strategy); }

static pc_status warp_enqueue(pc_gpu_state *s, const pc_gpu_args *a, cudaStream_t stream) {
    return pc_warp_enqueue(s, (pc_warp *)s->strategy, a, stream);
}

static void warp_release(pc_gpu_state *s) {
    pc_warp_release(s, (pc_warp *)s->strategy);
    s->strategy = NULL;
}

const pc_gpu_impl pc_gpu_warp_impl = {
    .backend = PC_BACKEND_FUSE,
    .strategy_for = warp_strategy,
    .configure = warp_configure,
    .plan = warp_plan,
    .bytes = warp_bytes,
    .upload = warp_upload,
    .enqueue = warp_enqueue,
    .release = warp_release,
};
