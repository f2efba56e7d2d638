import sys, json
from harness import *
o = json.loads(sys.argv[1])
if o.get("dtau"): o["dists"] = tuple(d for d, _ in TR[SHAPES[int(sys.argv[2])]]["runs"])
third = SHAPES[int(sys.argv[2])]; ev = EVS[third]; opt = ev.recording.optimum.time_ms
res = []
for s in range(20):
    r = run_search(ev, "gpx", Budget(max_evals=200), s, transfer=TRS[third][s], options=o)
    res.append(evals_to(r.history, opt))
print(third, res)
