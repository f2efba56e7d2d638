import pickle, sys, math
import numpy as np
sys.path.insert(0, "/work/main")
from kerntune.evaluate import ReplayEvaluator
from kerntune.strategies import gp as G
SHAPES = ["matmul_4096_h100", "matmul_8192x8192x512_h100", "matmul_256x8192x8192_h100"]
evs = {n: ReplayEvaluator.from_file(f"/work/main/examples/spaces/{n}.json.gz") for n in SHAPES}
tr = pickle.load(open("/tmp/ws/transfer.pkl", "rb"))
sp = evs[SHAPES[0]].space
cfgs, keys, feats = G._enumerated(sp)
full = {}
for n in SHAPES:
    full[n] = {sp.key(sp.canonical(t.config)): (t.time_ms if t.ok else math.inf) for t in evs[n].recording.trials.values()}
def fit(run):
    fin = [(k, v) for k, v in run.items() if math.isfinite(v)]
    m = G._GP(sp.encoded_width, len(fin))
    m.add_pool(feats)
    for k, v in fin:
        m.add_obs(G._encode(sp, [sp.from_key(k)])[0])
    y = np.array([v for _, v in fin]); yn = (y - y.mean()) / y.std()
    live = np.ptp(feats, axis=0) > 0
    m.refit(yn, live)
    mu, sd = m.predict(yn)
    return mu * y.std() + y.mean(), sd * y.std(), m.theta
for third in SHAPES:
    opt = min(full[third].values())
    good = [k for k in keys if full[third][k] <= opt * 1.02]
    gi = [keys.index(k) for k in good]
    mus, sds = [], []
    for i, run in enumerate(tr[third]["transfer"]):
        mu, sd, th = fit(run)
        mus.append(mu); sds.append(sd)
        rk = np.argsort(np.argsort(mu)); rl = np.argsort(np.argsort(mu - 2*sd))
        print(third, "past", tr[third]["runs"][i][1], "theta", th, "needle mean-rank", rk[gi], "lcb-rank", rl[gi], "mu", mu[gi].round(2), "sd", sd[gi].round(2))
    avg = sum(mus); rk = np.argsort(np.argsort(avg)); 
    lcb = sum(m - 2*s for m, s in zip(mus, sds)); rl = np.argsort(np.argsort(lcb))
    mx = np.maximum(*mus); rm = np.argsort(np.argsort(mx))
    print("  avg rank", rk[gi], "avg lcb rank", rl[gi], "max rank", rm[gi])
    # pruning: fraction of configs predicted bad in both runs
    for thr in (0.5, 0.7, 1.0):
        bad = np.all([m - s > thr for m, s in zip(mus, sds)], axis=0)
        print("  prune mu-sd > log", thr, "frac", bad.mean().round(2), "needle pruned", bad[gi])
