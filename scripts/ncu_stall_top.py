"""The instructions of a kernel with the most warp stall samples, from the CSV of Nsight Compute's source page:

    ncu --set full -o rep ...; ncu -i rep.ncu-rep --page source --csv --print-source sass > sass.csv
    python3 scripts/ncu_stall_top.py sass.csv [N]

Prints the total samples, the stall reasons summed over the kernel, then the N instructions (default 40) with the
most samples, in program order: index, samples, share, executions, the SASS and its top three stall reasons.
"""

from __future__ import annotations

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


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40)
