"""The old-over-new table of a `tools/kernel_ab.sh` run: reads its ``ab_old_R.txt`` and
``ab_new_R.txt`` and, for each timed case both forms printed, gives every round's time of
each form and the best old time over the best new one (above 1: the change is faster).

    python3 tools/ab_summary.py DIR

Reads the result rows of `tools/ab_decision.py` (CUDA-graph µs of each value, one column
per value) and of `tools/sdd_short_tiles.py` (graph µs of each candidate, with its eager
µs a call before it under ``--eager``); other lines are skipped.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

_NUMS = r"((?:(?:[-\d.]+|nan)\s*)+)$"  # the row's numbers
_DECISION = re.compile(r"^\s*(\w+)\s+(\w+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+" + _NUMS)
_SHORT = re.compile(r"^(b=\d+)\s+C=K=(\d+)\s+d=([\d.]+)\s+N=(\d+)\s+[\d.]+ MB\s+" + _NUMS)
_CANDIDATES = re.compile(r"^(b=\d+) candidates: (.*)$")


def parse(text: str) -> dict[str, float]:
    """Case -> µs from one output file; a case names the tool's row, the value's or
    candidate's index, and the timing (graph, or eager where printed)."""
    per_candidate = {}  # sdd_short_tiles: candidates of each b, listed at the end
    for line in text.splitlines():
        if m := _CANDIDATES.match(line):
            per_candidate[m.group(1)] = len(re.findall(r"\([^)]*\)|\btma\b", m.group(2)))
    out = {}
    for line in text.splitlines():
        if m := _SHORT.match(line):
            nums = [float(v) for v in m.group(5).split()]
            count = per_candidate.get(m.group(1)) or len(nums) // 2
            width = len(nums) // count if count and len(nums) % count == 0 else 2
            b, ck, d, n = m.groups()[:4]
            for i in range(count):
                cell = nums[i * width:(i + 1) * width]
                if width == 3:
                    out[f"{b} C=K={ck} d={d} N={n} candidate {i} eager"] = cell[0]
                out[f"{b} C=K={ck} d={d} N={n} candidate {i} graph"] = cell[-2]
        elif m := _DECISION.match(line):
            nums = [float(v) for v in m.group(7).split()]
            if len(nums) % 2 == 0:  # (time, bw) per value, then dense cuBLAS
                continue
            op, dtype, n, ck, b, d = m.groups()[:6]
            for i in range(len(nums) // 2):
                out[f"{op} {dtype} N={n} C=K={ck} b={b} d={d} value {i} graph"] = nums[2 * i]
    return out


def summary(folder: str | Path) -> list[str]:
    """The table's lines for the files in ``folder``."""
    times: dict[str, dict[str, list[float]]] = {}
    for path in sorted(Path(folder).glob("ab_*_*.txt")):
        form = path.stem.split("_")[1]
        for case, t in parse(path.read_text()).items():
            times.setdefault(case, {}).setdefault(form, []).append(t)
    lines = []
    for case, by in times.items():
        if "old" not in by or "new" not in by:
            continue
        old, new = min(by["old"]), min(by["new"])
        lines.append(f"{case:<56} old {'/'.join(f'{t:.1f}' for t in by['old']):>15}  "
                     f"new {'/'.join(f'{t:.1f}' for t in by['new']):>15}  "
                     f"old/new {old / new:.3f}")
    return lines


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(__doc__)
        return 2
    lines = summary(argv[0])
    print("\n".join(lines) if lines else f"no case timed by both forms in {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
