"""Correctness of a rewritten kernel: its outputs against the original kernel's.

Inputs come from a user's generator file (``make_args(problem_size) -> list``), from a
generator the model wrote, or from arrays a Python caller passes; generators run only
inside the worker process (``kerntune.transform.worker``), under its time and memory
limits.  The inputs are made once and saved, so every kernel variant sees the same bytes.

The outputs are the arrays the original kernel changes (found on its first run; only those are
copied back and compared afterwards, so output arrays must start different from their results,
e.g. zeros).  Outputs are compared by dtype: floats within a relative and an absolute tolerance scaled
by the reference's magnitude near each element (a tiled kernel sums in another order), with at most a
tiny fraction of elements off by more than the relative one (a systematic error), integers and
booleans exactly; NaN or inf where the reference has a finite value never passes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

#: dtype kind/size -> (rtol, atol as a fraction of the reference's largest magnitude near the element)
TOLERANCES: dict[str, tuple[float, float]] = {
    "float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2), "float32": (1e-4, 1e-5), "float64": (1e-9, 1e-12),
    "complex64": (1e-4, 1e-5), "complex128": (1e-9, 1e-12),
}
MAX_ARG_BYTES = 2**31
#: elements per block of ``nearby_scale``: an element's absolute tolerance scales with the largest
#: magnitude within a block or so of it
NEARBY_BLOCK = 4096
#: a right reordering of sums leaves few elements outside rtol plus ROUNDINGS rounding units of the nearby
#: magnitude (near-zero ones, by cancellation: 0.2% of a float32 matmul's with K=16384, 0.3% of a float16 one
#: summed in float16 with K=2048); more than this fraction (and SYSTEMATIC_MIN elements) is a systematic error
#: (an output off by 3e-6 of its largest magnitude everywhere, within atol, has 9% there)
SYSTEMATIC_FRACTION = 0.01
SYSTEMATIC_MIN = 16
ROUNDINGS = 4


def tolerance(dtype: np.dtype, overrides: Mapping[str, Sequence[float]] | None = None) -> tuple[float, float]:
    name = np.dtype(dtype).name
    if overrides and name in overrides:
        rtol, atol = overrides[name]
        return float(rtol), float(atol)
    if name in TOLERANCES:
        return TOLERANCES[name]
    return (0.0, 0.0)  # integers, booleans: exact


def compare(reference: Sequence[Any], outputs: Sequence[Any],
            overrides: Mapping[str, Sequence[float]] | None = None) -> tuple[bool, str, float]:
    """(equal within tolerance, what differs, largest absolute error) over the array arguments."""
    worst = 0.0
    for i, (ref, out) in enumerate(zip(reference, outputs)):
        if ref is None or not isinstance(ref, np.ndarray):
            continue
        if out is None:
            return False, f"argument {i}: no output", float("inf")
        out = np.asarray(out)
        if out.shape != ref.shape:
            if out.size != ref.size:
                return False, f"argument {i}: shape {out.shape} instead of {ref.shape}", float("inf")
            out = out.reshape(ref.shape)
        if ref.dtype.kind in "fc":
            ok, why, e = _compare_floats(i, ref, out, *tolerance(ref.dtype, overrides))
            worst = max(worst, e)
            if not ok:
                return False, why, e
        else:
            if not np.array_equal(ref, out):
                n = int(np.sum(ref != out)) if ref.shape == out.shape else ref.size
                return False, f"argument {i}: {n} of {ref.size} elements differ from the original kernel's", float(n)
    return True, "", worst


def _compare_floats(i: int, ref: np.ndarray, out: np.ndarray, rtol: float, atol_frac: float) -> tuple[bool, str, float]:
    """Floats within ``rtol`` of each element plus ``atol_frac`` of the largest magnitude near it
    (``nearby_scale``), with few elements off by more than rtol plus a few rounding units of that magnitude
    (``SYSTEMATIC_FRACTION``); non-finite reference values reproduced exactly.

    Why near, not the whole array's largest: an element's rounding error scales with the terms it sums,
    which its neighbours share; a prefix sum's last element is ~10^6 times its first ones, so an
    exclusive scan (every element off by one input) passed against the inclusive one within an absolute
    slack of 15.  Why the count: a right reordering of sums leaves only scattered elements near zero
    (cancellation) outside ``rtol`` and their own rounding; an error in most elements is systematic.

    Computed in the arrays' own precision (float32 stays float32; float16 goes to float32): the
    tolerances are far above the rounding of one subtraction, and outputs can hold 10^8 elements."""
    if ref.dtype == out.dtype and np.array_equal(ref, out):  # bit for bit (and free of NaN): the common fast case
        return True, "", 0.0
    work = np.float32 if ref.dtype in (np.float16, np.float32) else (np.complex128 if ref.dtype.kind == "c" else np.float64)
    r, o = ref.astype(work, copy=False), out.astype(work, copy=False)
    finite = np.isfinite(r)
    if bool(finite.all()):
        if not bool(np.isfinite(o).all()):
            return False, f"argument {i}: output holds NaN or inf", float("inf")
        err = o - r
        np.abs(err, out=err)
        magnitude = np.abs(r)
    else:
        if bool(np.any(~np.isfinite(o) & finite)):
            return False, f"argument {i}: output holds NaN or inf", float("inf")
        err = np.abs(np.where(finite, o - r, 0))
        same = np.array_equal(np.isnan(r), np.isnan(o)) and np.array_equal(r[np.isinf(r)], o[np.isinf(r)])
        if not same:
            return False, f"argument {i}: NaN or inf where the original kernel's output has none, or the reverse", \
                float("inf")
        magnitude = np.abs(np.where(finite, r, 0))
    err, magnitude = err.real.reshape(-1), magnitude.real.reshape(-1)  # abs of complex is real already
    e = float(np.max(err)) if err.size else 0.0
    nearby = nearby_scale(magnitude)
    rounding = min(ROUNDINGS * _eps(ref.dtype), atol_frac)
    bound = magnitude  # reused in place: |ref| is not needed again
    bound *= rtol
    _add_blockwise(bound, nearby * rounding)
    systematic = int(np.count_nonzero(err > bound))
    _add_blockwise(bound, nearby * (atol_frac - rounding))
    bad = err > bound
    if bool(bad.any()):
        idx = int(np.argmax(bad))
        return False, (f"argument {i}: differs from the original kernel's output (max abs error {e:.3g},"
                       f" {int(np.count_nonzero(bad))} of {ref.size} elements outside rtol={rtol:g},"
                       f" atol={atol_frac:g}*max|ref| nearby; first at flat index {idx})"), e
    if systematic > max(SYSTEMATIC_MIN, SYSTEMATIC_FRACTION * ref.size):
        return False, (f"argument {i}: differs from the original kernel's output systematically ({systematic} of"
                       f" {ref.size} elements off by more than rtol={rtol:g} and their rounding; max abs error"
                       f" {e:.3g})"), e
    return True, "", e


def _eps(dtype: np.dtype) -> float:
    """The dtype's rounding unit (bfloat16 without ml_dtypes: 2^-7)."""
    try:
        return float(np.finfo(dtype).eps)
    except (TypeError, ValueError):
        return 2.0**-7


def nearby_scale(magnitude: np.ndarray, block: int | None = None) -> np.ndarray:
    """Per block of ``NEARBY_BLOCK`` consecutive elements (memory order), the largest magnitude in it and
    in the blocks on either side: an element's scale for the absolute tolerance (one block: the whole
    array's largest, as before)."""
    block = block or NEARBY_BLOCK
    n = magnitude.size
    if n == 0:
        return np.zeros(1, magnitude.dtype)
    full = n // block * block
    maxima = [magnitude[:full].reshape(-1, block).max(axis=1)] if full else []
    if full < n:
        maxima.append(magnitude[full:].max(keepdims=True))
    m = np.concatenate(maxima)
    near = m.copy()
    np.maximum(near[1:], m[:-1], out=near[1:])
    np.maximum(near[:-1], m[1:], out=near[:-1])
    np.maximum(near, 1e-30, out=near)
    return near


def _add_blockwise(values: np.ndarray, per_block: np.ndarray, block: int | None = None) -> None:
    """``values`` (flat) += each element's block's entry of ``per_block``, in place (no full-size copy)."""
    block = block or NEARBY_BLOCK
    full = values.size // block * block
    if full:
        view = values[:full].reshape(-1, block)
        np.add(view, per_block[:full // block, None].astype(values.dtype, copy=False), out=view)
    if full < values.size:
        values[full:] += per_block[-1].astype(values.dtype)


# -- arguments on disk ----------------------------------------------------------------------------
def save_args(args: Sequence[Any], path: str | Path) -> list[dict[str, Any]]:
    """Arrays and numpy scalars to ``.npz`` plus a manifest (scalars keep their dtype)."""
    manifest, arrays = [], {}
    total = 0
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray):
            kind = "array"
        elif isinstance(a, np.generic):
            kind = "scalar"
        elif isinstance(a, (bool, int, float)):
            raise TypeError(f"argument {i}: a Python {type(a).__name__}; use a numpy scalar such as np.int32(n)"
                            " so that its C type is known")
        else:
            raise TypeError(f"argument {i}: {type(a).__name__} is neither a numpy array nor a numpy scalar")
        arr = np.asarray(a)
        if arr.dtype.kind not in "biufc":
            raise TypeError(f"argument {i}: dtype {arr.dtype} is not a number type")
        total += arr.nbytes
        if total > MAX_ARG_BYTES:
            raise ValueError(f"arguments larger than {MAX_ARG_BYTES >> 20} MiB")
        arrays[f"a{i}"] = arr
        manifest.append({"kind": kind, "dtype": arr.dtype.name, "shape": list(arr.shape)})
    np.savez(path, **arrays)
    Path(str(path) + ".json").write_text(json.dumps(manifest))
    return manifest


def load_args(path: str | Path) -> list[Any]:
    manifest = json.loads(Path(str(path) + ".json").read_text())
    with np.load(path, allow_pickle=False) as data:
        out: list[Any] = []
        for i, m in enumerate(manifest):
            arr = data[f"a{i}"]
            out.append(arr[()] if m["kind"] == "scalar" else np.array(arr))
    return out


def save_outputs(outputs: Sequence[Any], path: str | Path) -> None:
    arrays = {f"a{i}": np.asarray(o) for i, o in enumerate(outputs) if isinstance(o, np.ndarray)}
    np.savez(path, n=np.int64(len(outputs)), **arrays)


def load_outputs(path: str | Path) -> list[Any]:
    with np.load(path, allow_pickle=False) as data:
        n = int(data["n"])
        return [np.array(data[f"a{i}"]) if f"a{i}" in data.files else None for i in range(n)]


def run_generator(problem_size: Sequence[int], file: str | None = None, code: str | None = None) -> list[Any]:
    """Call ``make_args(problem_size)`` from a file or from code text.

    Only the worker process calls this (the generator is arbitrary Python: a user's file or a
    model's code), under the worker's memory and time limits, in its scratch directory.
    """
    if file is not None:
        source, where = Path(file).read_text(), str(file)
    elif code is not None:
        source, where = code, "<model-written make_args>"
    else:
        raise ValueError("no generator")
    namespace: dict[str, Any] = {"__name__": "kerntune_args_generator", "np": np, "numpy": np}
    exec(compile(source, where, "exec"), namespace)  # noqa: S102 - sandboxed worker process, by design
    make_args = namespace.get("make_args")
    if not callable(make_args):
        raise ValueError(f"{where}: defines no make_args(problem_size) function")
    args = make_args(tuple(int(p) for p in problem_size))
    if not isinstance(args, (list, tuple)) or not args:
        raise ValueError(f"{where}: make_args must return a non-empty list of numpy arrays and scalars")
    return list(args)
