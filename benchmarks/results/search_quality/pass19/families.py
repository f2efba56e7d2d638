"""Per family (the two-valued fields of a recording): configs, best / optimum, 10th percentile / optimum, configs within 1.1x and 1.25x of the optimum.
``PYTHONPATH=. python benchmarks/results/search_quality/pass19/families.py``"""
import sys, math, collections
sys.path.insert(0,'.')
from kerntune.evaluate import ReplayEvaluator
for s in ["convolution_A100","convolution_A4000","dedispersion_A100","dedispersion_MI250X","matmul_256x8192x8192_h100"]:
    ev = ReplayEvaluator.from_file(f"examples/spaces/{s}.json.gz")
    rec = ev.recording
    sp = ev.space
    fields = [p.name for p in sp.params if len(p.values())==2]
    fam = collections.defaultdict(list)
    for t in rec.trials.values():
        if t.ok: fam[tuple(t.config[f] for f in fields)].append(t.time_ms)
    opt = min(min(v) for v in fam.values())
    print(s, fields)
    for k,v in sorted(fam.items()):
        v=sorted(v); print("   ",k,len(v),"best/opt %.3f"%(v[0]/opt),"p10/opt %.3f"%(v[len(v)//10]/opt), "n<1.1opt", sum(x<1.1*opt for x in v), "n<1.25", sum(x<1.25*opt for x in v))
