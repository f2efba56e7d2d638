"""Where the optimum ranks among the unmeasured configs 2 fields from the incumbent (the shell) under three
predictions, during default `auto` runs: the rank GP (the default's fit and targets), log-time targets on
that fit, and a GP of the same kernel family fitted on log-times.  Only runs whose incumbent is 2 fields
from the optimum are reported.
``PYTHONPATH=. python benchmarks/results/search_quality/pass20/shellrank.py SPACE FIRST_SEED RUNS``"""
import sys, json
sys.path.insert(0, '.')
import numpy as np
from kerntune.evaluate import ReplayEvaluator
from kerntune.run.search import RunOptions, run_search
from kerntune.strategies import Budget
from kerntune.strategies.surrogate import SurrogateSearch, _encode
from kerntune.strategies.gp_model import _GP, ordinal_steps

space_name = sys.argv[1]; seeds = range(int(sys.argv[2]), int(sys.argv[2]) + int(sys.argv[3]))
ev = ReplayEvaluator.from_file(f"examples/spaces/{space_name}.json.gz")
space = ev.space
opt = ev.recording.optimum.config
names = [p.name for p in space.params]
real = SurrogateSearch._gp_propose
rows = []

def spy(self, n, taken):
    c = self.region.best_config
    m = len(self.all_vals)
    if c is not None and self.ys and m % 10 == 0 and sum(c[k] != opt[k] for k in names) == 2:
        key = space.key(space.canonical(opt))
        i = self.index.get(key)
        if i is not None and not self.measured[i]:
            base = _encode(space, [c])[0]
            diff = (self.model.pool != base)
            fields = np.zeros(len(self.configs), int); at = 0
            for w in self.widths:
                fields += diff[:, at:at + w].any(axis=1); at += w
            ok = (fields == 2) & ~np.array(self.measured)
            yn = self._normalised(); self._refit(yn)
            yl = self._targets("log")
            g = _GP(space.encoded_width, self.cap, self.model.noise, steps=ordinal_steps(space), alpha=self.opts.gp_ordinal, adaptive=self.opts.gp_ordinal_fit)
            g.add_pool(self.model.pool)
            for r in range(self.model.n): g.add_obs(self.model.obs[r])
            g.refit(yl, self.live)
            out = [m, int(ok.sum())]
            glob = ~np.array(self.measured)
            for mu, sd in (self.model.predict(yn), self.model.predict(yl), g.predict(yl)):
                s = mu - self.opts.kappa * sd
                out.append(int((s[ok] < s[i]).sum()) + 1)           # rank in the shell
                out.append(int((s[glob] < s[i]).sum()) + 1)         # rank among all unmeasured
            rows.append(out)
    return real(self, n, taken)

SurrogateSearch._gp_propose = spy
for s in seeds:
    rows.clear()
    res = run_search(ev, "auto", Budget(max_evals=200), seed=s)
    print(s, "evals, shell size, [rank GP: shell rank, global rank], [log on rank fit], [log fit]:", rows[:8], flush=True)
