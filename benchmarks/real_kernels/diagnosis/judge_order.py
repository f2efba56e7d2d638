"""Does the judge's rotation bias a pair?

    python benchmarks/real_kernels/diagnosis/judge_order.py ADAPTER SHAPE PACKAGE_CONFIG KERNTUNE_CONFIG [REPEATS]

 One process: package (A), kerntune (B) and torch, timed as judge.py
does (3 candidates rotated), then A and B alone, then the 3 candidates in the other cyclic order."""
import json, os, sys
import torch
from kerntune.adapters import load
from kerntune.evaluate.judge import summarize, time_interleaved
from kerntune.evaluate.protocol import DEFAULT
from kerntune.evaluate.triton_backend.worker import timer

if len(sys.argv) < 5 or sys.argv[1] in ("-h", "--help"):  # usage, not an IndexError
    print(__doc__)
    sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
name, shape_s, A, B = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
reps = int(sys.argv[5]) if len(sys.argv) > 5 else 2
shape = tuple(int(x) for x in shape_s.split("x"))
os.environ["KERNTUNE_PACKAGE_CHOICE"] = json.dumps(A)
target = load(name)
target.make_inputs(shape)
a = target.adapter
ref_inputs = a.make_inputs(shape)
pk = {"package": lambda: target.launch(A, None), "kerntune": lambda: target.launch(B, None)}
t = {"torch": lambda: a.torch_op(ref_inputs)}
orders = {"pkt": {**pk, **t}, "pk": dict(pk), "kpt": {"kerntune": pk["kerntune"], "package": pk["package"], **t}}
bench = timer(torch)
out = {}
for rep in range(reps):
    for label, cands in orders.items():
        s = summarize(time_interleaved(cands, bench, DEFAULT), {"speedup": ("package", "kerntune")}, DEFAULT)
        out.setdefault(label, []).append(s["speedup"])
        print(rep, label, json.dumps(s["speedup"]), {k: round(s[k]["ms"], 3) for k in cands}, flush=True)
print("JSON", json.dumps({"kernel": name, "shape": shape_s, "A": A, "B": B, "speedups": out}))
