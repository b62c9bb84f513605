"""Per-phase trace of the fuse warp strategy's chain items (bench/device/gpu_trace_device.sh).

Reads the "TR" lines that a PC_TRACE build prints when its evaluator is freed (one per
chain: chain, groups, children, the item's timestamps for sample tile 0 of the last forward
pass) and prints the critical path through the chains (from the root, the child that published
last), each item's wake-up (last child's publish -> seen), run, staging and per-group
gather/product cycles, and the medians over all chains.
    usage: python3 warp_trace.py STDERR_FILE
"""
import statistics as st
import sys


def main(path):
    R = {}
    for line in open(path):
        if not line.startswith("TR "):
            continue
        v = [int(x) for x in line.split()[1:]]
        c, n, ch = v[0], v[1], [x for x in v[3:7] if x >= 0]
        g0, g1, pub, ck0, ck1, ck2 = v[7:13]
        ph = v[13:21]
        gat, pro, prev = [], [], ck2
        for i in range(min(n, 4)):
            gat.append(ph[2 * i] - prev)
            pro.append(ph[2 * i + 1] - ph[2 * i])
            prev = ph[2 * i + 1]
        R[c] = dict(len=n, ch=ch, g0=g0, g1=g1, pub=pub, stage=ck1 - ck0, gat=gat, pro=pro)
    if not R:
        sys.exit("no TR lines in %s (a PC_TRACE build, fuse-warp?)" % path)
    t0 = min(r["g0"] for r in R.values())
    root = max(R, key=lambda c: R[c]["pub"])
    print("chains", len(R), "span ns", R[root]["pub"] - t0)
    path, c = [], root
    while True:
        path.append(c)
        if not R[c]["ch"]:
            break
        c = max(R[c]["ch"], key=lambda q: R[q]["pub"])
    path.reverse()
    print("critical path: %d chains, %d groups" % (len(path), sum(R[c]["len"] for c in path)))
    print("chain len | start ns | last child pub -> seen ns | seen -> pub ns | stage cyc | "
          "gather/product cyc per group")
    wake_sum = run_sum = 0
    for c in path:
        r = R[c]
        last = max((R[q]["pub"] for q in r["ch"]), default=r["g0"])
        wake = r["g1"] - last if r["ch"] else 0
        wake_sum += wake
        run_sum += r["pub"] - r["g1"]
        print("%5d %2d | %7d | %6d | %6d | %5d | %s" % (
            c, r["len"], r["g0"] - t0, wake, r["pub"] - r["g1"], r["stage"],
            " ".join("%d/%d" % gp for gp in zip(r["gat"], r["pro"]))))
    print("path sums: wake-up %d ns, run %d ns" % (wake_sum, run_sum))
    rs = list(R.values())
    print("median stage cycles", st.median(r["stage"] for r in rs))
    print("bottom gather median", st.median(r["gat"][0] for r in rs),
          "bottom product median", st.median(r["pro"][0] for r in rs))
    lg = [g for r in rs for g in r["gat"][1:]]
    lp = [p for r in rs for p in r["pro"][1:]]
    if lg:
        print("link gather median", st.median(lg), "link product median", st.median(lp))
    print("top product (log, stores, publish) median",
          st.median(r["pro"][min(r["len"], 4) - 1] for r in rs if r["len"] <= 4))
    wk = [R[c]["g1"] - max(R[q]["pub"] for q in R[c]["ch"]) for c in R
          if R[c]["ch"] and R[c]["g0"] < max(R[q]["pub"] for q in R[c]["ch"])]
    if wk:
        print("wake-up of items that waited: median ns", st.median(wk), "n", len(wk))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
