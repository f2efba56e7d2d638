"""Worker-side glue for Triton rewrites: imported only in worker processes, never in the tuner.

A model-written variant is a kernel file (``space``, the ``@triton.jit`` kernel, ``launch``).  It is
measured through a *harness* kernel file that kerntune writes beside it::

    from kerntune.transform.triton_harness import bind
    bind(globals(), "ORIGINAL.py", ["VARIANT.py"])

``bind`` takes ``space`` and ``launch`` from the variant and ``make_inputs``, ``reference``, ``flops``,
``bytes_moved``, ``name`` and ``description`` from the user's original file, so every config of every
variant is checked against the original's reference on the original's inputs, whatever the variant's
own ``make_inputs``/``reference`` say.  With several variants the harness is one kernel file whose space
has a ``variant`` parameter (each variant's parameters constrained to its own values, the others pinned).

``python -m kerntune.transform.triton_harness HARNESS SHAPE`` is the check worker: under the limits in
``KERNTUNE_TRANSFORM_LIMITS`` it imports the harness, reports the space as data (callable constraints
cannot leave the process: refused), launches the default config once and compares it with the
reference (dtype tolerances of the Triton evaluator's worker).  One JSON line on its own stdout.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Mapping, Sequence

FROM_ORIGINAL = ("make_inputs", "flops", "bytes_moved", "name", "description")


def fix_interpreter() -> None:
    """Make Triton 3.6's CPU interpreter (``TRITON_INTERPRET=1``) work with NumPy >= 2.4.

    The interpreter turns a scalar tensor into a Python int with ``int(array)`` on a one-element
    1-D array, which NumPy 2.4 refuses, so ``for k in range(tl.cdiv(K, BLOCK_K))`` raises.  The fix
    reads the single element instead; nothing else changes and compiled (GPU) Triton is untouched.
    """
    if os.environ.get("TRITON_INTERPRET") != "1":
        return
    import numpy as np
    import triton.runtime.interpreter as interp

    if getattr(interp, "_kerntune_fixed", False):
        return
    original = interp._patch_lang_tensor

    def patched(tensor: Any, scope: Any) -> None:
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).reshape(-1)[0]))

    interp._patch_lang_tensor = patched
    interp._kerntune_fixed = True


def _load(path: str, base: Path) -> Any:
    from kerntune.evaluate.triton_backend.kernel_file import load_kernel_module

    p = Path(path)
    return load_kernel_module(p if p.is_absolute() else base / p)


def _space_of(module: Any, shape: Sequence[int] | None) -> Any:
    from kerntune.evaluate.triton_backend.kernel_file import module_space

    return module_space(module, tuple(shape) if shape else None)


def combined_space(spaces: Sequence[Any], labels: Sequence[str]) -> Any:
    """One space over several variants: ``variant`` (an index) plus the union of their parameters.

    A parameter keeps the values its variant gives it (``P in (...)``); a variant that lacks it pins it
    to its first value, so the space holds no duplicate configs; each variant's own constraints apply
    only to it.  The default is the first variant's default."""
    from kerntune.space import Choice, Space

    values: dict[str, list[Any]] = {}
    for sp in spaces:
        for p in sp.params:
            vals = values.setdefault(p.name, [])
            vals += [v for v in p.values() if v not in vals]
    params = [Choice("variant", options=tuple(range(len(spaces))),
                     description="which rewrite: " + ", ".join(f"{i}={lab}" for i, lab in enumerate(labels)))]
    params += [Choice(n, options=tuple(v)) for n, v in values.items() if n != "variant"]
    rules: list[str] = []
    for i, sp in enumerate(spaces):
        for n, vals in values.items():
            if n in sp.names:
                own = [v for v in sp.by_name[n].values()]
                if len(own) < len(vals):
                    rules.append(f"variant != {i} or {n} in ({', '.join(map(repr, own))},)")
            else:
                rules.append(f"variant != {i} or {n} == {vals[0]!r}")
        rules += [f"variant != {i} or ({c.text})" for c in sp.constraints if c.expression is not None]
    default = {"variant": 0, **{n: (spaces[0].default[n] if n in spaces[0].names else v[0])
                                for n, v in values.items()}}
    return Space(params, rules, default=default, name="+".join(labels))


def bind(namespace: dict[str, Any], original: str, variants: Sequence[str], labels: Sequence[str] = (),
         shape: Sequence[int] | None = None) -> None:
    """Fill a harness module's namespace (see the module docstring); paths relative to the harness."""
    fix_interpreter()
    base = Path(namespace.get("__file__") or ".").resolve().parent
    orig = _load(original, base)
    mods = [_load(v, base) for v in variants]
    for key in FROM_ORIGINAL:
        if hasattr(orig, key):
            namespace[key] = getattr(orig, key)
    if callable(getattr(orig, "reference", None)):
        namespace["reference"] = orig.reference
    else:  # the original kernel's own output at its default config is the reference
        orig_default = _space_of(orig, shape).default
        namespace["reference"] = lambda inputs: orig.launch(orig_default, inputs)
    if len(mods) == 1:
        namespace["space"] = _space_of(mods[0], shape)
        namespace["launch"] = mods[0].launch
        return
    spaces = [_space_of(m, shape) for m in mods]
    namespace["space"] = combined_space(spaces, list(labels) or [Path(v).stem for v in variants])

    def launch(config: Mapping[str, Any], inputs: Any) -> Any:
        i = int(config["variant"])
        own = {n: config[n] for n in spaces[i].names}
        return mods[i].launch(own, inputs)

    namespace["launch"] = launch


def check(harness: str, shape: tuple[int, ...], out: dict[str, Any]) -> dict[str, Any]:
    """Import the harness, report its space, run its default config once against the reference;
    ``out`` says how far it got when an exception escapes."""
    from kerntune.evaluate.triton_backend.kernel_file import load_kernel_module, module_space
    from kerntune.evaluate.triton_backend.worker import clone, compare_outputs

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
    try:
        import torch
    except ImportError:
        torch = None
    inputs = module.make_inputs(shape)
    originals = [clone(t) for t in inputs]
    ref = clone(module.reference(inputs))
    for t, o in zip(inputs, originals):
        if hasattr(t, "copy_"):
            t.copy_(o)
    t1 = time.perf_counter()
    got = module.launch(space.default, inputs)
    if torch is not None and torch.cuda.is_available():
        torch.cuda.synchronize()
    out["launch_s"] = time.perf_counter() - t1
    out["stage"] = "compare"
    wrong = compare_outputs(got, ref, torch)
    if wrong:
        out["error"] = f"at its default config {json.dumps(out['space']['default'])}: {wrong}"
        return out
    out["ok"], out["stage"] = True, "done"
    return out


def main() -> None:
    from kerntune.evaluate.triton_backend.worker import results_pipe
    from kerntune.transform.worker import LIMITS_ENV, apply_limits

    apply_limits(json.loads(os.environ.get(LIMITS_ENV) or "{}"))
    pipe = results_pipe()
    harness, shape = sys.argv[1], tuple(int(x) for x in sys.argv[2].split("x"))
    result: dict[str, Any] = {}
    try:
        check(harness, shape, result)
    except MemoryError:
        result.update(ok=False, error="out of memory (the worker's memory limit)")
    except BaseException as exc:  # noqa: BLE001 - model-written code may raise anything
        tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
        where = next((ln.strip() for ln in reversed(tb) if "/variants/" in ln), "")
        result.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:1500] + (f" ({where[:300]})" if where else ""))
    pipe.write(json.dumps(result) + "\n")
    pipe.flush()


if __name__ == "__main__":
    main()
