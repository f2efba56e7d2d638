"""Render the suite's per-pair JSON files as one Markdown table (the README's table).

    python benchmarks/real_kernels/table.py benchmarks/results/real_kernels/h100 > benchmarks/results/real_kernels/h100/TABLE.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _ms(d: dict) -> str:
    lo, hi = d["ci_ms"]
    return f"{d['ms']:.4g} [{lo:.4g}, {hi:.4g}]"


def main() -> None:
    folder = Path(sys.argv[1])
    rows = []
    for f in sorted(folder.glob("*_*.json")):
        r = json.loads(f.read_text())
        if "judge" not in r:
            continue
        j, k = r["judge"], r["kerntune"]
        ver = r["versions"].get(r["package"], "?")
        searched = f"{k['evaluations']} ({k['failed']} failed) of {k['space_size']}"
        if j is None:  # kerntune found no working config (suite.py did not judge)
            rows.append(f"| {r['kernel']} | {r['package']} {ver} | {r['shape']} | - | no working config found | - | - "
                        f"| {searched} | {k['search_s']:.0f} s + {k['startup_s']:.0f} s start-up | | |")
            continue
        s = j["speedup"]
        own = r.get("package_own_autotune_s")
        auto = (f"{r['package_first_call_s']:.1f} s" + (f" ({own:.1f} s its own autotune)" if own else "")
                if r["autotuned"] else "heuristic")
        lo = r.get("list_only")
        list_only = "" if not lo else (f"{lo['wall_s']:.0f} s for {lo['evaluations']} evals (limit "
                                       f"{lo['wall_limit_s']:.0f} s); x{lo['speedup']['median']:.3f}"
                                       if lo.get("speedup") else f"{lo['wall_s']:.0f} s, no pick")
        torch_ms = _ms(j["torch"]) if "torch" in j else "-"
        rows.append(f"| {r['kernel']} | {r['package']} {ver} | {r['shape']} | {_ms(j['package'])} | {_ms(j['kerntune'])} "
                    f"| {s['median']:.3f} [{s['ci'][0]:.3f}, {s['ci'][1]:.3f}] | {torch_ms} | {searched} "
                    f"| {k['search_s']:.0f} s + {k['startup_s']:.0f} s start-up | {auto} | {list_only} |")
    print("| kernel | package | shape | package's choice, ms [95% CI] | kerntune's winner, ms [95% CI] | speedup "
          "[95% CI] | PyTorch, ms | evaluations | kerntune wall | package's own first call | same list, half its wall |")
    print("|" + "---|" * 11)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
