"""Twelfth pass: P(n), the methodology score's summand at each evaluation count n, from mean curves.

    python pn_screen.py SPEC.json OUT.json     # a screen: variants x spaces, 2 processes (as pass9's screen.py)
    python pn_screen.py --curves A.json [B.json ...]   # P(n) of bench.py JSONs, each on its own
    python pn_screen.py --pooled A.json [B.json ...]   # the same, one space's mean curves averaged over the files

SPEC: {"repeats": N, "seed": S, "spaces": [...], "variants": [[name, strategy, {options}], ...]}.
A row equals ``bench.py --seed S --repeats N -o ...`` for that space (it calls ``bench.one``).
P(n) = (E[best of n random draws] - mean best after n) / (E[random draw] - optimum), per ``compare/metrics.py``."""
import json
import os
import sys
from pathlib import Path

for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(v, "1")
_ROOT = Path(__file__).resolve().parents[5]
sys.path.insert(0, str(_ROOT))
sys.path.insert(0, str(_ROOT / "benchmarks" / "search_quality"))
import numpy as np  # noqa: E402
import bench  # noqa: E402
from kerntune.compare.metrics import Reference  # noqa: E402
from kerntune.evaluate import ReplayEvaluator  # noqa: E402

NS = (1, 2, 3, 5, 8, 10, 15, 20, 30, 40, 60, 80, 120, 150, 200)
_REFS: dict = {}


def p_of_n(space: str, curve_over_opt) -> tuple[np.ndarray, int]:
    if space not in _REFS:
        rec = ReplayEvaluator.from_file(str(_ROOT / "examples" / "spaces" / f"{space}.json.gz")).recording
        ref = Reference.from_times(rec.ok_times, len(rec.trials) - len(rec.ok_times))
        _REFS[space] = (ref, ref.cutoff(200), ref.random_expectation(200))
    ref, cut, e = _REFS[space]
    c = np.asarray(curve_over_opt)[:200] * ref.optimum
    return (e - c) / (e - ref.optimum), cut


def line(space: str, curve) -> str:
    p, cut = p_of_n(space, curve)
    return f"cutoff {cut:3} score {p[:cut].mean():.3f} | " + " ".join(f"{n}:{p[n - 1]:+.2f}" for n in NS if n <= cut)


def _job(a):
    name, strat, opts, space, repeats, seed = a
    return name, space, bench.one(space, strat, 200, repeats, seed, opts)


if __name__ == "__main__":
    if sys.argv[1] in ("--curves", "--pooled"):
        pooled: dict = {}
        for f in sys.argv[2:]:
            for row in json.load(open(f))["rows"]:
                tag = "" if sys.argv[1] == "--pooled" else Path(f).stem
                pooled.setdefault((tag, row["strategy"], row["space"]), []).append(np.array(row["mean_curve_over_opt"]))
        for (tag, st, sp), cs in pooled.items():
            print(f"{tag} {st:6} {sp:26} {line(sp, np.mean(cs, axis=0))}")
        sys.exit()
    from concurrent.futures import ProcessPoolExecutor
    spec = json.load(open(sys.argv[1]))
    jobs = [(n, st, o, sp, spec["repeats"], spec["seed"]) for n, st, o in spec["variants"] for sp in spec["spaces"]]
    res: dict = {"spec": spec, "command": " ".join(["python"] + sys.argv), "rows": {}}
    with ProcessPoolExecutor(2) as pool:
        for name, sp, r in pool.map(_job, jobs):
            print(f"{name:<12} {sp:<20} {r['score']:.3f} +- {r['stderr']:.3f} {line(sp, r['mean_curve_over_opt'])}", flush=True)
            res["rows"].setdefault(name, {})[sp] = {"score": r["score"], "stderr": r["stderr"],
                                                    "mean_curve_over_opt": r["mean_curve_over_opt"]}
    Path(sys.argv[2]).write_text(json.dumps(res) + "\n")
