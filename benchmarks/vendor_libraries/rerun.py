"""The README's GPU claims, re-measured under kerntune's timing protocol (kerntune.evaluate.protocol).

    PYTHONPATH=$PWD python benchmarks/vendor_libraries/rerun.py OUT JOB [JOB ...]

Jobs (each search through ``kerntune.tune``, the path the CLI takes, in a fresh Triton cache and
store; its clock includes the workers' start-up, as a user's run does):
  matmul-4096           examples/triton/matmul.py at 4096^3: the exhaustive search of its 1,056
                        configs, the GP (``bayes``) for 60 s and the default strategy for 60 s
  matmul-SHAPE          the default strategy for 60 s at another shape (256x8192x8192, 8192x8192x512)
  attention-D           examples/triton/attention.py at 4x32x4096xD, exhaustive (48 configs)
After a job's searches, one fresh judge process (``--judge``) times every winner, the kernel
file's default config and the file's ``reference`` (cuBLAS through ``torch.matmul``, PyTorch SDPA)
interleaved by one timer (kerntune.evaluate.judge): each figure is the median of 10 rounds with a
95% interval, each share the median of per-round ratios with its interval (``X_share_of_vendor``:
the vendor's time over X's; ``X_share_of_exhaustive``: the exhaustive winner's time over X's, so
1.0 is as fast as the exhaustive best).  One JSON per job.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MATMUL, ATTENTION = "examples/triton/matmul.py", "examples/triton/attention.py"


def _jobs(name: str) -> tuple[str, str, dict[str, dict[str, Any]]]:
    """(kernel file, shape, searches by label: kerntune.tune keyword arguments)."""
    default = {"seconds": 60.0, "budget": None}
    if name == "matmul-4096":
        return MATMUL, "4096x4096x4096", {"exhaustive": {"strategy": "exhaustive", "budget": 100000},
                                          "bayes60": {"strategy": "bayes", **default}, "default60": default}
    if name.startswith("matmul-"):
        return MATMUL, name.split("-", 1)[1], {"default60": default}
    if name.startswith("attention-"):
        return ATTENTION, f"4x32x4096x{name.split('-', 1)[1]}", {"exhaustive": {"strategy": "exhaustive",
                                                                                "budget": 100000}}
    raise SystemExit(f"unknown job {name}")


def _versions() -> dict[str, Any]:
    import torch
    import triton

    p = torch.cuda.get_device_properties(0)
    return {"device": p.name, "sms": p.multi_processor_count, "torch": torch.__version__,
            "triton": triton.__version__, "cuda": torch.version.cuda}


def _search(kernel: str, shape: str, kwargs: dict[str, Any], out: Path, label: str) -> dict[str, Any]:
    import kerntune

    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"triton-{label}-")
    t0 = time.perf_counter()
    res = kerntune.tune(kernel=ROOT / kernel, shape=shape, store=out, report=False, retime=5, **kwargs)
    return {"kwargs": kwargs, "wall_s": time.perf_counter() - t0, "evaluations": res.trials,
            "stop_reason": res.stop_reason, "winner": res.winner, "retimed_ms": res.time_ms,
            "speedup_over_default": res.speedup, "notes": res.notes, "run_id": res.run_id}


def judge(kernel: str, shape: str, configs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """In this (fresh) process: every config, the default and the reference, interleaved."""
    import torch

    from kerntune.evaluate.judge import summarize, time_interleaved
    from kerntune.evaluate.triton_backend.kernel_file import load_kernel_module, module_space, parse_shape
    from kerntune.evaluate.triton_backend.worker import timer

    mod = load_kernel_module(ROOT / kernel)
    dims = parse_shape(shape)
    inputs = mod.make_inputs(dims)
    ref_out = mod.reference(inputs).float()
    cands = {"default": dict(module_space(mod, dims).default), **configs}
    errors = {}
    for name, cfg in cands.items():
        got = mod.launch(cfg, inputs).float()
        errors[name] = float((got - ref_out).abs().max() / ref_out.abs().max().clamp_min(1e-6))
    fns = {n: (lambda c=c: mod.launch(c, inputs)) for n, c in cands.items()}
    fns["vendor"] = lambda: mod.reference(inputs)
    rounds = time_interleaved(fns, timer(torch))
    ratios = {f"{n}_share_of_vendor": ("vendor", n) for n in cands}  # vendor time / config time
    ratios.update({f"{n}_share_of_exhaustive": ("exhaustive", n) for n in configs if n != "exhaustive"
                   and "exhaustive" in configs})  # exhaustive winner's time / this winner's time
    out = summarize(rounds, ratios)
    out["relative_max_error"] = errors
    out["configs"] = cands
    return out


def run_job(out_dir: Path, name: str) -> dict[str, Any]:
    kernel, shape, searches = _jobs(name)
    rec: dict[str, Any] = {"job": name, "kernel": kernel, "shape": shape, **_versions(),
                           "command": f"python benchmarks/vendor_libraries/rerun.py OUT {name}", "searches": {}}
    for label, kwargs in searches.items():
        r = _search(kernel, shape, kwargs, out_dir / f"{name}.db", f"{name}-{label}")
        rec["searches"][label] = r
        (out_dir / f"{name}.json").write_text(json.dumps(rec, indent=1))  # kept if the job is cut short
        print(f"  {name} {label}: {r['evaluations']} evaluations in {r['wall_s']:.0f} s, "
              f"re-timed {r['retimed_ms']} ms, {r['winner']}", flush=True)
    winners = {label: r["winner"] for label, r in rec["searches"].items() if r["winner"]}
    proc = subprocess.run([sys.executable, __file__, "--judge", kernel, shape, json.dumps(winners)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    rec["judge"] = json.loads(lines[-1]) if proc.returncode == 0 and lines else {"error": proc.stderr[-2000:]}
    return rec


def main() -> None:
    if sys.argv[1] == "--judge":
        print(json.dumps(judge(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))))
        return
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name in sys.argv[2:]:
        t0 = time.perf_counter()
        rec = run_job(out, name)
        (out / f"{name}.json").write_text(json.dumps(rec, indent=1))
        j = rec["judge"]
        shares = {k: v["median"] for k, v in j.items() if isinstance(v, dict) and "median" in v}
        print(f"{name}: {time.perf_counter() - t0:.0f} s, {shares}", flush=True)


if __name__ == "__main__":
    main()
