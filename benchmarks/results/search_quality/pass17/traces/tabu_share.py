# Scratch trace (seventeenth pass): python THIS SPACE JSON_OPTIONS RUNS, from the repository root, PYTHONPATH=.
import sys, json
sys.path.insert(0, '.')
import numpy as np
from kerntune.evaluate import ReplayEvaluator
from kerntune.run.search import RunOptions, run_search
from kerntune.strategies import Budget
import kerntune.strategies.surrogate as S
from kerntune.strategies.surrogate_designs import kernel_tabu
out = []
orig = S.SurrogateSearch._restart
def rs(self):
    orig(self)
    out.append([kernel_tabu(self.model, self.tabu, t).mean() for t in (0.3, 0.5, 0.7)] + [self.tabu_mask.mean()])
S.SurrogateSearch._restart = rs
opts = json.loads(sys.argv[2])
for sp in sys.argv[1].split(','):
    ev = ReplayEvaluator.from_file(f'examples/spaces/{sp}.json.gz')
    out.clear()
    for r in range(int(sys.argv[3])):
        run_search(ev, 'auto', Budget(max_evals=200), seed=1000 + r, run=RunOptions(strategy_options=opts))
    a = np.array(out)
    print(sp, 'closed share at tau 0.3/0.5/0.7, hamming tabu: first restart', a[0].round(3), 'mean', a.mean(0).round(3), 'n', len(a))
