"""The check of a Triton rewrite, in two processes so the variant cannot reach the comparison.

``python -m kerntune.transform.triton_check ORIGINAL HARNESS SHAPE`` is the *judge*: it never imports the
variant.  It imports the user's original kernel file (trusted, as ``kerntune tune`` does), makes the
inputs, takes the reference (the original's ``reference``, else its own launch at its default config),
saves the inputs to a private temporary directory, and starts the *runner*
(``... triton_check --run HARNESS SHAPE DIR``), which imports the harness (and so the variant),
reports its space as data, launches the default config once on the saved inputs and saves what
``launch`` returned with ``torch.save``.  The judge loads those outputs with
``torch.load(weights_only=True)`` (tensors and plain containers only: no code runs) and compares them
with the reference it kept in its own memory, with the Triton evaluator's ``compare_outputs``.

Why two processes: a variant imported where the comparison runs can change it (``torch.allclose =
lambda *a, **k: True`` at import makes any output pass), and so can one imported before the reference
is taken.  Here import-time and launch-time code of the variant runs only in the runner; the judge's
torch, its reference and its comparison functions are out of its reach.  The remaining reach is what
any code of the same user has (``ptrace``, ``/proc/PID/mem`` where the system allows it, killing the
judge: the check then fails); stronger isolation needs another user or a sandbox.

Both print one JSON line on their own stdout (``results_pipe``); both run under the limits in
``KERNTUNE_TRANSFORM_LIMITS``.  The runner is in the judge's process group, which the session kills as
a whole when the check ends (``kerntune.procs``).  The judge leads that group in a session of its own,
which a SIGKILL of the tuner does not reach: it watches the tuner (``worker_life.exit_with_parent``) and
kills the group once the tuner is gone, and it waits for the runner at most ``TIMEOUT`` seconds (an
optional fourth argument; a hung variant once kept both processes alive after the tuner was killed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any


def _variant_frame(exc: BaseException) -> str:
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return next((ln.strip() for ln in reversed(tb) if "/variants/" in ln), "")


def run_variant(harness: str, shape: tuple[int, ...], folder: Path, out: dict[str, Any]) -> dict[str, Any]:
    """The runner: import the harness, report its space, launch its default config on the judge's inputs
    and save the outputs to ``folder/outputs.pt``; ``out`` says how far it got when an exception escapes."""
    import torch

    from kerntune.evaluate.triton_backend.kernel_file import load_kernel_module, module_space
    from kerntune.transform.triton_harness import fix_interpreter

    fix_interpreter()
    out.update(ok=False, stage="load")
    t0 = time.perf_counter()
    module = load_kernel_module(harness)
    out["load_s"] = time.perf_counter() - t0
    out["stage"] = "space"
    space = module_space(module, shape)
    calls = [c.text for c in space.constraints if c.expression is None]
    if calls:
        out["error"] = (f"constraint {calls[0]!r} is a Python callable: give constraints as expression strings"
                        " (e.g. \"BLOCK_M * BLOCK_N <= 16384\")")
        return out
    out["space"] = space.to_dict()
    out["stage"] = "launch"
    inputs = torch.load(folder / "inputs.pt", weights_only=False)  # written by the judge
    t1 = time.perf_counter()
    got = module.launch(space.default, inputs)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    out["launch_s"] = time.perf_counter() - t1
    torch.save(got, folder / "outputs.pt")
    out["ok"], out["stage"] = True, "launched"
    return out


#: The judge's wait for its runner when no TIMEOUT is given (the session's own limit is the hard bound).
RUNNER_TIMEOUT_S = 600.0


def judge(original: str, harness: str, shape: tuple[int, ...], out: dict[str, Any],
          timeout_s: float = RUNNER_TIMEOUT_S) -> dict[str, Any]:
    """Reference first, then the runner (for at most ``timeout_s`` seconds), then the comparison, all
    without importing the variant."""
    import torch

    from kerntune.evaluate.triton_backend.kernel_file import load_kernel_module, module_space
    from kerntune.evaluate.triton_backend.output_check import clone, compare_outputs
    from kerntune.transform.triton_harness import fix_interpreter

    fix_interpreter()
    out.update(ok=False, stage="reference")
    orig = load_kernel_module(original)
    inputs = orig.make_inputs(shape)
    originals = [clone(t) for t in inputs]
    if callable(getattr(orig, "reference", None)):
        ref = clone(orig.reference(inputs))
    else:  # the original kernel's own output at its default config is the reference
        ref = clone(orig.launch(module_space(orig, shape).default, inputs))
    with torch.no_grad():  # inputs may be weights that require gradients
        for t, o in zip(inputs, originals):
            if hasattr(t, "copy_"):
                t.copy_(o)
            elif isinstance(t, list):
                t[:] = clone(o)
    with tempfile.TemporaryDirectory(prefix="kerntune-check-") as tmp:
        folder = Path(tmp)
        torch.save(inputs, folder / "inputs.pt")
        try:
            proc = subprocess.run([sys.executable, "-m", "kerntune.transform.triton_check", "--run", harness,
                                   "x".join(map(str, shape)), str(folder)], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, check=False, timeout=timeout_s)
        except subprocess.TimeoutExpired:  # run() killed the runner; the session ends the rest of the group
            out.update(stage="timeout", error=f"the variant did not finish within {timeout_s:g} s")
            return out
        lines = [ln for ln in proc.stdout.decode(errors="replace").splitlines() if ln.strip()]
        try:
            ran = json.loads(lines[-1])
        except (IndexError, json.JSONDecodeError):
            code = proc.returncode
            how = f"signal {-code}" if code < 0 else f"exit code {code}"
            out.update(stage="crash", error=f"the variant's process died ({how})")
            return out
        if not isinstance(ran, dict):
            out.update(stage="crash", error="the variant's process answered nonsense")
            return out
        for key in ("space", "load_s", "launch_s"):
            if key in ran:
                out[key] = ran[key]
        if ran.get("ok") is not True:
            out.update(stage=str(ran.get("stage") or "launch"), error=str(ran.get("error") or "no reason given"))
            return out
        out["stage"] = "compare"
        try:
            got = torch.load(folder / "outputs.pt", weights_only=True)
        except Exception as exc:  # noqa: BLE001 - whatever the variant saved
            out["error"] = (f"launch returned what cannot be compared (tensors, numbers and tuples of them):"
                            f" {type(exc).__name__}: {str(exc)[:300]}")
            return out
    wrong = compare_outputs(got, ref, torch)
    if wrong:
        out["error"] = f"at its default config {json.dumps((out.get('space') or {}).get('default'))}: {wrong}"
        return out
    out["ok"], out["stage"] = True, "done"
    return out


def main() -> None:
    from kerntune.evaluate.triton_backend.worker import results_pipe
    from kerntune.evaluate.triton_backend.worker_life import exit_with_parent
    from kerntune.transform.worker import LIMITS_ENV, apply_limits

    runner = sys.argv[1] == "--run"
    if not runner:  # the judge leads the check's process group: it ends the group once the tuner is gone
        exit_with_parent()
    apply_limits(json.loads(os.environ.get(LIMITS_ENV) or "{}"))
    pipe = results_pipe()
    args = sys.argv[2:] if runner else sys.argv[1:]
    result: dict[str, Any] = {}
    try:
        if runner:
            run_variant(args[0], tuple(int(x) for x in args[1].split("x")), Path(args[2]), result)
        else:
            judge(args[0], args[1], tuple(int(x) for x in args[2].split("x")), result,
                  float(args[3]) if len(args) > 3 else RUNNER_TIMEOUT_S)
    except MemoryError:
        result.update(ok=False, error="out of memory (the worker's memory limit)")
    except BaseException as exc:  # noqa: BLE001 - model-written code may raise anything
        where = _variant_frame(exc)
        result.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:1500] + (f" ({where[:300]})" if where else ""))
    pipe.write(json.dumps(result, default=str) + "\n")
    pipe.flush()


if __name__ == "__main__":
    main()
