"""Adapters for Triton kernels that ship in installed packages (liger-kernel, fla-core, torchao, flag-gems, ...).

Each package module lists ``Adapter``s: which kernel, the package's own entry point that launches it,
realistic inputs at shapes taken from real models, and (for launchers that pick configs by a
heuristic) the knobs worth searching.  ``kerntune tune NAME --shape ...`` (or the kernel's
``package.module:kernel`` path) tunes one where it lives; ``benchmarks/real_kernels/`` runs them all.
Importing this module imports no package: each adapter module imports its package only when used.
"""

from __future__ import annotations

import importlib
from typing import Any

from kerntune.adapters.target import Adapter, PackageTarget, import_object
from kerntune.errors import KerntuneError

#: adapter module -> the pip package whose kernels it covers
ADAPTER_MODULES = {
    "kerntune.adapters.liger": "liger-kernel",
    "kerntune.adapters.liger_moe": "liger-kernel",
    "kerntune.adapters.liger_mlp": "liger-kernel",
    "kerntune.adapters.fla": "fla-core",
    "kerntune.adapters.torchao": "torchao",
    "kerntune.adapters.flaggems": "flag-gems",
}
#: adapter modules whose package refuses to import without a GPU (flag-gems probes the device at import)
GPU_ONLY_MODULES = frozenset({"kerntune.adapters.flaggems"})


def all_adapters() -> dict[str, Adapter]:
    """Every adapter by name (``liger.rms_norm``, ...)."""
    out: dict[str, Adapter] = {}
    for mod in ADAPTER_MODULES:
        for a in importlib.import_module(mod).ADAPTERS:
            out[a.name] = a
    return out


def gpu_only_names() -> set[str]:
    """Names of the adapters whose package imports only on a GPU (``GPU_ONLY_MODULES``); listing them
    imports no package."""
    return {a.name for mod in GPU_ONLY_MODULES for a in importlib.import_module(mod).ADAPTERS}


def find(spec: str) -> Adapter:
    """An adapter by its name or its kernel's ``package.module:kernel`` path."""
    adapters = all_adapters()
    if spec in adapters:
        return adapters[spec]
    hits = [a for a in adapters.values() if a.kernel == spec]
    if len(hits) > 1 and sum(not a.variant for a in hits) == 1:  # the plain way, not a variant of it
        hits = [a for a in hits if not a.variant]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise KerntuneError(f"{spec}: several adapters launch this kernel ({', '.join(a.name for a in hits)}); "
                            "name one")
    raise KerntuneError(f"no adapter for {spec!r}: known are {', '.join(sorted(adapters))}. For another kernel, "
                        "write a kernel file that imports it and defines kernel, make_inputs(shape) and "
                        "call(inputs) (README: tuning a kernel where it lives)")


def load(spec: str) -> PackageTarget:
    return PackageTarget(find(spec))


def from_module(module: Any) -> PackageTarget:
    """A user's kernel file that names a package ``kernel`` and the ``call`` that launches it."""
    kernel = module.kernel
    adapter = Adapter(
        name=getattr(module, "name", getattr(kernel, "__name__", "kernel")), kernel="", package=getattr(
            module, "package", ""), shape_doc=getattr(module, "shape_doc", ""), shapes=getattr(module, "shapes", ()),
        make_inputs=module.make_inputs, call=module.call, knobs=getattr(module, "knobs", None),
        default=getattr(module, "default", None), launch_knobs=getattr(module, "launch_knobs", None),
        torch_op=getattr(module, "torch_op", None),
        bytes_moved=getattr(module, "bytes_moved", None), flops=getattr(module, "flops", None),
        which=getattr(module, "which", -1), description=getattr(module, "description", ""),
        widen=getattr(module, "widen", True), constraints=tuple(getattr(module, "constraints", ())),
        pre_hook=getattr(module, "pre_hook", None))
    return PackageTarget(adapter, kernel=kernel)


__all__ = ["ADAPTER_MODULES", "GPU_ONLY_MODULES", "Adapter", "PackageTarget", "all_adapters", "find", "from_module",
           "gpu_only_names", "import_object", "load"]
