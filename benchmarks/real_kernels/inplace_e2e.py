"""The in-place switch on a real program: FLA's GatedDeltaNet layer (fla.layers.GatedDeltaNet, the
linear-attention layer of Gated DeltaNet / Qwen3-Next) run forward on realistic inputs, in three (or four)
fresh processes that share one Triton compile cache and one kerntune store:

  untuned       the program as shipped: Triton compiles, every triton.autotune kernel benchmarks its list
  untuned-warm  (E2E_WARM_UNTUNED=1) again, compiles cached: what every later start-up pays to autotune
  tuned         KERNTUNE_AUTOTUNE=1 (kerntune.retune): each (kernel, key) searched once, winner stored
  loaded        KERNTUNE_AUTOTUNE=1 again: every winner loaded from the store, nothing measured

    python benchmarks/real_kernels/inplace_e2e.py --out benchmarks/results/real_kernels/h100/inplace_e2e.json

Each process prints its first forward's wall time (start-up autotuning included), the steady time
of a forward (median of 20, CUDA events) and what the switch did; outputs are saved and compared.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHAPE = dict(batch=4, tokens=4096, hidden=2048, heads=16, head_dim=128)


def child(out_path: str) -> None:
    import torch

    if os.environ.get("KERNTUNE_AUTOTUNE") == "1":
        import kerntune.retune as retune

        retune.enable_from_env()
    from fla.layers import GatedDeltaNet

    torch.manual_seed(0)
    layer = GatedDeltaNet(hidden_size=SHAPE["hidden"], head_dim=SHAPE["head_dim"], num_heads=SHAPE["heads"],
                          mode="chunk").to("cuda", torch.bfloat16).eval()
    x = torch.randn(SHAPE["batch"], SHAPE["tokens"], SHAPE["hidden"], device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        y = layer(x)[0]
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        times = []
        for _ in range(20):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            layer(x)
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b))
    torch.save(y.cpu(), out_path)
    info = {"first_forward_s": first, "steady_ms": sorted(times)[len(times) // 2], "steady_all_ms": times}
    if os.environ.get("KERNTUNE_AUTOTUNE") == "1":
        from kerntune.retune import STATS

        info.update(tuned=STATS.tuned, loaded=STATS.loaded, measured=STATS.measured, tuning_s=STATS.tuning_s)
    print(json.dumps(info))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--child")
    args = ap.parse_args()
    if args.child:
        child(args.child)
        return
    work = Path(tempfile.mkdtemp(prefix="inplace-"))
    base = {k: v for k, v in os.environ.items() if not k.startswith("KERNTUNE_")}
    base.update(TRITON_CACHE_DIR=str(work / "triton"), FLA_CACHE_RESULTS="0", KERNTUNE_STORE=str(work / "kt.db"))
    result = {"shape": SHAPE, "runs": {}}
    runs = [("untuned", {}), ("tuned", {"KERNTUNE_AUTOTUNE": "1"}), ("loaded", {"KERNTUNE_AUTOTUNE": "1"})]
    if os.environ.get("E2E_WARM_UNTUNED") == "1":
        runs.insert(1, ("untuned-warm", {}))
    for name, extra in runs:
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, __file__, "--out", args.out, "--child", str(work / f"{name}.pt")],
                           env={**base, **extra}, capture_output=True, text=True, timeout=560)
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
        if p.returncode != 0 or not lines:
            result["runs"][name] = {"error": p.stderr[-3000:]}
            print(f"{name}: FAILED\n{p.stderr[-3000:]}", flush=True)
            break
        result["runs"][name] = {**json.loads(lines[-1]), "process_s": time.perf_counter() - t0}
        print(name, {k: v for k, v in result["runs"][name].items() if k != "steady_all_ms"}, flush=True)
    import torch

    outs = {n: torch.load(work / f"{n}.pt") for n in result["runs"] if (work / f"{n}.pt").exists()}
    if "untuned" in outs:
        ref = outs["untuned"].float()
        result["max_abs_diff_vs_untuned"] = {n: float((o.float() - ref).abs().max()) for n, o in outs.items()}
        result["identical_to_untuned"] = {n: bool(torch.equal(o, outs["untuned"])) for n, o in outs.items()}
    if "tuned" in outs and "loaded" in outs:
        result["loaded_identical_to_tuned"] = bool(torch.equal(outs["tuned"], outs["loaded"]))
    import triton

    result["versions"] = {"torch": torch.__version__, "triton": triton.__version__,
                          "device": torch.cuda.get_device_name(0)}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}))
    if any("error" in run for run in result["runs"].values()):
        sys.exit(1)  # a failed process is a failed benchmark, not a short result


if __name__ == "__main__":
    main()
