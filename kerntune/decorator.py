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
kernel (Triton's ``cache_key``: its source and the helpers and constexpr globals it
uses) and space, the key argument values and the tensor arguments' dtypes, the
device and the triton/torch versions; a later process with the same key launches
it at once (``kerntune.run.decorator_key``).  ``pre_hook`` / ``post_hook`` are
called around each measured launch as ``triton.autotune`` calls them.
``kerntune cache export --triton`` turns the cache into ``triton.Config`` lists.

This module is the lookup side (memory, cache, dispatch table, nearest key) and the
launch; the search a miss runs is ``kerntune.run.decorator_search``'s.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import sqlite3
import threading
import warnings
from typing import Any, Callable, Mapping, Sequence

from kerntune.budget_default import UNSET, Unset, default_evals
from kerntune.errors import KerntuneError
from kerntune.evaluate.triton_backend.capture import layers
from kerntune.run.decorator_key import kernel_identity, problem_key, split_key
from kerntune.run.dispatch import DispatchConfigs, dtypes_text
from kerntune.run.decorator_search import (Timer, default_timer, device_and_versions, reset_after_search,
                                            search_call, torch_module)
from kerntune.space import Config, Space, space_from_dict
from kerntune.store import Store, thread_store


class Autotuned:
    """The decorated kernel: ``kernel[grid](*args)`` tunes once per key, then launches the winner."""

    def __init__(self, fn: Any, space: Space | Mapping[str, Any], key: Sequence[str], strategy: str = "auto",
                 budget: int | None | Unset = UNSET, seconds: float | None = None, store: str | Store | None = None,
                 restore_value: Sequence[str] = (), reset_to_zero: Sequence[str] = (), check: Sequence[str] = (),
                 options: Mapping[str, Any] | None = None, llm: Any = None, seed: int = 0, rep_ms: int = 20,
                 timer: Timer | None = None, on_miss: str = "tune", dispatch: Any = None,
                 pre_hook: Callable[..., Any] | None = None, post_hook: Callable[..., Any] | None = None) -> None:
        if on_miss not in ("tune", "nearest"):
            raise KerntuneError(f"autotune: on_miss must be 'tune' or 'nearest', got {on_miss!r}")
        _check_settings(strategy, budget, seconds, options, llm, seed, rep_ms, pre_hook, post_hook)
        self.pre_hook, self.post_hook = pre_hook, post_hook
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
        # 60 evaluations a key unless told otherwise; none when only ``seconds`` is given (as for ``tune``),
        # or when ``budget=None`` is given
        self.key, self.strategy, self.seconds = list(key), strategy, seconds
        self.budget = default_evals(budget, seconds, default=60)
        self.restore_value, self.reset_to_zero, self.check = list(restore_value), list(reset_to_zero), list(check)
        self.options, self.seed = dict(options or {}), seed
        self._llm = _client(llm)  # a spec naming an in-process model is kept as text until a search needs it
        self.timer = timer or default_timer(rep_ms)
        self._store_arg = store
        self._local = threading.local()  # this thread's store, where the caller gave a Store
        # problem key -> its lock: one thread tunes a key while the others wait for its winner
        self._locks: dict[str, threading.RLock] = {}
        self._locks_guard = threading.Lock()
        self.tuned = frozenset(self.space.names)  # names a launch must not pass
        self.source = _source(fn) or self.name
        self.defaults = _defaults(fn)
        self._kernel_hash: str | None = None  # read at the first lookup (``kernel_hash``)
        self.best: dict[str, tuple[Config, float]] = {}  # problem key -> winner, this process
        # problem key -> the dispatch table's or the nearest key's config, this process: every launch
        # after the first is a dictionary lookup (asking the store at each launch cost 70 us on an H100
        # machine, 8x a 1024^3 matmul); a key tuned later in this process (``tune``) takes precedence
        self.served: dict[str, Config] = {}
        self.tuned_keys: list[str] = []                  # keys this process had to tune (not cached)
        # A shipped dispatch table (``kerntune cache export --json``): (key values in ``key`` order, the
        # row's dtypes as ``dtypes_text``: None where it names none) -> the row's config.
        self.dispatch: DispatchConfigs = {}
        self._said_untyped = False  # the note that a row naming no dtypes served a call (``_untyped``)
        if dispatch is not None:  # a stale row or a shape given twice is refused here (``dispatch_configs``)
            from kerntune.run.dispatch import dispatch_configs

            self.dispatch = dispatch_configs(dispatch, self.space, self.key, lambda: device_and_versions()[0])

    @property
    def llm(self) -> Any:
        """The model client (None: no model); a ``local:`` or ``auto`` spec is built at the first use."""
        if isinstance(self._llm, str):
            self._llm = _build_client(self._llm)
        return self._llm

    @property
    def kernel_hash(self) -> str:
        """The cache's kernel identity: the kernel (``kernel_identity``: Triton's ``cache_key``, or the
        source under the interpreter) and the space.  Computed at the first lookup, not at decoration
        (``kernel_identity`` says why)."""
        if self._kernel_hash is None:
            blob = json.dumps([kernel_identity(self.fn, self.source), self.space.to_dict()], sort_keys=True,
                              default=str)
            self._kernel_hash = hashlib.sha256(blob.encode()).hexdigest()[:16]
        return self._kernel_hash

    def synchronize(self) -> None:
        torch = torch_module()
        if torch is not None and torch.cuda.is_available():
            torch.cuda.synchronize()

    @property
    def store(self) -> Store:
        """The store, one connection per thread (``kerntune.store.thread_store`` says why).  A ``Store``
        given by the caller serves the thread that opened it; another thread (autograd's backward
        thread) opens its own on the same file, as SQLite refuses a connection made elsewhere."""
        given = self._store_arg
        if isinstance(given, Store):
            mine = getattr(self._local, "store", None)
            if mine is None:
                mine = self._local.store = given if _usable_here(given) else thread_store(given.path)
            return mine
        from kerntune.cli.common import default_store_path

        return thread_store(self._store_arg or default_store_path())

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return lambda *args, **kwargs: self.run(*args, grid=grid, **kwargs)

    def problem_key(self, args: Mapping[str, Any]) -> str:
        """The key arguments' values and the tensor arguments' dtypes (``decorator_key.problem_key``)."""
        return problem_key(self.key, self.arg_names, self.defaults, args)

    def _lock(self, pkey: str) -> threading.RLock:
        with self._locks_guard:
            return self._locks.setdefault(pkey, threading.RLock())

    def config_for(self, grid: Any, args: dict[str, Any], extra: Mapping[str, Any] | None = None) -> Config:
        """The winner for these arguments: this process's memory, the store, or (``on_miss``)
        a search now, or the nearest tuned key's winner while this key waits in ``queued``."""
        pkey = self.problem_key(args)
        if pkey in self.best:
            return self.best[pkey][0]
        if pkey in self.served:
            return self.served[pkey]
        # One search per key: two threads first calling it (a forward and autograd's backward thread)
        # both tuned, their launches interleaved and spoiling each other's timings.  The second waits
        # here and takes the first's winner from memory.
        with self._lock(pkey):
            if pkey in self.best:
                return self.best[pkey][0]
            if pkey in self.served:
                return self.served[pkey]
            return self._miss(grid, args, pkey, extra)

    def _miss(self, grid: Any, args: dict[str, Any], pkey: str, extra: Mapping[str, Any] | None) -> Config:
        """``config_for`` past this process's memory, under the key's lock."""
        device, versions = device_and_versions()
        hit = self.store.best_entry(self.kernel_hash, pkey, device, versions)
        if hit is not None and not self._narrower(hit["run_max_evals"]):
            cfg = self.space.canonical(hit["config"])
            if self.space.is_valid(cfg):
                self.best[pkey] = (cfg, hit["time_ms"])
                return cfg
        if self.dispatch:
            values, dtypes = split_key(pkey)
            shape = tuple(json.dumps(v) if isinstance(v, (list, dict)) else v for v in (values[k] for k in self.key))
            row = self._table_row(shape, dtypes)
            if row is not None:
                self.served[pkey] = row
                return row
        if self.on_miss == "nearest":
            near = self.nearest(pkey, device, versions)
            if near is not None:
                if pkey not in self.queued:
                    self.queued.append(pkey)
                self.served[pkey] = near
                return near
        cfg = self.tune(grid, args, pkey, device, versions, extra)
        reset_after_search(self, args, extra, cfg)
        return cfg

    def _table_row(self, shape: tuple, dtypes: dict[str, str] | None) -> Config | None:
        """The dispatch table's config for this shape and the call's dtypes: its row of these dtypes,
        else its row that names none (noted once: ``_untyped``), else None (a row of other dtypes is
        not launched: an fp32 call must not launch the tile picked for fp16)."""
        row = self.dispatch.get((shape, dtypes_text(dtypes)))
        if row is None and dtypes:
            row = self.dispatch.get((shape, None))
            if row is not None:
                self._untyped(shape, dtypes)
        return row

    def _untyped(self, shape: tuple, dtypes: dict[str, str]) -> None:
        """Say once that a table row naming no dtypes serves a call that has some (an older table, or a
        ``tune`` run's, whose store does not know them): it is launched, as before, for any dtype."""
        if not self._said_untyped:
            self._said_untyped = True
            row, here = "x".join(map(str, shape)), ", ".join(sorted(set(dtypes.values())))
            warnings.warn(f"autotune: {self.name}: the dispatch table names no dtypes: its row {row} is launched"
                          f" for calls of any dtype (here {here})",
                          stacklevel=7)  # the caller's launch: _untyped, _table_row or nearest, _miss, ...

    def _narrower(self, stored_max_evals: int | None) -> bool:
        """Whether a stored winner came from a search given fewer evaluations than this decorator's
        (``budget=10`` once, ``budget=60`` now, in a space of more than 10 configs): it is searched
        again instead of served for good.  Judged by the budgets given, not by what was measured (a
        search that stopped early must not be re-run at every start); unknown budgets are not narrower."""
        if stored_max_evals is None or (self.budget is not None and stored_max_evals >= self.budget):
            return False  # ``budget=None`` (or ``seconds`` alone): no cap, wider than any stored budget
        from kerntune.errors import SpaceError

        try:
            return stored_max_evals < self.space.count()
        except SpaceError:  # too many to count: certainly more than the stored budget
            return True

    def nearest(self, pkey: str, device: str, versions: str) -> Config | None:
        """The cached winner of the nearest tuned key (sum of |log2| differences of the numeric
        key values, see ``kerntune.run.warm_start.shape_distance``) on this device and stack."""
        from kerntune.run.warm_start import shape_distance

        want, dtypes = split_key(pkey)
        best: tuple[float, Config] | None = None
        for e in self.store.iter_best(self.kernel_hash):
            if e["device"] != device or e["versions"] != versions:
                continue
            have, their_dtypes = split_key(e["problem_key"])
            if their_dtypes != dtypes:  # a winner for other dtypes is no guess for these
                continue
            if set(have) != set(want) or not all(isinstance(want[k], (int, float)) and isinstance(have[k], (int, float))
                                                 for k in want):
                continue
            d = shape_distance([have[k] for k in sorted(want)], [want[k] for k in sorted(want)])
            cfg = self.space.canonical(e["config"])
            if self.space.is_valid(cfg) and (best is None or d < best[0]):
                best = (d, cfg)
        untyped: tuple | None = None  # the shape of a table row that names no dtypes, where it is the pick
        if all(isinstance(want[k], (int, float)) for k in self.key):
            here, mine = [want[k] for k in self.key], dtypes_text(dtypes)
            for (shape, typed), cfg in self.dispatch.items():
                if typed is not None and typed != mine:  # a row for other dtypes is no guess for these
                    continue
                d = shape_distance(list(shape), here)
                if best is None or d < best[0]:
                    best, untyped = (d, cfg), (shape if typed is None and dtypes else None)
        if untyped is not None:
            self._untyped(untyped, dtypes)
        return best[1] if best else None

    def tune_queued(self, calls: Mapping[str, tuple[Any, dict[str, Any]]]) -> None:
        """Tune the keys a nearest-shape fallback served; ``calls`` maps a key to (grid, arguments)."""
        device, versions = device_and_versions()
        for pkey in list(self.queued):
            if pkey in calls:
                grid, args = calls[pkey]
                with self._lock(pkey):
                    self.tune(grid, args, pkey, device, versions)
                self.queued.remove(pkey)

    def tune(self, grid: Any, args: dict[str, Any], pkey: str, device: str, versions: str,
             extra: Mapping[str, Any] | None = None) -> Config:
        """Search now for this key (``kerntune.run.decorator_search``) and cache the winner; ``extra``:
        the call's launch options that are no kernel argument (``num_warps`` when not tuned, ...),
        launched with every config measured as with the winner."""
        res = search_call(self, grid, args, pkey, extra)
        if res.best is None:
            raise KerntuneError(f"autotune: no config of {self.name} ran for {pkey}; "
                                f"first error: {next((t.error for t in res.history if t.error), 'none')}")
        # a winner stored by a smaller search (``_narrower``) is replaced whatever its time: the two were
        # timed in different processes, and keeping the faster-looking one would keep the partial pick
        hit = self.store.best_entry(self.kernel_hash, pkey, device, versions)
        self.store.put_best(self.kernel_hash, pkey, device, versions, res.best.config, res.best.time_ms, res.run_id,
                            replace=hit is not None and self._narrower(hit["run_max_evals"]))
        self.best[pkey] = (self.space.canonical(res.best.config), res.best.time_ms)
        self.tuned_keys.append(pkey)
        return self.best[pkey][0]

    def run(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        if len(args) > len(self.arg_names):
            raise KerntuneError(f"{self.name} takes {len(self.arg_names)} arguments, got {len(args)}")
        warmup = kwargs.pop("warmup", False)  # from a ``triton.heuristics`` stacked above: Triton's launch flag
        bound = dict(zip(self.arg_names, args))
        if kwargs and not bound.keys().isdisjoint(kwargs):  # as Python and Triton do (the keyword silently won)
            twice = next(k for k in kwargs if k in bound)
            raise TypeError(f"{self.name}() got multiple values for argument {twice!r}")
        bound.update({k: v for k, v in kwargs.items() if k in self.arg_names})
        extra = {k: v for k, v in kwargs.items() if k not in self.arg_names}
        if not (self.tuned.isdisjoint(bound) and self.tuned.isdisjoint(extra)):  # every launch: no sets built
            clash = sorted(self.tuned & (set(bound) | set(extra)))
            raise KerntuneError(f"{self.name}: {', '.join(clash)} passed to a launch but tuned by kerntune.autotune "
                                "(leave it out of the call, or out of the space)")
        if warmup:  # compile only (``JITFunction.run(warmup=True)``): the known winner, else the default
            known = self.best.get(self.problem_key(bound))
            return self.fn.run(grid=grid, warmup=True, **bound, **(known[0] if known else self.space.default),
                               **extra)
        config = self.config_for(grid, bound, extra)
        return self.fn[grid](**bound, **config, **extra)


def _usable_here(store: Store) -> bool:
    """Whether this thread may use ``store``'s connection: SQLite refuses (ProgrammingError) one
    opened in another thread, and which thread opened it is not recorded anywhere else."""
    try:
        store.conn.execute("SELECT 1")
    except sqlite3.ProgrammingError:
        return False
    return True


def _check_settings(strategy: Any, budget: Any, seconds: Any, options: Any, llm: Any, seed: Any, rep_ms: Any,
                    pre_hook: Any, post_hook: Any) -> None:
    """The settings checked at decoration, each refused in one line as ``kerntune.tune`` refuses it:
    ``budget="10"``, ``budget=2.5`` or ``options=[1]`` were taken here and failed at the first launch
    in a TypeError deep inside the search.  The strategy is checked by name only, so that importing a
    decorated kernel does not import the search code; its options (when given) by their models."""
    from kerntune.api import _check_count, _check_seconds
    from kerntune.strategies import ALIASES, LLM_STRATEGIES, STRATEGIES
    from kerntune.strategies.base import MAX_EVALS, MAX_SEED

    try:
        if not isinstance(strategy, str) or ALIASES.get(strategy, strategy) not in STRATEGIES:
            raise KerntuneError(f"unknown strategy {strategy!r} (known: {', '.join(STRATEGIES)})")
        if strategy in LLM_STRATEGIES and llm is None:
            raise KerntuneError(f"strategy {strategy} needs a model: pass llm=")
        if not isinstance(budget, Unset):
            _check_count("budget", budget, 1, MAX_EVALS, " evaluations a key", none="no cap")
        _check_seconds("seconds", seconds, 1e9)
        _check_seconds("rep_ms", rep_ms, 600_000, optional=False)
        _check_count("seed", seed, 0, MAX_SEED)
        if options is not None and not (isinstance(options, Mapping) and all(isinstance(k, str) for k in options)):
            raise KerntuneError(f"options must be a dict of the strategy's options by name, e.g. {{'initial': 25}},"
                                f" got {options!r}")
        if options:
            from kerntune.strategies.options import validate_options

            validate_options(strategy, dict(options), with_model=llm is not None)
        if llm is not None and not isinstance(llm, str) and not callable(getattr(llm, "complete", None)):
            raise KerntuneError(f"llm must be a model spec ('openai:MODEL', 'replay:FILE', 'local:', ...) or an "
                                f"LLMClient, got {type(llm).__name__}")
        for name, hook in (("pre_hook", pre_hook), ("post_hook", post_hook)):
            if hook is not None and not callable(hook):
                raise KerntuneError(f"{name} must be a function of the launch's arguments, got {hook!r}")
    except KerntuneError as exc:
        raise KerntuneError(f"autotune: {exc}") from None


def _client(llm: Any) -> Any:
    """A model spec made into its client, as ``kerntune.tune(llm=...)`` makes it: a spec string was taken
    here and the first launch failed on it ('str' object has no attribute 'complete').  A spec that
    cannot work (an unknown provider, a missing transcript) is refused in one line now.  ``local:`` and
    ``auto`` (which may pick it) stay text until a search needs them (``Autotuned.llm``): loading a model
    at import, where every key may come from the store, would cost seconds and memory for nothing."""
    if not isinstance(llm, str):
        return llm
    if llm.strip().partition(":")[0] in ("local", "auto"):
        return llm
    return _build_client(llm)


def _build_client(spec: str) -> Any:
    from kerntune.llm import LLMClient

    try:
        return LLMClient.from_spec(spec)
    except KerntuneError as exc:
        raise KerntuneError(f"autotune: llm: {exc}") from None


def _source(fn: Any) -> str | None:
    """The kernel's source text under any wrappers (``triton.heuristics`` keeps the JITFunction, which
    holds ``src``, in ``.fn``): the cache is keyed by it where Triton gives no ``cache_key`` (the
    interpreter; ``kernel_identity``), so an edited kernel is tuned afresh."""
    stack = list(layers(fn))
    src = next((s for s in (getattr(layer, "src", None) for layer in stack) if isinstance(s, str) and s), None)
    if src is not None:
        return src
    try:
        return inspect.getsource(stack[-1])
    except (OSError, TypeError):
        return None


def _defaults(fn: Any) -> dict[str, Any]:
    """The kernel's argument defaults (the innermost Python function's signature), for key arguments a
    call leaves out."""
    try:
        params = inspect.signature(list(layers(fn))[-1]).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}


#: ``triton.autotune`` arguments that ``kerntune.autotune`` takes otherwise: what to write instead.
_TRITON_ONLY = {
    "configs": "give the values to search as a space (space=...)",
    "prune_configs_by": "kerntune searches a space, not a list to prune: write the rule as a constraint of "
                        "the space (its 'constraints'), and a config it rules out is never launched",
    "warmup": "timing is kerntune's: rep_ms= or timer=", "rep": "timing is kerntune's: rep_ms= or timer=",
    "use_cuda_graph": "timing is kerntune's: timer=", "do_bench": "timing is kerntune's: timer=",
    "cache_results": "winners are always cached, in the store (store=)",
}


def autotune(space: Space | Mapping[str, Any], key: Sequence[str], **options: Any) -> Callable[[Any], Autotuned]:
    """Decorator; ``options`` are ``Autotuned``'s (strategy, budget, seconds, store, restore_value,
    reset_to_zero, check, options, llm, seed, rep_ms, timer, on_miss, dispatch, pre_hook, post_hook).
    A ``triton.autotune`` argument kerntune has no use for, or an unknown one, is refused here in one
    line (it was a TypeError from ``Autotuned``)."""
    known = set(inspect.signature(Autotuned.__init__).parameters) - {"self", "fn", "space", "key"}
    for name in options:
        if name in _TRITON_ONLY:
            raise KerntuneError(f"autotune: {name} is triton.autotune's and not supported: {_TRITON_ONLY[name]}")
        if name not in known:
            raise KerntuneError(f"autotune: unknown option {name!r} (known: {', '.join(sorted(known))})")

    def wrap(fn: Any) -> Autotuned:
        return Autotuned(fn, space, key, **options)
    return wrap
