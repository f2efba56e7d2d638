import pickle, sys, math
import numpy as np
sys.path.insert(0, "/work/main")
from kerntune.evaluate import ReplayEvaluator
SHAPES = ["matmul_4096_h100", "matmul_8192x8192x512_h100", "matmul_256x8192x8192_h100"]
evs = {n: ReplayEvaluator.from_file(f"/work/main/examples/spaces/{n}.json.gz") for n in SHAPES}
tr = pickle.load(open("/tmp/ws/transfer.pkl", "rb"))
sp = evs[SHAPES[0]].space
full = {n: {sp.key(sp.canonical(t.config)): (t.time_ms if t.ok else math.inf) for t in evs[n].recording.trials.values()} for n in SHAPES}
third = SHAPES[1]
opt = {n: min(full[n].values()) for n in SHAPES}
top = sorted(full[third], key=full[third].get)[:25]
past = tr[third]["transfer"]
print("key  | 8192x8192x512 | 4096 full | 4096 run | 256x full | 256x run")
for k in top:
    print(k, round(full[third][k]/opt[third],3), round(full[SHAPES[0]][k]/opt[SHAPES[0]],2), round(math.exp(past[0][k]),2) if k in past[0] else '-', round(full[SHAPES[2]][k]/opt[SHAPES[2]],2), round(math.exp(past[1][k]),2) if k in past[1] else '-')
print("past 4096 run best 15:")
for k, v in sorted(past[0].items(), key=lambda x: x[1])[:15]:
    print(k, round(math.exp(v),3), "on third", round(full[third][k]/opt[third],2))
print("past 256x run best 15:")
for k, v in sorted(past[1].items(), key=lambda x: x[1])[:15]:
    print(k, round(math.exp(v),3), "on third", round(full[third][k]/opt[third],2))
print("past runs BLOCK_N=256 measured:")
for i in range(2):
    print([ (k, round(math.exp(v),2)) for k, v in past[i].items() if json.loads(k)[1]==256] if False else [(k, round(math.exp(v),2)) for k,v in past[i].items() if eval(k)[1]==256])
