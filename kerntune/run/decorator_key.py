"""What ``@kerntune.autotune``'s cache is keyed by: the kernel's identity and a call's problem key.

The kernel's identity (``kernel_identity``) is Triton's own ``JITFunction.cache_key``, which covers
the ``@triton.jit`` helpers the kernel calls and the ``tl.constexpr`` globals it reads, so editing a
helper tunes afresh instead of serving the winner of the old code.  A call's problem key
(``problem_key``) holds the key arguments' values and, as ``triton.autotune``'s key does (Triton
3.6 ``Autotuner.run`` appends ``str(arg.dtype)`` of every argument with a ``dtype``), the dtype of
every tensor argument: an fp32 call must not launch the tile picked for fp16.  ``kerntune.retune``
hashes ``triton.autotune`` kernels with ``kernel_identity`` too.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Mapping, Sequence

from kerntune.space import jsonable

#: The problem key's member holding the tensor arguments' dtypes (argument name -> dtype); not an
#: identifier, so no kernel argument of a key can take its place.
DTYPES = "(dtypes)"


def key_part(value: Any) -> Any:
    """One key argument as the cache key holds it: a tensor by its shape and dtype, else its value."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return [list(value.shape), str(value.dtype)]
    return jsonable(value)


def call_dtypes(arg_names: Sequence[str], args: Mapping[str, Any]) -> dict[str, str]:
    """Every argument with a ``dtype`` (a tensor; ``triton.autotune``'s key takes the same ones,
    as ``kerntune.retune._key`` does), by name: a name-keyed map, not Triton's positional list,
    so that an optional pointer passed as None in one call and a tensor in another cannot shift
    one dtype into another's place."""
    return {n: str(args[n].dtype) for n in arg_names if n in args and hasattr(args[n], "dtype")}


def problem_key(key: Sequence[str], arg_names: Sequence[str], defaults: Mapping[str, Any],
                args: Mapping[str, Any]) -> str:
    """The key arguments' values (a tensor's shape and dtype; one the call leaves out counts as its
    default value, as the kernel sees it, or null where it has none) and, under ``DTYPES``, the
    dtypes of the call's tensor arguments (left out when it has none).

    Keys stored before the dtypes were added (no ``DTYPES`` member) no longer match a call with
    tensors: such a key is tuned once more, which is the point (the old entry may hold an fp16
    winner that an fp32 call would have been served)."""
    out = {k: key_part(args[k] if k in args else defaults.get(k)) for k in key}
    dtypes = call_dtypes(arg_names, args)
    if dtypes:
        out[DTYPES] = dtypes
    return json.dumps(out, sort_keys=True)


def split_key(pkey: str) -> tuple[dict[str, Any], Any]:
    """A problem key's key-argument values and its dtypes (None where it holds none)."""
    values = json.loads(pkey)
    return values, values.pop(DTYPES, None)


def kernel_identity(fn: Any, source: str | None = None) -> str:
    """What identifies the kernel's code: Triton's ``JITFunction.cache_key`` (a hash of its source
    and of its dependencies: the ``@triton.jit`` functions it calls, transitively, and the
    ``tl.constexpr`` globals it reads), or, where there is none (Triton's interpreter,
    ``TRITON_INTERPRET=1``, gives an ``InterpretedFunction`` without one; a CPU stand-in), the
    source text ``source`` (a helper's edit then goes unseen, as it did before).

    Read at the first lookup, never at decoration: Triton memoizes ``cache_key`` on first use, and a
    helper defined below the kernel in its module is not there yet while the decorator runs, so an
    early read would leave that helper out both here and in Triton's own compile cache key.
    ``cache_key`` also holds the kernel's first line number: an edit above the kernel in its file
    tunes it afresh, as it makes Triton compile it afresh."""
    jit = sys.modules.get("triton.runtime.jit")
    cls = getattr(jit, "JITFunction", None)
    layer = fn
    for _ in range(8):  # the JITFunction under heuristics wrappers (each keeps the next in ``.fn``)
        if layer is None:
            break
        if cls is not None and isinstance(layer, cls):
            try:
                key = layer.cache_key
            except Exception:
                # What Triton cannot hash (an unsupported function referenced) it raises at this launch
                # anyway; a failed read leaves its placeholder key memoized, which would let Triton's own
                # read (``kerntune.retune`` falling back to it) pass silently: cleared so that it raises.
                if str(getattr(layer, "hash", "")).startswith("recursion:"):
                    layer.hash = None
                raise
            if isinstance(key, str) and key:
                return "cache_key:" + key
            break
        layer = getattr(layer, "fn", None)
    return source or ""
