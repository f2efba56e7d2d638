"""One process, one timer: the package's choice, kerntune's winner and the PyTorch reference of one
(kernel, shape), timed interleaved under kerntune's protocol (kerntune.evaluate.protocol).

    python benchmarks/real_kernels/judge.py ADAPTER SHAPE --package-only        # the package's own first call
    KERNTUNE_AUTOTUNE=1 python benchmarks/real_kernels/judge.py ADAPTER SHAPE --package-only   # kerntune.retune in place
    python benchmarks/real_kernels/judge.py ADAPTER SHAPE --package CFG --winner CFG

``--package-only`` runs the package's entry point in a fresh process (the caller gives it a fresh
TRITON_CACHE_DIR): the seconds of its first call are the package's own autotune (or compile) wall,
and what it launched is its choice; of those seconds, ``own_autotune_s`` is the tuned kernel's own
``triton.autotune`` (its list's compiles and benchmarks; the call's other kernels excluded).  The judge then re-creates that launch without autotuning
again (KERNTUNE_PACKAGE_CHOICE) and times the candidates interleaved (kerntune.evaluate.judge: a warm-up, then rounds in which every
candidate gets the protocol's window, the order rotated each round), so that every figure and every
paired ratio comes from the same GPU state.  Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("adapter")
    ap.add_argument("shape")
    ap.add_argument("--package-only", action="store_true")
    ap.add_argument("--package", help="the package's choice (JSON)")
    ap.add_argument("--winner", help="kerntune's winner (JSON)")
    args = ap.parse_args()

    import torch

    from kerntune.adapters import load
    from kerntune.evaluate.judge import summarize, time_interleaved
    from kerntune.evaluate.protocol import DEFAULT
    from kerntune.evaluate.triton_backend.kernel_file import parse_shape
    from kerntune.evaluate.triton_backend.worker import timer

    shape = parse_shape(args.shape)
    target = load(args.adapter)
    if args.package_only:
        import kerntune.retune as retune

        switched = retune.enable_from_env()  # KERNTUNE_AUTOTUNE=1: kerntune tunes the autotuned kernels in place
        t0 = time.perf_counter()
        target.make_inputs(shape)
        print(json.dumps({"config": target.baseline(), "first_call_s": target.autotune_s,
                          "own_autotune_s": target.own_autotune_s,
                          "setup_s": time.perf_counter() - t0,
                          **({"retune": retune.STATS.searches} if switched else {})}))
        return
    package, winner = json.loads(args.package), json.loads(args.winner)
    os.environ["KERNTUNE_PACKAGE_CHOICE"] = json.dumps(package)
    target.make_inputs(shape)
    cands = {"package": lambda: target.launch(package, None), "kerntune": lambda: target.launch(winner, None)}
    a = target.adapter
    if a.torch_op is not None:
        ref_inputs = a.make_inputs(shape)
        cands["torch"] = lambda: a.torch_op(ref_inputs)
    # the winner's output against the package's, on pristine inputs (in-place kernels rewrite theirs)
    check = None
    try:
        pristine = [t.clone() for _, t in target.launch_state.tensors()]

        def outputs(cfg: dict) -> list:
            with torch.no_grad():  # a training call's tensors include weights that require gradients
                for (_, t), p in zip(target.launch_state.tensors(), pristine):
                    t.copy_(p)
            return [o.float().clone() for o in target.launch(cfg, None)]

        ref, got = outputs(package), outputs(winner)
        check = max(float((r - g).abs().max()) / max(float(r.abs().max()), 1e-6) for r, g in zip(ref, got))
        del pristine
    except Exception as exc:  # noqa: BLE001 - report, do not hide
        check = f"{type(exc).__name__}: {exc}"
    rounds = time_interleaved(cands, timer(torch), DEFAULT)
    out = summarize(rounds, {"speedup": ("package", "kerntune"), "package_vs_torch": ("torch", "package")}, DEFAULT)
    out["relative_max_error"] = check
    print(json.dumps(out))


if __name__ == "__main__":
    sys.exit(main())
