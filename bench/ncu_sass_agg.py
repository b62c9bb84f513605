#!/usr/bin/env python3
"""Where a kernel's instructions go: reads Nsight Compute's SASS source page as CSV and prints
the executed instructions by opcode, then by basic block (runs of instructions executed equally
often), largest first, with each block's size, execution count and stall-sample share.

    ncu -o rep --kernel-name regex:tile_kernel --launch-skip 2 --launch-count 1 \\
        --section SourceCounters --section InstructionStats BUILD/gpu_circuit_bench ...
    ncu -i rep.ncu-rep --page source --csv --print-source sass > sass.csv
    python3 bench/ncu_sass_agg.py sass.csv [BLOCKS]
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
    for r in rows[head + 1:]:
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
    blocks, cur = [], [ins[0]]
    for x in ins[1:]:
        if x[2] == cur[-1][2]:
            cur.append(x)
        else:
            blocks.append(cur)
            cur = [x]
    blocks.append(cur)
    blocks.sort(key=lambda b: -sum(x[2] for x in b))
    print("\nbasic blocks: executed %, stall %, instructions, times run, first address, top opcodes")
    for b in blocks[:nblocks]:
        n = sum(x[2] for x in b)
        ops = collections.Counter(opcode(x[1]) for x in b).most_common(5)
        print(f"  {100 * n / total:5.1f} % {100 * sum(x[3] for x in b) / stalls:5.1f} % "
              f"{len(b):5d} x{b[0][2]:<10.0f} {b[0][0]}  {ops}")


if __name__ == "__main__":
    main()
