"""Traces of `auto` runs: evaluations in each family (two-valued fields), when 1.1x and the optimum are first reached.
``PYTHONPATH=. python benchmarks/results/search_quality/pass19/trace.py SPACE OPTIONS_JSON FIRST_SEED RUNS``"""
import sys, json, collections
sys.path.insert(0,'.')
from kerntune.evaluate import ReplayEvaluator
from kerntune.run.search import RunOptions, run_search
from kerntune.strategies import Budget
space = sys.argv[1]; opts = json.loads(sys.argv[2]); seeds = range(int(sys.argv[3]), int(sys.argv[3])+int(sys.argv[4]))
ev = ReplayEvaluator.from_file(f"examples/spaces/{space}.json.gz")
fields = [p.name for p in ev.space.params if len(p.values())==2]
opt = ev.recording.optimum; ofam = tuple(opt.config[f] for f in fields); ot = opt.time_ms
for s in seeds:
    res = run_search(ev, "auto", Budget(max_evals=200), seed=s, run=RunOptions(strategy_options=opts))
    h = res.history
    cnt = collections.Counter(tuple(t.config[f] for f in fields) for t in h)
    inopt = [i for i,t in enumerate(h) if tuple(t.config[f] for f in fields)==ofam]
    first11 = next((i for i,t in enumerate(h) if t.ok and t.time_ms < 1.1*ot), None)
    first101 = next((i for i,t in enumerate(h) if t.ok and t.time_ms <= 1.001*ot), None)
    best = min(t.time_ms for t in h if t.ok)/ot
    fb = {}
    for t in h:
        if t.ok:
            k=tuple(t.config[f] for f in fields); fb[k]=min(fb.get(k,9e9), t.time_ms/ot)
    print(s, "n_optfam", len(inopt), "first", inopt[:5], "<1.1x at", first11, "opt at", first101, "best %.3f"%best,
          {k:(cnt[k], round(fb.get(k,0),2)) for k in sorted(cnt)})
