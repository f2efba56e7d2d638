"""Scratch traces of the thirty-first pass (run from the repository root): STRATEGY with OPTIONS (JSON) on
RECORDING, N runs from repeat 5000, budget 200; writes OUT (gzip it here): per run, per evaluation,
(time in ms or null, source). The committed traces:
    PYTHONPATH=. python trace.py benchmarks/results/heldout/spaces/torchao.fp8_blockwise_mm_4096x18432x7168.json.gz 30 auto '{}' fp8_auto.json
    ... 30 auto '{"tpe_share":0.5}' fp8_tpe50.json   (at commit 56bbdde, which holds the option)
    ... 30 tpe '{}' fp8_tpe.json
and the same on fla.chunk_o_4x4096x32x128.json.gz as co_auto.json and co_tpe50.json.
Summary: python curves.py *.json.gz"""
import json
import sys
from concurrent.futures import ProcessPoolExecutor

from kerntune.evaluate import ReplayEvaluator
from kerntune.run.search import RunOptions, run_search
from kerntune.strategies import Budget

PATH, N, STRAT, OPTS, OUT = sys.argv[1], int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4]), sys.argv[5]


def one(seed):
    ev = ReplayEvaluator.from_file(PATH)
    res = run_search(ev, STRAT, Budget(max_evals=200), seed=seed, run=RunOptions(strategy_options=OPTS))
    return [(t.time_ms if t.ok else None, getattr(t, "source", "")) for t in res.history]


if __name__ == "__main__":
    with ProcessPoolExecutor(2) as pool:
        runs = list(pool.map(one, [5000 + i for i in range(N)]))
    json.dump(runs, open(OUT, "w"))
