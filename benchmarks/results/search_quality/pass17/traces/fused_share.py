# Scratch trace (seventeenth pass): python THIS SPACE JSON_OPTIONS RUNS, from the repository root, PYTHONPATH=.
import sys, json
sys.path.insert(0, '.')
from kerntune.evaluate import ReplayEvaluator
from kerntune.run.search import RunOptions, run_search
from kerntune.strategies import Budget
import kerntune.strategies.surrogate as S
made = []
orig = S.SurrogateSearch.__init__
def init(self, *a, **k):
    orig(self, *a, **k); made.append(self)
S.SurrogateSearch.__init__ = init
opts = json.loads(sys.argv[2])
for sp in sys.argv[1].split(','):
    ev = ReplayEvaluator.from_file(f'examples/spaces/{sp}.json.gz')
    opt = ev.recording.optimum if not callable(getattr(ev.recording,'optimum',None)) else None
    ok = sorted(t.time_ms for t in ev.recording.trials.values() if t.ok); best = ok[0]
    rows = []
    for r in range(int(sys.argv[3])):
        made.clear()
        res = run_search(ev, 'auto', Budget(max_evals=200), seed=1000 + r, run=RunOptions(strategy_options=opts))
        e = made[-1]; f = e.fusion
        b = [t.time_ms for t in res.history if t.ok]
        at = lambda n: min(b[:n]) / best
        rows.append((f.moved / max(f.picks, 1), f.picks, at(60), at(200), e.restarts))
    import numpy as np
    a = np.array(rows)
    print(sp, 'moved share %.2f' % a[:,0].mean(), 'fused picks %.0f' % a[:,1].mean(), 'best@60 %.3f @200 %.3f' % (a[:,2].mean(), a[:,3].mean()), 'restarts %.1f' % a[:,4].mean())
