/* Trace points of the fuse tile and warp strategies, compiled in only where PC_TRACE is defined
 * (cmake -DPC_TRACE=ON; off by default, and then every PC_TRACED(...) is empty, so the kernels
 * are built exactly as without it). A trace build is a lab build: during a forward pass the
 * kernels write timestamps into device buffers (no printf in kernels), and when an evaluator is
 * freed it writes the records of its last forward pass to stderr, one line each, for the
 * readers in bench/trace/. The shipped library never prints.
 *
 * Records (fields separated by one space; c* are clock64() cycles of the SM, t* globaltimer
 * nanoseconds):
 *
 *   TT group slice part nch wait [cG ...] warp c0 c1 c2 t1 t2
 *       tile strategy, one per unit of block 0: the unit's group, its slice of the block's
 *       samples, its part (0 unless the slice is split), its children's count, the group it
 *       waits on for its slot (-1: none), up to 4 child groups as "c<id>", the warp that ran
 *       it, the cycles before its waits (c0), after them (c1) and at its end (c2), and the
 *       global times after its waits (t1) and at its end (t2).
 *   TR chain groups nch ch0 ch1 ch2 ch3 t_start t_seen t_end c_start c_staged c_seen
 *      c0 c1 ... c7
 *       warp strategy, one per chain, for its item of sample tile 0: the chain, its groups,
 *       its bottom's child chains (count, then up to 4, -1 for none), the global time at the
 *       item's start, when its bottom's wait for the children ended and when it published
 *       (or wrote log p(x) at the root), the cycles at its start, after staging its rows and
 *       when the wait ended, then per group of its first four: the cycles after its gather
 *       and after its product (0 past the chain's length).
 *   IT chain tile sm start bottom_done end
 *       warp strategy, one per item: its chain, its tile of S samples, the SM that ran it,
 *       and the global times at its start, when its bottom group's gather was done (the wait
 *       for the children, loads, sums, max and exp) and at its end.
 *   CH chain | nch:nv ... | child ...
 *       warp strategy, one per chain of the plan the last pass took: its groups bottom first
 *       as children:variables, then its bottom's child chains. */
#ifndef PC_GPU_TRACE_CUH
#define PC_GPU_TRACE_CUH

#ifdef PC_TRACE
#define PC_TRACED(...) __VA_ARGS__
#else
#define PC_TRACED(...)
#endif

#ifdef PC_TRACE
/* The GPU's global time in nanoseconds. */
static __device__ __forceinline__ long long pc_trace_time() {
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#endif

#endif
