import sys, math, numpy as np
from harness import *
import gpx
third = SHAPES[1]; ev = EVS[third]; sp = ev.space
cfgs, keys, feats = gpx._enumerated(sp)
live = np.ptp(feats, 0) > 0
needle = keys.index('[128,256,64,1,8,3]')
opt = ev.recording.optimum.time_ms
for s in range(20):
    tr = TRS[third][s]
    pm = gpx._PastModel(sp, tr, live)
    mus, sds = pm.predict(feats)
    pr = mus.mean(0)
    rk = int(np.argsort(np.argsort(pr))[needle])
    inrec = ['[128,256,64,1,8,3]' in r for r in tr]
    reg = [sum(1 for k in r if eval(k)[:2]==[128,256] and eval(k)[4]==8) for r in tr]
    h = run_search(ev, "gpx", Budget(max_evals=200), s, transfer=tr, options={"mode":"prior"}).history
    e = evals_to(h, opt)
    print(s, "needle in rec", inrec, "region counts", reg, "per-run mu", mus[:, needle].round(2), "sd", sds[:, needle].round(2), "avg rank", rk, "evals", e)
