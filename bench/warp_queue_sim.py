"""Simulates the fuse warp strategy's work queue on a model's chains, to compare queue orders.

Model: `blocks` resident blocks take gangs (one chain, 4 sample tiles) from the queue in order;
a gang starts when its block is free and its chain's children have finished the same tiles
(the block waits, held, until then), and takes a fixed time: a chain's bottom 1 + SRC per
source (child or variable), each group above it LINK x (1 + SRC per variable). Prints the
makespan of the plan's order (chains by the step at which each could start) and of the order
by the longest path of costs to the root (highest level first), against the two lower bounds
(the critical path, and all work spread evenly), for a few cost models.

usage: python3 bench/warp_queue_sim.py CHAINS.txt [--blocks 660] [--gangs 32,64]
CHAINS.txt: the listing of bench/warp_queue_sim.c (bench/warp_queue_sim.sh makes it).
"""
import argparse
import heapq


def read_chains(path):
    chains = []
    for line in open(path):
        _, groups, kids = line.split("|")
        chains.append(([tuple(map(int, g.split(":"))) for g in groups.split()],
                       [int(k) for k in kids.split()]))
    return chains


def item_time(groups, src, link):
    bottom_children, bottom_vars = groups[0]
    t = 1 + src * (bottom_children + bottom_vars)
    return t + sum(link * (1 + src * nv) for _, nv in groups[1:])


def plan_cost(groups, src=0.15):
    """The engine's cost of a chain (gpu_plan.c: 1 + 0.15 per source, every group)."""
    return sum(1 + src * (nc + nv) for nc, nv in groups)


def by_path(chains):
    parent = {k: i for i, (_, kids) in enumerate(chains) for k in kids}
    path = [0.0] * len(chains)
    for i in reversed(range(len(chains))):  # parents come after their children
        path[i] = plan_cost(chains[i][0]) + (path[parent[i]] if i in parent else 0.0)
    return sorted(range(len(chains)), key=lambda i: (-path[i], i))


def simulate(chains, order, blocks, gangs, src, link):
    free = [(0.0, b) for b in range(blocks)]
    done = {}
    for c in order:
        groups, kids = chains[c]
        d = item_time(groups, src, link)
        for g in range(gangs):
            t, b = heapq.heappop(free)
            start = max([t] + [done[(k, g)] for k in kids])
            done[(c, g)] = start + d
            heapq.heappush(free, (start + d, b))
    return max(done.values())


def bounds(chains, blocks, gangs, src, link):
    t = [item_time(g, src, link) for g, _ in chains]
    longest = [0.0] * len(chains)
    for i, (_, kids) in enumerate(chains):  # children come first
        longest[i] = t[i] + max([longest[k] for k in kids], default=0.0)
    return max(longest), sum(t) * gangs / blocks


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("chains")
    ap.add_argument("--blocks", type=int, default=660, help="resident blocks (H200, K <= 32: 132 x 5)")
    ap.add_argument("--gangs", default="8,16,32,64", help="gangs per chain (batch / 64)")
    a = ap.parse_args()
    chains = read_chains(a.chains)
    path_order = by_path(chains)
    print(f"{len(chains)} chains, {a.blocks} blocks")
    print("| gangs | SRC | LINK | plan order | by path | plan / by path | critical path | even spread |")
    print("|---|---|---|---|---|---|---|---|")
    for gangs in map(int, a.gangs.split(",")):
        for src in (0.05, 0.15, 0.3):
            for link in (0.3, 0.6, 1.0):
                plan = simulate(chains, range(len(chains)), a.blocks, gangs, src, link)
                path = simulate(chains, path_order, a.blocks, gangs, src, link)
                cp, even = bounds(chains, a.blocks, gangs, src, link)
                print(f"| {gangs} | {src} | {link} | {plan:.1f} | {path:.1f} | {plan / path:.2f} "
                      f"| {cp:.1f} | {even:.1f} |")


if __name__ == "__main__":
    main()
