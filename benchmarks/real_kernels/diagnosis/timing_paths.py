"""Why in-place timing and the judge rank two configs differently: one process, three timing paths.

    python benchmarks/real_kernels/diagnosis/timing_paths.py ADAPTER SHAPE CONFIG_A CONFIG_B [ROUNDS]

1. the in-place search itself (KERNTUNE_AUTOTUNE=1, the kernel's list cut to [A, B], runoff 2: 5 rounds);
2. afterwards, in the same process, 10 interleaved rounds of: the judge's path (captured launch, target.launch),
   kerntune's in-place path (Autotuner._bench with kerntune's do_bench, ListEvaluator) and Triton's own
   (Autotuner._bench with Triton's do_bench, rep 100), for A and B."""
import json, os, statistics, sys, tempfile, time
import torch
from kerntune.adapters import load
from kerntune.evaluate.triton_backend.capture import autotuner
from kerntune.evaluate.triton_backend.derive_space import config_dict
from kerntune.evaluate.triton_backend.worker import timer
from kerntune.evaluate.protocol import DEFAULT
import kerntune.retune as retune
from kerntune.retune_timing import ListEvaluator

if len(sys.argv) < 5 or sys.argv[1] in ("-h", "--help"):  # usage, not an IndexError
    print(__doc__)
    sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
name, shape_s = sys.argv[1], sys.argv[2]
A, B = json.loads(sys.argv[3]), json.loads(sys.argv[4])
rounds_n = int(sys.argv[5]) if len(sys.argv) > 5 else 10
shape = tuple(int(x) for x in shape_s.split("x"))
target = load(name)
tuner = autotuner(target.kernel)
full = list(tuner.configs)

def listed(c):
    hits = [tc for tc in full if all(config_dict(tc).get(k, v) == v for k, v in c.items() if k in config_dict(tc))]
    assert len(hits) == 1, (c, len(hits))
    return hits[0]

tA, tB = listed(A), listed(B)
got = {}
orig_w = retune._winner
def spy(t, key, args, kwargs):
    if t is tuner:
        got["args"], got["kwargs"] = args, kwargs
    return orig_w(t, key, args, kwargs)
retune._winner = spy
os.environ.update(KERNTUNE_AUTOTUNE="1", KERNTUNE_STORE=tempfile.mkdtemp() + "/kt.db", KERNTUNE_AUTOTUNE_RUNOFF="2")
retune.enable_from_env()
tuner.configs = [tA, tB]
inputs = target.adapter.make_inputs(shape)
t0 = time.perf_counter()
target.adapter.call(inputs)
torch.cuda.synchronize()
retune.disable()
tuner.configs = full
s = [x for x in retune.STATS.searches if x["kernel"] == tuner.base_fn.__name__][-1]
print("in-search:", json.dumps({"config": s["config"], "runoff": s.get("runoff")}), flush=True)

# captured launch for the judge's path, the package choice preset to A
os.environ["KERNTUNE_PACKAGE_CHOICE"] = json.dumps(A)
target.make_inputs(shape)
args, kwargs = got["args"], got["kwargs"]
st = retune._state(tuner)
cA = {k: v for k, v in config_dict(tA).items() if k in st.space.names}
cB = {k: v for k, v in config_dict(tB).items() if k in st.space.names}
ev = ListEvaluator(tuner, st, args, kwargs)
bench = timer(torch)

def judge_path(cfg):
    samples = sorted(bench(lambda: target.launch(cfg, None), DEFAULT.rep_ms, DEFAULT.warmup_ms))
    return samples[len(samples) // 2]

def inplace_path(c):
    tuner.nargs = dict(zip(tuner.arg_names, args))
    try:
        fn = ev.launchers([c])[0]  # Autotuner._bench's launch, as kerntune.retune times it
    finally:
        tuner.nargs = None
    fn()
    torch.cuda.synchronize()
    samples = sorted(bench(fn, DEFAULT.rep_ms, DEFAULT.warmup_ms))
    return samples[len(samples) // 2]

def triton_path(tc):
    tuner.nargs = dict(zip(tuner.arg_names, args))
    try:
        return tuner._bench(*args, config=tc, **kwargs)[0]
    finally:
        tuner.nargs = None

paths = {"judge_A": lambda: judge_path(A), "judge_B": lambda: judge_path(B),
         "inplace_A": lambda: inplace_path(cA), "inplace_B": lambda: inplace_path(cB),
         "triton_A": lambda: triton_path(tA), "triton_B": lambda: triton_path(tB)}
names = list(paths)
bench(lambda: target.launch(A, None), 300, 300)
res = {n: [] for n in names}
for r in range(rounds_n):
    for i in range(len(names)):
        n = names[(i + r) % len(names)]
        res[n].append(paths[n]())
out = {"kernel": name, "shape": shape_s, "A": A, "B": B, "rounds": res,
       "in_search_runoff": s.get("runoff"), "in_search_pick": s["config"]}
for p in ("judge", "inplace", "triton"):
    ratios = sorted(b / a for a, b in zip(res[p + "_A"], res[p + "_B"]))
    out[p] = {"A_ms": statistics.median(res[p + "_A"]), "B_ms": statistics.median(res[p + "_B"]),
              "B_over_A_median": statistics.median(ratios), "B_over_A_range": [ratios[0], ratios[-1]]}
    print(p, json.dumps(out[p]), flush=True)
print("JSON", json.dumps(out), flush=True)
