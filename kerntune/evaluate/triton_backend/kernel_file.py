"""A user's kernel file: the Triton kernel, how to launch it, its inputs and
its search space, in one importable Python file.

Required names:
  space                      a kerntune Space (or the dict form of one)
  make_inputs(shape)         -> tuple of tensors (on the GPU) for a problem shape (tuple of ints)
  launch(config, inputs)     runs the kernel with a config; returns the output tensor(s)
Optional:
  reference(inputs)          the correct output (else the default config's output is the reference)
  flops(shape), bytes_moved(shape)   for TFLOP/s and GB/s in reports
  name                       the kernel's name; description: a sentence for prompts

A kernel that lives in an installed package needs no launcher of its own: a file that defines
``kernel`` (the package's Triton kernel, imported), ``make_inputs(shape)`` and ``call(inputs)``
(the package's own entry point) is tuned by catching and replaying the package's launch
(``kerntune.adapters``); ``knobs`` and ``default(shape)`` name what to search when the package
picks its config by a heuristic, ``launch_knobs`` the constexprs an autotuned kernel's launcher
fixes outside its list (with ``default(shape)`` giving the launcher's values).  ``NAME`` or
``package.module:kernel`` in place of a path names one of kerntune's adapters for real packages
(``kerntune adapters`` lists them).
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from kerntune.errors import KerntuneError
from kerntune.space import Space, space_from_dict

REQUIRED = ("space", "make_inputs", "launch")


def is_adapter_spec(path: str | Path) -> bool:
    """``liger.rms_norm`` or ``package.module:kernel``: an adapter's name rather than a file."""
    text = str(path)
    return not Path(text).exists() and not text.endswith(".py") and ("/" not in text)


def load_kernel_module(path: str | Path) -> Any:
    if is_adapter_spec(path):
        from kerntune.adapters import load

        return load(str(path))
    path = Path(path).resolve()
    if not path.is_file():
        raise KerntuneError(f"kernel file not found: {path}")
    name = "kerntune_user_kernel_" + hashlib.sha1(str(path).encode()).hexdigest()[:8]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise KerntuneError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except ImportError as exc:  # most often torch or triton missing on this machine
        sys.modules.pop(name, None)
        missing = f" (install {exc.name}: a kernel file runs on a machine with a GPU, torch and Triton)" \
            if getattr(exc, "name", None) in ("torch", "triton") else ""
        raise KerntuneError(f"{path}: importing the kernel file failed: {exc}{missing}") from None
    except Exception as exc:  # noqa: BLE001 - the user's file raised while importing: one line, not a traceback
        sys.modules.pop(name, None)
        raise KerntuneError(f"{path}: importing the kernel file failed: {type(exc).__name__}: {exc}") from None
    if hasattr(module, "kernel") and hasattr(module, "call") and not hasattr(module, "launch"):
        from kerntune.adapters import from_module

        return from_module(module)
    missing = [n for n in REQUIRED if not hasattr(module, n)]
    if missing:
        raise KerntuneError(f"{path}: kernel file lacks {', '.join(missing)} (see kerntune.evaluate.triton_backend)")
    return module


def module_space(module: Any, shape: tuple[int, ...] | None = None) -> Space:
    if hasattr(module, "space_for"):
        if shape is None:
            raise KerntuneError("this kernel's space depends on the shape: pass --shape")
        return call_kernel_fn(module, "space_for", tuple(shape))  # type: ignore[no-any-return]
    space = module.space
    if isinstance(space, Space):
        return space
    if isinstance(space, dict):
        return space_from_dict(space)
    raise KerntuneError("the kernel file's `space` must be a kerntune Space or its dict form")


def source_hash(path: str | Path, module: Any = None) -> str:
    """What resume, warm start and the cache take a kernel's identity from: a kernel file's bytes; the
    module's own ``source_hash()`` where it has one (a package's kernel, a transform's variant), and for
    a package-form kernel file (``kernel``, ``make_inputs``, ``call``) the file's bytes beside it: the
    package's kernel alone made two such files with other inputs or knobs one kernel, so a resume took
    an edited file and the cache kept one winner for both."""
    if module is not None and hasattr(module, "source_hash"):
        own: str = module.source_hash()
        if _package_form_file(path, module):
            return hashlib.sha256(own.encode() + b"\n" + Path(path).read_bytes()).hexdigest()[:16]
        return own
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def _package_form_file(path: str | Path, module: Any) -> bool:
    """A user's kernel file that ``load_kernel_module`` made a ``PackageTarget`` of (not an adapter's
    name, nor another module with a ``source_hash`` of its own)."""
    from kerntune.adapters.target import PackageTarget

    return isinstance(module, PackageTarget) and not is_adapter_spec(path) and Path(path).is_file()


def parse_shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(x) for x in text.lower().replace(",", "x").split("x") if x)
    except ValueError:
        raise KerntuneError(f"bad --shape {text!r}: expected e.g. 4096x4096x4096") from None
    if not shape or any(d <= 0 for d in shape):
        raise KerntuneError(f"bad --shape {text!r}: sizes must be positive")
    return shape


def describe(module: ModuleType, shape: tuple[int, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {"kernel_name": getattr(module, "name", None) or getattr(module, "__name__", "kernel"),
                           "problem_size": list(shape),
                           "description": getattr(module, "description", None)}
    for key, fn in (("flops", "flops"), ("bytes", "bytes_moved")):
        if callable(getattr(module, fn, None)):
            value = call_kernel_fn(module, fn, shape)
            if value is not None:
                out[key] = value
    return out


def call_kernel_fn(module: Any, fn: str, shape: tuple[int, ...]) -> Any:
    """The kernel file's own ``fn(shape)`` (``flops``, ``bytes_moved``, ``space_for``): an exception
    raised there (most often a shape of the wrong length: ``m, n, k = shape``) becomes one line that
    names the function and the shape, not a traceback from the user's file."""
    try:
        return getattr(module, fn)(shape)
    except KerntuneError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's code: any error is the shape not fitting it
        where = getattr(module, "__file__", None)
        what = Path(where).name if where else (getattr(module, "name", None) or "the kernel")
        detail = " ".join(str(exc).split())
        raise KerntuneError(f"{what}: --shape {'x'.join(map(str, shape))} does not fit the kernel file ({fn}():"
                            f" {type(exc).__name__}{': ' + detail if detail else ''})") from None
