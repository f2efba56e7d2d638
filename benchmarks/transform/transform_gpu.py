"""Code-level strategies on a CUDA GPU (issue 7, acceptance 2).

Runs ``kerntune transform``'s three strategies (one-prompt, explicit with the default step
library, autonomous) on three naive CUDA kernels — matmul, transpose and a sum reduction — with
two models: a scripted expert (canned expert rewrites chosen by each prompt's marker, so the
strategies' machinery is measured with a model that knows the answer) and the embedded model
(``local:``, Gemma 3 270M) or any ``--models`` spec.  ``embedded`` is the embedded model replayed from
its recorded answers (``benchmarks/transform/transform_embedded.py``: a run stops at the first request with no
recorded answer, writes it to ``--misses`` and is reported ``awaiting_model``; the answers are made on
a CPU by ``transform_embedded.py answer`` and the GPU call repeated until no run awaits the model).
Writes one JSON with, per run, the speedup over the naive kernel, the best configuration, every
step's outcome, model calls and wall times.

    PYTHONPATH=$PWD python benchmarks/transform/transform_gpu.py --out benchmarks/results/transform_gpu_h100.json
    PYTHONPATH=$PWD python benchmarks/transform/transform_gpu.py --check      # CPU: import and script check only
    PYTHONPATH=$PWD python benchmarks/transform/transform_gpu.py --models embedded --out embedded.json  # misses: embedded.misses.jsonl
    PYTHONPATH=$PWD python benchmarks/transform/transform_gpu.py --models embedded --speculate  # CPU: answer ahead of the GPU call

Needs kernel_tuner and CuPy (or cuda-python / PyCUDA) on the GPU machine; ``local:`` needs the
``[local]`` extra.  Everything runs through the public API (``KernelTransformer``), each config in
kerntune's worker process, each rewrite checked against the naive kernel's outputs.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.transform.transform_embedded import (TRANSCRIPT, AwaitingModelAnswer, LiveRecorder, NeedsGPU,  # noqa: E402
                                           RecordedModel, speculation)
from kerntune.llm import LLMClient  # noqa: E402
from kerntune.transform import (AutonomousTuningStrategy, ExplicitTuningStrategy, KernelTransformer,  # noqa: E402
                                OnePromptTuningStrategy)
from kerntune.transform.kernel import kernel_names  # noqa: E402
from kerntune.transform.steps import default_steps  # noqa: E402
from kerntune.transform.scripted import Script, ScriptedTransformProvider  # noqa: E402

#: replayed models (``--models``): name -> its recorded answers.  ``embedded`` is the embedded model
#: (local:); ``strong`` a strong model's answers written from the prompt alone through ``files:``.
TRANSCRIPTS = {"embedded": TRANSCRIPT, "strong": TRANSCRIPT.with_name("strong.jsonl")}

MATMUL_NAIVE = r"""
extern "C" __global__ void matmul(float* C, const float* A, const float* B, const int n) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < n && y < n) {
        float sum = 0.0f;
        for (int k = 0; k < n; k++) sum += A[y * n + k] * B[k * n + x];
        C[y * n + x] = sum;
    }
}
"""
MATMUL_EXPERT = r"""
extern "C" __global__ void matmul(float* C, const float* A, const float* B, const int n) {
    __shared__ float As[block_size_y * WPT][TILE_K + PAD];
    __shared__ float Bs[TILE_K][block_size_x];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int x = blockIdx.x * block_size_x + tx;
    const int row0 = blockIdx.y * block_size_y * WPT;
    float acc[WPT];
    #pragma unroll
    for (int j = 0; j < WPT; j++) acc[j] = 0.0f;
    for (int k0 = 0; k0 < n; k0 += TILE_K) {
        for (int r = ty; r < block_size_y * WPT; r += block_size_y)
            for (int i = tx; i < TILE_K; i += block_size_x)
                As[r][i] = (row0 + r < n && k0 + i < n) ? A[(row0 + r) * n + k0 + i] : 0.0f;
        for (int i = ty; i < TILE_K; i += block_size_y)
            Bs[i][tx] = (x < n && k0 + i < n) ? B[(k0 + i) * n + x] : 0.0f;
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < TILE_K; k++) {
            const float b = Bs[k][tx];
            #pragma unroll
            for (int j = 0; j < WPT; j++) acc[j] += As[ty + j * block_size_y][k] * b;
        }
        __syncthreads();
    }
    #pragma unroll
    for (int j = 0; j < WPT; j++) {
        const int y = row0 + ty + j * block_size_y;
        if (x < n && y < n) C[y * n + x] = acc[j];
    }
}
"""
TRANSPOSE_NAIVE = r"""
extern "C" __global__ void transpose(float* out, const float* in, const int n) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < n && y < n) out[x * n + y] = in[y * n + x];
}
"""
TRANSPOSE_EXPERT = r"""
extern "C" __global__ void transpose(float* out, const float* in, const int n) {
    __shared__ float tile[block_size_x][block_size_x + PAD];
    const int bx = blockIdx.x * block_size_x, by = blockIdx.y * block_size_x;
    const int tx = threadIdx.x, ty = threadIdx.y;
    for (int j = ty; j < block_size_x; j += block_size_y) {
        const int x = bx + tx, y = by + j;
        if (x < n && y < n) tile[j][tx] = in[y * n + x];
    }
    __syncthreads();
    for (int j = ty; j < block_size_x; j += block_size_y) {
        const int x = by + tx, y = bx + j;
        if (x < n && y < n) out[y * n + x] = tile[tx][j];
    }
}
"""
REDUCE_NAIVE = r"""
extern "C" __global__ void reduce(float* out, const float* in, const int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, in[i]);
}
"""
REDUCE_EXPERT = r"""
extern "C" __global__ void reduce(float* out, const float* in, const int n) {
    __shared__ float warp_sums[block_size_x / 32];
    const int base = blockIdx.x * block_size_x * WPT + threadIdx.x;
    float s = 0.0f;
    #pragma unroll
    for (int j = 0; j < WPT; j++) {
        const int k = base + j * block_size_x;
        if (k < n) s += in[k];
    }
    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) warp_sums[w] = s;
    __syncthreads();
    if (w == 0) {
        s = lane < block_size_x / 32 ? warp_sums[lane] : 0.0f;
        for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
        if (lane == 0) atomicAdd(out, s);
    }
}
"""


def matmul_args(n: int) -> list[Any]:
    rng = np.random.default_rng(0)
    return [np.zeros((n, n), np.float32), rng.standard_normal((n, n)).astype(np.float32),
            rng.standard_normal((n, n)).astype(np.float32), np.int32(n)]


def transpose_args(n: int) -> list[Any]:
    rng = np.random.default_rng(0)
    return [np.zeros((n, n), np.float32), rng.standard_normal((n, n)).astype(np.float32), np.int32(n)]


def reduce_args(n: int) -> list[Any]:
    # zeros and ones: every partial sum is an integer below n <= 2**24, so exact in float32 whatever the order
    # of the adds (the naive kernel's atomicAdd order changes from run to run).  Values up to 3 made sums
    # above 2**24, whose rounding depends on that order: a correct rewrite was rejected at 1.3e-4 relative.
    assert n <= 1 << 24
    rng = np.random.default_rng(0)
    return [np.zeros(1, np.float32), rng.integers(0, 2, n).astype(np.float32), np.int32(n)]


#: name -> naive source, expert reply, its restrictions, the step text of the plan, problem size, args,
#: the naive kernel's launch, and the default-library step the expert thinks worth doing
KERNELS: dict[str, dict[str, Any]] = {
    "matmul": dict(naive=MATMUL_NAIVE, size=(4096, 4096), args=lambda: matmul_args(4096),
                   original={"block_size_x": [16], "block_size_y": [16]},
                   expert={"code": MATMUL_EXPERT, "grid_div_y": ["block_size_y", "WPT"],
                           "tune_params": {"block_size_x": [32, 64], "block_size_y": [2, 4, 8, 16], "WPT": [4, 8],
                                           "TILE_K": [16, 32], "PAD": [0, 1]}},
                   restrictions=["block_size_y * WPT <= 64", "block_size_x * block_size_y <= 1024"],
                   plan="Stage tiles of A and B in shared memory and let each thread compute WPT rows of C "
                        "(register blocking), with tunable tile sizes",
                   key_step="shared_memory_tiling"),
    "transpose": dict(naive=TRANSPOSE_NAIVE, size=(8192, 8192), args=lambda: transpose_args(8192),
                      original={"block_size_x": [16], "block_size_y": [16]},
                      expert={"code": TRANSPOSE_EXPERT, "grid_div_y": ["block_size_x"],
                              "tune_params": {"block_size_x": [16, 32, 64], "block_size_y": [2, 4, 8, 16],
                                              "PAD": [0, 1]}},
                      restrictions=["block_size_y <= block_size_x", "block_size_x * block_size_y <= 1024"],
                      plan="Transpose through a padded shared-memory tile so that reads and writes are both "
                           "coalesced, with tunable tile and block sizes",
                      key_step="shared_memory_tiling"),
    "reduction": dict(naive=REDUCE_NAIVE, size=(1 << 24,), args=lambda: reduce_args(1 << 24),
                      original={"block_size_x": [256]},
                      expert={"code": REDUCE_EXPERT, "grid_div_x": ["block_size_x", "WPT"],
                              "tune_params": {"block_size_x": [128, 256, 512, 1024], "WPT": [4, 8, 16, 32]}},
                      restrictions=["block_size_x % 32 == 0"],
                      plan="Let each thread sum WPT elements, reduce within warps by shuffles and within the "
                           "block in shared memory, and issue one atomicAdd per block",
                      key_step="work_per_thread"),
}


def expert_rules(k: dict[str, Any]) -> list[dict[str, Any]]:
    """A scripted expert: it knows the one rewrite that pays and says so at every prompt."""
    expert = dict(k["expert"], explanation="the expert rewrite")
    return [
        {"kind": "plan", "reply": {"steps": ["Profile the kernel with Nsight Compute to find the bottleneck",
                                             k["plan"]], "reasoning": "one rewrite that pays"}},
        {"kind": "validate", "reply": {"valid": True, "reason": "a code change with tunable sizes"}},
        {"kind": "breakdown", "reply": {"breakdown": False, "steps": [], "reason": "one change"}},
        {"kind": "execute", "reply": expert},
        {"kind": "one-prompt", "reply": dict(expert, restrictions=k["restrictions"])},
        {"kind": "restrictions", "reply": {"restrictions": k["restrictions"], "reason": "launch limits"}},
        {"kind": "evaluate-step", "contains": f"({k['key_step']})", "reply": {"apply": True, "reason": "pays"}},
        {"kind": "evaluate-step", "reply": {"apply": False, "reason": "the expert rewrite covers it"}},
        {"kind": "replan", "reply": {"steps": [], "reasoning": "done"}},
    ]


def strategy(name: str, model: str, args: argparse.Namespace | None = None) -> Any:
    """The strategy as run for ``model``.  A real model's runs are bounded so that a run stays minutes
    (and, for the embedded model replayed in rounds, so that its answers fit a session on 2 CPU cores):
    ``--explicit-steps`` picks steps of the default library, ``--autonomous-steps``, ``--replanning`` and
    ``--breakdowns`` bound the autonomous strategy (the scripted expert always gets the full library)."""
    small = not model.startswith("scripted")  # a real model, replayed or live
    if name == "one-prompt":
        return OnePromptTuningStrategy()
    if name == "explicit":
        wanted = getattr(args, "explicit_steps", None) if small else None
        if not wanted:
            return ExplicitTuningStrategy()
        steps = {s.id: s for s in default_steps()}
        unknown = [i for i in wanted.split(",") if i not in steps]
        if unknown:
            raise SystemExit(f"--explicit-steps: unknown step {unknown[0]!r}; the library has {', '.join(steps)}")
        return ExplicitTuningStrategy([steps[i] for i in wanted.split(",")])
    if not small:
        return AutonomousTuningStrategy(max_replanning=2, max_steps=20, max_breakdowns=1)
    return AutonomousTuningStrategy(max_replanning=getattr(args, "replanning", 1),
                                    max_steps=getattr(args, "autonomous_steps", 6),
                                    max_breakdowns=getattr(args, "breakdowns", 1))


def check() -> None:
    """CPU: every kernel has its name, every scripted prompt kind is answered, strategies build."""
    for name, k in KERNELS.items():
        for src in (k["naive"], k["expert"]["code"]):
            assert kernel_names(src, "CUDA"), name
        script = Script(expert_rules(k))
        for kind in ("plan", "validate", "breakdown", "execute", "one-prompt", "restrictions", "replan"):
            json.loads(script.answer(f"<!-- kerntune-transform: {kind} -->"))
        assert json.loads(script.answer(f"<!-- kerntune-transform: evaluate-step -->({k['key_step']})"))["apply"]
        for s in ("one-prompt", "explicit", "autonomous"):
            strategy(s, "scripted")
    print(f"check ok: {len(KERNELS)} kernels, scripted expert answers every prompt kind, strategies build")


def versions() -> dict[str, Any]:
    """Device and library versions for the results file (what is importable; nothing fails here)."""
    out: dict[str, Any] = {"python": sys.version.split()[0], "host": platform.node()}
    try:
        from importlib.metadata import version
        out["kernel_tuner"] = version("kernel_tuner")
    except Exception:  # noqa: BLE001 - a version we cannot read is left out
        pass
    try:
        import cupy
        out["cupy"] = cupy.__version__
        out["cuda_runtime"] = cupy.cuda.runtime.runtimeGetVersion()
        out["device"] = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
        out["driver"] = cupy.cuda.runtime.driverGetVersion()
    except Exception:  # noqa: BLE001 - no CuPy or no GPU (the --check path)
        pass
    return out


def run_one(kernel: str, strat: str, model: str, args: argparse.Namespace, live: Any = None) -> dict[str, Any]:
    k = KERNELS[kernel]
    recorded: RecordedModel | None = None
    if model == "scripted":
        llm: Any = ScriptedTransformProvider(expert_rules(k))
    elif model in TRANSCRIPTS:  # the client exactly as for a spec string (make_client): only the provider differs
        transcript, run = args.transcript or TRANSCRIPTS[model], f"{kernel}/{strat}"
        # --speculate (live): a miss is answered live, on the CPU; otherwise it stops the run
        recorded = LiveRecorder(live, transcript, run=run) if live is not None else \
            RecordedModel(transcript, args.misses, run=run)
        llm = LLMClient(recorded)
    else:
        llm = model
    t0 = time.perf_counter()
    events: list[str] = []
    try:
        kt = KernelTransformer(k["naive"], strategy=strategy(strat, model, args), llm=llm, backend=args.backend,
                               problem_size=k["size"], args=k["args"](), tune_params=k["original"],
                               search=args.search, budget=args.budget, iterations=args.iterations,
                               timeout_s=args.timeout, max_tokens=args.max_tokens, memory_mb=args.memory_mb,
                               on_event=lambda m: (events.append(m), print(f"    {m}", flush=True)))
        res = kt.run()
        out = res.to_dict()
        out["steps"] = [{kk: v for kk, v in s.items() if kk != "code"} for s in out["steps"]]
        out["kernel_source"] = res.kernel_source if res.accepted else None
        out.update(ok=True)
    except AwaitingModelAnswer as exc:  # not a model failure: the run resumes once the model has answered
        out = {"ok": False, "awaiting_model": True, "error": str(exc)}
    except NeedsGPU as exc:  # --speculate: the rest of this run depends on a measurement
        out = {"ok": False, "needs_gpu": True, "error": str(exc)}
    except Exception as exc:  # one failed run is a result, not the end of the benchmark
        out = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-3000:]}
    out.update(kernel=kernel, strategy_name=strat, model=model, wall_s=time.perf_counter() - t0, events=events)
    if recorded is not None:
        out["model_calls"] = recorded.calls  # per call: kind, key, match (exact | masked | miss)
        out["prompt_matches"] = {m: sum(c["match"] == m for c in recorded.calls) for m in ("exact", "masked", "miss")}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="transform_gpu.json")
    ap.add_argument("--kernels", default="matmul,transpose,reduction")
    ap.add_argument("--strategies", default="one-prompt,explicit,autonomous")
    ap.add_argument("--models", default="scripted,local:",
                    help="scripted, embedded or strong (replayed from their transcripts) and/or any --llm spec")
    ap.add_argument("--transcript", type=Path, default=None,
                    help="a replayed model's recorded answers (default: benchmarks/transform/transcripts/MODEL.jsonl)")
    ap.add_argument("--misses", type=Path, default=None,
                    help="where requests with no recorded answer go (default: next to --out, OUT.misses.jsonl)")
    ap.add_argument("--backend", default="cuda", help="cuda (Kernel Tuner picks CuPy/cuda-python/PyCUDA) or cupy")
    ap.add_argument("--search", default="exhaustive")
    ap.add_argument("--budget", type=int, default=60, help="evaluations per rewrite")
    ap.add_argument("--iterations", type=int, default=7)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per config")
    ap.add_argument("--memory-mb", type=int, default=None)
    ap.add_argument("--max-tokens", type=int, default=4096)
    ap.add_argument("--explicit-steps", default="", help="a real model's explicit runs: these library steps only")
    ap.add_argument("--autonomous-steps", type=int, default=6, help="a real model's autonomous runs: at most N steps")
    ap.add_argument("--replanning", type=int, default=1, help="a real model's autonomous runs: re-plans")
    ap.add_argument("--breakdowns", type=int, default=1, help="a real model's autonomous runs: breakdowns")
    ap.add_argument("--check", action="store_true", help="CPU check of kernels and scripts; measures nothing")
    ap.add_argument("--speculate", action="store_true",
                    help="CPU, embedded model: answer live, ahead of the GPU call, every request up to each run's first"
                         " measured rewrite (benchmarks/transform/transform_embedded.py, speculation); measures nothing")
    ap.add_argument("--live", default="local:",
                    help="--speculate: the model that answers live (local: for embedded; files:DIR for a strong model "
                         "answered by a person or an agent from the prompt alone)")
    ap.add_argument("--device-name", default="NVIDIA H100 80GB HBM3", help="--speculate: the GPU's name as it reports it")
    ap.add_argument("--max-threads", type=int, default=1024, help="--speculate: the GPU's threads per block")
    args = ap.parse_args()
    if args.check:
        check()
        return
    if args.speculate:
        speculate(args)
        return
    results = []
    out = Path(args.out)
    info = versions()
    if args.misses is None:
        args.misses = out.with_name(out.stem + ".misses.jsonl")
    if set(args.models.split(",")) & set(TRANSCRIPTS):
        args.misses.unlink(missing_ok=True)  # this call's misses only: none left means the runs are complete
    for model in args.models.split(","):
        for kernel in args.kernels.split(","):
            for strat in args.strategies.split(","):
                print(f"== {model} / {kernel} / {strat}", flush=True)
                r = run_one(kernel, strat, model, args)
                results.append(r)
                print(f"   -> {'%.2fx' % r['speedup'] if r.get('ok') else r.get('error')} in {r['wall_s']:.1f} s"
                      + (f", prompts {r['prompt_matches']}" if "prompt_matches" in r else ""), flush=True)
                out.write_text(json.dumps({"command": " ".join(sys.argv), "versions": info,
                                           "awaiting_model": sum(bool(r.get("awaiting_model")) for r in results),
                                           "misses": str(args.misses), "results": results}, indent=1))
    print("\n| model | kernel | strategy | speedup | accepted | wall s | model calls |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        sp = f"{r['speedup']:.2f}x" if r.get("ok") else ("awaiting model" if r.get("awaiting_model") else "error")
        print(f"| {r['model']} | {r['kernel']} | {r['strategy_name']} | {sp} | {','.join(r.get('accepted') or [])} |"
              f" {r['wall_s']:.1f} | {r.get('llm_calls', '')} |")
    print(f"wrote {out}")
    waiting = sum(bool(r.get("awaiting_model")) for r in results)
    if waiting:
        print(f"{waiting} run(s) await the model: answer {args.misses} on a CPU with"
              f" benchmarks/transform/transform_embedded.py answer, then run again")


def speculate(args: argparse.Namespace) -> None:
    """Every (kernel, strategy) of ``--models embedded`` on the CPU, with the same options as the GPU call,
    the embedded model answering live every request the transcript lacks, up to the first rewrite that must
    be measured; afterwards the GPU call replays these answers and goes on from there."""
    from kerntune.llm.providers import make_provider

    if args.models not in TRANSCRIPTS:
        raise SystemExit(f"--speculate runs one replayed model: pass --models {' or '.join(TRANSCRIPTS)}")
    live = make_provider(args.live)
    try:
        with speculation(args.device_name, args.max_threads):
            for kernel in args.kernels.split(","):
                for strat in args.strategies.split(","):
                    print(f"== speculate {args.models} / {kernel} / {strat}", flush=True)
                    r = run_one(kernel, strat, args.models, args, live=live)
                    print(f"   -> {'complete' if r.get('ok') else r.get('error')} in {r['wall_s']:.1f} s, prompts"
                          f" {r['prompt_matches']}", flush=True)
    finally:
        live.close()


if __name__ == "__main__":
    main()
