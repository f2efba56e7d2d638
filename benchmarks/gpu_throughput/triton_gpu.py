"""Issue 5's GPU figures: run named jobs on the lent GPU, one JSON summary per job.

    PYTHONPATH=$PWD python benchmarks/gpu_throughput/triton_gpu.py OUTDIR JOB [JOB ...]

Jobs (each `kerntune tune` runs in a fresh Triton cache, so compile time is real):
  exhaustive-4096   the whole 1,056-config matmul space at 4096^3: configs/s end to end
  bayes60-4096      GP search for 60 s of wall at 4096^3; pattern60-4096 the same for pattern search
  bayes60-<shape>   the same at another matmul shape (256x8192x8192, 8192x8192x512)
  planted           benchmarks/gpu_throughput/kernels/planted_scale.py, exhaustive: the three planted failures
  faults            benchmarks/gpu_throughput/kernels/planted_faults.py, exhaustive: issue 10's six planted faults
  softmax, layernorm  exhaustive over their spaces at 8192x8192: GB/s
  tma-bayes60-4096  GP search, 60 s, over the TMA/persistent matmul (examples/triton/matmul_tma.py)
  attention         exhaustive over the flash-attention forward example at 4x32x4096x64; sdpa: PyTorch's
  bandwidth         the device's copy bandwidth (torch copy_ of 1 GiB) and cuBLAS matmul times
The summaries hold the command, device, versions, wall time, the evaluation at which the
best was found and its wall-clock time, status counts and the best config.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

MATMUL = "examples/triton/matmul.py"
JOBS = {
    "exhaustive-4096": (MATMUL, "4096x4096x4096", ["--strategy", "exhaustive", "--budget", "100000", "--retime", "5"]),
    "bayes60-4096": (MATMUL, "4096x4096x4096", ["--strategy", "bayes", "--seconds", "60", "--budget", "100000"]),
    "pattern60-4096": (MATMUL, "4096x4096x4096", ["--strategy", "pattern", "--seconds", "60", "--budget", "100000"]),
    "bayes60-256x8192x8192": (MATMUL, "256x8192x8192", ["--strategy", "bayes", "--seconds", "60", "--budget", "100000"]),
    "bayes60-8192x8192x512": (MATMUL, "8192x8192x512", ["--strategy", "bayes", "--seconds", "60", "--budget", "100000"]),
    "planted": ("benchmarks/gpu_throughput/kernels/planted_scale.py", "67108864",
                ["--strategy", "exhaustive", "--budget", "100", "--compile-timeout", "20"]),
    "faults": ("benchmarks/gpu_throughput/kernels/planted_faults.py", "67108864",
               ["--strategy", "exhaustive", "--budget", "100", "--compile-timeout", "20"]),
    "tma-bayes60-4096": ("examples/triton/matmul_tma.py", "4096x4096x4096",
                         ["--strategy", "bayes", "--seconds", "60", "--budget", "100000"]),
    "attention": ("examples/triton/attention.py", "4x32x4096x64", ["--strategy", "exhaustive", "--budget", "100"]),
    "softmax": ("examples/triton/softmax.py", "8192x8192", ["--strategy", "exhaustive", "--budget", "1000"]),
    "layernorm": ("examples/triton/layernorm.py", "8192x8192", ["--strategy", "exhaustive", "--budget", "1000"]),
}


def _versions() -> dict:
    import torch
    import triton

    p = torch.cuda.get_device_properties(0)
    return {"device": p.name, "sms": p.multi_processor_count, "torch": torch.__version__, "triton": triton.__version__,
            "cuda": torch.version.cuda}


def run_tune(out: Path, name: str) -> dict:
    kernel, shape, extra = JOBS[name]
    db = out / f"{name}.db"
    db.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "kerntune", "tune", kernel, "--shape", shape, "--store", str(db), *extra]
    env = dict(os.environ, TRITON_CACHE_DIR=tempfile.mkdtemp(prefix=f"triton-{name}-"))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    (out / f"{name}.log").write_text(proc.stdout + proc.stderr)
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    run = con.execute("SELECT id FROM runs ORDER BY created DESC LIMIT 1").fetchone()["id"]
    rows = con.execute("SELECT * FROM trials WHERE run_id=? ORDER BY seq", (run,)).fetchall()
    ok = [r for r in rows if r["status"] == "ok"]
    best = min(ok, key=lambda r: r["time_ms"]) if ok else None
    summary = {
        "job": name, "command": "kerntune " + " ".join(cmd[3:]).replace(str(out) + "/", "OUT/"),
        "exit_code": proc.returncode, **_versions(), "wall_s": wall, "evaluations": len(rows),
        "configs_per_s": len(rows) / wall, "tuning_clock_s": rows[-1]["clock_s"] if rows else None,
        "statuses": dict(Counter(r["status"] for r in rows)),
        "best_ms": best["time_ms"] if best else None, "best_config": json.loads(best["config_json"]) if best else None,
        "best_found_at_eval": (rows.index(best) + 1) if best else None,
        "best_found_at_clock_s": best["clock_s"] if best else None,
        "failures": [{"config": json.loads(r["config_json"]), "status": r["status"], "error": (r["error"] or "")[:300]}
                     for r in rows if r["status"] != "ok"][:20],
        "stdout_tail": proc.stdout[-1500:],
    }
    if best is not None and name.startswith(("bayes", "pattern")):
        summary["curve"] = [(r["clock_s"], r["time_ms"]) for r in ok]
    return summary


def bandwidth() -> dict:
    import torch
    import triton.testing

    src = torch.empty(2**30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), rep=500)
    out = {"job": "bandwidth", **_versions(), "copy_GBps": 2 * 2**30 / (ms * 1e-3) / 1e9,
           "method": "torch copy_ of 1 GiB, read + write, triton.testing.do_bench(rep=500) median"}
    cublas = {}
    for m, n, k in ((4096, 4096, 4096), (256, 8192, 8192), (8192, 8192, 512)):
        a = torch.randn((m, k), device="cuda", dtype=torch.float16)
        b = torch.randn((k, n), device="cuda", dtype=torch.float16)
        t = triton.testing.do_bench(lambda: torch.matmul(a, b), rep=500)
        cublas[f"{m}x{n}x{k}"] = {"ms": t, "TFLOPs": 2 * m * n * k / (t * 1e-3) / 1e12}
    out["cublas_fp16"] = cublas
    return out


def sdpa() -> dict:
    """PyTorch's scaled_dot_product_attention (flash backend) at the attention example's shape."""
    import torch
    import triton.testing

    q, k, v = (torch.randn((4, 32, 4096, 64), device="cuda", dtype=torch.float16) for _ in range(3))
    ms = triton.testing.do_bench(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v), rep=500)
    return {"job": "sdpa", **_versions(), "shape": "4x32x4096x64", "ms": ms,
            "TFLOPs": 4.0 * 4 * 32 * 4096 * 4096 * 64 / (ms * 1e-3) / 1e12}


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name in sys.argv[2:]:
        t0 = time.perf_counter()
        summary = bandwidth() if name == "bandwidth" else sdpa() if name == "sdpa" else run_tune(out, name)
        (out / f"{name}.json").write_text(json.dumps(summary, indent=1))
        print(f"{name}: {time.perf_counter() - t0:.0f} s", {k: summary.get(k) for k in
              ("evaluations", "configs_per_s", "best_ms", "best_found_at_clock_s", "statuses", "copy_GBps")},
              flush=True)


if __name__ == "__main__":
    main()
