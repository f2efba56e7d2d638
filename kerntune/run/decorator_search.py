"""The decorator's tuning path: a search over one call's arguments, launched in this process.

``@kerntune.autotune`` (``kerntune.decorator``) looks a winner up (its memory, the store's
cache, a dispatch table, the nearest tuned key) and, on a miss, calls ``search_call`` here,
which measures configs by launching the kernel with the call's own arguments
(``LaunchEvaluator``; the decorator's ``pre_hook`` / ``post_hook`` around each such launch, and
``reset_after_search`` before the winner's, as ``triton.autotune`` calls them) and runs
``run_search`` over them.  As ``triton.autotune`` does, a
config that crashes the CUDA context takes the process with it; ``kerntune tune FILE``
measures in isolated workers instead.  ``device_and_versions`` is what a measurement made
here is valid for: the decorator's cache and ``kerntune.retune`` key their winners by it.

The search code (strategies, the store's run tables) is imported only when a call misses,
so that importing a decorated kernel stays light.
"""

from __future__ import annotations

import functools
import inspect
import json
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from kerntune.errors import KerntuneError, StoreError
from kerntune.evaluate.base import Evaluator
from kerntune.evaluate.trial import Status, Trial
from kerntune.evaluate.triton_backend.output_check import clone, compare_outputs
from kerntune.evaluate.triton_backend.worker import classify
from kerntune.evaluate.triton_backend.worker import timer as make_timer
from kerntune.space import Config

if TYPE_CHECKING:
    from kerntune.decorator import Autotuned
    from kerntune.run.search import SearchResult
    from kerntune.store import Store
    from kerntune.store.files import RunLock
    from kerntune.strategies import Budget

#: Times one launch closure: the sample times in ms.
Timer = Callable[[Callable[[], Any]], list[float]]


def torch_module() -> Any:
    """torch if it is installed, else None (the decorator also runs CPU stand-ins without it)."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def default_timer(rep_ms: int) -> Timer:
    """``triton.testing.do_bench``-style timing of a launch (the worker's timer, shared on purpose)."""
    bench = make_timer(torch_module(), max_samples=200)
    return lambda fn: bench(fn, rep_ms)


def device_and_versions() -> tuple[str, str]:
    """What a cached winner is only valid for: the device and the compiler stack."""
    torch = torch_module()
    index = torch.cuda.current_device() if torch is not None and torch.cuda.is_available() else -1
    return _device_and_versions(index)


@functools.lru_cache(maxsize=None)
def _device_and_versions(index: int) -> tuple[str, str]:
    """Per CUDA device index (-1: none): the name and versions do not change within a process."""
    torch = torch_module()
    device = "cpu"
    versions = []
    if torch is not None:
        versions.append(f"torch={torch.__version__}")
        if index >= 0:
            device = torch.cuda.get_device_name(index)
    try:
        import triton

        versions.append(f"triton={triton.__version__}")
    except ImportError:
        pass
    return device, ",".join(versions)


def _is_buffer(x: Any) -> bool:
    """A tensor or an array, which a launch writes in place: what ``restore_value``, ``reset_to_zero``
    and the poisoning of ``check`` outputs can copy into."""
    return hasattr(x, "copy_") or (hasattr(x, "shape") and hasattr(x, "dtype") and hasattr(x, "__setitem__"))


def _copy_into(dst: Any, value: Any) -> None:
    dst.copy_(value) if hasattr(dst, "copy_") else dst.__setitem__(Ellipsis, value)


def _fill_unlike(dst: Any, ref: Any) -> None:
    """Fill ``dst`` with what no right output holds where the reference ``ref`` wrote: NaN for floats
    (``compare_outputs`` takes NaN as wrong where the reference holds a number), ``~ref`` for bools and
    ``ref + 1`` for integers, whose every value a right output may hold.  Why: a checked launch wrote
    into the buffer the reference had filled, so what a config left unwritten still held the right
    values and passed."""
    torch = torch_module()
    if torch is not None and isinstance(dst, torch.Tensor):
        with torch.no_grad():
            if dst.is_floating_point() or dst.is_complex():
                dst.fill_(float("nan"))
            else:
                dst.copy_(~ref if dst.dtype == torch.bool else ref + 1)
        return
    import numpy as np

    if np.issubdtype(dst.dtype, np.inexact):
        dst[...] = np.nan
    else:
        dst[...] = ~ref if dst.dtype == np.bool_ else ref + 1


def _refuse_non_buffers(tuner: Autotuned, args: Mapping[str, Any]) -> None:
    """``restore_value`` / ``reset_to_zero`` naming an argument that is no tensor (an int, None) is
    refused in one line; it failed at the first launch with a raw AttributeError."""
    for option, names in (("restore_value", tuner.restore_value), ("reset_to_zero", tuner.reset_to_zero)):
        for n in names:
            if not _is_buffer(args.get(n)):
                what = "which this call does not pass" if n not in args else f"of type {type(args[n]).__name__}"
                raise KerntuneError(f"autotune: {option} names {n}, {what}: it must name a tensor argument")


class LaunchEvaluator(Evaluator):
    """Measures configs of one call's arguments by launching the kernel here."""

    name = "autotune"

    def __init__(self, tuner: Autotuned, grid: Any, args: dict[str, Any],
                 extra: Mapping[str, Any] | None = None) -> None:
        super().__init__(tuner.space)
        _refuse_non_buffers(tuner, args)
        self.tuner, self.grid, self.args, self.extra = tuner, grid, args, dict(extra or {})
        self.saved = {n: clone(args[n]) for n in tuner.restore_value}
        # ``check`` outputs no option restores: filled with a poison before each checked launch
        # (``_fill_unlike``), so the user's values are kept to put back after each batch
        self.originals = {n: clone(args[n]) for n in tuner.check
                          if n not in tuner.restore_value and n not in tuner.reset_to_zero and _is_buffer(args[n])}
        self.poisoned: list[str] = []  # those of them the reference config's output survives poisoned
        self.reference: Any = None
        self.default_failed = False  # then the first config that runs gives the reference (``check``)

    def _restore(self) -> None:
        for n, v in self.saved.items():
            _copy_into(self.args[n], v)
        for n in self.tuner.reset_to_zero:
            dst = self.args[n]
            dst.zero_() if hasattr(dst, "zero_") else dst.__setitem__(Ellipsis, 0)

    def _put_back(self, names: Sequence[str]) -> None:
        """The user's own values in these ``check`` outputs (kept in ``originals``)."""
        for n in names:
            _copy_into(self.args[n], self.originals[n])

    def _launch(self, config: Config, poison: Sequence[str] = ()) -> None:
        self._restore()
        for n in poison:
            _fill_unlike(self.args[n], self.reference[self.tuner.check.index(n)])
        pre, post = self.tuner.pre_hook, self.tuner.post_hook
        if pre is None and post is None:
            self.tuner.fn[self.grid](**self.args, **config, **self.extra)
            return
        # As ``triton.autotune``'s ``_bench`` calls them around each launch it measures: the call's
        # arguments, its launch options and the config, by name; the post hook with the exception.
        full = {**self.args, **self.extra, **config}
        if pre is not None:
            pre(full)
        try:
            self.tuner.fn[self.grid](**self.args, **config, **self.extra)
        except Exception as exc:
            if post is not None:
                post(full, exception=exc)
            raise
        if post is not None:
            post(full, exception=None)

    def _outputs(self) -> Any:
        self.tuner.synchronize()
        return tuple(clone(self.args[n]) for n in self.tuner.check)

    def _take_reference(self, config: Config) -> None:
        """``config``'s output over the user's own values is the reference.  Then each output is poisoned
        in the checked launches only where ``config`` launched over the poison still gives the reference:
        an output the kernel reads (data, not only a result) is left as it was.  Each probe starts from the
        user's values in every output: it ran over what the previous probe left (NaN in an output the kernel
        reads), so whether an output was poisoned depended on the order of ``check``."""
        self._put_back(list(self.originals))
        self._launch(config)
        self.reference = self._outputs()
        torch = torch_module()
        for n in self.originals:
            try:
                self._put_back(list(self.originals))
                self._launch(config, [*self.poisoned, n])
                if compare_outputs(self._outputs(), self.reference, torch) is None:
                    self.poisoned.append(n)
            except Exception:  # noqa: BLE001 - it ran unpoisoned: only the poison can be to blame
                pass
        for i, n in enumerate(self.tuner.check):  # the others hold what the reference's launch left, as before
            if n in self.originals and n not in self.poisoned:
                _copy_into(self.args[n], self.reference[i])

    def _check(self, config: Config) -> str | None:
        """None if ``config``'s output matches the reference, launched over poisoned outputs; else why not."""
        if self.reference is None and not self.default_failed:
            try:
                self._take_reference(self.space.default)
            except Exception:  # noqa: BLE001 - its own trial says why, if it is measured
                self.default_failed = True
        if self.reference is None:  # the default does not run: this config's output is the reference
            self._take_reference(config)
        self._launch(config, self.poisoned)
        return compare_outputs(self._outputs(), self.reference, torch_module())

    def _measure(self, cfg: Config) -> Trial:
        t0 = time.perf_counter()
        try:
            if self.tuner.check:
                wrong = self._check(cfg)
                if wrong:
                    return Trial(dict(cfg), Status.WRONG_RESULT, error=wrong)
            times = sorted(self.tuner.timer(lambda c=cfg: self._launch(c)))
            return Trial(dict(cfg), Status.OK, times[len(times) // 2], times[:: max(1, len(times) // 32)],
                         bench_s=time.perf_counter() - t0)
        except Exception as exc:  # noqa: BLE001 - a bad config is a status, never the end of the call
            status, text = classify(exc)
            return Trial(dict(cfg), Status(status), error=text[-2000:], bench_s=time.perf_counter() - t0)

    def stream(self, configs: Sequence[Config]) -> Iterator[tuple[int, Trial]]:
        """Each trial as it is measured, so that the store commits it at once: the default stream
        yields at the batch's end, and a search killed mid-batch (an exhaustive one is one batch)
        left nothing stored to resume from.  After the batch (or a stream left early) the arguments
        ``restore_value`` names and the poisoned ``check`` outputs hold the user's values again (no
        poison is left for the winner's launch to leave where it does not write)."""
        try:
            for i, cfg in enumerate(configs):
                yield i, self._measure(cfg)
        finally:
            self._restore()
            self._put_back(self.poisoned)

    def evaluate(self, configs: Sequence[Config]) -> list[Trial]:
        return [t for _, t in self.stream(configs)]

    def device(self) -> dict[str, Any]:
        return {"name": device_and_versions()[0]}

    def workload(self) -> dict[str, Any]:
        return {"kernel_name": self.tuner.name, "source": self.tuner.source,
                "problem_size": json.loads(self.tuner.problem_key(self.args))}

    def describe(self) -> dict[str, Any]:
        """Stored with the run: with the problem size (``workload``) and the run's device, strategy,
        seed and options, the identity of the cached winner, by which a later call finds this run
        to resume (``unfinished_run``); the outputs checked too, which decide the trials' statuses."""
        return {"evaluator": self.name, "kernel_hash": self.tuner.kernel_hash,
                "versions": device_and_versions()[1], "check": list(self.tuner.check)}


def reset_after_search(tuner: Autotuned, args: Mapping[str, Any], extra: Mapping[str, Any] | None,
                       config: Config) -> None:
    """After a search, before the winner's launch: the pre hook once more, as ``triton.autotune``
    calls it (``pre_hook(kwargs, reset_only=True)``) so that a hook that zeroes an accumulator
    leaves it clean after the measured launches.  A hook without ``reset_only`` (nor ``**kwargs``)
    is called with the arguments alone, which Triton's call would have failed on."""
    hook = tuner.pre_hook
    if hook is None:
        return
    full = {**args, **(extra or {}), **config}
    try:
        params = inspect.signature(hook).parameters.values()
    except (TypeError, ValueError):
        params = ()
    takes = any(p.name == "reset_only" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    hook(full, reset_only=True) if takes else hook(full)


#: (store path, run id) of the runs this process is searching: the run lock (``fcntl``) never keeps a
#: process out of its own runs, so two threads of it must not both take one up.
_ACTIVE: set[tuple[str, str]] = set()
_ACTIVE_GUARD = threading.Lock()


def unfinished_run(store: Store, evaluator: LaunchEvaluator, label: str, budget: Budget) -> tuple[str, RunLock] | None:
    """The newest run of this search that did not finish (``running``: its process was killed;
    ``interrupted``: Ctrl-C) and that no process holds, with its lock held: the same kernel, space,
    problem key, device, versions, outputs checked, strategy, seed, budget, options and model.  Why:
    every first-call search started a new run, so a killed one was measured again from scratch."""
    from kerntune.run.search import RESUME_PATH, evaluator_identity, stored_options
    from kerntune.store.resume import plain
    from kerntune.strategies.options import validate_options

    tuner = evaluator.tuner
    options = validate_options(tuner.strategy, dict(tuner.options), with_model=tuner.llm is not None)
    want = plain(stored_options(budget, options, tuner.llm))  # as run_search stored them
    identity = plain(evaluator_identity(evaluator))
    rows = store._read(  # the store's own reader: a damaged file is one line, not a traceback
        "SELECT id, strategy, seed, device, options_json, evaluator_json FROM runs WHERE kind='tune' AND"
        " parent_id IS NULL AND label=? AND status IN ('running', 'interrupted') ORDER BY created DESC",
        (label,))
    for r in rows:
        try:
            stored = {k: v for k, v in json.loads(r["options_json"] or "{}").items() if k != RESUME_PATH}
            same = (r["strategy"] == tuner.strategy and r["seed"] == tuner.seed and stored == want
                    and r["device"] == evaluator.device().get("name")
                    and json.loads(r["evaluator_json"] or "null") == identity)
        except (ValueError, AttributeError):  # a damaged row: not this search's
            same = False
        if not same:
            continue
        with _ACTIVE_GUARD:
            if (str(store.path), r["id"]) in _ACTIVE:
                continue
            try:
                lock = store.lock_run(r["id"])
            except StoreError:  # another process is searching it now
                continue
            _ACTIVE.add((str(store.path), r["id"]))
        return r["id"], lock
    return None


def search_call(tuner: Autotuned, grid: Any, args: dict[str, Any], pkey: str,
                extra: Mapping[str, Any] | None = None) -> SearchResult:
    """Search ``tuner``'s space for this call's arguments (problem key ``pkey``; ``extra``: its launch
    options that are no kernel argument) with its strategy, budget, seed, options and model, storing
    the run in its store; the caller caches the winner.  A run of the same search that a killed (or
    interrupted) process left unfinished is resumed: what it stored is not measured again."""
    from kerntune.run.search import RunOptions, run_search
    from kerntune.store.sqlite import new_run_id
    from kerntune.strategies import Budget

    evaluator = LaunchEvaluator(tuner, grid, args, extra)
    budget = Budget(max_evals=tuner.budget, max_seconds=tuner.seconds)
    store, label = tuner.store, f"autotune {tuner.name} {pkey}"
    found = unfinished_run(store, evaluator, label, budget)
    run_id, lock = found if found is not None else (new_run_id(), None)
    if found is None:
        with _ACTIVE_GUARD:
            _ACTIVE.add((str(store.path), run_id))
    run_options = RunOptions(store=store, run_id=run_id, label=label, strategy_options=tuner.options, llm=tuner.llm)
    try:
        # a resumed run's lock is held from the look-up on (run_search takes it again: the same process)
        return run_search(evaluator, tuner.strategy, budget, tuner.seed, run_options)
    finally:
        with _ACTIVE_GUARD:
            _ACTIVE.discard((str(store.path), run_id))
        if lock is not None:
            lock.release()
