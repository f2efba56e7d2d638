"""Idea 5 variants. usage: exp.py NAME POLISH PAST_BUDGET [parts]"""
import pickle, sys, math, statistics, time, json, tempfile, os
from pathlib import Path
sys.path.insert(0, "/work/main"); sys.path.insert(0, "/tmp/ws3")
from kerntune.evaluate import ReplayEvaluator
from kerntune.runner import run_search
from kerntune.store import Store
from kerntune.strategies import Budget, STRATEGIES
from kerntune.warmstart import transfer_data
STRATEGIES["gpp"] = "gpp"
SHAPES = ["matmul_4096_h100", "matmul_8192x8192x512_h100", "matmul_256x8192x8192_h100"]
EVS = {n: ReplayEvaluator.from_file(f"/work/main/examples/spaces/{n}.json.gz") for n in SHAPES}
BUDGET, SEEDS = 200, range(20)
name, polish, past_budget = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
parts = sys.argv[4].split(",") if len(sys.argv) > 4 else ["prep", "cold", "seed0", "per"]
OPTS = {"polish": polish}
def evals_to(history, optimum, within=0.02):
    best = math.inf
    for i, t in enumerate(history, 1):
        if t.ok: best = min(best, t.time_ms)
        if best <= optimum * (1 + within): return i
    return BUDGET + 1
trp = f"/tmp/ws3/tr_{polish}_{past_budget}.pkl"
t0 = time.time()
if "prep" in parts and not os.path.exists(trp):
    TRS = {}
    for third in SHAPES:
        ev = EVS[third]; TRS[third] = {}
        for s in SEEDS:
            with tempfile.TemporaryDirectory() as tmp:
                store = Store(Path(tmp) / "kt.db")
                for other in SHAPES:
                    if other != third:
                        run_search(EVS[other], "gpp", Budget(max_evals=past_budget), s, store=store, options=OPTS)
                n, size = ev.workload()["kernel_name"], ev.workload()["problem_size"]
                TRS[third][s] = transfer_data(store, n, size, ev.space)
        print("prep", third, f"{time.time()-t0:.0f}s", flush=True)
    pickle.dump(TRS, open(trp, "wb"))
TRS = pickle.load(open(trp, "rb")) if os.path.exists(trp) else None
res = {}
for part in [p for p in parts if p != "prep"]:
    row = {}
    for third in SHAPES:
        ev = EVS[third]; opt = ev.recording.optimum.time_ms
        tr = (lambda s: []) if part == "cold" else (lambda s: TRS[third][0]) if part == "seed0" else (lambda s: TRS[third][s])
        r = [evals_to(run_search(ev, "gpp", Budget(max_evals=BUDGET), s, transfer=tr(s), options=OPTS).history, opt) for s in SEEDS]
        row[third] = (statistics.median(r), r)
    res[part] = row
    print(name, part, [row[s][0] for s in SHAPES], f"{time.time()-t0:.0f}s", flush=True)
    for s in SHAPES: print("   ", s, sorted(row[s][1]), flush=True)
json.dump(res, open(f"/tmp/ws3/res_{name}_{'_'.join(parts)}.json", "w"))
