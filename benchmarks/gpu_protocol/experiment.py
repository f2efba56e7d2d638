"""Why one config's screening and re-timed times disagree on a GPU, and what to do about it.

    PYTHONPATH=$PWD python3 benchmarks/gpu_protocol/experiment.py OUT.json

A controlled experiment for issue 23 (item 4): it changes none of the GPU's settings (no clock or
power locks); it only reads the SM clock, power, temperature and clock-event reasons through NVML
while it times, and varies what the GPU did just before a measurement:

  A  trace       each kernel after 3 s idle, then back to back for 4 s: time per launch and SM clock
                 over time (how fast and how far the clock falls under load)
  B  variants    one kernel timed by the ways kerntune and its baselines have been timed (do_bench
                 rep=20 after an idle gap, right after a heavy load, rep=500, warm-ups of 25-1000 ms
                 of the kernel itself before rep=20), each 3 times, with the mean clock of its window
  C  l2          steady state, L2 flushed between launches (do_bench) or not (back to back)
  D  launch      per-launch events (do_bench) against a CUDA graph of the same launches
  E  protocols   six matmul configs screened one after another with idle gaps (as compile waits
                 make them) and then re-timed in interleaved rounds, by the old settings and by the
                 candidate protocol (GPU kept busy between configs, warm-up with the kernel itself)

The JSON holds every sample; the last lines print a summary table.
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import torch
import triton
import triton.testing

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from kerntune.evaluate.triton_backend.kernel_file import load_kernel_module  # noqa: E402

try:
    import pynvml
except ImportError:  # the numbers still come, without clocks
    pynvml = None


class Sampler(threading.Thread):
    """NVML readings every ``period`` seconds: (t, sm MHz, mem MHz, power W, temp C, event reasons)."""

    def __init__(self, period: float = 0.005) -> None:
        super().__init__(daemon=True)
        self.period, self.samples, self.stop = period, [], threading.Event()
        self.h = None
        if pynvml is not None:
            pynvml.nvmlInit()
            self.h = pynvml.nvmlDeviceGetHandleByIndex(0)

    def read(self) -> tuple:
        h = self.h
        try:
            reasons = pynvml.nvmlDeviceGetCurrentClocksEventReasons(h)
        except Exception:  # noqa: BLE001 - older bindings
            reasons = pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h)
        return (time.perf_counter(), pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM),
                pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM), pynvml.nvmlDeviceGetPowerUsage(h) / 1000,
                pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU), int(reasons))

    def run(self) -> None:
        while self.h is not None and not self.stop.is_set():
            self.samples.append(self.read())
            time.sleep(self.period)

    def window(self, t0: float, t1: float) -> dict[str, float]:
        s = [x for x in self.samples if t0 <= x[0] <= t1]
        if not s:
            return {}
        return {"sm_mhz": statistics.mean(x[1] for x in s), "mem_mhz": statistics.mean(x[2] for x in s),
                "power_w": statistics.mean(x[3] for x in s), "temp_c": statistics.mean(x[4] for x in s),
                "reasons": sorted({x[5] for x in s}), "n": len(s)}


def kernels() -> dict[str, tuple[Callable[[], Any], float]]:
    """name -> (launch, flops or bytes for the rate)."""
    torch.manual_seed(0)
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    c = torch.empty_like(a)
    mm = load_kernel_module("examples/triton/matmul.py")
    best = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 4}
    inputs = (a, b, c)
    x = torch.randn(16384, 4096, device="cuda", dtype=torch.float16)  # 128 MiB: more than L2
    w = torch.randn(4096, device="cuda", dtype=torch.float16)
    xs = torch.randn(2048, 4096, device="cuda", dtype=torch.float16)  # 16 MiB: fits in L2
    big = torch.empty(1 << 28, device="cuda", dtype=torch.float16)  # 512 MiB
    big2 = torch.empty_like(big)
    return {
        "cublas_mm_4096": (lambda: torch.matmul(a, b, out=c), 2 * 4096**3),
        "triton_mm_4096": (lambda: mm.launch(best, inputs), 2 * 4096**3),
        "rmsnorm_16384x4096": (lambda: torch.nn.functional.rms_norm(x, (4096,), w), 2 * x.numel() * 2),
        "rmsnorm_2048x4096": (lambda: torch.nn.functional.rms_norm(xs, (4096,), w), 2 * xs.numel() * 2),
        "copy_512MiB": (lambda: big2.copy_(big), 2 * big.numel() * 2),
    }


def heater(seconds: float) -> None:
    """A heavy load of its own (8192^3 fp16 matmuls) for ``seconds``."""
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(10):
            torch.matmul(a, a)
        torch.cuda.synchronize()


def per_launch(fn: Callable[[], Any], n: int) -> float:
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(n):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / n


def bench(fn: Callable[[], Any], rep: int, warmup: int, sampler: Sampler) -> dict[str, Any]:
    t0 = time.perf_counter()
    times = triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="all")
    t1 = time.perf_counter()
    # the window of the timed part only: do_bench's warm-up comes first
    share = rep / (rep + warmup)
    return {"median_ms": statistics.median(times), "n": len(times), **sampler.window(t1 - (t1 - t0) * share, t1)}


def exp_trace(ks: dict, sampler: Sampler) -> dict:
    out = {}
    for name, (fn, _) in ks.items():
        n = max(1, int(2.0 / max(per_launch(fn, 5), 1e-3)))  # about 2 ms per batch
        time.sleep(3.0)
        rows, t_start = [], time.perf_counter()
        while time.perf_counter() - t_start < 4.0:
            ms = per_launch(fn, n)
            rows.append((time.perf_counter() - t_start, ms))
        t_end = time.perf_counter()
        clocks = [(x[0] - t_start, x[1], x[3], x[4]) for x in sampler.samples if t_start - 0.2 <= x[0] <= t_end]

        def med(lo: float, hi: float) -> float:
            v = [ms for t, ms in rows if lo <= t < hi]
            return statistics.median(v) if v else float("nan")

        def clk(lo: float, hi: float) -> float:
            v = [c for t, c, _, _ in clocks if lo <= t < hi]
            return statistics.mean(v) if v else float("nan")

        windows = [(0, 0.02), (0.02, 0.1), (0.1, 0.3), (0.3, 1.0), (1.0, 2.0), (3.0, 4.0)]
        out[name] = {"launches_per_batch": n, "windows": [
            {"from_s": lo, "to_s": hi, "median_ms": med(lo, hi), "sm_mhz": clk(lo, hi)} for lo, hi in windows],
            "rows": rows[::5], "clocks": clocks[::4]}
        print(f"A {name}: " + ", ".join(f"{w['from_s']}-{w['to_s']}s {w['median_ms']:.4f} ms @{w['sm_mhz']:.0f}"
                                         for w in out[name]["windows"]), flush=True)
    return out


def exp_variants(ks: dict, sampler: Sampler, names: list[str], repeats: int = 3) -> dict:
    out: dict[str, dict[str, list]] = {}
    for name in names:
        fn = ks[name][0]
        res: dict[str, list] = {}
        for _ in range(repeats):
            time.sleep(1.0)
            res.setdefault("rep20_after_idle", []).append(bench(fn, 20, 5, sampler))
            heater(1.0)
            res.setdefault("rep20_after_heavy_load", []).append(bench(fn, 20, 5, sampler))
            res.setdefault("rep500", []).append(bench(fn, 500, 25, sampler))
            for w in (25, 100, 300, 1000):
                time.sleep(1.0)
                res.setdefault(f"rep20_after_idle_warmup{w}", []).append(bench(fn, 20, w, sampler))
            heater(1.0)
            res.setdefault("rep100_after_heavy_load", []).append(bench(fn, 100, 25, sampler))
        out[name] = res
        for k, v in res.items():
            ms = [x["median_ms"] for x in v]
            mhz = [x.get("sm_mhz", float("nan")) for x in v]
            print(f"B {name} {k}: {statistics.median(ms):.4f} ms (spread {min(ms):.4f}-{max(ms):.4f}) "
                  f"@{statistics.mean(mhz):.0f} MHz", flush=True)
    return out


def exp_l2(ks: dict, sampler: Sampler) -> dict:
    out = {}
    for name in ("cublas_mm_4096", "triton_mm_4096", "rmsnorm_16384x4096", "rmsnorm_2048x4096"):
        fn = ks[name][0]
        heater(1.0)
        flushed = bench(fn, 100, 25, sampler)["median_ms"]
        hot = statistics.median(per_launch(fn, 20) for _ in range(25))
        out[name] = {"l2_flushed_ms": flushed, "back_to_back_ms": hot}
        print(f"C {name}: flushed {flushed:.4f} ms, back to back {hot:.4f} ms", flush=True)
    return out


def exp_launch(ks: dict, sampler: Sampler) -> dict:
    out = {}
    for name in ("rmsnorm_2048x4096", "rmsnorm_16384x4096", "triton_mm_4096"):
        fn = ks[name][0]
        heater(0.5)
        events = bench(fn, 100, 25, sampler)["median_ms"]
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            fn()
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g):
            for _ in range(20):
                fn()
        graph = statistics.median(per_launch(g.replay, 5) / 20 for _ in range(20))
        t0 = time.perf_counter()
        for _ in range(200):
            fn()
        host_us = (time.perf_counter() - t0) / 200 * 1e6
        torch.cuda.synchronize()
        out[name] = {"do_bench_ms": events, "graph_ms": graph, "host_launch_us": host_us}
        print(f"D {name}: do_bench {events:.4f} ms, graph {graph:.4f} ms, host {host_us:.1f} us/launch", flush=True)
    return out


MM_CONFIGS = [
    {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 4},
    {"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3},
    {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 4, "num_stages": 4},
    {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 1, "num_warps": 4, "num_stages": 3},
    {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8, "num_warps": 4, "num_stages": 4},
    {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 1, "num_warps": 4, "num_stages": 3},
]


def exp_protocols(sampler: Sampler, rounds: int = 5) -> dict:
    """Screen, then re-time in interleaved rounds, under two protocols; per config screened/re-timed."""
    mm = load_kernel_module("examples/triton/matmul.py")
    inputs = mm.make_inputs((4096, 4096, 4096))
    fns = [lambda c=c: mm.launch(c, inputs) for c in MM_CONFIGS]
    for f in fns:
        f()
    torch.cuda.synchronize()
    settings = {"old": {"gap_s": 0.3, "busy": False, "warmup": 5, "rep": 20, "retime_rep": 100},
                "steady": {"gap_s": 0.3, "busy": True, "warmup": 100, "rep": 20, "retime_rep": 20}}
    out = {}
    for name, s in settings.items():
        time.sleep(2.0)
        screened = []
        for f in fns:
            # a compile wait: idle (old) or kept busy with the last kernel measured (steady)
            if s["busy"]:
                end = time.perf_counter() + s["gap_s"]
                while time.perf_counter() < end:
                    per_launch(fns[0], 10)
            else:
                time.sleep(s["gap_s"])
            screened.append(bench(f, s["rep"], s["warmup"], sampler)["median_ms"])
        rts: list[list[float]] = [[] for _ in fns]
        for _ in range(rounds):
            for i, f in enumerate(fns):
                rts[i].append(bench(f, s["retime_rep"], s["warmup"], sampler)["median_ms"])
        retimed = [statistics.median(r) for r in rts]
        out[name] = {"settings": s, "screened_ms": screened, "retimed_rounds_ms": rts, "retimed_ms": retimed,
                     "ratio": [a / b for a, b in zip(screened, retimed)],
                     "rank_screened": sorted(range(len(fns)), key=lambda i: screened[i]),
                     "rank_retimed": sorted(range(len(fns)), key=lambda i: retimed[i])}
        print(f"E {name}: screened/re-timed " + " ".join(f"{r:.3f}" for r in out[name]["ratio"])
              + f"; round spread " + " ".join(f"{(max(r) - min(r)) / statistics.median(r):.3f}" for r in rts),
              flush=True)
    return out


def main() -> None:
    out_path = Path(sys.argv[1])
    p = torch.cuda.get_device_properties(0)
    meta = {"device": p.name, "torch": torch.__version__, "triton": triton.__version__, "cuda": torch.version.cuda,
            "command": "python3 benchmarks/gpu_protocol/experiment.py " + " ".join(sys.argv[1:])}
    if pynvml is not None:
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        meta["driver"] = pynvml.nvmlSystemGetDriverVersion()
        for key, q in (("max_sm_mhz", pynvml.NVML_CLOCK_SM), ("max_mem_mhz", pynvml.NVML_CLOCK_MEM)):
            meta[key] = pynvml.nvmlDeviceGetMaxClockInfo(h, q)
        meta["power_limit_w"] = pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000
    print(json.dumps(meta), flush=True)
    sampler = Sampler()
    sampler.start()
    ks = kernels()
    for fn, _ in ks.values():
        fn()
    torch.cuda.synchronize()
    result: dict[str, Any] = {"meta": meta}
    stages = [("trace", lambda: exp_trace(ks, sampler)),
              ("variants", lambda: exp_variants(ks, sampler, ["triton_mm_4096", "cublas_mm_4096",
                                                              "rmsnorm_16384x4096"])),
              ("l2", lambda: exp_l2(ks, sampler)), ("launch", lambda: exp_launch(ks, sampler)),
              ("protocols", lambda: exp_protocols(sampler))]
    only = set(sys.argv[2:])
    for name, fn in stages:
        if only and name not in only:
            continue
        t0 = time.perf_counter()
        result[name] = fn()
        result[name + "_wall_s"] = time.perf_counter() - t0
        out_path.write_text(json.dumps(result))
    sampler.stop.set()


if __name__ == "__main__":
    main()
