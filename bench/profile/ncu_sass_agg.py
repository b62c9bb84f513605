#!/usr/bin/env python3
"""Where a kernel's instructions go: reads Nsight Compute's SASS source page as CSV and prints
the executed instructions by opcode, the stall samples by the opcode the warp waits to issue,
then the basic blocks (runs of instructions executed equally often), largest first, with each
block's size, execution count and stall-sample share; given the report's raw page as CSV too,
the kernel's stall reasons (cycles per issued instruction, largest first).

    ncu -o rep --kernel-name regex:tile_kernel --launch-skip 2 --launch-count 1 \\
        --section SourceCounters --section InstructionStats BUILD/gpu_circuit_bench ...
    ncu -i rep.ncu-rep --page source --csv --print-source sass > sass.csv
    ncu -i rep.ncu-rep --page raw --csv > raw.csv
    python3 bench/profile/ncu_sass_agg.py sass.csv [BLOCKS [raw.csv]]
"""

import collections
import csv
import sys


def opcode(sass):
    """The opcode of a SASS line without its predicate and modifiers."""
    words = sass.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else "?"


def main():
    rows = list(csv.reader(open(sys.argv[1])))
    nblocks = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    head = next(i for i, r in enumerate(rows) if "Instructions Executed" in r)
    cols = rows[head]
    c_src, c_exec = cols.index("Source"), cols.index("Instructions Executed")
    c_stall = cols.index("Warp Stall Sampling (All Samples)")
    ins = []
    for r in rows[head + 1 :]:
        try:
            n = float(r[c_exec].replace(",", ""))
            stall = float(r[c_stall].replace(",", "") or 0)
        except (ValueError, IndexError):
            continue
        ins.append((r[0], r[c_src].strip(), n, stall))
    total = sum(x[2] for x in ins)
    stalls = sum(x[3] for x in ins) or 1.0
    print(f"{len(ins)} SASS instructions, {total:.0f} executed (warp level)")
    by_op = collections.Counter()
    for _, src, n, _ in ins:
        by_op[opcode(src)] += n
    for op, n in by_op.most_common(20):
        print(f"  {op:10s} {100 * n / total:5.1f} %")
    stall_op = collections.Counter()
    for _, src, _, st in ins:
        stall_op[opcode(src)] += st
    print("stall samples by the opcode waiting to issue:")
    for op, st in stall_op.most_common(12):
        print(f"  {op:10s} {100 * st / stalls:5.1f} %")
    blocks, cur = [], [ins[0]]
    for x in ins[1:]:
        if x[2] == cur[-1][2]:
            cur.append(x)
        else:
            blocks.append(cur)
            cur = [x]
    blocks.append(cur)
    blocks.sort(key=lambda b: -sum(x[2] for x in b))
    print(
        "\nbasic blocks: executed %, stall %, instructions, times run, first address, top opcodes"
    )
    for b in blocks[:nblocks]:
        n = sum(x[2] for x in b)
        ops = collections.Counter(opcode(x[1]) for x in b).most_common(5)
        print(
            f"  {100 * n / total:5.1f} % {100 * sum(x[3] for x in b) / stalls:5.1f} % "
            f"{len(b):5d} x{b[0][2]:<10.0f} {b[0][0]}  {ops}"
        )


def stall_reasons(path):
    """The raw page's per-reason stall metrics
    (smsp__average_warps_issue_stalled_*_per_issue_active: cycles a warp spends stalled for that
    reason per issued instruction), largest first."""
    rows = list(csv.reader(open(path)))
    head = next(i for i, r in enumerate(rows) if any("issue_stalled" in c for c in r))
    names, values = rows[head], rows[-1]
    found = []
    for name, value in zip(names, values):
        if "issue_stalled" in name and name.endswith("per_issue_active.ratio"):
            try:
                found.append((float(value.replace(",", "")), name))
            except ValueError:
                pass
    if not found:  # other metric names: every stall metric with a value
        for name, value in zip(names, values):
            try:
                if "issue_stalled" in name:
                    found.append((float(value.replace(",", "")), name))
            except ValueError:
                pass
    print("\nstall reasons, cycles per issued instruction:")
    for value, name in sorted(found, reverse=True)[:14]:
        reason = name.split("issue_stalled_")[-1].split("_per_issue_active")[0]
        print(f"  {reason:22s} {value:6.2f}")


if __name__ == "__main__":
    main()
    if len(sys.argv) > 3:
        stall_reasons(sys.argv[3])
