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
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from kerntune.evaluate.base import Evaluator
from kerntune.evaluate.trial import Status, Trial
from kerntune.evaluate.triton_backend.output_check import clone, compare_outputs
from kerntune.evaluate.triton_backend.worker import classify
from kerntune.evaluate.triton_backend.worker import timer as make_timer
from kerntune.space import Config

if TYPE_CHECKING:
    from kerntune.decorator import Autotuned
    from kerntune.run.search import SearchResult

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


class LaunchEvaluator(Evaluator):
    """Measures configs of one call's arguments by launching the kernel here."""

    name = "autotune"

    def __init__(self, tuner: Autotuned, grid: Any, args: dict[str, Any],
                 extra: Mapping[str, Any] | None = None) -> None:
        super().__init__(tuner.space)
        self.tuner, self.grid, self.args, self.extra = tuner, grid, args, dict(extra or {})
        self.saved = {n: clone(args[n]) for n in tuner.restore_value}
        self.reference: Any = None
        self.default_failed = False  # then the first config that runs gives the reference (``check``)

    def _restore(self) -> None:
        for n, v in self.saved.items():
            dst = self.args[n]
            dst.copy_(v) if hasattr(dst, "copy_") else dst.__setitem__(Ellipsis, v)
        for n in self.tuner.reset_to_zero:
            dst = self.args[n]
            dst.zero_() if hasattr(dst, "zero_") else dst.__setitem__(Ellipsis, 0)

    def _launch(self, config: Config) -> None:
        self._restore()
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

    def evaluate(self, configs: Sequence[Config]) -> list[Trial]:
        out = []
        for cfg in configs:
            t0 = time.perf_counter()
            try:
                if self.tuner.check:
                    if self.reference is None and not self.default_failed:
                        try:
                            self._launch(self.space.default)
                            self.reference = self._outputs()
                        except Exception:  # noqa: BLE001 - its own trial says why, if it is measured
                            self.default_failed = True
                    self._launch(cfg)
                    got = self._outputs()
                    if self.reference is None:  # the default does not run: this config's output is the reference
                        self.reference = got
                    wrong = compare_outputs(got, self.reference, torch_module())
                    if wrong:
                        out.append(Trial(dict(cfg), Status.WRONG_RESULT, error=wrong))
                        continue
                times = sorted(self.tuner.timer(lambda c=cfg: self._launch(c)))
                out.append(Trial(dict(cfg), Status.OK, times[len(times) // 2], times[:: max(1, len(times) // 32)],
                                 bench_s=time.perf_counter() - t0))
            except Exception as exc:  # noqa: BLE001 - a bad config is a status, never the end of the call
                status, text = classify(exc)
                out.append(Trial(dict(cfg), Status(status), error=text[-2000:], bench_s=time.perf_counter() - t0))
        self._restore()
        return out

    def device(self) -> dict[str, Any]:
        return {"name": device_and_versions()[0]}

    def workload(self) -> dict[str, Any]:
        return {"kernel_name": self.tuner.name, "source": self.tuner.source,
                "problem_size": json.loads(self.tuner.problem_key(self.args))}


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


def search_call(tuner: Autotuned, grid: Any, args: dict[str, Any], pkey: str,
                extra: Mapping[str, Any] | None = None) -> SearchResult:
    """Search ``tuner``'s space for this call's arguments (problem key ``pkey``; ``extra``: its launch
    options that are no kernel argument) with its strategy, budget, seed, options and model, storing
    the run in its store; the caller caches the winner."""
    from kerntune.run.search import RunOptions, run_search
    from kerntune.strategies import Budget

    evaluator = LaunchEvaluator(tuner, grid, args, extra)
    run_options = RunOptions(store=tuner.store, label=f"autotune {tuner.name} {pkey}",
                             strategy_options=tuner.options, llm=tuner.llm)
    return run_search(evaluator, tuner.strategy, Budget(max_evals=tuner.budget, max_seconds=tuner.seconds),
                      tuner.seed, run_options)
