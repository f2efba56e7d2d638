"""Issue 12, acceptance 2: a dispatch table for 8 matmul shapes tuned on the GPU under one
budget, exported, and used by ``@kerntune.autotune(dispatch=...)`` at run time, where two
unseen shapes get the nearest tuned shape's config.

    PYTHONPATH=$PWD python benchmarks/gpu_throughput/dispatch_gpu.py OUTDIR [BUDGET]

Writes OUTDIR/dispatch.json (the exported table), OUTDIR/dispatch_gpu.json (the summary:
per shape the winner, its time, evaluations, warm-start sources; per decorator call the config
used, whether it is the table's or the nearest shape's, correctness against torch.matmul, and
the time against cuBLAS) and OUTDIR/dispatch_tune.log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHAPES = ["4096x4096x4096", "2048x2048x2048", "1024x1024x1024", "8192x4096x4096", "4096x4096x1024",
          "8192x8192x512", "512x4096x4096", "256x8192x8192"]
UNSEEN = ["3072x3072x3072", "256x4096x8192"]


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):  # "--help" once became an output folder
        print(__doc__)
        sys.exit(0 if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help") else 2)
    out = Path(sys.argv[1])
    budget = int(sys.argv[2]) if len(sys.argv) > 2 else 240
    out.mkdir(parents=True, exist_ok=True)
    db = out / "dispatch.db"
    db.unlink(missing_ok=True)
    shapes_file = out / "shapes.txt"
    shapes_file.write_text("\n".join(SHAPES) + "\n")
    env = dict(os.environ, TRITON_CACHE_DIR=tempfile.mkdtemp(prefix="triton-dispatch-"))
    cmd = [sys.executable, "-m", "kerntune", "tune", "examples/triton/matmul.py", "--shapes", str(shapes_file),
           "--strategy", "bayes", "--budget", str(budget), "--compile-timeout", "15", "--store", str(db)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    tune_wall = time.perf_counter() - t0
    (out / "dispatch_tune.log").write_text(proc.stdout + proc.stderr)
    exp = subprocess.run([sys.executable, "-m", "kerntune", "cache", "export", "--json", "--store", str(db),
                          "-o", str(out / "dispatch.json")], capture_output=True, text=True, env=env)
    summary: dict = {"command": " ".join(["kerntune"] + cmd[3:]).replace(str(out) + "/", "OUT/"),
                     "tune_exit_code": proc.returncode, "tune_wall_s": tune_wall, "budget": budget,
                     "export_exit_code": exp.returncode, "export_stderr": exp.stderr[-500:]}

    import sqlite3

    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    runs = con.execute("SELECT id, label FROM runs ORDER BY created").fetchall()
    summary["shapes"] = []
    for r in runs:
        rows = con.execute("SELECT status, time_ms, source FROM trials WHERE run_id=? ORDER BY seq", (r["id"],)).fetchall()
        ok = [x["time_ms"] for x in rows if x["status"] == "ok"]
        summary["shapes"].append({"label": r["label"], "evaluations": len(rows), "best_ms": min(ok) if ok else None,
                                  "warm_start_trials": sum(x["source"] == "warm-start" for x in rows)})

    import torch
    import triton
    import triton.testing

    import kerntune
    from kerntune.evaluate.triton_backend.kernel_file import load_kernel_module

    p = torch.cuda.get_device_properties(0)
    summary.update({"device": p.name, "torch": torch.__version__, "triton": triton.__version__,
                    "cuda": torch.version.cuda})
    table = json.loads((out / "dispatch.json").read_text())
    by_shape = {tuple(e["shape"]): e["config"] for e in table["entries"]}
    mod = load_kernel_module("examples/triton/matmul.py")
    kernel = kerntune.autotune(space=mod.space, key=["M", "N", "K"], store=str(out / "decorator.db"),
                               on_miss="nearest", dispatch=out / "dispatch.json")(mod._matmul_kernel)
    calls = []
    for text in SHAPES + UNSEEN:
        m, n, k = map(int, text.split("x"))
        a = torch.randn((m, k), device="cuda", dtype=torch.float16)
        b = torch.randn((k, n), device="cuda", dtype=torch.float16)
        c = torch.empty((m, n), device="cuda", dtype=torch.float16)
        args = (a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))

        def call() -> None:
            kernel[lambda meta: (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)](*args)

        t0 = time.perf_counter()
        call()
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        used = kernel.config_for(None, dict(zip(kernel.arg_names, args)))
        ms = triton.testing.do_bench(call, rep=100)
        cublas = triton.testing.do_bench(lambda: torch.matmul(a, b), rep=100)
        calls.append({"shape": text, "seen": text in SHAPES, "config": used,
                      "table_config": by_shape.get((m, n, k)),
                      "correct": bool(torch.allclose(c.float(), (a @ b).float(), rtol=1e-2, atol=1e-1)),
                      "ms": ms, "cublas_ms": cublas, "share_of_cublas": cublas / ms, "first_call_s": first})
    summary["decorator_calls"] = calls
    summary["decorator_tuned_keys"] = kernel.tuned_keys
    summary["decorator_queued"] = kernel.queued
    (out / "dispatch_gpu.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: v for k, v in summary.items() if k != "decorator_calls"}, indent=1))
    for c in calls:
        print(c["shape"], "seen" if c["seen"] else "UNSEEN", c["config"], f"{c['ms']:.4f} ms",
              f"{100 * c['share_of_cublas']:.0f}% of cuBLAS", "correct" if c["correct"] else "WRONG")


if __name__ == "__main__":
    main()
