"""Where the per-window noise of a 7 ms power-limited kernel comes from: two configs alternated in windows,
every launch's time kept, the SM clock and power sampled by nvidia-smi every 10 ms beside it (OUT.smi).

    python benchmarks/real_kernels/diagnosis/launch_noise.py ADAPTER SHAPE CONFIG_A CONFIG_B OUT.json ROUNDS

ROUNDS rounds of 50 ms windows (A then B, B then A on odd rounds), then ROUNDS/2 rounds of 200 ms windows."""
import json, os, subprocess, sys, time
import torch
import triton.testing
from kerntune.adapters import load

if len(sys.argv) < 7 or sys.argv[1] in ("-h", "--help"):  # usage, not an IndexError
    print(__doc__)
    sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
name, shape_s, A, B = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
out_path = sys.argv[5]
rounds_n = int(sys.argv[6])
shape = tuple(int(x) for x in shape_s.split("x"))
os.environ["KERNTUNE_PACKAGE_CHOICE"] = json.dumps(A)
target = load(name)
target.make_inputs(shape)
smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active",
                        "--format=csv,noheader,nounits", "-lms", "10"], stdout=open(out_path + ".smi", "w"))
t_base = time.time()
events = []
fns = {"A": lambda: target.launch(A, None), "B": lambda: target.launch(B, None)}
triton.testing.do_bench(fns["A"], warmup=300, rep=300)
for r in range(rounds_n):
    for k in (("A", "B") if r % 2 == 0 else ("B", "A")):
        t0 = time.time() - t_base
        xs = triton.testing.do_bench(fns[k], warmup=25, rep=50, return_mode="all")
        events.append({"round": r, "cfg": k, "t0": t0, "t1": time.time() - t_base, "ms": [float(x) for x in xs]})
# long windows too: 200 ms
for r in range(rounds_n // 2):
    for k in (("A", "B") if r % 2 == 0 else ("B", "A")):
        t0 = time.time() - t_base
        xs = triton.testing.do_bench(fns[k], warmup=25, rep=200, return_mode="all")
        events.append({"round": 1000 + r, "cfg": k, "t0": t0, "t1": time.time() - t_base, "ms": [float(x) for x in xs]})
smi.terminate()
json.dump({"t_base": t_base, "A": A, "B": B, "events": events}, open(out_path, "w"))
print("done", len(events))
