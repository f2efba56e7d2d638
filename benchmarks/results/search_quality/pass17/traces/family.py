# Scratch trace (seventeenth pass): python THIS SPACE JSON_OPTIONS RUNS, from the repository root, PYTHONPATH=.
import sys, json
sys.path.insert(0, '.')
from kerntune.evaluate import ReplayEvaluator
from kerntune.run.search import RunOptions, run_search
from kerntune.strategies import Budget
sp, opts, n = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
ev = ReplayEvaluator.from_file(f'examples/spaces/{sp}.json.gz')
best = min(t.time_ms for t in ev.recording.trials.values() if t.ok)
gaps = []
for r in range(n):
    res = run_search(ev, 'auto', Budget(max_evals=200), seed=1000 + r, run=RunOptions(strategy_options=opts))
    fam = next((i for i, t in enumerate(res.history) if t.ok and t.time_ms <= 1.05 * best), None)
    near = next((i for i, t in enumerate(res.history) if t.ok and t.config['use_shmem'] == 0 and t.time_ms <= 1.25 * best and t.time_ms > 1.05 * best), None)
    shm = next((i for i, t in enumerate(res.history) if t.ok and t.config['use_shmem'] == 1 and t.time_ms <= 1.3 * best), None)
    print(r, 'shmem-basin at', shm, 'near family (shmem off, 1.05-1.25x) at', near, 'optimum family at', fam)
