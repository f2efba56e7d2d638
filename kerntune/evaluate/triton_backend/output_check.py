"""Whether a config's output is right: the comparison with the reference's output, and the poisoned
allocations under which a checked launch runs, so that what a config leaves unwritten cannot pass.

Apart from the worker (``worker.py``, which re-exports these) because the in-process decorator and the
transform harness use the same check, and the harness guards exactly these objects against a variant
that would replace them (``kerntune.transform.triton_harness.GUARDED``)."""

from __future__ import annotations

import contextlib
import sys
import warnings
from typing import Any, Callable, Iterator


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
            _set_deterministic(torch, True, warn_only=was[1] if was[0] else True)
            det.fill_uninitialized_memory = True
            yield
    finally:
        det.fill_uninitialized_memory = was[2]
        _set_deterministic(torch, was[0], warn_only=was[1])


def _set_deterministic(torch: Any, mode: bool, warn_only: bool) -> None:
    """``torch.use_deterministic_algorithms`` without its import of ``torch._inductor.config``: that
    import took 3 s and 900 modules in every benchmark worker's first check, for a flag of Inductor's code
    generation that no Triton launch reads.  Where Inductor is loaded, its flag is set as torch sets it."""
    setter = getattr(getattr(torch, "_C", None), "_set_deterministic_algorithms", None)
    if setter is None:
        torch.use_deterministic_algorithms(mode, warn_only=warn_only)
        return
    inductor = sys.modules.get("torch._inductor.config")
    if inductor is not None:
        inductor.deterministic = mode
    setter(mode, warn_only=warn_only)


def _poison_value(dtype: Any, torch: Any) -> Any:
    """What ``fill_uninitialized_memory`` writes into an integer or bool tensor (None: a float type,
    whose NaN fill no right output holds)."""
    if dtype == torch.bool:
        return True
    if dtype.is_floating_point or dtype.is_complex:
        return None
    return torch.iinfo(dtype).max


def differing(t: Any) -> Any | None:
    """A copy of the bool or integer tensor ``t`` that differs from it in every element: bools negated,
    integers with their lowest bit flipped (one from the value, never out of the type's range); None for
    a float or complex ``t`` (NaN poisons those) or a type without the operation.  Why: a package
    kernel's bool or integer output, poisoned before a checked launch with its own right values each
    changed, shows every element a config leaves unwritten, where any one fill (0, -1, True) may be
    the right value there and pass."""
    import torch

    if t.is_floating_point() or t.is_complex():
        return None
    try:
        return t.logical_not() if t.dtype == torch.bool else t.bitwise_xor(1)
    except (RuntimeError, TypeError, NotImplementedError):  # quantized, or an unsigned type without xor
        return None


def exact_input_buffers_poisoned(inputs: Any, originals: Any, torch: Any) -> list[int]:
    """Positions in ``inputs`` of integer or bool buffers that ``make_inputs`` left uninitialised.

    Why: an uninitialised buffer starts filled (``unwritten_poisoned``) with NaN for floats, which no
    right output holds, but with True or the type's largest value for bools and integers, which a right
    output may well hold (a mask that is all True where a config wrote it): a config leaving part of such
    a buffer unwritten passed.  A buffer qualifies where its copy taken after ``make_inputs``
    (``originals``) is the fill everywhere, whatever the launch returns: it may return the buffer, a view
    of it at an offset or a converted copy (matched by pointer only, those passed half unwritten).  Which
    of them may be zeroed is for ``ZeroedRelaunch`` to find out: an all-True mask given as data is
    read by the kernel."""
    if torch is None:
        return []
    found = []
    for i, (t, orig) in enumerate(zip(inputs, originals)):
        if not isinstance(t, torch.Tensor) or not t.numel() or not isinstance(orig, torch.Tensor):
            continue
        fill = _poison_value(t.dtype, torch)
        if fill is not None and bool((orig == fill).all()):
            found.append(i)
    return found


_EMPTY_OPS = ("empty.memory_format", "empty_strided.default", "empty_like.default", "new_empty.default",
              "new_empty_strided.default")


def _keys_below_mode(args: Any, kwargs: Any, torch: Any) -> Any | None:
    """The dispatch keys an op's tensor arguments reach below a dispatch mode's own (Python) key, for
    running the op's implementation with the mode on; None where there are none (no tensor argument)
    or this torch lacks the calls."""
    from torch.utils._pytree import tree_leaves

    try:
        tensors = [a for a in tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
        if not tensors:
            return None
        keys = torch._C._dispatch_keys(tensors[0])
        for t in tensors[1:]:
            keys = keys | torch._C._dispatch_keys(t)
        keys = keys & torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.Python)
        return keys if keys.raw_repr() else None
    except (AttributeError, RuntimeError, TypeError):
        return None


@contextlib.contextmanager
def exact_allocations_zeroed(torch: Any) -> Iterator[None]:
    """While it is active, a bool or integer tensor allocated uninitialised (``torch.empty`` and kin)
    starts zeroed; floats keep ``unwritten_poisoned``'s NaN.  Why: an output that ``launch()`` itself
    allocates starts at True or the type's largest value under ``unwritten_poisoned``, which a right
    output may hold (a mask that is True where a config wrote it), so a config leaving part of it
    unwritten passed; launched once more under this, what it leaves unwritten is False or 0 instead.

    A dispatch mode sees the ops the calling code reaches, not those inside another op's kernel: a
    custom op's (``torch.library``) implementation ran with the mode off, so its ``torch.empty`` kept
    the fill.  So an op outside aten's own is run below the mode's key with the mode on again, and its
    allocations start zeroed too (before the op writes them: what it writes still shows).  A custom op
    without tensor arguments (nothing to dispatch it by) runs as it is, its allocations not zeroed;
    allocations inside aten's own kernels (a converted copy) are those kernels' to write in full."""
    from torch.utils._python_dispatch import TorchDispatchMode

    ops = set()
    for name in _EMPTY_OPS:
        op, _, overload = name.partition(".")
        packet = getattr(torch.ops.aten, op, None)
        if packet is not None and hasattr(packet, overload):
            ops.add(getattr(packet, overload))
    overload_type = getattr(torch._ops, "OpOverload", ())

    class _Zeroed(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if isinstance(func, overload_type) and func.namespace not in ("aten", "prim", "prims"):
                keys = _keys_below_mode(args, kwargs, torch)
                if keys is not None:
                    with self:  # the mode is off inside its own handler: on again for the op's kernel
                        return func.redispatch(keys, *args, **kwargs)
            out = func(*args, **kwargs)
            if func in ops and isinstance(out, torch.Tensor) and not (out.is_floating_point() or out.is_complex()):
                out.zero_()  # the mode is off inside its own handler: a plain fill
            return out

    with _Zeroed():
        yield


def _storage(t: Any) -> int:
    """Where ``t``'s memory block starts: the same for a view at any offset as for its base."""
    try:
        return t.untyped_storage().data_ptr()
    except (AttributeError, RuntimeError, NotImplementedError):  # a tensor without a plain storage
        return t.data_ptr()


def fresh_exact_outputs(out: Any, inputs: Any, torch: Any) -> bool:
    """Whether the launch returned a bool or integer tensor that shares no input's storage (one
    ``launch()`` allocated itself, which ``exact_input_buffers_poisoned`` cannot zero beforehand).  A
    view of an input at an offset is the input's memory, not a fresh allocation."""
    if torch is None:
        return False
    outs = out if isinstance(out, (tuple, list)) else (out,)
    held = {_storage(t) for t in inputs if isinstance(t, torch.Tensor) and t.numel()}
    return any(isinstance(o, torch.Tensor) and o.numel() and not (o.is_floating_point() or o.is_complex())
               and _storage(o) not in held for o in outs)


def _holds_exact(x: Any, torch: Any) -> bool:
    """Whether ``x`` (an output) holds a bool or integer tensor anywhere."""
    if isinstance(x, (tuple, list)):
        return any(_holds_exact(v, torch) for v in x)
    return isinstance(x, torch.Tensor) and not (x.is_floating_point() or x.is_complex())


class ZeroedRelaunch:
    """The second checked launch for outputs whose poison a right output may hold: the bool and integer
    buffers ``make_inputs`` left uninitialised are zeroed (``exact_input_buffers_poisoned``), and those
    the launch allocates itself start zeroed (``exact_allocations_zeroed``); what the config leaves
    unwritten then shows.  Each is done only where a config trusted for it gives the reference's output
    so (``trust``, once per worker, one launch per buffer): an all-True mask a kernel reads and updates
    in place is data, not an unwritten output, and a launch that cannot run under the dispatcher's mode
    is left to the first check.  The default config is trusted for it, launched by ``Reference.prepare``
    between its reference messages (a crash or hang there is the default's, never the config's behind
    it); where the default failed, the first config to pass its check in the worker is, in its own task."""

    FRESH = -1  # ``trusted``'s key for the allocations launch() makes

    def __init__(self, module: Any, inputs: list[Any], originals: list[Any], torch: Any, restore: Any,
                 sync: Any, reference: Any) -> None:
        self.module, self.inputs, self.originals = module, inputs, originals
        self.torch, self.restore, self.sync, self.reference = torch, restore, sync, reference
        # buffer position (or FRESH) -> zeroing it keeps the trusted config's output right; None: not yet known
        self.trusted: dict[int, bool] | None = None

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

    def keys(self) -> list[int]:
        """What may be zeroed: each uninitialised bool or integer buffer of ``make_inputs``, and (where
        the reference holds a bool or integer output) the launch's own allocations."""
        keys = exact_input_buffers_poisoned(self.inputs, self.originals, self.torch)
        if self.torch is not None and _holds_exact(self.reference.value, self.torch):
            keys.append(self.FRESH)
        return keys

    def trial(self, cfg: Any, key: int) -> bool:
        """Whether ``cfg``'s output stays right with ``key`` zeroed (exceptions propagate); inputs restored."""
        try:
            return self._launch(cfg, [] if key == self.FRESH else [key], key == self.FRESH) is None
        finally:
            self.restore()

    def trust(self, cfg: Any, each: Callable[[Callable[[], bool]], bool] | None = None) -> None:
        """Find what may be zeroed by ``cfg``'s launches (an error: not that).  ``each`` runs one of them
        (a call that returns ``trial``'s answer) and returns whether it trusts the zeroing: the reference's
        says the launch is the default's and ends the loop where the CUDA context broke
        (``Reference._trust_default``)."""
        self.trusted = {}
        for key in self.keys():
            launch = lambda key=key: self.trial(cfg, key)  # noqa: E731 - bound per key
            self.trusted[key] = each(launch) if each is not None else _trusted_unless_it_fails(launch)

    def check(self, out: Any, cfg: Any) -> str | None:
        """None, or why ``cfg``'s output is wrong once what it leaves unwritten is zero."""
        if self.trusted is None:  # the default failed: this config, right, is trusted instead
            self.trust(cfg)
        trusted = self.trusted or {}
        buffers = [k for k, ok in trusted.items() if ok and k != self.FRESH]
        fresh = trusted.get(self.FRESH, False) and fresh_exact_outputs(out, self.inputs, self.torch)
        wrong = self._launch(cfg, buffers, fresh) if buffers or fresh else None
        return f"{wrong} (launched again with its bool or integer output zeroed: part of it is left unwritten)" \
            if wrong else None


def _trusted_unless_it_fails(launch: Callable[[], bool]) -> bool:
    """``launch()``'s answer; False where it raised (the config fails so: nothing to trust the zeroing by)."""
    try:
        return launch()
    except Exception:  # noqa: BLE001 - a config's own failure
        return False
