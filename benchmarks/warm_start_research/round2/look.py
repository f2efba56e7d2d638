import pickle, sys, math
sys.path.insert(0, "/work/main")
from kerntune.evaluate import ReplayEvaluator
SHAPES = ["matmul_4096_h100", "matmul_8192x8192x512_h100", "matmul_256x8192x8192_h100"]
evs = {n: ReplayEvaluator.from_file(f"/work/main/examples/spaces/{n}.json.gz") for n in SHAPES}
tr = pickle.load(open("/tmp/ws/transfer.pkl", "rb"))
ev = evs[SHAPES[0]]
print(ev.space.names, [ (p.name, p.values) for p in ev.space.params] if hasattr(ev.space,'params') else '')
rec = ev.recording
print(type(rec), [a for a in dir(rec) if not a.startswith('_')])
for n in SHAPES:
    r = evs[n].recording
    print(n, r.optimum.config, r.optimum.time_ms)
