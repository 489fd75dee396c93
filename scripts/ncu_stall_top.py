"""The instructions of a kernel with the most warp stall samples, from the CSV of Nsight Compute's source page:

    ncu --set full -o rep ...; ncu -i rep.ncu-rep --page source --csv --print-source sass > sass.csv
    python3 scripts/ncu_stall_top.py sass.csv [N]

Prints the total samples, the stall reasons summed over the kernel, then the N instructions (default 40) with the
most samples, in program order: index, samples, share, executions, the SASS and its top three stall reasons.
Last, the instruction mix: warp instructions executed per wgmma (GMMA), by opcode, the ten most frequent (how much
each k-block issues beside its mmas, whatever the tile width; a kernel without wgmma: per instruction).
"""

from __future__ import annotations

import collections
import csv
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"


def main(path: str, top: int = 40) -> None:
    with open(path) as f:
        rows = list(csv.reader(f))
    header, data = rows[1], rows[2:]          # rows[0]: the kernel's name
    col = {h: i for i, h in enumerate(header)}
    reasons = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]

    def count(row, name):
        return int(row[col[name]] or 0)

    total = sum(count(r, SAMPLES) for r in data)
    print("total samples", total)
    summed = {name[6:]: sum(count(r, name) for r in data) for name in reasons}
    print(sorted(((v, k) for k, v in summed.items() if v), reverse=True)[:10])
    hot = sorted(range(len(data)), key=lambda i: -count(data[i], SAMPLES))[:top]
    for i in sorted(hot):
        r = data[i]
        n = count(r, SAMPLES)
        why = sorted(((count(r, s), s[6:]) for s in reasons if count(r, s)), reverse=True)[:3]
        print(f"{i:5d} {n:6d} {100 * n / total:5.1f}% exec {r[col['Instructions Executed']]:>8} "
              f"{r[col['Source']].strip()[:60]:60s} {why}")
    mix(data, col)


def mix(data, col) -> None:
    """Executed warp instructions per wgmma, by opcode (its first dotted part, past any predicate)."""
    ops = collections.Counter()
    for r in data:
        words = r[col["Source"]].split()
        if words:
            op = words[1] if words[0].startswith("@") and len(words) > 1 else words[0]
            ops[op.split(".")[0]] += int(r[col["Instructions Executed"]] or 0)
    per = sum(n for op, n in ops.items() if op.endswith("GMMA")) or sum(ops.values())
    print(f"instructions per wgmma: {sum(ops.values()) / per:.1f};",
          ", ".join(f"{op} {n / per:.2f}" for op, n in ops.most_common(10)))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40)
