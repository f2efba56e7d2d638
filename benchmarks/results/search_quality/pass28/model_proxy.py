"""Twenty-eighth pass (scratch proxy, run from the repository root): ``auto`` with the committed
strong-model transcript of SPACE (``benchmarks/llm/transcripts/auto/``) replayed over N engine
seeds (0..N-1), or a model-free strategy; prints the mean best/optimum curve, the worst ratio to
the GP's mean curve of ``classical_200x20.json`` (25-200) and when runs reach 1.3x and the optimum,
and writes the curves to OUTDIR (default this folder).

The replay is positional (answer k for call k): at seed 0 it is the live run; at other seeds the
first answer is exact (the first prompt does not depend on the history) and later answers are the
live run's, not what the model would have written for that history: a proxy.

    python benchmarks/results/search_quality/pass28/model_proxy.py convolution_A100 90 model
    python benchmarks/results/search_quality/pass28/model_proxy.py all 10 model call_patience=1
    python benchmarks/results/search_quality/pass28/model_proxy.py convolution_A100 30 nomodel strategy=gp
    TRANSCRIPTS=DIR OUTDIR=OUT python benchmarks/results/search_quality/pass28/model_proxy.py all 10 model
"""
import gzip
import json
import os
import subprocess
import sys
from multiprocessing import Pool
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks/search_quality"))
import numpy as np  # noqa: E402

from kerntune.compare.metrics import Reference, best_so_far  # noqa: E402
from kerntune.evaluate import ReplayEvaluator  # noqa: E402
from kerntune.llm import LLMClient  # noqa: E402
from kerntune.run.search import RunOptions, run_search  # noqa: E402
from kerntune.strategies import Budget  # noqa: E402
from vs_gp import gp_mean_curves  # noqa: E402

SPACES = ["convolution_A100", "convolution_A4000", "dedispersion_A100", "dedispersion_A4000", "dedispersion_MI250X",
          "matmul_256x8192x8192_h100", "matmul_4096_h100", "matmul_8192x8192x512_h100"]
OUT = Path(os.environ.get("OUTDIR", Path(__file__).parent))
#: The transcripts replayed (TRANSCRIPTS=DIR: another set, e.g. an earlier commit's, written out with git show)
TRANSCRIPTS = Path(os.environ.get("TRANSCRIPTS", ROOT / "benchmarks/llm/transcripts/auto"))


def one(args):
    space, seed, opts, model = args
    ev = ReplayEvaluator.from_file(ROOT / "examples/spaces" / f"{space}.json.gz")
    rec = ev.recording
    ref = Reference.from_times(rec.ok_times, len(rec.trials) - len(rec.ok_times))
    o = dict(opts)
    strategy = o.pop("strategy", "auto")
    llm = None
    if model:  # as strong_auto.sh ran it
        llm = LLMClient.from_spec(f"replay:{TRANSCRIPTS}/{space}.llm.jsonl")
        o = {"model_clock_s": 30, "max_calls": 4, **o}
    res = run_search(ev, strategy, Budget(max_evals=200), seed=seed, run=RunOptions(strategy_options=o, llm=llm))
    return [float(x) for x in best_so_far([t.time_ms if t.ok else None for t in res.history], ref.worst) / ref.optimum]


def stats(space: str, curves: list[list[float]]) -> dict:
    """A row's figures: the mean time/optimum curve, its worst ratio to the GP's mean (25-200) and where,
    (runs, median evaluation) reaching 1.3x and the optimum (999 for a run that does not), and the runs
    at 0.98 of the optimum by 40 evaluations."""
    m = np.array([x[:200] + [x[-1]] * (200 - len(x)) for x in curves]).mean(0)
    r = m / np.array(gp_mean_curves()[space])
    i = int(np.argmax(r[24:])) + 24  # the first budget of a tie (vs_gp.worst_vs takes the last)
    worst, at = float(r[i]), i + 1

    def hits(thr):
        h = [next((k + 1 for k, x in enumerate(cv) if x <= thr), None) for cv in curves]
        return sum(x is not None for x in h), float(np.median([x or 999 for x in h]))

    return {"mean": m, "worst": worst, "at": at, "hits_1.3": hits(1.3), "hits_opt": hits(1.0001),
            "at_0.98_by_40": int(sum(cv[39] <= 1 / 0.98 for cv in curves))}


def main() -> None:
    space, n, model, rest = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "model", sys.argv[4:]
    if space == "all":
        for sp in SPACES:
            subprocess.run([sys.executable, __file__, sp, *sys.argv[2:]], check=True)
        return
    opts = {k: (json.loads(v) if v[:1] in "0123456789-[{tfn" else v) for k, _, v in (a.partition("=") for a in rest)}
    with Pool(2) as p:
        curves = p.map(one, [(space, s, opts, model) for s in range(n)])
    st = stats(space, curves)
    print(space, "model" if model else "no model", opts, f"n={n}", "mean time/opt @40/60/100/150/200",
          [round(float(st["mean"][k - 1]), 3) for k in (40, 60, 100, 150, 200)],
          f"worst vs gp mean {st['worst']:.3f} at {st['at']}", "within 1.3x (runs, median eval)", st["hits_1.3"],
          "optimum", st["hits_opt"], "runs >=0.98 by 40", st["at_0.98_by_40"])
    label = "_".join(rest) or "default"
    with gzip.open(OUT / f"{space}_{'model' if model else 'nomodel'}_{label}_{n}.json.gz", "wt") as f:
        json.dump({"space": space, "options": opts, "model": model, "seeds": n, "curves": curves}, f)


if __name__ == "__main__":
    main()
