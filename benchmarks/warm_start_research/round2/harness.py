"""Experiment harness: medians of evals-to-2% for cold and warm runs of a strategy module variant."""
import pickle, sys, math, statistics, time, json
sys.path.insert(0, "/work/main"); sys.path.insert(0, "/tmp/ws")
from kerntune.evaluate import ReplayEvaluator
from kerntune.runner import run_search
from kerntune.strategies import Budget, STRATEGIES
STRATEGIES["gpx"] = "gpx"
SHAPES = ["matmul_4096_h100", "matmul_8192x8192x512_h100", "matmul_256x8192x8192_h100"]
EVS = {n: ReplayEvaluator.from_file(f"/work/main/examples/spaces/{n}.json.gz") for n in SHAPES}
TR = pickle.load(open("/tmp/ws/transfer.pkl", "rb"))
BUDGET = 200
def evals_to(history, optimum, within=0.02):
    best = math.inf
    for i, t in enumerate(history, 1):
        if t.ok: best = min(best, t.time_ms)
        if best <= optimum * (1 + within): return i
    return BUDGET + 1
TRS = pickle.load(open("/tmp/ws/transfer_seeds_bayes.pkl", "rb"))
def measure(options, warm=True, seeds=range(20), strategy="gpx", per_seed=False):
    out = {}
    for third in SHAPES:
        ev = EVS[third]; opt = ev.recording.optimum.time_ms
        tr = lambda s: (TRS[third][s] if per_seed else TR[third]["transfer"]) if warm else []
        o = dict(options)
        if o.get("dtau"): o["dists"] = tuple(d for d, _ in TR[third]["runs"])
        r = [evals_to(run_search(ev, strategy, Budget(max_evals=BUDGET), s, transfer=tr(s), options=o).history, opt) for s in seeds]
        out[third] = (statistics.median(r), r)
    return out
if __name__ == "__main__":
    opts = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    warm = sys.argv[2] != "cold" if len(sys.argv) > 2 else True
    per_seed = len(sys.argv) > 3 and sys.argv[3] == "per_seed"
    t0 = time.time()
    res = measure(opts, warm, per_seed=per_seed)
    print(json.dumps(opts), "warm" if warm else "cold", "per_seed" if per_seed else "", [res[s][0] for s in SHAPES], f"{time.time()-t0:.0f}s")
    for s in SHAPES: print("   ", s, sorted(res[s][1]))
