"""Cache the past runs' transfer data for each third shape (bayes, 100 evals, seed 0)."""
import pickle, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, "/work/main")
from kerntune.evaluate import ReplayEvaluator
from kerntune.runner import run_search
from kerntune.store import Store
from kerntune.strategies import Budget
from kerntune.warmstart import transfer_data, _nearby_runs
SHAPES = ["matmul_4096_h100", "matmul_8192x8192x512_h100", "matmul_256x8192x8192_h100"]
evs = {n: ReplayEvaluator.from_file(f"/work/main/examples/spaces/{n}.json.gz") for n in SHAPES}
out = {}
for third in SHAPES:
    ev = evs[third]
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "kt.db")
        for other in SHAPES:
            if other != third:
                run_search(evs[other], "bayes", Budget(max_evals=100), 0, store=store)
        name, size = ev.workload()["kernel_name"], ev.workload()["problem_size"]
        out[third] = dict(transfer=transfer_data(store, name, size, ev.space),
                          runs=[(d, s) for _, d, _, _, s in _nearby_runs(store, name, size, "")], size=size)
        print(third, size, out[third]["runs"], [len(r) for r in out[third]["transfer"]])
pickle.dump(out, open("/tmp/ws/transfer.pkl", "wb"))
t = time.time()
r = run_search(evs[SHAPES[0]], "bayes", Budget(max_evals=200), 0)
print("cold run s", time.time() - t)
