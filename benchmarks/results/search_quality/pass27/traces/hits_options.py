"""Scratch trace of the twenty-seventh pass (run from the repository root): STRATEGY (default auto) with OPTIONS,
N runs from repeat 5000, writes /tmp/hits_SPACE_LABEL.json (gzip it here for hitsum.py). The table's rows:
python hits_options.py convolution_A100 30 default '{}'; ... gp '{}' gp; ... tabu1 '{"tabu_radius":1}';
... nostall '{"stall":1000}'; ... tu05 '{"tabu_until":0.5}' and tu03 '{"tabu_until":0.3}' (at commit 6103a51)."""
import json
import sys
from concurrent.futures import ProcessPoolExecutor

from kerntune.evaluate import ReplayEvaluator
from kerntune.run.search import RunOptions, run_search
from kerntune.strategies import Budget

SP, N, LABEL, OPTS = sys.argv[1], int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
STRATEGY = sys.argv[5] if len(sys.argv) > 5 else "auto"


def one(seed):
    ev = ReplayEvaluator.from_file(f"examples/spaces/{SP}.json.gz")
    res = run_search(ev, STRATEGY, Budget(max_evals=200), seed=seed, run=RunOptions(strategy_options=OPTS))
    return [t.time_ms if t.ok else None for t in res.history]


if __name__ == "__main__":
    with ProcessPoolExecutor(2) as pool:
        runs = list(pool.map(one, [5000 + i for i in range(N)]))
    json.dump(runs, open(f"/tmp/hits_{SP}_{LABEL}.json", "w"))
