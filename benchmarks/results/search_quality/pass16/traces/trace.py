"""Scratch trace (fifteenth pass; copied for the sixteenth): the share of GP steps ``twin_preq`` gives the twin, per space, and each
GP's mean log score per scored measurement.  python benchmarks/results/search_quality/pass15/traces/trace.py SPACE[,SPACE] RUNS SEED [JSON options]"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[5]
sys.path.insert(0, str(ROOT))
from kerntune.evaluate import ReplayEvaluator  # noqa: E402
from kerntune.run.search import RunOptions, run_search  # noqa: E402
from kerntune.strategies import Budget  # noqa: E402
from kerntune.strategies import surrogate  # noqa: E402

log: list = []
orig_choice, orig_score = surrogate.SurrogateSearch._preq_twin, surrogate.SurrogateSearch._preq_score


def choice(self):
    r = orig_choice(self)
    log.append(("step", r))
    return r


def score(self, feat, value):
    before = dict(self.preq)
    orig_score(self, feat, value)
    if self.preq_n:
        d = self.opts.preq_decay
        log.append(("score", self.preq["main"] - d * before["main"], self.preq["twin"] - d * before["twin"]))


surrogate.SurrogateSearch._preq_twin, surrogate.SurrogateSearch._preq_score = choice, score
opts = {"twin_preq": True, **(json.loads(sys.argv[4]) if len(sys.argv) > 4 else {})}
for space in sys.argv[1].split(","):
    ev = ReplayEvaluator.from_file(str(ROOT / "examples" / "spaces" / f"{space}.json.gz"))
    for r in range(int(sys.argv[2])):
        log.clear()
        res = run_search(ev, "auto", Budget(max_evals=200), seed=int(sys.argv[3]) + r, run=RunOptions(strategy_options=opts))
        steps = [x[1] for x in log if x[0] == "step"]
        sc = [x for x in log if x[0] == "score"]
        half = len(steps) // 2
        print(f"{space} seed {int(sys.argv[3]) + r}: twin took {sum(steps)}/{len(steps)} GP steps "
              f"(first half {sum(steps[:half])}/{half}, second {sum(steps[half:])}/{len(steps) - half}); "
              f"mean log score main {sum(s[1] for s in sc) / len(sc):.2f} twin {sum(s[2] for s in sc) / len(sc):.2f}; "
              f"twin - main over the first 20 / 50 / all scored: {sum(s[2] - s[1] for s in sc[:20]) / len(sc[:20]):.2f} "
              f"{sum(s[2] - s[1] for s in sc[:50]) / len(sc[:50]):.2f} {sum(s[2] - s[1] for s in sc) / len(sc):.2f} (n {len(sc)}); best at 60 / 100 / 200: "
              f"{min(t.time_ms for t in res.history[:60] if t.ok):.3f} {min(t.time_ms for t in res.history[:100] if t.ok):.3f} {res.best.time_ms:.3f}", flush=True)
