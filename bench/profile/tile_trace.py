"""Per-unit trace of the fuse tile strategy (bench/device/gpu_trace_device.sh).

Reads the "TT" lines that a PC_TRACE build prints when its evaluator is freed (one per
unit of block 0 in the last forward pass: group, slice of the block's samples, part, children,
its warp, cycles before and after its waits and at its end, and two global timestamps) and
prints the warps' busy and waiting cycles, the slowest units, and the critical path back from
the root: at each unit, the child (of the same slice) or the warp's previous unit that
finished last ("c" or "w" after the unit in the list). A slice split into parts (the thin
layers) counts on the path as its part that finished last ("group.part" in the list; "/slice"
where a group has several), and a slice's parts as one for its parent.
    usage: python3 tile_trace.py STDERR_FILE
"""

import statistics as st
import sys


def main(path):
    U, last = {}, {}  # U by (group, slice, part); last: each slice's part that finished last
    for line in open(path):
        if not line.startswith("TT "):
            continue
        f = line.split()[1:]
        g, sl, part, nch = int(f[0]), int(f[1]), int(f[2]), int(f[3])
        k = 5 + min(nch, 4)
        ch = [int(x[1:]) for x in f[5:k]]
        w, c0, c1, c2, t1, t2 = [int(x) for x in f[k : k + 6]]
        u = (g, sl, part)
        U[u] = dict(nch=nch, ch=ch, w=w, t1=t1, t2=t2, busy=c2 - c1, wait=c1 - c0)
        if (g, sl) not in last or t2 > U[last[(g, sl)]]["t2"]:
            last[(g, sl)] = u
    if not U:
        sys.exit("no TT lines in %s (a PC_TRACE build, fuse-tile?)" % path)
    split = {g for g, sl, part in U if part > 0}
    slices = 1 + max(sl for g, sl, part in U)
    print(
        "groups",
        len({g for g, sl in last}),
        "x slices",
        slices,
        "of which split into parts",
        len(split),
    )

    def name(u):  # group, group.part for a part of a split slice, /slice if several
        g, sl, part = u
        return ("%d.%d" % (g, part) if g in split else "%d" % g) + (
            "/%d" % sl if slices > 1 else ""
        )

    t0 = min(r["t1"] for r in U.values())
    print("units", len(U), "span ns", max(r["t2"] for r in U.values()) - t0)
    warps = {}
    for u in sorted(U, key=lambda u: U[u]["t1"]):
        warps.setdefault(U[u]["w"], []).append(u)
    busy = [sum(U[u]["busy"] for u in us) for us in warps.values()]
    wait = [sum(U[u]["wait"] for u in us) for us in warps.values()]
    print(
        "per warp: units %d-%d, busy cycles median %d max %d, wait cycles median %d max %d"
        % (
            min(len(v) for v in warps.values()),
            max(len(v) for v in warps.values()),
            st.median(busy),
            max(busy),
            st.median(wait),
            max(wait),
        )
    )
    prev = {}
    for us in warps.values():
        for i, u in enumerate(us):
            prev[u] = us[i - 1] if i else None
    print(
        "unit busy cycles: median %d, leaves %d, with children %d"
        % (
            st.median(r["busy"] for r in U.values()),
            st.median(r["busy"] for r in U.values() if r["nch"] == 0),
            st.median([r["busy"] for r in U.values() if r["nch"] > 0] or [0]),
        )
    )
    top = sorted(U, key=lambda u: -U[u]["busy"])[:5]
    print(
        "slowest units:",
        ", ".join("%s (%d cyc, %d ch)" % (name(u), U[u]["busy"], U[u]["nch"]) for u in top),
    )
    u, path, seen = max(U, key=lambda u: U[u]["t2"]), [], set()
    while u is not None:
        if u in seen:  # a record that does not fit the schedule: stop rather than loop
            print("critical path: unit %s twice, the walk stops there" % name(u))
            break
        seen.add(u)
        r, pw = U[u], prev[u]
        pw_t = U[pw]["t2"] if pw is not None else t0
        chs = [last[(c, u[1])] for c in r["ch"] if (c, u[1]) in last]
        cm = max(chs, key=lambda c: U[c]["t2"]) if chs else None
        if cm is not None and U[cm]["t2"] >= pw_t:
            path.append((u, "c", r["t1"] - U[cm]["t2"], r["busy"]))
            u = cm
        else:
            path.append((u, "w", r["t1"] - pw_t, r["busy"]))
            u = pw
    path.reverse()
    nw = sum(1 for p in path if p[1] == "w")
    print(
        "critical path: %d units (%d after their child, %d after their warp's previous unit)"
        % (len(path), len(path) - nw, nw)
    )
    print(
        "  sum busy cycles %d, sum gap ns (previous done -> this start) %d"
        % (sum(p[3] for p in path), sum(p[2] for p in path))
    )
    for kind, what in (("c", "after a child (its wake-up)"), ("w", "after the warp's previous")):
        gaps = [p[2] for p in path if p[1] == kind]
        if gaps:
            print(
                "  gap ns %s: %d links, median %d, sum %d"
                % (what, len(gaps), st.median(gaps), sum(gaps))
            )
    print("  ", " ".join("%s%s:%d" % (name(p[0]), p[1], p[3]) for p in path[-45:]))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
