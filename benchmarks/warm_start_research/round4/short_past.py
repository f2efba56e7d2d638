"""Session 3: warm starts with short past runs (30 evaluations) and a 30-evaluation budget, as in tune --shapes (benchmarks/results/dispatch_h100/README.md, session 3).
Prints, per third shape, median and mean over 20 seeds of best time / optimum after the budget, for a cold GP, the prior design
and the second-task design; past runs redone per seed.  Run from the repo root: .venv/bin/python benchmarks/warm_start_research/round4/short_past.py 30 30
"""
import statistics, sys, tempfile
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from kerntune.evaluate import ReplayEvaluator
from kerntune.runner import run_search
from kerntune.store import Store
from kerntune.strategies import Budget
from kerntune.warmstart import transfer_data
SHAPES = ["matmul_4096_h100", "matmul_8192x8192x512_h100", "matmul_256x8192x8192_h100"]
evs = {n: ReplayEvaluator.from_file(f"examples/spaces/{n}.json.gz") for n in SHAPES}
PAST, B, R = int(sys.argv[1]), int(sys.argv[2]), 20
for third in SHAPES:
    ev = evs[third]; opt = ev.recording.optimum.time_ms
    res = {"cold": [], "prior": [], "task": []}
    for s in range(R):
        with tempfile.TemporaryDirectory() as tmp:
            store = Store(Path(tmp) / "kt.db")
            for o in SHAPES:
                if o != third:
                    run_search(evs[o], "bayes", Budget(max_evals=PAST), s, store=store)
            w = ev.workload(); tr = transfer_data(store, w["kernel_name"], w["problem_size"], ev.space)
        for kind, kw in (("cold", {}), ("prior", dict(transfer=tr)), ("task", dict(transfer=tr, options={"transfer_model": "task"}))):
            h = run_search(ev, "bayes", Budget(max_evals=B), s, **kw).history
            best = min(t.time_ms for t in h if t.ok)
            res[kind].append(best / opt)
    print(third, {k: (round(statistics.median(v), 4), round(statistics.mean(v), 4)) for k, v in res.items()}, flush=True)
