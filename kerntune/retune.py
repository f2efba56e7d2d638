"""Retune every ``triton.autotune`` kernel of a running program through kerntune (opt-in).

    import kerntune.retune; kerntune.retune.enable()        # in the program, before its first launch
    KERNTUNE_AUTOTUNE=1 python train.py                      # the same, for a program that imports
                                                             # kerntune.retune (or: kerntune exec -- CMD)

A program whose kernels carry ``@triton.autotune`` benchmarks every config of every list at every
start-up (Triton keeps its picks in memory only, unless the author turned on its disk cache).  With
the switch on, the first launch of each (kernel, key) is tuned by a kerntune search over that
kernel's own list with a measurement budget of half the list (all of it for lists of four or
fewer), timed by kerntune's protocol; the winner goes to the persistent store (keyed by the
kernel's source, its autotune list, the key, the device and the torch/Triton versions), and every
later launch of that key, in this process or any later one, takes it from memory or the store
without measuring.  Only the kernel's own list is searched: its author vouched for every config in
it, so, as with ``triton.autotune``, no output is checked (``kerntune tune`` searches beyond a list
and checks every output).  Kernels without ``triton.autotune`` are untouched.

Settings (environment): ``KERNTUNE_STORE`` (the store, default ``.kerntune/kerntune.db``),
``KERNTUNE_AUTOTUNE_STRATEGY`` (default ``bayes``), ``KERNTUNE_AUTOTUNE_BUDGET`` (a share of the
list such as ``0.5``, or a number of measurements).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from kerntune.errors import KerntuneError
from kerntune.evaluate.base import Evaluator
from kerntune.evaluate.protocol import DEFAULT as PROTOCOL
from kerntune.evaluate.trial import Status, Trial
from kerntune.evaluate.triton_backend.capture import kernel_source
from kerntune.evaluate.triton_backend.derive_space import config_dict, space_from_configs
from kerntune.space import Config, Space, jsonable

_original_run: Any = None


@dataclass
class Stats:
    """What the switch did in this process (tests and the benchmark read it)."""

    tuned: list[str] = field(default_factory=list)      # "kernel key" tuned here
    loaded: list[str] = field(default_factory=list)     # taken from the store
    measured: int = 0                                   # configs timed in this process
    tuning_s: float = 0.0


STATS = Stats()


def enable(store: str | None = None, strategy: str | None = None, budget: str | float | None = None) -> None:
    """Route every ``triton.autotune`` kernel through kerntune from now on (idempotent)."""
    global _original_run
    from triton.runtime.autotuner import Autotuner

    _SETTINGS.update(store=store or os.environ.get("KERNTUNE_STORE", ".kerntune/kerntune.db"),
                     strategy=strategy or os.environ.get("KERNTUNE_AUTOTUNE_STRATEGY", "bayes"),
                     budget=str(budget if budget is not None else os.environ.get("KERNTUNE_AUTOTUNE_BUDGET", "0.5")))
    _budget(100)  # a bad setting fails here, once, not at the first launch
    if _original_run is None:
        _original_run = Autotuner.run
        Autotuner.run = _run  # type: ignore[method-assign]


def disable() -> None:
    global _original_run
    if _original_run is not None:
        from triton.runtime.autotuner import Autotuner

        Autotuner.run = _original_run  # type: ignore[method-assign]
        _original_run = None


def enable_from_env() -> bool:
    """``enable()`` when ``KERNTUNE_AUTOTUNE`` is 1/true/yes; returns whether it did."""
    if os.environ.get("KERNTUNE_AUTOTUNE", "").strip().lower() in ("1", "true", "yes", "on"):
        enable()
        return True
    return False


_SETTINGS: dict[str, Any] = {}
_stores: dict[str, Any] = {}


def _budget(n_configs: int) -> int:
    text = _SETTINGS.get("budget", "0.5")
    try:
        value = float(text)
    except ValueError:
        raise KerntuneError(f"KERNTUNE_AUTOTUNE_BUDGET={text!r}: expected a share such as 0.5 or a count") from None
    if not math.isfinite(value) or value <= 0:
        raise KerntuneError(f"KERNTUNE_AUTOTUNE_BUDGET={text!r}: must be positive")
    if n_configs <= 4:
        return n_configs
    n = math.ceil(value * n_configs) if value <= 1 else int(value)
    return max(2, min(n, n_configs))


def _store() -> Any:
    from kerntune.store import Store

    path = _SETTINGS["store"]
    if path not in _stores:
        _stores[path] = Store(path)
    return _stores[path]


def _key(tuner: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """Triton's own autotune key (its ``Autotuner.run``): the key arguments, then every tensor's dtype."""
    all_args = {**dict(zip(tuner.arg_names, args)), **kwargs}
    named = {k: v for k, v in all_args.items() if k in tuner.arg_names}
    key = [named[k] for k in tuner.keys if k in named]
    key += [str(v.dtype) for v in named.values() if hasattr(v, "dtype")]
    return tuple(key)


class _State:
    """Per autotuner: its space over the listed configs and its identity in the store."""

    def __init__(self, tuner: Any) -> None:
        self.space: Space = space_from_configs(tuner.configs, widen=False)
        self.fixed = dict(getattr(self.space, "fixed", {}))
        self.name = getattr(getattr(tuner, "base_fn", None), "__name__", "kernel")
        blob = json.dumps([kernel_source(tuner), [config_dict(c) for c in tuner.configs]], sort_keys=True,
                          default=str)
        self.kernel_hash = hashlib.sha256(blob.encode()).hexdigest()[:16]

    def triton_config(self, cfg: Config) -> Any:
        import triton

        flat = {**self.fixed, **cfg}
        opts = {k: flat.pop(k) for k in ("num_warps", "num_stages", "num_ctas", "maxnreg") if k in flat}
        return triton.Config(flat, **opts)


def _state(tuner: Any) -> _State:
    st = getattr(tuner, "_kerntune_state", None)
    if st is None:
        st = _State(tuner)
        tuner._kerntune_state = st
    return st


def _run(self: Any, *args: Any, **kwargs: Any) -> Any:
    if len(self.configs) > 1:
        key = _key(self, args, kwargs)
        if key not in self.cache:
            self.nargs = dict(zip(self.arg_names, args))  # Autotuner._bench and its hooks read it
            try:
                best = _winner(self, key, args, kwargs)
                self.pre_hook({**self.nargs, **kwargs, **best.all_kwargs()}, reset_only=True)
            finally:
                self.nargs = None
            self.cache[key] = best
    return _original_run(self, *args, **kwargs)


def _winner(tuner: Any, key: tuple[Any, ...], args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    from kerntune.decorator import device_and_versions

    st = _state(tuner)
    pkey = json.dumps([jsonable(k) if not isinstance(k, str) else k for k in key], default=str)
    device, versions = device_and_versions()
    hit = _store().get_best(st.kernel_hash, pkey, device, versions)
    label = f"{st.name} {pkey}"
    if hit is not None:
        cfg = st.space.canonical({k: v for k, v in hit[0].items() if k in st.space.names})
        if st.space.is_valid(cfg):
            STATS.loaded.append(label)
            return st.triton_config(cfg)
    from kerntune.run.search import RunOptions, run_search
    from kerntune.strategies import Budget

    t0 = time.perf_counter()
    ev = _ListEvaluator(tuner, st, args, kwargs)
    res = run_search(ev, _SETTINGS["strategy"], Budget(max_evals=_budget(st.space.count())),
                     run=RunOptions(store=_store(), label=f"retune {label}"))
    if res.best is None:
        raise KerntuneError(f"kerntune retune: no config of {st.name}'s autotune list ran for key {pkey}; "
                            f"first error: {next((t.error for t in res.history if t.error), 'none')}")
    _store().put_best(st.kernel_hash, pkey, device, versions, res.best.config, res.best.time_ms, res.run_id)
    STATS.tuned.append(label)
    STATS.tuning_s += time.perf_counter() - t0
    return st.triton_config(res.best.config)


class _ListEvaluator(Evaluator):
    """Times configs of one autotuned launch in this process, through the autotuner's own ``_bench``
    (its hooks: ``reset_to_zero``, ``restore_value``, pre/post hooks) with kerntune's timer.

    A batch is compiled first and then timed back to back, the first config with the protocol's
    rested warm-up (compiling leaves the GPU idle; kerntune.evaluate.protocol), the others with its
    usual one, so that every config is timed in the same sustained state."""

    name = "retune"

    def __init__(self, tuner: Any, st: _State, args: Sequence[Any], kwargs: dict[str, Any]) -> None:
        super().__init__(st.space)
        self.tuner, self.st, self.args, self.kwargs = tuner, st, tuple(args), dict(kwargs)

    def evaluate(self, configs: Sequence[Config]) -> list[Trial]:
        from kerntune.evaluate.triton_backend.worker import classify
        from kerntune.evaluate.triton_backend.worker import timer as make_timer

        torch = _torch()
        bench = make_timer(torch)
        warm = [PROTOCOL.warmup_ms]

        def do_bench(fn: Any, quantiles: Any = None) -> list[float]:
            times = sorted(bench(fn, PROTOCOL.rep_ms, warm[0]))
            warm[0] = PROTOCOL.warmup_ms
            return [times[len(times) // 2], times[len(times) // 5], times[4 * len(times) // 5]]

        out: list[Trial | None] = [None] * len(configs)
        t_configs = [self.st.triton_config(c) for c in configs]
        for i, tc in enumerate(t_configs):  # compile the batch first (nothing runs on the GPU)
            t0 = time.perf_counter()
            try:
                self.tuner.fn.run(*self.args, **{**self.kwargs, "warmup": True}, **tc.all_kwargs())
            except Exception as exc:  # noqa: BLE001 - a config that cannot compile is a status
                status, text = classify(exc)
                out[i] = Trial(dict(configs[i]), Status(status), error=text[-2000:], compile_s=time.perf_counter() - t0)
        saved = self.tuner.__dict__.get("do_bench")
        self.tuner.__dict__["do_bench"] = do_bench  # shadows Triton's cached_property for this batch
        warm[0] = 300  # the GPU rested while the batch compiled
        try:
            for i, tc in enumerate(t_configs):
                if out[i] is not None:
                    continue
                t0 = time.perf_counter()
                try:
                    med = self.tuner._bench(*self.args, config=tc, **self.kwargs)[0]
                    STATS.measured += 1
                    ok = math.isfinite(med)
                    out[i] = Trial(dict(configs[i]), Status.OK if ok else Status.RUNTIME_ERROR, med if ok else None,
                                   [med] if ok else [], bench_s=time.perf_counter() - t0,
                                   error=None if ok else "out of resources (Triton's autotuner reports inf)")
                except Exception as exc:  # noqa: BLE001
                    status, text = classify(exc)
                    out[i] = Trial(dict(configs[i]), Status(status), error=text[-2000:],
                                   bench_s=time.perf_counter() - t0)
        finally:
            if saved is None:
                self.tuner.__dict__.pop("do_bench", None)
            else:
                self.tuner.__dict__["do_bench"] = saved
        return [t for t in out if t is not None]

    def device(self) -> dict[str, Any]:
        from kerntune.decorator import device_and_versions

        return {"name": device_and_versions()[0]}

    def workload(self) -> dict[str, Any]:
        return {"kernel_name": self.st.name, "source": kernel_source(self.tuner)}


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch
