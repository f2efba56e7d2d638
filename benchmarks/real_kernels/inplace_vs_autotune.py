"""Acceptance 3 of the real-kernels issue: the in-place switch (``kerntune.retune``) against the
kernel's own ``triton.autotune``, over the same list, in the same kind of process.

    python benchmarks/real_kernels/inplace_vs_autotune.py --out benchmarks/results/real_kernels/h100/inplace_vs_autotune.json \\
        [--only fla.chunk_h ...] [--variants 8:1:fork,8:1:threads,1:1:serial,8:1:fork:0] [--stores DIR]

For every (kernel, shape) whose kernel carries ``triton.autotune``, each step a fresh process with a
fresh Triton cache (nobody profits from another's compiles):
1. the package as shipped (judge.py --package-only): the kernel's own autotune wall over its list
   (its compiles and benchmarks; the call's other kernels excluded) and its pick;
2. per variant ``WORKERS:BUDGET[:MODE]``, the same program with ``KERNTUNE_AUTOTUNE=1`` (a fresh
   store): the same wall clock around the same kernel now measures kerntune's in-place search over
   the same list (``WORKERS`` parallel compiles, ``BUDGET`` a share of the list or a count, ``MODE``
   fork, threads or serial; an optional fourth field sets ``KERNTUNE_AUTOTUNE_RUNOFF``, a fifth
   ``KERNTUNE_AUTOTUNE_OVERLAP``, an empty one leaves the default: kerntune.retune),
   and its pick (``--stores DIR`` keeps each variant's store, with every config's time, in DIR);
3. the judge (judge.py, fresh process): every pick that differs from the package's, timed interleaved
   beside it (kerntune.evaluate.judge).  A pick equal to the package's is as fast by construction.
Writes one JSON with every figure and the command, after every variant (a row still running is marked
``"partial": true`` and runs again when the same ``--out`` is given again).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from suite import _fresh_cache, _judge, _versions  # noqa: E402  (the suite's own subprocess judge and fresh caches)


def _fresh(env: dict[str, str], **extra: str) -> dict[str, str]:
    return {**_fresh_cache(env), **extra}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--shape", default=None)
    ap.add_argument("--variants", default="8:1:fork",
                    help="WORKERS:BUDGET[:MODE[:RUNOFF[:OVERLAP]]],... (kerntune.retune settings; an empty field: the default)")
    ap.add_argument("--stores", default=None, help="keep each variant's kerntune store in this folder")
    ap.add_argument("--deadline", type=float, default=540.0, help="stop starting pairs after this many seconds")
    args = ap.parse_args()
    from kerntune.adapters import all_adapters, gpu_only_names, load
    from kerntune.evaluate.triton_backend.capture import autotuner

    t_start = time.perf_counter()
    base = {k: v for k, v in os.environ.items() if not k.startswith("KERNTUNE_")}
    variants = [v.split(":") for v in args.variants.split(",")]
    out_path = Path(args.out)
    rows: list[dict[str, Any]] = json.loads(out_path.read_text())["rows"] if out_path.exists() else []
    rows = [r for r in rows if not r.get("partial")]  # a row cut short by a timeout runs again
    done = {(r["kernel"], r["shape"]) for r in rows}

    def write(extra: list[dict[str, Any]]) -> None:
        """The JSON as it stands, after every variant: a call stopped by its time limit keeps what ran."""
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(json.dumps({"command": "python benchmarks/real_kernels/inplace_vs_autotune.py "
                                        + " ".join(sys.argv[1:]), "versions": {**_versions(), **_device()},
                                        "rows": rows + extra}, indent=1))
    # flag-gems' kernels (GPU-only): its libtuner has a run of its own, which the in-place switch leaves alone
    skip = gpu_only_names()
    for name, a in all_adapters().items():
        if (args.only and name not in args.only) or a.knobs is not None or name in skip or autotuner(load(name).kernel) is None:
            continue
        for shape in a.shapes:
            s = "x".join(map(str, shape))
            if (args.shape and s != args.shape) or (name, s) in done:
                continue
            if time.perf_counter() - t_start > args.deadline:
                print(f"deadline: {name} {s} not started", flush=True)
                continue
            pkg = _judge([name, s, "--package-only"], _fresh(base))
            row: dict[str, Any] = {"kernel": name, "shape": s, "package": pkg, "kerntune": []}
            print(f"{name} {s}: own autotune {pkg['own_autotune_s']:.2f} s, pick {pkg['config']}", flush=True)
            for vi, (threads, budget, *rest) in enumerate(variants):
                mode, runoff = (rest + ["fork"])[0], (rest[1:] or [None])[0] or None
                overlap = (rest[2:] or [None])[0]
                tag = (f"{name}_{s}_{threads}_{budget}_{mode}" + (f"_runoff{runoff}" if runoff is not None else "")
                       + (f"_overlap{overlap}" if overlap is not None else ""))
                tag += f"_v{vi}" if variants.count(variants[vi]) > 1 else ""  # a repeated variant: a store of its own
                store = (Path(args.stores) / f"{tag}.db") if args.stores else Path(tempfile.mkdtemp(prefix="kt-store-")) / "kt.db"
                store.parent.mkdir(parents=True, exist_ok=True)
                env = _fresh(base, KERNTUNE_AUTOTUNE="1", KERNTUNE_AUTOTUNE_COMPILE_THREADS=threads,
                             KERNTUNE_AUTOTUNE_BUDGET=budget, KERNTUNE_AUTOTUNE_COMPILE=mode, KERNTUNE_STORE=str(store),
                             **({"KERNTUNE_AUTOTUNE_RUNOFF": runoff} if runoff is not None else {}),
                             **({"KERNTUNE_AUTOTUNE_OVERLAP": overlap} if overlap is not None else {}))
                kt = _judge([name, s, "--package-only"], env)
                rec = {"threads": int(threads), "budget": budget, "mode": mode,
                       **({"runoff": runoff} if runoff is not None else {}),
                       **({"overlap": overlap} if overlap is not None else {}), **kt,
                       "wall_share": kt["own_autotune_s"] / pkg["own_autotune_s"]}
                if kt["config"] != pkg["config"]:
                    j = _judge([name, s, "--package", json.dumps(pkg["config"]), "--winner", json.dumps(kt["config"])],
                               _fresh(base))
                    rec["judge"] = j
                    rec["speedup"] = j["speedup"]
                else:
                    rec["speedup"] = {"median": 1.0, "ci": [1.0, 1.0], "same_config": True}
                row["kerntune"].append(rec)
                write([{**row, "partial": True}])
                print(f"  {mode} x{threads} budget {budget} runoff {runoff}: {kt['own_autotune_s']:.2f} s "
                      f"({rec['wall_share']:.2f} of its own), pick {kt['config']}, speedup {rec['speedup']}", flush=True)
            rows.append(row)
            write([])


def _device() -> dict[str, str]:
    try:
        import torch

        return {"device": torch.cuda.get_device_name(0)}
    except Exception:  # noqa: BLE001 - no GPU: the JSON says nothing about one
        return {}


if __name__ == "__main__":
    main()
