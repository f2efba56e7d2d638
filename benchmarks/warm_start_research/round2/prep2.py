"""Past runs seeded per repeat: TRS[third][s] = transfer data after bayes runs (100 evals, seed s) of the other two."""
import pickle, sys, tempfile
from pathlib import Path
sys.path.insert(0, "/work/main")
from kerntune.evaluate import ReplayEvaluator
from kerntune.runner import run_search
from kerntune.store import Store
from kerntune.strategies import Budget
from kerntune.warmstart import transfer_data
SHAPES = ["matmul_4096_h100", "matmul_8192x8192x512_h100", "matmul_256x8192x8192_h100"]
evs = {n: ReplayEvaluator.from_file(f"/work/main/examples/spaces/{n}.json.gz") for n in SHAPES}
strategy = sys.argv[1] if len(sys.argv) > 1 else "bayes"
out = {}
for third in SHAPES:
    ev = evs[third]; out[third] = {}
    for s in range(20):
        with tempfile.TemporaryDirectory() as tmp:
            store = Store(Path(tmp) / "kt.db")
            for other in SHAPES:
                if other != third:
                    run_search(evs[other], strategy, Budget(max_evals=100), s, store=store)
            name, size = ev.workload()["kernel_name"], ev.workload()["problem_size"]
            out[third][s] = transfer_data(store, name, size, ev.space)
pickle.dump(out, open(f"/tmp/ws/transfer_seeds_{strategy}.pkl", "wb"))
