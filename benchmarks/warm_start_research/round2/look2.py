import pickle, sys, math
import numpy as np
sys.path.insert(0, "/work/main")
from kerntune.evaluate import ReplayEvaluator
from scipy.stats import spearmanr
SHAPES = ["matmul_4096_h100", "matmul_8192x8192x512_h100", "matmul_256x8192x8192_h100"]
evs = {n: ReplayEvaluator.from_file(f"/work/main/examples/spaces/{n}.json.gz") for n in SHAPES}
tr = pickle.load(open("/tmp/ws/transfer.pkl", "rb"))
sp = evs[SHAPES[0]].space
full = {}
for n in SHAPES:
    r = evs[n].recording
    d = {}
    for t in r.trials.values():
        k = sp.key(sp.canonical(t.config))
        d[k] = t.time_ms if t.ok else math.inf
    full[n] = d
    ok = [v for v in d.values() if math.isfinite(v)]
    opt = min(ok)
    print(n, "configs", len(d), "ok", len(ok), "within2%", sum(v <= opt*1.02 for v in ok), "within5%", sum(v <= opt*1.05 for v in ok), "within10%", sum(v<=opt*1.1 for v in ok), "median ratio", np.median(ok)/opt)
keys = sorted(set.intersection(*[set(d) for d in full.values()]))
for third in SHAPES:
    others = [o for o in SHAPES if o != third]
    opt = min(full[third].values())
    good = [k for k in keys if full[third][k] <= opt*1.02]
    for o in others:
        ok_k = [k for k in keys if math.isfinite(full[o][k])]
        rank = sorted(ok_k, key=lambda k: full[o][k])
        oo = min(full[o].values())
        print(third, "good-set ranks in", o, sorted(rank.index(k) for k in good if k in rank), "ratios", [round(full[o][k]/oo,2) for k in good])
    # past run coverage
    t = tr[third]["transfer"]
    for i, run in enumerate(t):
        print("  past", tr[third]["runs"][i], "measured good-set:", [k for k in good if k in run], "n inf", sum(not math.isfinite(v) for v in run.values()))
    # average log ratio rank
    avg = {k: sum(math.log(full[o][k]/min(full[o].values())) for o in others) for k in keys if all(math.isfinite(full[o][k]) for o in others)}
    r2 = sorted(avg, key=avg.get)
    print("  rank in avg of two full:", sorted(r2.index(k) for k in good if k in r2))
print(sp.names)
for third in SHAPES:
    opt = min(full[third].values())
    good = [k for k in keys if full[third][k] <= opt*1.02]
    print(third, good)
