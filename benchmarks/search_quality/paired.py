"""Two bench.py results compared repeat by repeat (a paired difference), for design passes.

    python benchmarks/search_quality/paired.py DEFAULT.json[,MORE.json] CANDIDATE.json[,MORE.json]

Why paired.  Repeat r of a bench.py run uses the seed ``--seed + r`` whatever the options, so a
candidate and the default run the same random stream until the candidate's change first acts (an
option that acts only once a run has stalled leaves the first tens of evaluations identical).  Their
per-repeat scores are then correlated, and the standard error of the mean of the per-repeat
differences is smaller than the unpaired one (the two rows' standard errors combined), which is all
``pass38/rows.py`` can give.  Both columns are printed, with the correlation, so a rule can say which
it uses.  Needs the rows' ``per_repeat`` scores (bench.py writes them since the twenty-second session)
and the same seed and number of repeats on both sides; other rows are skipped with a note."""

from __future__ import annotations

import json
import math
import sys

import numpy as np


def load(arg: str) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for f in arg.split(","):
        doc = json.load(open(f))
        for r in doc["rows"]:
            out[f"{r['strategy']}:{r['space']}"] = {**r, "seed": doc.get("seed")}
    return out


def paired(a: dict, b: dict) -> dict | None:
    """One space: the default's row ``a`` and the candidate's ``b``; None unless both hold per-repeat
    scores from the same seed and number of repeats."""
    if "per_repeat" not in a or "per_repeat" not in b or a["seed"] != b["seed"] or a["repeats"] != b["repeats"]:
        return None
    x, y = np.array(a["per_repeat"]), np.array(b["per_repeat"])
    delta = y - x
    return {"default": float(x.mean()), "candidate": float(y.mean()), "difference": float(delta.mean()),
            "paired_se": float(delta.std(ddof=1) / math.sqrt(len(delta))) if len(delta) > 1 else math.inf,
            "unpaired_se": math.hypot(a["stderr"], b["stderr"]),
            "correlation": float(np.corrcoef(x, y)[0, 1]) if x.std() > 0 and y.std() > 0 else float("nan")}


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    d, c = load(sys.argv[1]), load(sys.argv[2])
    print("| space | default | candidate | difference | paired se | unpaired se | correlation |\n|---|---|---|---|---|---|---|")
    diffs, ses = [], []
    for key in [k for k in d if k in c]:
        space = key.split(":", 1)[1]
        r = paired(d[key], c[key])
        if r is None:
            print(f"| {space} | (skipped: per-repeat scores missing, or other seeds or repeats) | | | | | |")
            continue
        diffs.append(r["difference"])
        ses.append(r["paired_se"])
        print(f"| {space} | {r['default']:.3f} | {r['candidate']:.3f} | {r['difference']:+.3f} | {r['paired_se']:.3f} "
              f"| {r['unpaired_se']:.3f} | {r['correlation']:.2f} |")
    if diffs:
        print(f"| **mean of {len(diffs)}** | | | {np.mean(diffs):+.3f} | {math.sqrt(sum(s * s for s in ses)) / len(ses):.3f} | | |")


if __name__ == "__main__":
    main()
