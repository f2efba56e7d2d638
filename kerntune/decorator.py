"""``@kerntune.autotune``: a drop-in for ``@triton.autotune`` that searches a
kerntune Space with any strategy and remembers the winner in the store.

    @kerntune.autotune(space=SPACE, key=["M", "N", "K"], budget=60)   # strategy="auto" by default
    @triton.jit
    def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, ..., BLOCK_M: tl.constexpr, ...):
        ...

    matmul_kernel[grid](a, b, c, M, N, K, ...)   # grid may be a lambda of META, as with Triton

On the first call for a key, the configs are launched *in this process* (as
``triton.autotune`` does: a config that crashes the CUDA context takes the
process with it; use ``kerntune tune FILE`` for isolated workers), timed with
``triton.testing.do_bench`` on a GPU, and optionally checked against the
default config's output (``check=[names of output args]``).  The winner is
written to the persistent cache (the store's ``best_configs``), keyed by the
kernel source and space, the key argument values, the device and the
triton/torch versions; a later process with the same key launches it at once.
``kerntune cache export --triton`` turns the cache into ``triton.Config`` lists.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import time
from typing import Any, Callable, Mapping, Sequence

from kerntune.errors import KerntuneError
from kerntune.evaluate.base import Evaluator
from kerntune.evaluate.trial import Status, Trial
from kerntune.evaluate.triton_backend.worker import classify, clone, compare_outputs
from kerntune.evaluate.triton_backend.worker import timer as make_timer
from kerntune.space import Config, Space, jsonable, space_from_dict
from kerntune.store import Store

Timer = Callable[[Callable[[], Any]], list[float]]


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


def _default_timer(rep_ms: int) -> Timer:
    bench = make_timer(_torch(), max_samples=200)
    return lambda fn: bench(fn, rep_ms)


def device_and_versions() -> tuple[str, str]:
    """What a cached winner is only valid for: the device and the compiler stack."""
    torch = _torch()
    index = torch.cuda.current_device() if torch is not None and torch.cuda.is_available() else -1
    return _device_and_versions(index)


@functools.lru_cache(maxsize=None)
def _device_and_versions(index: int) -> tuple[str, str]:
    """Per CUDA device index (-1: none): the name and versions do not change within a process."""
    torch = _torch()
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


def _key_part(value: Any) -> Any:
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return [list(value.shape), str(value.dtype)]
    return jsonable(value)


class _LaunchEvaluator(Evaluator):
    """Measures configs of one call's arguments by launching the kernel here."""

    name = "autotune"

    def __init__(self, tuner: "Autotuned", grid: Any, args: dict[str, Any]) -> None:
        super().__init__(tuner.space)
        self.tuner, self.grid, self.args = tuner, grid, args
        self.saved = {n: clone(args[n]) for n in tuner.restore_value}
        self.reference: Any = None

    def _restore(self) -> None:
        for n, v in self.saved.items():
            dst = self.args[n]
            dst.copy_(v) if hasattr(dst, "copy_") else dst.__setitem__(Ellipsis, v)
        for n in self.tuner.reset_to_zero:
            dst = self.args[n]
            dst.zero_() if hasattr(dst, "zero_") else dst.__setitem__(Ellipsis, 0)

    def _launch(self, config: Config) -> None:
        self._restore()
        self.tuner.fn[self.grid](**self.args, **config)

    def _outputs(self) -> Any:
        self.tuner.synchronize()
        return tuple(clone(self.args[n]) for n in self.tuner.check)

    def evaluate(self, configs: Sequence[Config]) -> list[Trial]:
        out = []
        for cfg in configs:
            t0 = time.perf_counter()
            try:
                if self.tuner.check:
                    if self.reference is None:
                        self._launch(self.space.default)
                        self.reference = self._outputs()
                    self._launch(cfg)
                    wrong = compare_outputs(self._outputs(), self.reference, _torch())
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
                "problem_size": {k: _key_part(self.args[k]) for k in self.tuner.key}}


class Autotuned:
    """The decorated kernel: ``kernel[grid](*args)`` tunes once per key, then launches the winner."""

    def __init__(self, fn: Any, space: Space | Mapping[str, Any], key: Sequence[str], strategy: str = "auto",
                 budget: int = 60, seconds: float | None = None, store: str | Store | None = None,
                 restore_value: Sequence[str] = (), reset_to_zero: Sequence[str] = (), check: Sequence[str] = (),
                 options: Mapping[str, Any] | None = None, llm: Any = None, seed: int = 0, rep_ms: int = 20,
                 timer: Timer | None = None, on_miss: str = "tune", dispatch: Any = None) -> None:
        if on_miss not in ("tune", "nearest"):
            raise KerntuneError(f"autotune: on_miss must be 'tune' or 'nearest', got {on_miss!r}")
        self.on_miss = on_miss
        self.queued: list[str] = []  # keys served by a nearest-shape fallback, waiting for tune_queued()
        self.fn = fn
        self.space = space if isinstance(space, Space) else space_from_dict(dict(space))
        inner = getattr(fn, "fn", fn)
        self.name = getattr(inner, "__name__", "kernel")
        self.arg_names = list(getattr(fn, "arg_names", None) or inspect.signature(inner).parameters)
        unknown = [k for k in (*key, *restore_value, *reset_to_zero, *check) if k not in self.arg_names]
        if unknown:
            raise KerntuneError(f"autotune: {', '.join(unknown)} not among {self.name}'s arguments "
                                f"({', '.join(self.arg_names)})")
        self.key, self.strategy, self.budget, self.seconds = list(key), strategy, budget, seconds
        self.restore_value, self.reset_to_zero, self.check = list(restore_value), list(reset_to_zero), list(check)
        self.options, self.llm, self.seed = dict(options or {}), llm, seed
        self.timer = timer or _default_timer(rep_ms)
        self._store_arg = store
        self._store: Store | None = None
        try:
            self.source = getattr(fn, "src", None) or inspect.getsource(inner)
        except (OSError, TypeError):
            self.source = self.name
        blob = json.dumps([self.source, self.space.to_dict()], sort_keys=True, default=str)
        self.kernel_hash = hashlib.sha256(blob.encode()).hexdigest()[:16]
        self.best: dict[str, tuple[Config, float]] = {}  # problem key -> winner, this process
        # problem key -> the dispatch table's or the nearest key's config, this process: every launch
        # after the first is a dictionary lookup (asking the store at each launch cost 70 us on an H100
        # machine, 8x a 1024^3 matmul); a key tuned later in this process (``tune``) takes precedence
        self.served: dict[str, Config] = {}
        self.tuned_keys: list[str] = []                  # keys this process had to tune (not cached)
        # A shipped dispatch table (``kerntune cache export --json``): key values in ``key`` order -> winner.
        self.dispatch: dict[tuple, Config] = {}
        if dispatch is not None:
            from kerntune.multishape import load_dispatch

            for shape, cfg, _ in load_dispatch(dispatch):
                if len(shape) != len(self.key):
                    raise KerntuneError(f"autotune: dispatch table shape {shape} has {len(shape)} values, "
                                        f"key {self.key} has {len(self.key)}")
                cfg = self.space.canonical(cfg)
                if self.space.is_valid(cfg):
                    self.dispatch[shape] = cfg

    def synchronize(self) -> None:
        torch = _torch()
        if torch is not None and torch.cuda.is_available():
            torch.cuda.synchronize()

    @property
    def store(self) -> Store:
        if self._store is None:
            if isinstance(self._store_arg, Store):
                self._store = self._store_arg
            else:
                from kerntune.cli.common import default_store_path

                self._store = Store(self._store_arg or default_store_path())
        return self._store

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return lambda *args, **kwargs: self.run(*args, grid=grid, **kwargs)

    def problem_key(self, args: Mapping[str, Any]) -> str:
        return json.dumps({k: _key_part(args[k]) for k in self.key}, sort_keys=True)

    def config_for(self, grid: Any, args: dict[str, Any]) -> Config:
        """The winner for these arguments: this process's memory, the store, or (``on_miss``)
        a search now, or the nearest tuned key's winner while this key waits in ``queued``."""
        pkey = self.problem_key(args)
        if pkey in self.best:
            return self.best[pkey][0]
        if pkey in self.served:
            return self.served[pkey]
        device, versions = device_and_versions()
        hit = self.store.get_best(self.kernel_hash, pkey, device, versions)
        if hit is not None:
            cfg = self.space.canonical(hit[0])
            if self.space.is_valid(cfg):
                self.best[pkey] = (cfg, hit[1])
                return cfg
        if self.dispatch:
            shape = tuple(json.dumps(v) if isinstance(v, (list, dict)) else v
                          for v in (json.loads(pkey)[k] for k in self.key))
            if shape in self.dispatch:
                self.served[pkey] = self.dispatch[shape]
                return self.served[pkey]
        if self.on_miss == "nearest":
            near = self.nearest(pkey, device, versions)
            if near is not None:
                if pkey not in self.queued:
                    self.queued.append(pkey)
                self.served[pkey] = near
                return near
        return self.tune(grid, args, pkey, device, versions)

    def nearest(self, pkey: str, device: str, versions: str) -> Config | None:
        """The cached winner of the nearest tuned key (sum of |log2| differences of the numeric
        key values, see ``kerntune.warmstart.shape_distance``) on this device and stack."""
        from kerntune.warmstart import shape_distance

        want = json.loads(pkey)
        best: tuple[float, Config] | None = None
        for e in self.store.iter_best(self.kernel_hash):
            if e["device"] != device or e["versions"] != versions:
                continue
            have = json.loads(e["problem_key"])
            if set(have) != set(want) or not all(isinstance(want[k], (int, float)) and isinstance(have[k], (int, float))
                                                 for k in want):
                continue
            d = shape_distance([have[k] for k in sorted(want)], [want[k] for k in sorted(want)])
            cfg = self.space.canonical(e["config"])
            if self.space.is_valid(cfg) and (best is None or d < best[0]):
                best = (d, cfg)
        if all(isinstance(want[k], (int, float)) for k in self.key):
            here = [want[k] for k in self.key]
            for shape, cfg in self.dispatch.items():
                d = shape_distance(list(shape), here)
                if best is None or d < best[0]:
                    best = (d, cfg)
        return best[1] if best else None

    def tune_queued(self, calls: Mapping[str, tuple[Any, dict[str, Any]]]) -> None:
        """Tune the keys a nearest-shape fallback served; ``calls`` maps a key to (grid, arguments)."""
        device, versions = device_and_versions()
        for pkey in list(self.queued):
            if pkey in calls:
                grid, args = calls[pkey]
                self.tune(grid, args, pkey, device, versions)
                self.queued.remove(pkey)

    def tune(self, grid: Any, args: dict[str, Any], pkey: str, device: str, versions: str) -> Config:
        from kerntune.runner import run_search
        from kerntune.strategies import Budget

        evaluator = _LaunchEvaluator(self, grid, args)
        res = run_search(evaluator, self.strategy, Budget(max_evals=self.budget, max_seconds=self.seconds),
                         seed=self.seed, store=self.store, label=f"autotune {self.name} {pkey}",
                         options=self.options, llm=self.llm)
        if res.best is None:
            raise KerntuneError(f"autotune: no config of {self.name} ran for {pkey}; "
                                f"first error: {next((t.error for t in res.history if t.error), 'none')}")
        self.store.put_best(self.kernel_hash, pkey, device, versions, res.best.config, res.best.time_ms, res.run_id)
        self.best[pkey] = (self.space.canonical(res.best.config), res.best.time_ms)
        self.tuned_keys.append(pkey)
        return self.best[pkey][0]

    def run(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        if len(args) > len(self.arg_names):
            raise KerntuneError(f"{self.name} takes {len(self.arg_names)} arguments, got {len(args)}")
        bound = dict(zip(self.arg_names, args))
        bound.update({k: v for k, v in kwargs.items() if k in self.arg_names})
        extra = {k: v for k, v in kwargs.items() if k not in self.arg_names}
        config = self.config_for(grid, bound)
        return self.fn[grid](**bound, **config, **extra)


def autotune(space: Space | Mapping[str, Any], key: Sequence[str], **options: Any) -> Callable[[Any], Autotuned]:
    """Decorator; ``options`` are ``Autotuned``'s (strategy, budget, seconds, store, restore_value,
    reset_to_zero, check, options, llm, seed, rep_ms, timer, on_miss, dispatch)."""
    def wrap(fn: Any) -> Autotuned:
        return Autotuned(fn, space, key, **options)
    return wrap
