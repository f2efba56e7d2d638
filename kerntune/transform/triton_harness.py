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

The check of a new variant (``kerntune.transform.triton_check``) takes the reference and compares in a
process that never imports the variant.  In the evaluator's workers, which import the harness, ``bind``
takes the reference before it loads any variant, and ``launch`` refuses to go on once a variant has
replaced one of the functions the output comparison uses (``ComparisonGuard``): a variant's code runs
in the process that compares there, so this is a tripwire against the plain patches, not a wall.
"""

from __future__ import annotations

import os
import sys
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


#: What ``compare_outputs`` (the Triton evaluator's worker) and its callers rely on: replacing one of them
#: is how a variant would make a wrong output pass.
GUARDED = {"torch": ("allclose", "isnan", "isfinite", "nan_to_num", "equal", "Tensor", "float16", "bfloat16",
                     "float32", "float64", "complex64", "complex128", "cuda", "view_as_real", "where", "linalg",
                     "use_deterministic_algorithms"),
           "torch._C": ("_set_deterministic_algorithms",),  # unwritten_poisoned sets the mode through it
           "torch.Tensor": ("float", "abs", "max", "any", "item", "numel", "clone", "copy_", "to", "__and__",
                            "__invert__", "__sub__", "__truediv__", "__getitem__", "shape", "dtype", "__bool__",
                            "__float__", "resolve_conj"),
           "numpy": ("allclose", "isnan", "isfinite", "asarray", "nanmax", "abs", "where", "linalg"),
           "builtins": ("isinstance", "len", "max", "float", "zip", "type", "all", "any", "abs"),
           "kerntune.evaluate.triton_backend.output_check": ("compare_outputs", "clone", "_is_plain_numbers",
                                                             "_relative_error", "_holds_values", "unwritten_poisoned"),
           "kerntune.evaluate.triton_backend.worker": ("compare_outputs", "clone", "timer", "unwritten_poisoned"),
           "kerntune.evaluate.triton_backend.reference": ("compare_outputs", "clone", "unwritten_poisoned")}


class ComparisonGuard:
    """The objects in ``GUARDED`` as they were before any variant ran; ``changed()`` names those replaced
    since (identity, so any reassignment counts).  A tripwire for processes where a variant's code and
    the comparison share an interpreter: it sees ``torch.allclose = ...``, not a patch of torch's C
    internals; the check of a new variant does not rely on it (``triton_check``)."""

    def __init__(self) -> None:
        import importlib

        self.entries: list[tuple[str, Any, str, Any]] = []
        for owner_name, attrs in GUARDED.items():
            try:
                owner: Any = importlib.import_module(owner_name.removesuffix(".Tensor"))
            except ImportError:
                continue
            if owner_name.endswith(".Tensor"):
                owner = owner.Tensor
            self.entries += [(owner_name, owner, attr, getattr(owner, attr, None)) for attr in attrs]
        main = sys.modules.get("__main__")  # the evaluator's worker runs as ``python -m ...worker``
        if main is not None and callable(getattr(main, "compare_outputs", None)):
            owner_name = "kerntune.evaluate.triton_backend.worker"
            self.entries += [("__main__", main, attr, getattr(main, attr, None)) for attr in GUARDED[owner_name]]
        self.hooks = (sys.getprofile(), sys.gettrace())  # a hook could patch while the comparison runs

    def add(self, name: str, fn: Any) -> None:
        """Also guard a function's code (the reference's: ``fn.__code__ = ...`` would change it in place)."""
        for attr in ("__code__", "__defaults__", "__kwdefaults__"):
            if hasattr(fn, attr):
                self.entries.append((name, fn, attr, getattr(fn, attr)))

    def changed(self) -> list[str]:
        out = [f"{name}.{attr}" for name, owner, attr, value in self.entries if getattr(owner, attr, None) is not value]
        if (sys.getprofile(), sys.gettrace()) != self.hooks:
            out.append("sys.setprofile/settrace hooks")
        return out

    def check_outputs(self, got: Any) -> None:
        """Tensors ``launch`` returns must be plain ``torch.Tensor``s: a subclass can override
        ``__torch_function__`` and answer the comparison itself."""
        torch = sys.modules.get("torch")
        if torch is None or type(got) is torch.Tensor:
            return
        for t in (got if isinstance(got, (tuple, list)) else (got,)):
            if isinstance(t, torch.Tensor) and type(t) is not torch.Tensor:
                raise RuntimeError(f"launch returned a {type(t).__name__}, a subclass of torch.Tensor: return"
                                   " plain tensors")

    def verify(self, who: str) -> None:
        if all(getattr(owner, attr, None) is value for _, owner, attr, value in self.entries) \
                and (sys.getprofile(), sys.gettrace()) == self.hooks:
            return  # the fast path: it runs after every launch the evaluator times
        bad = self.changed()
        if bad:
            raise RuntimeError(f"{who} replaced {', '.join(bad[:4])}, which the output check uses: refused")

    def after_launch(self, got: Any) -> Any:
        self.verify("launch")
        self.check_outputs(got)
        return got


def bind(namespace: dict[str, Any], original: str, variants: Sequence[str], labels: Sequence[str] = (),
         shape: Sequence[int] | None = None) -> None:
    """Fill a harness module's namespace (see the module docstring); paths relative to the harness."""
    fix_interpreter()
    base = Path(namespace.get("__file__") or ".").resolve().parent
    # the original, its reference and the guard's snapshot come before any variant's code runs
    orig = _load(original, base)
    import kerntune.evaluate.triton_backend.reference  # noqa: F401 - its functions are guarded
    import kerntune.evaluate.triton_backend.worker  # noqa: F401 - its functions are guarded
    guard = ComparisonGuard()
    for key in ("make_inputs", "reference", "launch"):
        if callable(getattr(orig, key, None)):
            guard.add(f"the original's {key}", getattr(orig, key))
    for key in FROM_ORIGINAL:
        if hasattr(orig, key):
            namespace[key] = getattr(orig, key)
    if callable(getattr(orig, "reference", None)):
        namespace["reference"] = orig.reference
    else:  # the original kernel's own output at its default config is the reference
        orig_default = _space_of(orig, shape).default
        namespace["reference"] = lambda inputs: orig.launch(orig_default, inputs)
    mods = []
    for v in variants:
        mods.append(_load(v, base))
        guard.verify(f"importing {Path(v).name}")
    if len(mods) == 1:
        namespace["space"] = _space_of(mods[0], shape)
        own_launch = mods[0].launch

        def launch(config: Mapping[str, Any], inputs: Any) -> Any:
            return guard.after_launch(own_launch(config, inputs))

        namespace["launch"] = launch
        return
    spaces = [_space_of(m, shape) for m in mods]
    guard.verify("a variant's space")
    namespace["space"] = combined_space(spaces, list(labels) or [Path(v).stem for v in variants])

    def launch_one(config: Mapping[str, Any], inputs: Any) -> Any:
        i = int(config["variant"])
        own = {n: config[n] for n in spaces[i].names}
        return guard.after_launch(mods[i].launch(own, inputs))

    namespace["launch"] = launch_one
