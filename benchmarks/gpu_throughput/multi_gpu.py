"""Exhaustive throughput on 1, 2, 4, 8 GPUs of one host, locally and through Ray actors.

    PYTHONPATH=$PWD python benchmarks/gpu_throughput/multi_gpu.py examples/triton/matmul.py --shape 4096x4096x4096 \\
        --gpus 1,2,4,8 --cold --ray --out OUT/multi_gpu.json

What is measured, and why: whether the *benchmark stage* scales with the GPUs.  A cold run is
bound by compilation on the CPUs (about 0.8 s of CPU per matmul config), which would hide that, so:
  1. an untimed-for-the-verdict pass compiles every config once into a fresh Triton disk
     cache (``TRITON_CACHE_DIR``), on all GPUs; its end-to-end rate is reported as ``prewarm``;
  2. for each GPU count, a fresh ``TritonEvaluator(gpus=N)`` (new worker processes, same
     number of compile workers for every N, so the GPU count is the only variable) has its
     workers started by an untimed warm-up batch, then ``run_search(..., "exhaustive")``
     with a store measures the whole space; configs/s = configs / wall seconds of that search
     (the one-off device query for the store is made before the timed window, too).
     Compiles are then disk-cache loads, so this is the benchmark stage's throughput.
  3. ``--cold``: for each GPU count again, end to end in a fresh Triton cache with the compile
     workers that count gets by default (cores less one per GPU, at most 16 per GPU), worker
     start-up included: where it stops scaling is where compilation saturates.
  4. ``--ray``: step 2 through ``RayEvaluator`` on a private one-node cluster (``local``), one
     actor per GPU, each compiling on its share of the node's CPUs (issue 20: within 10% of
     the local figure).  The actors inherit this process's ``TRITON_CACHE_DIR`` (warm).
  5. every run ends as ``kerntune tune`` does: its 5 leaders re-timed on one GPU name the
     winner (``confirmed_config``; the time this takes is ``confirm_s``, outside the rate);
  6. every run's winner re-timed on one GPU in interleaved rounds (``judge``): screening times
     of runs with different GPU counts were taken in different clock states, so only this
     says whether the winners agree within noise (issue 20, acceptance 3).  ``--judge OLD.json``
     does only this step for an earlier run's JSON.
The JSON is rewritten after every run (a call cut short keeps what it measured) and holds every
rate, the speedups over one GPU, how the configs were shared out between the GPUs (from each
trial's ``gpu``), status counts, the best and confirmed config per run (the winners must agree
within noise), device names and versions.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from kerntune.evaluate.protocol import speedup
from kerntune.evaluate.retime import Confirmed, confirm
from kerntune.evaluate.triton_backend.evaluator import TritonEvaluator
from kerntune.evaluate.triton_backend.sizing import default_compile_workers, visible_devices
from kerntune.evaluate.triton_backend.kernel_file import parse_shape
from kerntune.run.search import RunOptions, run_search
from kerntune.store import Store
from kerntune.strategies import Budget

FACTS = """
import json, torch, triton
print(json.dumps({"torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda,
                  "devices": [torch.cuda.get_device_properties(i).name for i in range(torch.cuda.device_count())]}))
"""


def facts() -> dict:
    """Versions and devices, from a child process so that this one holds no CUDA context."""
    out: dict = {"host": platform.node(), "python": platform.python_version(), "cpu_count": os.cpu_count(),
                 "visible_devices": visible_devices()}
    try:
        proc = subprocess.run([sys.executable, "-c", FACTS], capture_output=True, text=True, timeout=300)
        out.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    except (subprocess.SubprocessError, ValueError, IndexError) as exc:
        out["facts_error"] = str(exc)
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=index,name,driver_version,memory.total,clocks.max.sm",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=60).stdout
        out["nvidia_smi"] = [line.strip() for line in smi.splitlines() if line.strip()]
    except (OSError, subprocess.SubprocessError):
        pass
    return out


def make_evaluator(kernel: str, shape: tuple[int, ...], gpus: int, compile_workers: int | None, ray: bool) -> Any:
    """The local multi-GPU evaluator, or Ray actors (one per GPU) on a private one-node cluster."""
    if ray:
        from kerntune.evaluate.ray_backend import RayEvaluator, TritonFactory

        return RayEvaluator(TritonFactory.of(kernel, shape), "local", num_actors=gpus)
    return TritonEvaluator(kernel, shape, compile_workers=compile_workers, gpus=gpus)


def timed_search(kernel: str, shape: tuple[int, ...], gpus: int, compile_workers: int | None, limit: int | None,
                 db: Path, warm_up: bool = True, ray: bool = False) -> dict:
    t_start = time.perf_counter()
    ev = make_evaluator(kernel, shape, gpus, compile_workers, ray)
    try:
        n = min(limit or ev.space.count(), ev.space.count())
        warm_s = 0.0
        if warm_up:
            # Outside the timed window: start every worker (and its CUDA context), and the one-off
            # device query that run_search makes for the store (a child process importing torch, ~4 s).
            t0 = time.perf_counter()
            first = [c for _, c in zip(range(getattr(ev, "parallelism", gpus)), ev.space.enumerate())]
            ev.evaluate(first)
            ev.device()
            warm_s = time.perf_counter() - t0
        with Store(db) as store:
            t0 = time.perf_counter()
            res = run_search(ev, "exhaustive", Budget(max_evals=n), seed=0, run=RunOptions(store=store))
            wall = time.perf_counter() - t0
        ok = [t for t in res.history if t.ok]
        best = min(ok, key=lambda t: t.time_ms) if ok else None
        # What `kerntune tune` does last: its 5 leaders (drawn from every GPU's ranking) re-timed
        # on one GPU; outside the throughput window, a fixed cost whatever the GPU count.
        t1 = time.perf_counter()
        try:
            found = confirm(ev, res.history, n_leaders=5)
        except Exception as exc:  # noqa: BLE001 - the rate stands without it; say so in the JSON
            found = Confirmed([], None, notes=[f"re-timing failed: {type(exc).__name__}: {exc}"])
        confirm_s = time.perf_counter() - t1
        return {
            "gpus": gpus, "via": "ray" if ray else "local", "devices": getattr(ev, "devices", None),
            "compile_workers": len(ev.compilers) if hasattr(ev, "compilers") else None, "configs": len(res.history),
            "wall_s": wall, "configs_per_s": len(res.history) / wall, "worker_warm_up_s": warm_s,
            "end_to_end_s": time.perf_counter() - t_start,
            "per_gpu": dict(Counter(str(t.extra.get("gpu")) for t in res.history if "gpu" in t.extra)),
            "bench_s_sum": sum(t.bench_s for t in res.history), "compile_s_sum": sum(t.compile_s for t in res.history),
            "statuses": dict(Counter(t.status.value for t in res.history)),
            "best_ms": best.time_ms if best else None, "best_config": best.config if best else None,
            "best_gpu": best.extra.get("gpu") if best else None,
            "leaders_retimed": [{"config": t.config, "ms": t.time_ms, "ci_ms": t.extra.get("ci_ms")}
                                for t in found.retimed],
            "confirmed_config": found.winner.config if found.winner else None,
            "confirmed_ms": found.winner.time_ms if found.winner else None, "confirm_s": confirm_s,
            "confirm_notes": found.notes,
        }
    finally:
        ev.close()


def judge_winners(kernel: str, shape: tuple[int, ...], runs: list[dict], rounds: int | None = None) -> dict:
    """Every run's winner re-timed on one GPU in interleaved rounds (the protocol's windows), so
    that winners found with different GPU counts are compared by one timer in one GPU state:
    a 1-GPU run screens every config under a minute of sustained load, a 4-GPU run under a
    quarter of it, on GPUs that differ by a few percent, so their screening times differ by
    more than the leading configs do (issue 20, acceptance 3)."""
    labels: dict[str, dict] = {}
    for r in runs:
        cfg = r.get("confirmed_config") or r.get("best_config")
        if cfg:
            key = json.dumps(cfg, sort_keys=True)
            labels.setdefault(key, {"config": cfg, "runs": []})["runs"].append(
                f"{r.get('via', 'prewarm')} {r['gpus']}")
    if not labels:
        return {}
    ev = TritonEvaluator(kernel, shape, gpus=1)
    try:
        trials = ev.retime([v["config"] for v in labels.values()], rounds=rounds)
    finally:
        ev.close()
    out = {"what": "each distinct winner re-timed on GPU 0, interleaved rounds, order rotated; "
                   "ratio = this config's time over the fastest's, paired by round, with its 95% interval",
           "winners": []}
    ok = [(v, t) for v, t in zip(labels.values(), trials) if t.ok]
    if not ok:
        return {**out, "error": "no winner re-timed ok"}
    fastest = min(ok, key=lambda vt: vt[1].time_ms)[1]
    for v, t in zip(labels.values(), trials):
        row = {**v, "status": t.status.value, "ms": t.time_ms, "ci_ms": t.extra.get("ci_ms")}
        if t.ok:
            s = speedup(t.extra["rounds_ms"], fastest.extra["rounds_ms"])
            row["over_fastest"] = {"median": s.median, "ci": [s.lo, s.hi], "within_noise": s.lo <= 1.0}
        out["winners"].append(row)
    out["all_within_noise"] = all(w.get("over_fastest", {}).get("within_noise", False) for w in out["winners"])
    return out


def _judge_guarded(kernel: str, shape: tuple[int, ...], runs: list[dict]) -> dict:
    try:
        out = judge_winners(kernel, shape, runs)
    except Exception as exc:  # noqa: BLE001 - the throughput figures stand without it
        return {"error": f"{type(exc).__name__}: {exc}"}
    for w in out.get("winners", []):
        print(f"judge: {w.get('ms')} ms, over fastest {w.get('over_fastest')}, winner of {w['runs']}", flush=True)
    return out


def _guarded(fn: Any, gpus: int, via: str) -> dict:
    """One run; a failure (fewer GPUs than asked, no Ray) is recorded in the JSON, not fatal."""
    try:
        run = fn()
    except Exception as exc:  # noqa: BLE001 - say so in the JSON and go on
        run = {"gpus": gpus, "via": via, "error": f"{type(exc).__name__}: {exc}"}
    print(f"{via}, {gpus} GPU(s): " + (f"{run['configs']} configs in {run['wall_s']:.1f} s = "
                                       f"{run['configs_per_s']:.1f} configs/s" if "error" not in run else run["error"]),
          flush=True)
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kernel", help="a kernel file, e.g. examples/triton/matmul.py")
    ap.add_argument("--shape", required=True, help="problem shape, e.g. 4096x4096x4096")
    ap.add_argument("--out", required=True, type=Path, help="JSON file to write")
    ap.add_argument("--gpus", default="1,2", help="GPU counts to time, in this order (default 1,2)")
    ap.add_argument("--limit", type=int, default=None, help="measure only the first N configs of the space")
    ap.add_argument("--compile-workers", type=int, default=None,
                    help="the same for every GPU count (default: what the largest count gets by default)")
    ap.add_argument("--cold", action="store_true", help="also each GPU count end to end in a fresh Triton cache")
    ap.add_argument("--ray", action="store_true", help="also each GPU count through Ray actors on this node")
    ap.add_argument("--skip-local", action="store_true",
                    help="leave out step 2 (for a second call that adds --ray or --cold to an earlier one's figures)")
    ap.add_argument("--judge", type=Path, default=None,
                    help="only re-time the winners of this earlier JSON on one GPU (written to --out)")
    args = ap.parse_args()
    if args.judge is not None:
        earlier = json.loads(args.judge.read_text())
        runs = [{**earlier["prewarm"], "via": "prewarm"}] + earlier["runs"] if "prewarm" in earlier else earlier["runs"]
        out = {"job": "multi_gpu_judge", "command": " ".join(sys.argv), "judged": str(args.judge), **facts(),
               "judge": judge_winners(args.kernel, parse_shape(args.shape), runs)}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1, default=str) + "\n")
        print(json.dumps(out["judge"], indent=1, default=str))
        return

    counts = [int(x) for x in args.gpus.split(",") if x.strip()]
    shape = parse_shape(args.shape)
    workdir = Path(tempfile.mkdtemp(prefix="kerntune-multi-gpu-"))
    # Every worker this process starts inherits the fresh cache: the pre-warm fills it, the timed runs read it.
    os.environ["TRITON_CACHE_DIR"] = str(workdir / "triton-cache")
    compile_workers = args.compile_workers or default_compile_workers(max(counts))
    summary: dict = {
        "job": "multi_gpu", "kernel": args.kernel, "shape": list(shape), "command": " ".join(sys.argv),
        "measured": ("configs/s of run_search(strategy=exhaustive, store on) with a warm Triton disk cache "
                     "(pre-compiled by the prewarm pass), workers already started and the device queried: "
                     "compiles are cache loads, so this is benchmark-stage throughput; same compile_workers for every GPU count"),
        **facts(), "compile_workers": compile_workers, "runs": [],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        """After every run, so a call cut short by its time limit still leaves what it measured."""
        args.out.write_text(json.dumps(summary, indent=1, default=str) + "\n")

    t0 = time.perf_counter()
    prewarm = timed_search(args.kernel, shape, max(counts), compile_workers, args.limit, workdir / "prewarm.db",
                           warm_up=False)
    prewarm["what"] = "end to end, cold Triton cache, all GPUs, worker start-up included (compile-bound)"
    summary["prewarm"] = prewarm
    print(f"prewarm: {prewarm['configs']} configs in {prewarm['wall_s']:.1f} s "
          f"({prewarm['configs_per_s']:.1f}/s, cold)", flush=True)
    save()
    for g in ([] if args.skip_local else counts):
        summary["runs"].append(_guarded(lambda g=g: timed_search(args.kernel, shape, g, compile_workers, args.limit,
                                                               workdir / f"gpus{g}.db"), g, "local"))
        save()
    if args.ray:
        for g in counts:
            summary["runs"].append(_guarded(lambda g=g: timed_search(args.kernel, shape, g, None, args.limit,
                                                                   workdir / f"ray{g}.db", ray=True), g, "ray"))
            save()
    if args.cold:
        for g in counts:
            os.environ["TRITON_CACHE_DIR"] = str(workdir / f"triton-cache-cold-{g}")
            summary["runs"].append(_guarded(lambda g=g: {**timed_search(
                args.kernel, shape, g, None, args.limit, workdir / f"cold{g}.db", warm_up=False),
                "via": "local, cold"}, g, "local, cold"))
            save()
    for via in ("local", "ray", "local, cold"):
        rates = {r["gpus"]: r["configs_per_s"] for r in summary["runs"] if r.get("via") == via and "configs_per_s" in r}
        if 1 in rates:
            summary.setdefault("speedup_over_1", {})[via] = {g: rates[g] / rates[1] for g in sorted(rates)}
            print(f"{via}: " + ", ".join(f"{g} GPUs {rates[g] / rates[1]:.2f}x" for g in sorted(rates)), flush=True)
    local = {r["gpus"]: r["configs_per_s"] for r in summary["runs"] if r.get("via") == "local" and "configs_per_s" in r}
    ray_rates = {r["gpus"]: r["configs_per_s"] for r in summary["runs"] if r.get("via") == "ray" and "configs_per_s" in r}
    summary["ray_over_local"] = {g: ray_rates[g] / local[g] for g in sorted(set(local) & set(ray_rates))}
    # Re-time every run's winner in the prewarmed cache (the cold runs changed TRITON_CACHE_DIR).
    os.environ["TRITON_CACHE_DIR"] = str(workdir / "triton-cache")
    summary["judge"] = _judge_guarded(args.kernel, shape, [{**prewarm, "via": "prewarm"}] + summary["runs"])
    summary["total_wall_s"] = time.perf_counter() - t0
    save()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
