"""Scratch trace of the twenty-seventh pass (run from the repository root): auto and gp, N runs from repeat 5000;
writes /tmp/hits_SPACE.json (split into _default / _gp for hitsum.py). python hits_auto_gp.py convolution_A100 30"""
import sys, json, numpy as np
from concurrent.futures import ProcessPoolExecutor
from kerntune.evaluate import ReplayEvaluator
from kerntune.run.search import RunOptions, run_search
from kerntune.strategies import Budget
SP = sys.argv[1]
def one(args):
    strat, seed = args
    ev = ReplayEvaluator.from_file(f"examples/spaces/{SP}.json.gz")
    res = run_search(ev, strat, Budget(max_evals=200), seed=seed)
    return [t.time_ms if t.ok else None for t in res.history]
if __name__ == "__main__":
    out = {}
    with ProcessPoolExecutor(2) as pool:
        for strat in ("auto", "gp"):
            out[strat] = list(pool.map(one, [(strat, 5000 + i) for i in range(int(sys.argv[2]))]))
    json.dump(out, open(f"/tmp/hits_{SP}.json", "w"))
