"""Helion's default autotuner against kerntune, kernel by kernel, on one GPU.

    PYTHONPATH=$PWD python benchmarks/helion/head_to_head.py dump OUT [KERNEL ...]
    PYTHONPATH=$PWD python benchmarks/helion/head_to_head.py run OUT KERNEL [--contenders helion,classical,scripted,embedded]
        [--effort full] [--fraction 0.25] [--overhead 10] [--helion-cap S] [--helion-wall S] [--deadline S]

``dump`` binds each kernel on the GPU and writes OUT/KERNEL.space.json: the kerntune Space of
its Helion ConfigSpec, the layout (fragments), the workload (Helion source and hints), the
device and Helion's seed configs -- what ``embedded_answers.py`` builds the embedded model's
exact round-1 prompt from, on a machine without the GPU.

``run`` tunes one kernel with each contender, one after the other, each in its own process
with fresh Helion and Triton caches (nothing compiled by one contender is reused by
another), then ``judge`` re-times every contender's winner in one process, in interleaved
rounds, and checks it against PyTorch.  Contenders:

  helion     Helion 1.4.0's default autotuner (LFBOTreeSearch) at ``--effort``
  classical  kerntune ``bayes`` (the GP) through kerntune.helion.autotuner
  scripted   kerntune ``llm-seeded``: round 1 is a fixed hand-written expert answer
             (expert/KERNEL.json, served by the replay provider), then the GP
  embedded   kerntune ``llm-seeded``: round 1 is the embedded model's (Gemma 3 270M) answer to
             the exact prompt, recorded on the CPU machine (transcripts/KERNEL.embedded.jsonl)
  strong     the same with a strong model's answer to the exact prompt (a model that saw the prompt
             only, through the ``files:`` provider; transcripts/KERNEL.strong.jsonl)

kerntune's search gets ``fraction`` x Helion's wall time of the same run minus ``overhead`` s
(Helion's baseline run, the precompile pool start and the final re-timing are outside the
search budget but inside the measured wall).  Every wall time is measured around
``BoundKernel.autotune(args, force=True)``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

CONTENDERS = ("helion", "classical", "scripted", "embedded", "strong")
START = time.perf_counter()  # --deadline counts from here, over all kernels of one ``run``
#: Options of the llm-seeded round 1 (the embedded model's prompt is built with the same ones).
EMBEDDED_INITIAL = 10
LLM_OPTIONS = {"warmup": 1, "temperature": 0.7}
GP_OPTIONS = {"batch_size": 16}


def llm_options(contender: str, n_expert: int = 12) -> dict[str, Any]:
    n = EMBEDDED_INITIAL if contender == "embedded" else n_expert
    return {**LLM_OPTIONS, "initial": n, "then_options": dict(GP_OPTIONS)}


def _versions() -> dict[str, Any]:
    import torch
    import triton

    from kerntune.helion import helion_version

    p = torch.cuda.get_device_properties(0)
    return {"device": p.name, "sms": p.multi_processor_count, "torch": torch.__version__, "triton": triton.__version__,
            "helion": helion_version(), "cuda": torch.version.cuda, "python": sys.version.split()[0]}


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


# -- dump -------------------------------------------------------------------------------------------
def dump(out: Path, names: list[str]) -> None:
    import kernels

    from kerntune.helion import dump_space

    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        args = kernels.KERNELS[name]["inputs"]("cuda")
        bound = kernels.make(name).bind(args)
        data = dump_space(bound, args)
        data["kernel"] = name
        data["versions"] = _versions()
        (out / f"{name}.space.json").write_text(json.dumps(_jsonable(data), indent=1))
        print(f"dump {name}: {len(data['space']['params'])} parameters, {len(data['seeds'])} Helion seed(s)", flush=True)


# -- the scripted expert ------------------------------------------------------------------------------
def scripted_transcript(kernel: str, out: Path) -> tuple[Path, int]:
    answer = json.loads((HERE / "expert" / f"{kernel}.json").read_text())
    path = out / f"{kernel}.scripted.jsonl"
    entry = {"provider": "scripted", "model": "helion-expert (hand-written, benchmarks/helion/expert)",
             "messages": [], "response": json.dumps(answer, separators=(",", ":"))}
    path.write_text(json.dumps(entry) + "\n")
    return path, len(answer["configs"])


# -- one contender ---------------------------------------------------------------------------------
def _read_log(base: Path) -> dict[str, Any]:
    """Helion's autotune CSV (written for every contender: kerntune measures through Helion)."""
    path = base.with_suffix(".csv")
    rows = []
    if path.exists():
        with path.open() as fh:
            rows = [r for r in csv.DictReader(fh) if r.get("status") != "started"]
    statuses: dict[str, int] = {}
    curve = []
    best = math.inf
    for r in rows:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
        if r.get("perf_ms"):
            perf = float(r["perf_ms"])
            if perf < best:
                best = perf
                curve.append((float(r["timestamp_s"] or 0.0), perf))
    return {"configs_tested": len(rows), "statuses": statuses, "log_best_ms": best if curve else None,
            "log_curve": curve}


def worker(out: Path, kernel: str, contender: str, seconds: float | None, effort: str, cap: float | None,
           transcript: str | None, n_expert: int) -> None:
    import helion  # noqa: F401
    import kernels
    import torch

    import kerntune.helion

    spec = kernels.KERNELS[kernel]
    torch.manual_seed(0)
    args = spec["inputs"]("cuda")
    base = out / f"{kernel}-{contender}"  # Helion appends .csv/.log (with_suffix: no dot in the stem)
    settings: dict[str, Any] = {"autotune_log": str(base), "autotune_progress_bar": False}
    searches: list[Any] = []
    record: dict[str, Any] = {"kernel": kernel, "contender": contender, "shape": spec["shape"], "dtype": spec["dtype"]}
    if contender == "helion":
        settings["autotune_effort"] = effort
        if cap:
            settings["autotune_budget_seconds"] = int(cap)
        record["tuner"] = f"Helion default autotuner (LFBOTreeSearch), autotune_effort={effort!r}" + (
            f", autotune_budget_seconds={int(cap)}" if cap else "")
    else:
        strategy = "bayes" if contender == "classical" else "llm-seeded"
        options = dict(GP_OPTIONS) if contender == "classical" else llm_options(contender, n_expert)
        llm = f"replay:{transcript}" if transcript else None
        settings["autotuner_fn"] = kerntune.helion.autotuner(strategy=strategy, llm=llm, seconds=seconds,
                                                             options=options, on_result=searches.append)
        record["tuner"] = f"kerntune {strategy} via kerntune.helion.autotuner, search budget {seconds:.0f} s"
        record["options"] = options
        record["llm"] = llm
    k = kernels.make(kernel, **settings)
    bound = k.bind(args)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    config = bound.autotune(args, force=True)
    wall = time.perf_counter() - t0
    record.update({"wall_s": wall, "config": _jsonable(dict(config.config)), **_read_log(base),
                   "versions": _versions()})
    if contender == "helion" and cap:
        log = base.with_suffix(".log").read_text(errors="replace") if base.with_suffix(".log").exists() else ""
        record["capped"] = "budget" in log and "exceeded" in log
        record["tuner"] += " (the cap was reached: a reduced run)" if record["capped"] else " (not reached)"
    if searches:
        s = searches[0]
        res = s.kerntune_result
        best_members = s.population
        record["tuner_best_ms"] = min(m.perf for m in best_members)
        record["kerntune"] = {
            "evaluations": len(res.history), "stop_reason": res.stop_reason, "notes": res.notes,
            "search_clock_s": res.clocks[-1] if res.clocks else 0.0,
            "statuses": _count(t.status.value for t in res.history),
            "best_so_far": [(c, t.time_ms) for c, t in _improvements(res)],
            "parameters": len(s.layout.space.params), "layout_notes": s.layout.notes,
        }
        if res.llm_exchanges:
            ex = res.llm_exchanges[0]
            record["kerntune"]["llm_round1"] = {
                "accepted": len(ex["accepted"]), "rejected": [r["reason"][:200] for r in ex["rejected"]],
                "model": ex["model"], "prompt_identical": _same_prompt(transcript, ex["prompt"])}
    else:
        record["tuner_best_ms"] = record.get("log_best_ms")
    (out / f"{kernel}.{contender}.json").write_text(json.dumps(_jsonable(record), indent=1))
    print(f"{kernel} {contender}: wall {wall:.1f} s, {record['configs_tested']} configs, tuner best "
          f"{record['tuner_best_ms']}", flush=True)


def _count(items: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in items:
        out[i] = out.get(i, 0) + 1
    return out


def _improvements(res: Any) -> list[tuple[float, Any]]:
    best = math.inf
    out = []
    for clock, t in zip(res.clocks, res.history):
        if t.ok and t.time_ms < best:
            best = t.time_ms
            out.append((clock, t))
    return out


def _same_prompt(transcript: str | None, prompt: str) -> bool | None:
    """Whether the replayed answer was given to this very prompt (embedded model transcripts)."""
    if not transcript:
        return None
    entry = json.loads(Path(transcript).read_text().splitlines()[0])
    if not entry.get("messages"):
        return None  # the scripted expert answers no prompt
    recorded = "\n\n".join(f"## {m['role']}\n{m['content']}" for m in entry["messages"])
    return recorded == prompt


# -- judge -----------------------------------------------------------------------------------------
def judge(out: Path, kernel: str, rounds: int = 7) -> dict[str, Any]:
    """Re-time every contender's winner in this one process, as Helion times a config: the
    function of ``BoundKernel.bench_compile_config`` (the compiled kernel without the
    ``helion.kernel`` call path), ``do_bench`` medians, in interleaved rounds."""
    import functools

    import helion
    import kernels
    import torch
    import triton.testing

    spec = kernels.KERNELS[kernel]
    torch.manual_seed(1)
    args = spec["inputs"]("cuda")
    ref = spec["reference"](*args).float()
    bound = kernels.make(kernel).bind(args)
    runs: dict[str, Any] = {}
    for c in CONTENDERS:
        path = out / f"{kernel}.{c}.json"
        if path.exists():
            rec = json.loads(path.read_text())
            fn = bound.bench_compile_config(helion.Config(**rec["config"]), allow_print=False)
            got = fn(*args).float()
            err = float((got - ref).norm() / ref.norm())
            runs[c] = {"fn": functools.partial(fn, *args), "rel_err": err, "times": []}
    for _ in range(rounds):
        for c, r in runs.items():
            r["times"].append(triton.testing.do_bench(r["fn"], warmup=25, rep=100, return_mode="median"))
    result = {}
    for c, r in runs.items():
        ms = sorted(r["times"])[len(r["times"]) // 2]
        row = {"kernel_ms": ms, "rounds_ms": r["times"], "rel_err": r["rel_err"]}
        if spec["flops"]:
            row["TFLOPs"] = spec["flops"] / (ms * 1e-3) / 1e12
        row["GBps"] = spec["bytes"] / (ms * 1e-3) / 1e9
        result[c] = row
    (out / f"{kernel}.judge.json").write_text(json.dumps({"kernel": kernel, "method": (
        "each winner compiled once in one process through BoundKernel.bench_compile_config (what Helion's "
        f"autotuner times); {rounds} interleaved rounds of triton.testing.do_bench(warmup=25, rep=100, median), "
        "the median round is reported; rel_err = ||out - torch|| / ||torch|| on fresh inputs"),
        "results": result, "versions": _versions()}, indent=1))
    for c, row in result.items():
        print(f"judge {kernel} {c}: {row['kernel_ms']:.4f} ms, rel_err {row['rel_err']:.2e}", flush=True)
    return result


# -- run -------------------------------------------------------------------------------------------
def _spawn(argv: list[str], timeout: float) -> int:
    env = dict(os.environ, HELION_SKIP_CACHE="1", HELION_AUTOTUNE_RANDOM_SEED="0", PYTHONUNBUFFERED="1",
               HELION_CACHE_DIR=tempfile.mkdtemp(prefix="helion-cache-"),
               TRITON_CACHE_DIR=tempfile.mkdtemp(prefix="triton-cache-"),
               TORCHINDUCTOR_CACHE_DIR=tempfile.mkdtemp(prefix="inductor-cache-"))
    try:
        return subprocess.run([sys.executable, __file__, *argv], env=env, timeout=timeout).returncode
    except subprocess.TimeoutExpired:
        print(f"timeout after {timeout:.0f} s: {' '.join(argv)}", flush=True)
        return 124


def run(out: Path, kernel: str, contenders: list[str], effort: str, fraction: float, overhead: float,
        cap: float | None, helion_wall: float | None, deadline: float | None, fit: bool = True,
        judge_after: bool = True) -> None:
    out.mkdir(parents=True, exist_ok=True)
    start = START
    summary: dict[str, Any] = {"kernel": kernel, "fraction": fraction, "overhead_s": overhead, "effort": effort,
                               "skipped": {}}
    for c in contenders:
        left = deadline - (time.perf_counter() - start) if deadline else None
        argv = ["worker", str(out), kernel, c]
        if c == "helion":
            this_cap = cap
            if left is not None and fit:
                # Leave time for the kerntune contenders of this kernel (fraction x Helion's wall each,
                # plus about 30 s of process start and judging) inside this device call.
                k = sum(1 for x in contenders if x != "helion")
                room = (left - 40 - 30 * k) / (1 + k * fraction)
                if this_cap is None or this_cap > room:
                    this_cap = max(room, 30)
            argv += ["--effort", effort] + (["--cap", str(int(this_cap))] if this_cap else [])
            _spawn(argv, timeout=(this_cap or 900) + 180)
            rec = out / f"{kernel}.helion.json"
            if rec.exists():
                helion_wall = json.loads(rec.read_text())["wall_s"]
            continue
        if helion_wall is None and (out / f"{kernel}.helion.json").exists():
            helion_wall = json.loads((out / f"{kernel}.helion.json").read_text())["wall_s"]  # an earlier run's
            summary["helion_from_earlier_run"] = True
        if helion_wall is None:
            summary["skipped"][c] = "no Helion wall time to take a fraction of"
            continue
        seconds = max(fraction * helion_wall - overhead, 10.0)
        if left is not None and left < seconds + overhead + 60:
            summary["skipped"][c] = f"not enough time left in this device call ({left:.0f} s)"
            print(f"skip {kernel} {c}: {summary['skipped'][c]}", flush=True)
            continue
        argv += ["--seconds", f"{seconds:.1f}"]
        if c == "scripted":
            path, n = scripted_transcript(kernel, out)
            argv += ["--transcript", str(path), "--n-expert", str(n)]
        elif c in ("embedded", "strong"):
            path = HERE / "transcripts" / f"{kernel}.{c}.jsonl"
            if not path.exists():
                summary["skipped"][c] = f"no transcript {path.name}"
                continue
            argv += ["--transcript", str(path)]
        _spawn(argv, timeout=seconds + overhead + 240)
    summary["helion_wall_s"] = helion_wall
    if judge_after and any((out / f"{kernel}.{c}.json").exists() for c in CONTENDERS if c != "helion"):
        _spawn(["judge", str(out), kernel], timeout=300)
    (out / f"{kernel}.summary.json").write_text(json.dumps(summary, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["dump", "run", "worker", "judge"])
    ap.add_argument("out")
    ap.add_argument("kernel", nargs="*")
    ap.add_argument("--contenders", default=",".join(CONTENDERS))
    ap.add_argument("--effort", default="full")
    ap.add_argument("--fraction", type=float, default=0.25)
    ap.add_argument("--overhead", type=float, default=10.0)
    ap.add_argument("--cap", type=float)
    ap.add_argument("--helion-cap", type=float)
    ap.add_argument("--helion-wall", type=float)
    ap.add_argument("--deadline", type=float)
    ap.add_argument("--seconds", type=float)
    ap.add_argument("--transcript")
    ap.add_argument("--n-expert", type=int, default=12)
    ap.add_argument("--no-fit", action="store_true",
                    help="do not cap Helion's run to leave room for the kerntune contenders in this call "
                         "(they run in a later call with the recorded Helion wall time)")
    ap.add_argument("--no-judge", action="store_true")
    a = ap.parse_args()
    out = Path(a.out)
    if a.mode == "dump":
        dump(out, a.kernel or ["matmul", "softmax", "layer_norm", "attention"])
    elif a.mode == "worker":
        worker(out, a.kernel[0], a.kernel[1], a.seconds, a.effort, a.cap, a.transcript, a.n_expert)
    elif a.mode == "judge":
        judge(out, a.kernel[0])
    else:
        for kernel in a.kernel:
            run(out, kernel, a.contenders.split(","), a.effort, a.fraction, a.overhead, a.helion_cap, a.helion_wall,
                a.deadline, fit=not a.no_fit, judge_after=not a.no_judge)


if __name__ == "__main__":
    main()
