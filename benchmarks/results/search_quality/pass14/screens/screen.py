"""Scratch (fourteenth pass): (name, strategy, options) variants x spaces over 2 processes, score +- se.

    python benchmarks/results/search_quality/pass14/screens/screen.py SPEC.json OUT.json
SPEC: {"repeats": N, "seed": S, "spaces": [...], "variants": [[name, strategy, {options}], ...]}.
Each (variant, space) pair is bench.py's one(), so a row equals
bench.py --seed S --repeats N -o STRATEGY.NAME=VALUE for that space."""
import json
import os
import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parents[5])
for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(v, "1")
sys.path.insert(0, _ROOT)
sys.path.insert(0, _ROOT + "/benchmarks/search_quality")
from concurrent.futures import ProcessPoolExecutor  # noqa: E402

import bench  # noqa: E402


def job(args):
    name, strat, opts, sp, repeats, seed = args
    r = bench.one(sp, strat, 200, repeats, seed, opts)
    return name, sp, r["score"], r["stderr"], r["wall_s"]


if __name__ == "__main__":
    spec = json.load(open(sys.argv[1]))
    jobs = [(n, st, o, sp, spec["repeats"], spec["seed"]) for n, st, o in spec["variants"] for sp in spec["spaces"]]
    res = {"spec": spec, "note": "score, stderr per variant and space (bench.py's one())", "scores": {}}
    with ProcessPoolExecutor(int(spec.get("jobs", 2))) as pool:
        for name, sp, sc, se, w in pool.map(job, jobs):
            print(f"{name:<28} {sp:<26} {sc:.3f} +- {se:.3f}  {w:.0f}s", flush=True)
            res["scores"].setdefault(name, {})[sp] = (sc, se)
            json.dump(res, open(sys.argv[2], "w"), indent=1)
