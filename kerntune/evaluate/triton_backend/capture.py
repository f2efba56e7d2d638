"""Catch one launch of a Triton kernel inside someone else's code, then replay it with other configs.

A kernel shipped in a package is launched by the package's own Python code: it allocates the
outputs, computes the grid, and picks the config (its ``triton.autotune`` list, a heuristic such as
"BLOCK_SIZE = next power of two of the row length, warps by size", or a fixed config).  Tuning it
where it lives means running the package's own entry point once, catching the kernel's launch
(every argument by name, the grid, the launch options), and then launching exactly that call again
with the tuned constexprs and options swapped in.  The package's code stays untouched and
uncopied; what it chose becomes the baseline.

The catch wraps the kernel's ``JITFunction.run`` on the instance for the duration of the call:
``kernel[grid](...)``, an autotuner's and a heuristics wrapper's launches all end there, after
they have filled in their choices.
"""

from __future__ import annotations

import contextlib
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from kerntune.errors import KerntuneError
from kerntune.evaluate.triton_backend.output_check import differing

#: Keyword arguments of ``JITFunction.run`` that are launch options, not kernel arguments.
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "launch_cooperative_grid",
                  "launch_pdl", "ir_override")

#: Set in compile workers: launches only compile (``warmup=True``), and a capture only records.
COMPILE_ONLY = False


def _kernel_classes() -> tuple[type, ...]:
    from triton.runtime.jit import JITFunction

    try:  # TRITON_INTERPRET=1 turns @triton.jit into this (the CPU tests use it)
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:  # pragma: no cover - every Triton 3 has it
        return (JITFunction,)
    return (JITFunction, InterpretedFunction)


def jit_function(kernel: Any) -> Any:
    """The ``JITFunction`` under autotuner and heuristics wrappers (each keeps the next in ``.fn``)."""
    classes = _kernel_classes()
    seen = 0
    while not isinstance(kernel, classes):
        inner = getattr(kernel, "fn", None)
        if inner is None or seen > 8:
            raise KerntuneError(f"{kernel!r} is not a Triton kernel (no JITFunction inside)")
        kernel, seen = inner, seen + 1
    return kernel


def layers(kernel: Any) -> Iterator[Any]:
    """The kernel object and the wrappers under it, outermost first (each keeps the next in ``.fn``;
    at most 8, as deep as Triton's own decorators and a package's stack of them go)."""
    for _ in range(8):
        if kernel is None:
            return
        yield kernel
        kernel = getattr(kernel, "fn", None)


def autotuner(kernel: Any) -> Any | None:
    """The ``triton.autotune`` wrapper around a kernel, if it has one."""
    return next((k for k in layers(kernel) if hasattr(k, "configs") and hasattr(k, "keys")), None)


def heuristics(kernel: Any) -> dict[str, Callable[[dict[str, Any]], Any]]:
    """The ``triton.heuristics`` rules around a kernel (name -> rule over the launch's arguments).

    A rule may read a tuned constexpr (``EVEN_K = K % BLOCK_K == 0``), so a replay with another
    config must recompute it, as the heuristics wrapper would have."""
    out: dict[str, Callable[[dict[str, Any]], Any]] = {}
    for layer in layers(kernel):
        values = getattr(layer, "values", None)
        if isinstance(values, dict) and hasattr(layer, "fn"):
            out.update({k: v for k, v in values.items() if callable(v)})
    return out


def constexpr_names(fn: Any) -> list[str]:
    """The kernel's ``tl.constexpr`` parameters."""
    params = getattr(fn, "params", None)
    if params is not None:
        return [p.name for p in params if getattr(p, "is_constexpr", False)]
    import inspect

    import triton.language as tl

    sig = inspect.signature(fn.fn)  # an interpreted kernel keeps the plain function
    return [n for n, p in sig.parameters.items()
            if p.annotation is tl.constexpr or str(p.annotation) in ("tl.constexpr", "constexpr")]


def kernel_source(kernel: Any) -> str:
    """The kernel's source text (what its cache entries are keyed by)."""
    import inspect

    fn = jit_function(kernel)
    return getattr(fn, "src", None) or inspect.getsource(fn.fn)


@dataclass
class Launch:
    """One caught launch: enough to run the same call again with another config."""

    fn: Any
    grid: Any
    args: dict[str, Any]
    options: dict[str, Any]
    outputs: list[str] = field(default_factory=list)
    calls: int = 1
    #: Seconds of the package's first call (its autotuning, compiles included, if it autotunes).
    first_call_s: float | None = None
    #: Of those, the seconds the kernel's own ``triton.autotune`` spent (None: it has none).
    own_autotune_s: float | None = None
    #: ``triton.heuristics`` rules to re-apply when a replay changes the config.
    rules: dict[str, Callable[[dict[str, Any]], Any]] = field(default_factory=dict)
    #: Outputs the launch overwrites whole (a NaN-filled buffer comes out as the launch writes it):
    #: a correctness check may poison them first, so that a config covering only part of them
    #: (a block size the caught grid no longer matches) cannot pass on the values left there.
    write_only: list[str] = field(default_factory=list)
    #: What each bool or integer one of ``write_only`` is poisoned with: its right values, each changed
    #: (``output_check.differing``; floats take NaN).
    fills: dict[str, Any] = field(default_factory=dict)
    #: The autotune list's ``pre_hook`` (one for every config), run before each launch with the
    #: launch's arguments and config as ``triton.autotune`` runs it: Hopper kernels that take host
    #: ``TensorDescriptor``s set the descriptors' block shapes there from the config's tiles.
    pre_hook: Callable[[dict[str, Any]], Any] | None = None

    @property
    def config(self) -> dict[str, Any]:
        """What the package chose: its constexprs and launch options as passed."""
        cons = set(constexpr_names(self.fn))
        return {**{k: v for k, v in self.args.items() if k in cons}, **self.options}

    def tensors(self) -> list[tuple[str, Any]]:
        """The launch's tensors by name: its tensor arguments, and the tensor behind each host
        ``TensorDescriptor`` argument as ``NAME.base`` (a descriptor kernel reads and writes those)."""
        out = []
        for k, v in self.args.items():
            if _is_tensor(v):
                out.append((k, v))
            elif _is_tensor(getattr(v, "base", None)) and hasattr(v, "block_shape"):
                out.append((f"{k}.base", v.base))
        return out

    def tensor(self, name: str) -> Any:
        """A tensor of ``tensors()`` by its name."""
        arg, _, attr = name.partition(".")
        return getattr(self.args[arg], attr) if attr else self.args[arg]

    def run(self, config: dict[str, Any] | None = None) -> Any:
        """Launch the caught call, with ``config``'s constexprs and options in place of the package's."""
        args, options = dict(self.args), dict(self.options)
        for k, v in (config or {}).items():
            if k in args:
                args[k] = v
            elif k in LAUNCH_OPTIONS:
                if v is None:  # an option the config leaves unset (maxnreg None: no cap) is Triton's default
                    options.pop(k, None)
                else:
                    options[k] = v
            else:
                raise KerntuneError(f"{k!r} is neither an argument of {self.fn.__name__} nor a launch option")
        if config:
            for k, rule in self.rules.items():
                if k in args and k not in config:
                    args[k] = rule(dict(args))
        if self.pre_hook is not None:  # every launch, the package's own config too: it resets what another set
            self.pre_hook({**args, **options})
        return self.fn.run(grid=self.grid, warmup=COMPILE_ONLY, **args, **options)

    def output_values(self) -> tuple[Any, ...]:
        return tuple(self.tensor(k) for k in self.outputs)


def _is_tensor(v: Any) -> bool:
    return hasattr(v, "data_ptr") and hasattr(v, "clone")


def list_pre_hook(kernel: Any) -> Callable[[dict[str, Any]], Any] | None:
    """The ``pre_hook`` every config of the kernel's autotune list carries (None: none has one).

    A replay launches configs that are not in the list, so a hook must not depend on which config
    it came with.  Hooks made per config by one factory (``pre_hook=init_to_zero("C")`` in a list
    comprehension) are distinct objects doing the same: they count as one (same code, equal closed-over
    values).  A list whose configs carry hooks that do differ cannot be replayed that way."""
    tuner = autotuner(kernel)
    configs = tuner.configs if tuner is not None else ()
    hooks = [h for h in (getattr(c, "pre_hook", None) for c in configs) if h is not None]
    if not hooks:
        return None
    if len(hooks) < len(configs) or not all(_same_hook(hooks[0], h) for h in hooks[1:]):
        raise KerntuneError(f"{jit_function(kernel).__name__}: its autotune configs carry different pre_hooks; "
                            "a config outside the list has none to take")
    return hooks[0]


def _same_hook(a: Callable[..., Any], b: Callable[..., Any]) -> bool:
    if a is b:
        return True
    code_a, code_b = getattr(a, "__code__", None), getattr(b, "__code__", None)
    if code_a is None or code_a is not code_b:
        return False
    cells_a, cells_b = a.__closure__ or (), b.__closure__ or ()  # type: ignore[attr-defined]
    try:
        return all(x.cell_contents is y.cell_contents or bool(x.cell_contents == y.cell_contents)
                   for x, y in zip(cells_a, cells_b))
    except Exception:  # noqa: BLE001 - contents that cannot be compared are taken as different
        return False


@contextlib.contextmanager
def _wrapped(fn: Any, hook: Callable[..., Any]) -> Iterator[None]:
    had = "run" in vars(fn)
    old = vars(fn).get("run")
    original = fn.run
    fn.run = lambda *a, **kw: hook(original, *a, **kw)
    try:
        yield
    finally:
        if had:
            fn.run = old
        else:
            del fn.run


#: Autotuners that ``other_autotuners_fixed`` leaves to benchmark their lists (``left_to_autotune``).
_LEFT_ALONE: list[Any] = []


@contextlib.contextmanager
def left_to_autotune(kernels: Iterable[Any]) -> Iterator[None]:
    """Inside ``other_autotuners_fixed``: ``kernels``' autotune lists run as shipped after all.

    A launcher may configure the tuned kernel from another kernel's autotune pick (liger's fused MLP
    launches its backward dGU kernel with the training forward's ``best_config``).  Cut to its first
    config, that other kernel would make the caught launch (the baseline, and the search's warm
    start) the first config of its list instead of the package's own choice."""
    tuners = [t for t in (autotuner(k) for k in kernels) if t is not None]
    _LEFT_ALONE.extend(tuners)
    try:
        yield
    finally:
        for t in tuners:
            _LEFT_ALONE.remove(t)


@contextlib.contextmanager
def other_autotuners_fixed(kernel: Any) -> Iterator[None]:
    """Inside a tuner's worker: every ``triton.autotune`` list other than ``kernel``'s launches its
    first config instead of benchmarking the whole list.

    A package's entry point often launches several autotuned kernels (FLA's chunked attention
    launches eight) to produce the inputs of the one being tuned.  Each of kerntune's workers runs
    that entry point once at start-up; letting every worker autotune every other kernel cost
    tens of seconds of compiles per worker and launched benchmarks on the GPU the benchmark worker
    times.  Those kernels only feed inputs, so their first config serves (and a config that fails
    falls back to the kernel's own autotuning).  The tuned kernel's own list is left alone: what it
    picks is the package's choice, the baseline; so are the lists named by ``left_to_autotune``
    (kernels whose pick the tuned kernel's launcher reads)."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:  # pragma: no cover - every Triton 3 has it
        yield
        return
    keep = autotuner(kernel)
    original = Autotuner.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self is keep or len(self.configs) <= 1 or any(self is t for t in _LEFT_ALONE):
            return original(self, *args, **kwargs)
        saved = self.configs
        self.configs = saved[:1]
        try:
            return original(self, *args, **kwargs)
        except Exception:  # noqa: BLE001 - the first config does not run here: the kernel's own way
            self.configs = saved
            return original(self, *args, **kwargs)
        finally:
            self.configs = saved

    Autotuner.run = run  # type: ignore[method-assign]
    try:
        yield
    finally:
        Autotuner.run = original  # type: ignore[method-assign]


def autotune_seconds(kernel: Any, call: Callable[[], Any], sync: Callable[[], None] | None = None) -> float | None:
    """Seconds that ``kernel``'s own ``triton.autotune`` spends inside ``call`` (its list's compiles
    and benchmarks; the other kernels of the call excluded); None when it has no autotuner."""
    tuner = autotuner(kernel)
    if tuner is None:
        call()
        return None
    spent = [0.0]
    done = sync or (lambda: None)

    def hook(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        done()
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            done()
            spent[0] += time.perf_counter() - t0

    with _wrapped(tuner, hook):
        call()
    return spent[0]


def clear_launch_caches(kernel: Any) -> int:
    """Empty the launch caches that wrappers in front of the kernel keep (flag-gems' ``libentry``:
    ``kernel_cache``, compiled kernels per device, launched directly on a hit, so that a second call of
    the package never reaches ``JITFunction.run``); they refill on the next call.  A wrapper's own
    ``lock`` is held while its caches are emptied.  Returns how many caches were emptied."""
    from collections.abc import MutableMapping

    cleared = 0
    for layer in layers(kernel):
        cache = getattr(layer, "kernel_cache", None)
        caches = [c for c in (cache if isinstance(cache, (tuple, list)) else (cache,)) if isinstance(c, MutableMapping)]
        if caches:
            with getattr(layer, "lock", None) or contextlib.nullcontext():
                for c in caches:
                    c.clear()
                    cleared += 1
    return cleared


def capture(kernel: Any, call: Callable[[], Any], which: int = -1, sync: Callable[[], None] | None = None,
            fresh: Callable[[], None] | None = None) -> Launch:
    """Run ``call`` (the package's own entry point) twice and catch launch number ``which`` of
    ``kernel`` in the second run (-1: the last).  The first run does what a program's first step
    does (an autotuner benchmarks its list and caches the winner); the second launches as every
    later step would.  ``fresh``, run between the two, puts back inputs the first run wrote into
    (liger's training cross-entropy writes the gradient into the logits): the caught launch sees
    what a step sees.  The tensors the caught launch writes are its outputs: those it changed, and
    those that change when poisoned with NaN first (an output buffer reused by the allocator may
    already hold the very values the launch writes).  Afterwards the outputs it writes whole hold
    what it wrote, and every other tensor what the caught launch found: a worker restores them
    before every launch, so an in-place kernel is never replayed on its own output."""
    fn = jit_function(kernel)
    if COMPILE_ONLY:
        launch = _record(fn, call, which, kernel)
        launch.rules, launch.pre_hook = heuristics(kernel), list_pre_hook(kernel)
        return launch
    done = sync or (lambda: None)
    t0 = time.perf_counter()
    # the first call's result lives until the caught call ran: else its outputs may get that memory back
    # holding what they are about to be given, and a bool or integer one (no NaN) is never seen written
    first: list[Any] = []
    own_s = autotune_seconds(kernel, lambda: first.append(call()), done)
    done()
    first_call_s = time.perf_counter() - t0
    seen: list[tuple[Launch, dict[str, Any], list[str]]] = []
    count = [0]

    def hook(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("warmup", False):
            return original(*args, **kwargs)
        count[0] += 1
        launch = _bind(fn, args, dict(kwargs), count[0])
        if which >= 0 and count[0] - 1 != which:
            return original(*args, **kwargs)
        before = {k: v.clone() for k, v in launch.tensors()}
        out = original(*args, **kwargs)
        done()
        seen[:] = [(launch, before, [k for k, v in launch.tensors() if not _same(v, before[k])])]
        return out

    if fresh is not None:
        fresh()
    clear_launch_caches(kernel)  # else a launch cache in front of the kernel skips JITFunction.run
    with _wrapped(fn, hook):
        call()
    done()
    first.clear()
    if not seen:
        raise KerntuneError(f"{fn.__name__} was not launched by the package call"
                            + (f" (asked for launch {which}, saw {count[0]})" if count[0] else ""))
    launch, before, outputs = seen[0]
    launch.calls, launch.first_call_s, launch.own_autotune_s = count[0], first_call_s, own_s
    launch.rules, launch.pre_hook = heuristics(kernel), list_pre_hook(kernel)

    def reset() -> None:
        with no_grad():
            for k, v in launch.tensors():
                v.copy_(before[k])

    reset()
    launch.run()
    done()
    written = {k: v.clone() for k, v in launch.tensors() if k in outputs}
    # One NaN-poisoned launch per floating tensor: a tensor it changes is an output (even one whose
    # buffer already held the values written, i.e. ``before``), and an output it reproduces whole,
    # leaving every other output as written, is write-only.  The second condition matters for
    # in-place kernels whose arguments alias (liger's MLP backward writes dU over U while dG reads
    # U): poisoning such an "output" poisons an input too, and must not be done before a check.
    # A bool or integer output the launch changed is tried so over its written values each changed
    # (``differing``); other bool or integer tensors are left alone (indices: a load out of bounds).
    for name, t in launch.tensors():
        fill = None if t.is_floating_point() or name not in written else differing(written[name])
        if fill is None and not t.is_floating_point():
            continue
        reset()
        with no_grad():
            t.copy_(fill) if fill is not None else t.fill_(float("nan"))
        launch.run()
        done()
        if name not in outputs and not bool(t.float().isnan().all()):  # .float(): FP8 has no isnan on CUDA
            outputs.append(name)
        if name in outputs and _same(t, written.get(name, before[name])) and all(
                _same(v, written[k]) for k, v in launch.tensors() if k in written and k != name):
            launch.write_only.append(name)
            if fill is not None:
                launch.fills[name] = fill
    reset()
    launch.run()  # the outputs as the launch writes them
    done()
    if not outputs:
        raise KerntuneError(f"{fn.__name__}: the caught launch wrote no tensor argument; nothing to check or time")
    launch.outputs = [k for k, _ in launch.tensors() if k in outputs]
    with no_grad():  # what the launch reads back as it found it (an in-place kernel's input, an accumulator)
        for k, v in launch.tensors():
            if k not in launch.write_only and not _same(v, before[k]):
                v.copy_(before[k])
    done()
    return launch


def no_grad() -> contextlib.AbstractContextManager[Any]:
    """Autograd off for kerntune's own in-place resets of a launch's tensors: a package's
    training call passes weights that require gradients (leaf tensors), and autograd refuses
    ``copy_`` or ``fill_`` on those; the kernels' own writes are Triton's and never tracked."""
    torch = sys.modules.get("torch")  # not imported: nothing can require gradients (plain-Python kernels)
    return contextlib.nullcontext() if torch is None else torch.no_grad()


def _record(fn: Any, call: Callable[[], Any], which: int, kernel: Any = None) -> Launch:
    """A compile worker's capture: the call's launches of ``fn`` are recorded, never run (the
    worker only needs the arguments and grid to compile other configs; running them would
    disturb the benchmark worker's measurements)."""
    seen: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def hook(original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        seen.append((args, dict(kwargs)))  # every launch: the worker's kernel[grid] adds warmup=True
        return None

    # An autotuner would benchmark its whole list here (no-op launches, but real L2 flushes on the
    # GPU the benchmark worker is timing on): one config is enough to see the arguments.
    tuner = autotuner(kernel)
    saved = tuner.configs if tuner is not None else None
    if tuner is not None:
        tuner.configs = saved[:1]
    clear_launch_caches(kernel)
    try:
        with _wrapped(fn, hook):
            call()
    finally:
        if tuner is not None:
            tuner.configs = saved
        clear_launch_caches(kernel)  # what a launch cache stored of the no-op launches must not be launched later
    if not seen:
        raise KerntuneError(f"{fn.__name__} was not launched by the package call")
    args, kwargs = seen[which]
    return _bind(fn, args, kwargs, len(seen))


def _same(a: Any, b: Any) -> bool:
    """Equal values, NaNs equal where both hold one.  One-byte floats (FP8 operands of a scaled
    GEMM) are compared by their bits: torch has neither ``nan_to_num`` nor ``equal`` for them."""
    try:
        import torch

        if a.is_floating_point() and a.element_size() == 1:
            return a.shape == b.shape and bool(torch.equal(a.view(torch.uint8), b.view(torch.uint8)))
        return bool(torch.equal(a, b)) if not a.is_floating_point() else bool(
            torch.equal(torch.nan_to_num(a, nan=0.0), torch.nan_to_num(b, nan=0.0))
            and torch.equal(torch.isnan(a), torch.isnan(b)))
    except ImportError:  # pragma: no cover - tensors imply torch
        return False


def _bind(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], calls: int) -> Launch:
    names = list(fn.arg_names)
    if len(args) > len(names):
        raise KerntuneError(f"{fn.__name__} got {len(args)} positional arguments for {len(names)} parameters")
    bound = dict(zip(names, args))
    grid = kwargs.pop("grid", None)
    kwargs.pop("warmup", None)
    options = {}
    for k, v in kwargs.items():
        if k in names:
            bound[k] = v
        else:
            options[k] = v
    missing = [n for n in names if n not in bound]
    if missing:
        defaults = {p.name: p.default for p in getattr(fn, "params", []) if getattr(p, "default", None) is not None}
        for n in missing:
            if n in defaults:
                bound[n] = defaults[n]
    return Launch(fn, grid, bound, options, calls=calls)
