"""Whether a config's output is right: the comparison with the reference's output, and the poisoned
allocations under which a checked launch runs, so that what a config leaves unwritten cannot pass.

Apart from the worker (``worker.py``, which re-exports these) because the in-process decorator and the
transform harness use the same check, and the harness guards exactly these objects against a variant
that would replace them (``kerntune.transform.triton_harness.GUARDED``)."""

from __future__ import annotations

import contextlib
import warnings
from typing import Any, Iterator


def compare_outputs(out: Any, ref: Any, torch: Any) -> str | None:
    """None if ``out`` matches ``ref``; else why not.  Tensors use dtype tolerances;
    anything else (a CPU launcher's lists or numbers) is compared as float arrays.  NaN is wrong only
    where the reference holds a number (a masked row's NaN in the reference is the right answer there,
    and a poisoned output a config leaves unwritten still shows as NaN where the reference wrote).
    Integer and bool outputs must match exactly; complex ones are compared as (real, imaginary) pairs.
    Besides each element, the whole output: its error may not exceed half the reference's norm, since the
    elementwise tolerance's floor (atol never below its value at magnitude 1, for fp16 outputs near zero
    by cancellation) passed an all-zeros output, or one half missing, wherever the reference was small.
    A reference that holds no tensor or number (a launcher that writes into a buffer and returns None)
    fails: nothing could be checked."""
    if not _holds_values(ref, torch):
        return "launch returned no output; return the output tensor(s) so configs can be checked"
    outs = out if isinstance(out, (tuple, list)) and not _is_plain_numbers(out) else (out,)
    refs = ref if isinstance(ref, (tuple, list)) and not _is_plain_numbers(ref) else (ref,)
    if len(outs) != len(refs):
        return f"returned {len(outs)} outputs, the reference {len(refs)}"
    for o, r in zip(outs, refs):
        if torch is not None and isinstance(r, torch.Tensor):
            if not isinstance(o, torch.Tensor):
                return f"returned {type(o).__name__}, the reference a tensor"
            if o.shape != r.shape:
                return f"output shape {tuple(o.shape)}, the reference's {tuple(r.shape)}"
            if not (r.dtype.is_floating_point or r.dtype.is_complex):  # integers, bools: exactly
                if o.dtype != r.dtype:  # another width: compared as float64 (exact up to 2**53)
                    o, r = o.to(torch.float64), r.to(torch.float64)
                if not torch.equal(o, r):
                    bad = int((o != r).sum())
                    return f"differs from the reference in {bad} of {r.numel()} elements (integers: exact match needed)"
                continue
            wide = r.dtype in (torch.float64, torch.complex128)  # compared in float64, not cut to float32
            if r.dtype.is_complex or o.dtype.is_complex:  # .float() dropped the imaginary part
                pair = torch.complex128 if wide else torch.complex64
                of, rf = (torch.view_as_real(x.to(pair).resolve_conj()) for x in (o, r))
            else:
                of, rf = (x.to(torch.float64 if wide else torch.float32) for x in (o, r))
            if (torch.isnan(of) & ~torch.isnan(rf)).any():
                return "output holds NaN"
            tol = {torch.float16: (1e-2, 1e-2), torch.complex32: (1e-2, 1e-2), torch.bfloat16: (2e-2, 2e-2),
                   torch.float32: (1e-4, 1e-4), torch.complex64: (1e-4, 1e-4), torch.float64: (1e-7, 1e-9),
                   torch.complex128: (1e-7, 1e-9)}
            # float64's own tolerance where the output is float64 too (a float32 kernel checked against a
            # float64 reference() keeps the loose default it always had)
            rtol, atol = tol.get(r.dtype if not wide or o.dtype in (torch.float64, torch.complex128) else None,
                                 (1e-3, 1e-3))
            finite = rf[torch.isfinite(rf)]
            scale = max(1.0, float(finite.abs().max())) if finite.numel() else 1.0
            if not torch.allclose(of, rf, rtol=rtol, atol=atol * scale, equal_nan=True):
                err = torch.nan_to_num((of - rf).abs(), nan=0.0).max().item()
                return f"differs from the reference (max abs error {err:.3g})"
            both = torch.isfinite(of) & torch.isfinite(rf)
            rel = _relative_error(torch.where(both, of - rf, 0), torch.where(both, rf, 0), torch)
        else:
            import numpy as np

            a, b = np.asarray(o, dtype=float), np.asarray(r, dtype=float)
            if a.shape != b.shape:
                return f"output shape {a.shape}, the reference's {b.shape}"
            if np.asarray(r).dtype.kind in "biu":  # integers, bools: exactly
                bad = int((a != b).sum())
                if bad:
                    return f"differs from the reference in {bad} of {b.size} elements (integers: exact match needed)"
                continue
            if (np.isnan(a) & ~np.isnan(b)).any():
                return "output holds NaN"
            if not np.allclose(a, b, rtol=1e-3, atol=1e-3, equal_nan=True):
                err = float(np.nanmax(np.abs(a - b)))
                return f"differs from the reference (max abs error {err:.3g})"
            both = np.isfinite(a) & np.isfinite(b)
            rel = _relative_error(np.where(both, a - b, 0.0), np.where(both, b, 0.0), None)
        if rel is not None and rel > 0.5:
            return f"differs from the reference (relative error of the whole output {rel:.3g})"
    return None


def _relative_error(diff: Any, ref: Any, torch: Any) -> float | None:
    """||diff|| / ||ref|| (L2, in float64, both scaled by max|ref| so that no square overflows); None
    where the reference is all zeros.  An all-zeros output is at 1, one with half its elements missing at
    about 0.7, whatever the reference's magnitude; a right one, within the elementwise tolerance (a few
    percent at the reference's own magnitude), stays far below 0.5 unless the whole output is rounding
    noise (every element near zero by cancellation), where no check can tell right from wrong."""
    if torch is not None:
        top = float(ref.abs().max()) if ref.numel() else 0.0
        if top == 0.0:
            return None
        norm = lambda x: float(torch.linalg.vector_norm(x.to(torch.float64) / top))  # noqa: E731
    else:
        import numpy as np

        top = float(np.abs(ref).max()) if ref.size else 0.0
        if top == 0.0:
            return None
        norm = lambda x: float(np.linalg.norm((x / top).ravel()))  # noqa: E731
    return norm(diff) / norm(ref)


def _is_plain_numbers(x: Any) -> bool:
    return all(isinstance(v, (int, float)) for v in x)


def _holds_values(x: Any, torch: Any) -> bool:
    """Whether ``x`` holds a tensor, an array or a number anywhere (None, or tuples of None, do not)."""
    if isinstance(x, (int, float)) or hasattr(x, "shape") or (torch is not None and isinstance(x, torch.Tensor)):
        return True
    if isinstance(x, (tuple, list)):
        return any(_holds_values(v, torch) for v in x)
    return False


def clone(x: Any) -> Any:
    if hasattr(x, "clone"):
        return x.clone()
    if hasattr(x, "copy") and hasattr(x, "shape"):  # numpy arrays
        return x.copy()
    if isinstance(x, (tuple, list)):
        return type(x)(clone(v) for v in x)
    return x


@contextlib.contextmanager
def unwritten_poisoned(torch: Any) -> Iterator[None]:
    """While a launch is checked: memory it allocates (``torch.empty`` and kin) is NaN for floats, the
    largest value for integers (deterministic mode's ``fill_uninitialized_memory``), so what a config
    leaves unwritten fails the check.  A config writing half its output, or none, passed: the reference's
    output, cloned and dropped, went back to the caching allocator, and the config's ``torch.empty`` got
    it back with the right values in it.  Timed launches are left alone, and memory made before (inputs,
    a buffer ``make_inputs`` zeroed for atomics) is untouched; the settings are restored after.  (A kernel
    file's ``make_inputs`` runs under it too: its uninitialised output buffers start as NaN.)"""
    det = None
    if torch is not None:
        try:
            import torch.utils.deterministic as det

            was = (torch.are_deterministic_algorithms_enabled(),
                   torch.is_deterministic_algorithms_warn_only_enabled(), det.fill_uninitialized_memory)
        except (ImportError, AttributeError):  # a torch without them: the launch as it was
            det = None
    if det is None:
        yield
        return
    try:
        with warnings.catch_warnings():  # ops without a deterministic implementation say so: not the kernel's news
            warnings.filterwarnings("ignore", message=r".*deterministic", category=UserWarning)
            torch.use_deterministic_algorithms(True, warn_only=was[1] if was[0] else True)
            det.fill_uninitialized_memory = True
            yield
    finally:
        det.fill_uninitialized_memory = was[2]
        torch.use_deterministic_algorithms(was[0], warn_only=was[1])


def _poison_value(dtype: Any, torch: Any) -> Any:
    """What ``fill_uninitialized_memory`` writes into an integer or bool tensor (None: a float type,
    whose NaN fill no right output holds)."""
    if dtype == torch.bool:
        return True
    if dtype.is_floating_point or dtype.is_complex:
        return None
    return torch.iinfo(dtype).max


def exact_buffers_left_poisoned(out: Any, inputs: Any, originals: Any, torch: Any) -> list[int]:
    """Positions in ``inputs`` of integer or bool output buffers that ``make_inputs`` left uninitialised.

    Why: an uninitialised buffer starts filled (``unwritten_poisoned``) with NaN for floats, which no
    right output holds, but with True or the type's largest value for bools and integers, which a right
    output may well hold (a mask that is all True where a config wrote it): a config leaving part of such
    a buffer unwritten passed.  A buffer qualifies where the launch returns it (the same memory) and its
    copy taken after ``make_inputs`` (``originals``) is the fill everywhere, so no kernel may read what
    is in it: launching again over it zeroed shows what the config leaves unwritten.  Buffers holding
    data (a counter incremented in place) are never touched."""
    if torch is None:
        return []
    outs = out if isinstance(out, (tuple, list)) else (out,)
    ptrs = {o.data_ptr() for o in outs if isinstance(o, torch.Tensor) and o.numel()}
    found = []
    for i, (t, orig) in enumerate(zip(inputs, originals)):
        if not isinstance(t, torch.Tensor) or not t.numel() or t.data_ptr() not in ptrs:
            continue
        fill = _poison_value(t.dtype, torch)
        if fill is not None and isinstance(orig, torch.Tensor) and bool((orig == fill).all()):
            found.append(i)
    return found


_EMPTY_OPS = ("empty.memory_format", "empty_strided.default", "empty_like.default", "new_empty.default",
              "new_empty_strided.default")


@contextlib.contextmanager
def exact_allocations_zeroed(torch: Any) -> Iterator[None]:
    """While it is active, a bool or integer tensor allocated uninitialised (``torch.empty`` and kin,
    however the calling code reaches it: the dispatcher sees every one) starts zeroed; floats keep
    ``unwritten_poisoned``'s NaN.  Why: an output that ``launch()`` itself allocates starts at True or
    the type's largest value under ``unwritten_poisoned``, which a right output may hold (a mask that is
    True where a config wrote it), so a config leaving part of it unwritten passed; launched once more
    under this, what it leaves unwritten is False or 0 instead."""
    from torch.utils._python_dispatch import TorchDispatchMode

    ops = set()
    for name in _EMPTY_OPS:
        op, _, overload = name.partition(".")
        packet = getattr(torch.ops.aten, op, None)
        if packet is not None and hasattr(packet, overload):
            ops.add(getattr(packet, overload))

    class _Zeroed(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            if func in ops and isinstance(out, torch.Tensor) and not (out.is_floating_point() or out.is_complex()):
                out.zero_()  # the mode is off inside its own handler: a plain fill
            return out

    with _Zeroed():
        yield


def fresh_exact_outputs(out: Any, inputs: Any, torch: Any) -> bool:
    """Whether the launch returned a bool or integer tensor that is none of the inputs' memory (one
    ``launch()`` allocated itself, so ``exact_buffers_left_poisoned`` cannot zero it beforehand)."""
    if torch is None:
        return False
    outs = out if isinstance(out, (tuple, list)) else (out,)
    held = {t.data_ptr() for t in inputs if isinstance(t, torch.Tensor) and t.numel()}
    return any(isinstance(o, torch.Tensor) and o.numel() and not (o.is_floating_point() or o.is_complex())
               and o.data_ptr() not in held for o in outs)


class ZeroedRelaunch:
    """The second checked launch for outputs whose poison a right output may hold: the bool and integer
    buffers ``make_inputs`` left uninitialised are zeroed (``exact_buffers_left_poisoned``), and those
    the launch allocates itself start zeroed (``exact_allocations_zeroed``); what the config leaves
    unwritten then shows.  Each is done only where the default config's output holds that way (checked
    once per worker): an all-True mask a kernel reads and updates in place is data, not an unwritten
    output, and a launch that cannot run under the dispatcher's mode is left to the first check."""

    FRESH = -1  # ``trusted``'s key for the allocations launch() makes

    def __init__(self, module: Any, default: Any, inputs: list[Any], originals: list[Any], torch: Any,
                 restore: Any, sync: Any, reference: Any) -> None:
        self.module, self.default, self.inputs, self.originals = module, default, inputs, originals
        self.torch, self.restore, self.sync, self.reference = torch, restore, sync, reference
        self.trusted: dict[int, bool] = {}  # buffer position (or FRESH) -> the default's output holds so

    def _launch(self, cfg: Any, buffers: list[int], fresh: bool) -> str | None:
        from kerntune.evaluate.triton_backend.capture import no_grad

        torch = self.torch
        self.restore()
        with no_grad():
            for i in buffers:
                self.inputs[i].zero_()
        with unwritten_poisoned(torch), (exact_allocations_zeroed(torch) if fresh else contextlib.nullcontext()):
            again = self.module.launch(cfg, self.inputs)
        self.sync()
        return compare_outputs(again, self.reference.value, torch)

    def _trust(self, key: int) -> bool:
        if key not in self.trusted:
            buffers, fresh = ([], True) if key == self.FRESH else ([key], False)
            try:
                self.trusted[key] = self._launch(self.default, buffers, fresh) is None
            except Exception:  # noqa: BLE001 - the default fails so: nothing to trust the zeroing by
                self.trusted[key] = False
        return self.trusted[key]

    def check(self, out: Any, cfg: Any) -> str | None:
        """None, or why ``cfg``'s output is wrong once what it leaves unwritten is zero."""
        buffers = [i for i in exact_buffers_left_poisoned(out, self.inputs, self.originals, self.torch)
                   if self._trust(i)]
        fresh = fresh_exact_outputs(out, self.inputs, self.torch) and self._trust(self.FRESH)
        wrong = self._launch(cfg, buffers, fresh) if buffers or fresh else None
        return f"{wrong} (launched again with its bool or integer output zeroed: part of it is left unwritten)" \
            if wrong else None
