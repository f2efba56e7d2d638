"""The fortieth pass's count (run from the repository root): in 12 runs of auto (seeds 7000-7011, budget 200)
on a recording, the failures among the first 100 evaluations, the evaluation at which each of the K (5)
fastest configs was measured (None: never), and in how many proposal calls ``fail_block`` left out at
least one of them while still unmeasured; OPTS (JSON in the environment) holds auto's options:
    OPTS='{"fail_fit":true}' python benchmarks/results/search_quality/pass40/hidden.py RECORDING.json.gz
(`fail_fit` is in the tree at commit 0e6c801 only: the pass was not adopted)."""
import sys, json, os, numpy as np
from concurrent.futures import ProcessPoolExecutor
from kerntune.evaluate import ReplayEvaluator
from kerntune.run.search import RunOptions, run_search
from kerntune.strategies import Budget
import kerntune.strategies.surrogate as S
PATH=sys.argv[1]; OPTS=json.loads(os.environ.get("OPTS","{}")); K=int(os.environ.get("K","5"))
def one(seed):
    ev = ReplayEvaluator.from_file(PATH); tr = ev.recording.trials
    space = ev.recording.space
    ok = {k: t for k, t in tr.items() if t.ok}
    top = sorted(ok, key=lambda k: ok[k].time_ms)[:K]
    log = []
    orig = S.SurrogateSearch._likely_failures
    def patched(self):
        m = orig(self)
        if m is not None:
            hid = [i for i, k in enumerate(top) if k in self.index and m[self.index[k]] and not self.measured[self.index[k]]]
            log.append((len(self.ys), hid))
        return m
    S.SurrogateSearch._likely_failures = patched
    res = run_search(ev, "auto", Budget(max_evals=200), seed=seed, run=RunOptions(strategy_options=OPTS))
    keys = [space.key(space.canonical(t.config)) for t in res.history]
    first = {k: (keys.index(k) if k in keys else None) for k in top}
    nf = sum(not t.ok for t in res.history[:100])
    return first, [l for l in log if l[1]], nf
if __name__ == '__main__':
    with ProcessPoolExecutor(1) as p:
        for seed, (first, hid, nf) in zip(range(7000, 7012), p.map(one, range(7000, 7012))):
            print(seed, "fail100", nf, "found(top%d)" % K, list(first.values()), "hidden at", [(n, h) for n, h in hid][:6], len(hid))
