"""The thirty-ninth pass's failure shares (run from the repository root): for each recording given, the share
of failed configs in the space and in 12 runs of auto (seeds 7000-7011, budget 200) over the first 30 / 100 /
200 evaluations; OPTS (JSON in the environment) holds auto's options:
    OPTS='{"fail_block":0.5}' python benchmarks/results/search_quality/pass39/fails.py RECORDING.json.gz ..."""
import sys, json, os, numpy as np
OPTS=json.loads(os.environ.get("OPTS","{}"))
from concurrent.futures import ProcessPoolExecutor
from kerntune.evaluate import ReplayEvaluator
from kerntune.run.search import RunOptions, run_search
from kerntune.strategies import Budget
def one(a):
    path, seed, strat = a
    ev = ReplayEvaluator.from_file(path)
    res = run_search(ev, strat, Budget(max_evals=200), seed=seed, run=RunOptions(strategy_options=OPTS if strat=="auto" else {}))
    return [0 if t.ok else 1 for t in res.history]
if __name__=='__main__':
    for path in sys.argv[1:]:
        ev=ReplayEvaluator.from_file(path); tr=ev.recording.trials
        base=1-sum(t.ok for t in tr.values())/len(tr)
        for strat in ("auto",):
            with ProcessPoolExecutor(2) as p: runs=list(p.map(one,[(path,7000+i,strat) for i in range(12)]))
            a=np.array([r[:200]+[0]*(200-len(r)) for r in runs])
            print(path.split('/')[-1][:30], strat, 'space fail %.2f'%base, 'first30 %.2f first100 %.2f all %.2f'%(a[:,:30].mean(),a[:,:100].mean(),a.mean()))
