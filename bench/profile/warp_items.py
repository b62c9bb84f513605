"""Timeline of every work item of one forward pass of the fuse warp strategy.

Reads the "IT" and "CH" lines that a PC_TRACE build (cmake -DPC_TRACE=ON) prints when
its evaluator is destroyed: per item (chain, sample tile) its SM and three globaltimer stamps
(start, the bottom group's gather done: its wait for the children, loads, sums, max and
exp; end), and per chain its groups (children:variables, bottom first)
and the chains its bottom reads. Prints how many warps hold an item over the pass (against the
resident warps), when the last item started and ended, item times by the chain's depth below
the root and by its shape, and, with a second argument, plots the busy warps over time.
    usage: python3 warp_items.py STDERR_FILE [PLOT.png]
"""
import argparse
import collections
import statistics as st


def read(path):
    items, chains = {}, {}
    for line in open(path):
        f = line.split()
        if line.startswith("IT "):
            c, t, sm, a, b, e = map(int, f[1:7])
            items[(c, t)] = (sm, a, b, e)
        elif line.startswith("CH "):
            _, groups, kids = line[3:].split("|")
            chains[int(f[1])] = ([tuple(map(int, g.split(":"))) for g in groups.split()],
                                 [int(k) for k in kids.split()])
    return items, chains


def depths(chains):
    parent = {k: c for c, (_, kids) in chains.items() for k in kids}
    out = {}
    for c in chains:
        d, x = 0, c
        while x in parent:
            x, d = parent[x], d + 1
        out[c] = d
    return out


def busy_profile(items, t0, span, width):
    """Warps holding an item, and of those in the bottom group's gather, per bin of `width` ns."""
    n = span // width + 1
    busy, bottom = [0.0] * n, [0.0] * n
    for sm, a, b, e in items.values():
        for lo, hi, arr in ((a, e, busy), (a, b, bottom)):
            lo, hi = lo - t0, hi - t0
            k = lo // width
            while k * width < hi:
                arr[k] += (min(hi, (k + 1) * width) - max(lo, k * width)) / width
                k += 1
    return busy, bottom


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("plot", nargs="?")
    a = ap.parse_args()
    items, chains = read(a.log)
    if not items or not chains:
        raise SystemExit("no IT/CH lines in %s (a PC_TRACE build, fuse-warp?)" % a.log)
    t0 = min(v[1] for v in items.values())
    end = max(v[3] for v in items.values())
    last = max(v[1] for v in items.values())
    events = sorted([(v[1], 1) for v in items.values()] + [(v[3], -1) for v in items.values()])
    held = most = 0
    for _, d in events:
        held += d
        most = max(most, held)
    print("items %d, chains %d, pass %.1f us, last item started at %.1f us, at most %d items "
          "held at once" % (len(items), len(chains), (end - t0) / 1e3, (last - t0) / 1e3, most))
    width = 20000
    busy, bottom = busy_profile(items, t0, end - t0, width)
    print("\nwarps holding an item per %d us (mean), of them in the bottom group's gather"
          % (width // 1000))
    for k, (x, y) in enumerate(zip(busy, bottom)):
        print("  %5d us  %6.0f  %6.0f" % (k * width // 1000, x, y))
    warp_us = sum(e - s for _, s, _, e in items.values()) / 1e3
    bottom_us = sum(b - s for _, s, b, _ in items.values()) / 1e3
    print("\nwarp time in items %.0f us, of it in the bottom groups' gathers (the wait for the "
          "children, loads, sums, max, exp) %.0f %%"
          % (warp_us, 100 * bottom_us / warp_us))
    dep = depths(chains)
    by_depth = collections.defaultdict(list)
    by_shape = collections.defaultdict(list)
    for (c, t), (sm, s, b, e) in items.items():
        by_depth[dep[c]].append((s - t0, b - s, e - b, e - t0))
        g = chains[c][0]
        by_shape[(len(g), g[0][0], g[0][1], sum(v for _, v in g[1:]))].append((b - s, e - b))
    print("\nby depth (chains below the root): items, median us of the bottom's gather / the "
          "rest (products, links, logs), first start, median start, last end")
    for d in sorted(by_depth):
        v = by_depth[d]
        print("  %2d %6d  %6.1f %6.1f  %6.1f %6.1f %6.1f" % (
            d, len(v), st.median(x[1] for x in v) / 1e3, st.median(x[2] for x in v) / 1e3,
            min(x[0] for x in v) / 1e3, st.median(x[0] for x in v) / 1e3,
            max(x[3] for x in v) / 1e3))
    print("\nby chain shape (groups, bottom's children, bottom's variables, links' variables): "
          "items, median us of the bottom's gather / the rest")
    for k in sorted(by_shape, key=lambda k: -len(by_shape[k]))[:16]:
        v = by_shape[k]
        print("  %-16s %6d  %6.1f %6.1f" % (k, len(v), st.median(x[0] for x in v) / 1e3,
                                           st.median(x[1] for x in v) / 1e3))
    if a.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        xs = [(k + 0.5) * width / 1e3 for k in range(len(busy))]
        fig, ax = plt.subplots(figsize=(8, 3.6))
        ax.plot(xs, busy, label="warps holding an item")
        ax.plot(xs, bottom, label="of them in the bottom group's gather")
        ax.axhline(most, color="gray", ls=":", label="most items held at once")
        ax.set_xlabel("time in the forward pass (us)")
        ax.set_ylabel("warps (mean per %d us)" % (width // 1000))
        ax.set_ylim(bottom=0)
        ax.legend(loc="lower left", fontsize=8)
        fig.tight_layout()
        fig.savefig(a.plot, dpi=120)


if __name__ == "__main__":
    main()
