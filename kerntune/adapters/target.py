"""A kernel that lives in an installed package, seen through the kernel-file interface.

``kerntune tune`` and its workers speak one interface (``kerntune.evaluate.triton_backend``):
``space``, ``make_inputs(shape)``, ``launch(config, inputs)``.  A ``PackageTarget`` provides it for
a kernel it does not own: ``make_inputs`` builds realistic inputs and runs the package's own entry
point once, catching the kernel's launch (``capture``); ``launch`` replays that launch with a
config; the package's own choice, caught in the same call, is the reference output and the
baseline every speedup is measured against.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from kerntune.errors import KerntuneError
from kerntune.evaluate.triton_backend import capture as cap
from kerntune.evaluate.triton_backend.derive_space import config_dict, space_from_configs, space_from_knobs
from kerntune.space import Space

Shape = tuple[int, ...]

#: What ``kernel[grid](...)`` launches with when the caller names no option (Triton 3, NVIDIA).
TRITON_DEFAULTS = {"num_warps": 4, "num_stages": 3}


def import_object(spec: str) -> Any:
    """``package.module:attribute`` -> the object (one line and exit 2 when it is not there)."""
    mod_name, _, attr = spec.partition(":")
    if not mod_name or not attr:
        raise KerntuneError(f"{spec!r}: expected package.module:kernel_name")
    try:
        module = importlib.import_module(mod_name)
    except ImportError as exc:
        raise KerntuneError(f"cannot import {mod_name} ({exc}); is its package installed?") from None
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise KerntuneError(f"{mod_name} has no {attr!r}")
        obj = getattr(obj, part)
    return obj


@dataclass
class Adapter:
    """How to run one package kernel on realistic inputs, and what may be tuned.

    ``call(inputs)`` is the package's own entry point (its public op or launcher), never a copy of
    its code.  ``knobs`` (a heuristic launcher's tunable constexprs and launch options, with the
    values worth trying) and ``default(shape)`` (the package's own rule) give the space; without
    them the kernel's ``triton.autotune`` list, widened, is the space."""

    name: str
    kernel: str
    package: str
    shape_doc: str
    shapes: Sequence[Shape]
    make_inputs: Callable[[Shape], tuple[Any, ...]]
    call: Callable[[tuple[Any, ...]], Any]
    knobs: Mapping[str, Sequence[Any]] | Callable[[Shape], Mapping[str, Sequence[Any]]] | None = None
    default: Callable[[Shape], dict[str, Any]] | None = None
    #: For a kernel with a ``triton.autotune`` list: constexprs its launcher fixes outside the list
    #: that the kernel accepts at other values (fla's ``recompute_w_u`` launches with BK = BV = 64),
    #: tuned along with the list.  ``default(shape)`` names the launcher's own values.
    launch_knobs: Mapping[str, Sequence[Any]] | Callable[[Shape], Mapping[str, Sequence[Any]]] | None = None
    torch_op: Callable[[tuple[Any, ...]], Any] | None = None
    bytes_moved: Callable[[Shape], float] | None = None
    flops: Callable[[Shape], float] | None = None
    which: int = -1
    #: Rules over the knobs (kerntune constraint expressions), e.g. a register-pressure bound.
    constraints: Sequence[str] = ()
    description: str = ""
    widen: bool = True
    notes: list[str] = field(default_factory=list)
    #: For a kernel the package builds inside a function (so ``kernel`` names no importable
    #: attribute): returns the kernel object.  ``kernel`` still names it for ``find`` and messages.
    resolve: Callable[[], Any] | None = None
    #: For a kernel with no autotune list whose launcher builds TMA descriptors at its own tile
    #: sizes: sets the descriptors' block shapes from a config's tiles before each replay (what a
    #: list's ``pre_hook`` does for an autotuned descriptor kernel), so other tiles can be tried.
    pre_hook: Callable[[dict[str, Any]], Any] | None = None
    #: For a second adapter of a kernel that another adapter already covers, run another way (liger's
    #: cross-entropy with logits that require grad): its name for the cache key, so the two ways'
    #: winners never overwrite each other, and ``find`` by the kernel's path picks the one without it.
    variant: str = ""
    #: ``package.module:kernel`` of autotuned kernels whose pick the launcher reads to configure this
    #: one (liger's MLP backward dGU launches at the training forward's ``best_config``): a worker
    #: cuts the call's other autotune lists to their first config, but leaves these to autotune as
    #: shipped, so that the caught launch (the baseline, the search's warm start) is the package's
    #: own choice and not the first config of another kernel's list.
    picks_from: Sequence[str] = ()


class PackageTarget:
    """The kernel-file interface over an ``Adapter``."""

    def __init__(self, adapter: Adapter, kernel: Any = None) -> None:
        self.adapter = adapter
        if kernel is None:
            kernel = adapter.resolve() if adapter.resolve is not None else import_object(adapter.kernel)
        self.kernel = kernel
        self.name = adapter.name
        self.description = adapter.description or (f"{adapter.kernel or self.name} from {adapter.package or 'a package'}"
                                                   f"; shape = {adapter.shape_doc or 'see make_inputs'}")
        self.launch_state: cap.Launch | None = None
        self.autotune_s: float | None = None      # the package call's first run (all its kernels)
        self.own_autotune_s: float | None = None  # the tuned kernel's own triton.autotune in it
        self._spaces: dict[Shape, Space] = {}

    # -- the kernel-file interface -----------------------------------------------------------
    def space_for(self, shape: Shape) -> Space:
        if shape not in self._spaces:
            a = self.adapter
            if a.knobs is not None:
                default = a.default(shape) if a.default is not None else {}
                knobs = a.knobs(shape) if callable(a.knobs) else a.knobs
                default = {**{k: v for k, v in TRITON_DEFAULTS.items() if k in knobs}, **default}
                rules = list(a.constraints)
                if a.default is not None:
                    rules = _admitting(rules, space_from_knobs(knobs, default).default)
                self._spaces[shape] = space_from_knobs(knobs, default, name=a.name, description=self.description,
                                                       constraints=rules)
            else:
                tuner = cap.autotuner(self.kernel)
                if tuner is None:
                    raise KerntuneError(f"{a.kernel or a.name} has no triton.autotune list: name its knobs "
                                        "(a dict of knob -> values) and the package's default(shape)")
                # KERNTUNE_LIST_ONLY=1: search the shipped list itself (how triton.autotune's own
                # wall time is matched like for like in benchmarks/real_kernels)
                widen = a.widen and os.environ.get("KERNTUNE_LIST_ONLY") != "1"
                extra = a.launch_knobs(shape) if callable(a.launch_knobs) else a.launch_knobs
                self._spaces[shape] = space_from_configs(
                    tuner.configs, name=a.name, widen=widen, description=self.description,
                    launch_knobs=extra if widen else None, launch_default=a.default(shape) if a.default else None)
        return self._spaces[shape]

    def make_inputs(self, shape: Shape) -> tuple[Any, ...]:
        """Realistic inputs, and the package's own launch on them caught for replay.

        ``KERNTUNE_PACKAGE_CHOICE`` (JSON of a config, set by ``benchmarks/real_kernels``): the
        package's autotune pick is already known from an earlier, separately timed process, so the
        package's autotuner is given that one config instead of benchmarking its list again; the
        search's clock then holds kerntune's work only."""
        import torch

        inputs = self.adapter.make_inputs(shape)
        sync = torch.cuda.synchronize if torch.cuda.is_available() else None
        preset = os.environ.get("KERNTUNE_PACKAGE_CHOICE")
        tuner = cap.autotuner(self.kernel) if preset else None
        saved = tuner.configs if tuner is not None else None
        if tuner is not None:  # only the list's own knobs (the rest are the launch's arguments and heuristics)
            knobs = {k for c in tuner.configs for k in config_dict(c)}
            tuner.configs = [_triton_config({k: v for k, v in json.loads(preset).items() if k in knobs},
                                            cap.list_pre_hook(self.kernel))]
        picks = [] if cap.COMPILE_ONLY else [import_object(k) for k in self.adapter.picks_from]
        try:
            with cap.left_to_autotune(picks):
                self.launch_state = cap.capture(self.kernel, lambda: self.adapter.call(inputs), self.adapter.which,
                                                sync, fresh=None if cap.COMPILE_ONLY else _refresher(inputs))
        finally:
            if tuner is not None:
                tuner.configs = saved
        if self.launch_state.pre_hook is None and self.adapter.pre_hook is not None:
            self.launch_state.pre_hook = self.adapter.pre_hook
        self.autotune_s = self.launch_state.first_call_s
        self.own_autotune_s = self.launch_state.own_autotune_s
        return tuple(t for _, t in self.launch_state.tensors())

    def launch(self, config: Mapping[str, Any], inputs: Any) -> Any:
        state = self._state()
        state.run(dict(config))
        return state.output_values()

    def before_check(self, inputs: Any) -> None:
        """Poison the outputs the launch writes whole, so that a config whose launch leaves part of them
        unwritten fails the check instead of passing on the values already there: floats with NaN, bool
        and integer ones with their right values each changed (``Launch.fills``), which no right output
        holds anywhere.  Only floats were poisoned, and a mask or index output left unwritten passed."""
        from kerntune.evaluate.triton_backend.capture import no_grad

        state = self._state()
        with no_grad():  # a training call's outputs may sit beside weights that require gradients
            for name in state.write_only:
                if name in state.fills:
                    state.tensor(name).copy_(state.fills[name])
                else:
                    state.tensor(name).fill_(float("nan"))

    def reference(self, inputs: Any) -> Any:
        """The output of the package's own choice on these inputs."""
        state = self._state()
        state.run()
        return state.output_values()

    def baseline(self) -> dict[str, Any]:
        """The package's own choice (what its autotuner, heuristic or fixed config launched); a
        launch option the package left out is at Triton's default, and is named so."""
        return {**TRITON_DEFAULTS, **self._state().config}

    def bytes_moved(self, shape: Shape) -> float | None:
        return self.adapter.bytes_moved(shape) if self.adapter.bytes_moved else None

    def flops(self, shape: Shape) -> float | None:
        return self.adapter.flops(shape) if self.adapter.flops else None

    def source_hash(self) -> str:
        """The kernel's identity for resume, warm start and the cache: the package's kernel and version,
        and the code that says how it is run (``adapter_source``).  The kernel alone left two adapters
        of it with other inputs or calls (float32 and float64, another scale) the same kernel: a resume
        mixed their trials and the cache kept one winner for both."""
        version = _version(self.adapter.package)
        blob = f"{self.adapter.kernel}\n{self.adapter.package}={version}\n{cap.kernel_source(self.kernel)}"
        if self.adapter.variant:
            blob += f"\nvariant={self.adapter.variant}"
        blob += f"\nadapter:\n{adapter_source(self.adapter)}"
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def _state(self) -> cap.Launch:
        if self.launch_state is None:
            raise KerntuneError(f"{self.name}: make_inputs(shape) must run before a launch")
        return self.launch_state


#: Where kerntune's own adapters draw their inputs (``randn``, ``device``, ...): an edit there changes
#: every adapter's inputs (TVD's operands were once drawn equal there), so it is part of their source.
SHARED_ADAPTER_HELPERS = "kerntune.adapters._shapes"


def adapter_source(adapter: Adapter) -> str:
    """The source of the files that define how ``adapter`` runs its kernel: those of its
    ``make_inputs``, ``call``, ``knobs``, ``default``, ``launch_knobs``, ``pre_hook`` and ``resolve``
    (a user's package-form kernel file, or the kerntune adapter module that lists it), and for
    kerntune's own adapters the input helpers they share.  Whole files, not the functions alone:
    the functions call helpers and read constants (shapes, dtypes) defined beside them."""
    import inspect

    files: list[str] = []
    ours = False
    for fn in (adapter.make_inputs, adapter.call, adapter.knobs, adapter.default, adapter.launch_knobs,
               adapter.pre_hook, adapter.resolve):
        while isinstance(fn, functools.partial):  # the function it wraps
            fn = fn.func
        if not callable(fn):
            continue
        ours = ours or str(getattr(fn, "__module__", "")).startswith("kerntune.adapters.")
        try:
            path = inspect.getsourcefile(fn)  # type: ignore[arg-type]
        except TypeError:  # built in: no file
            path = None
        if path and path not in files:
            files.append(path)
    if ours:
        helpers = importlib.import_module(SHARED_ADAPTER_HELPERS).__file__
        if helpers and helpers not in files:
            files.append(helpers)
    parts = []
    for path in files:
        try:
            parts.append(Path(path).read_text())
        except OSError:  # gone since it was imported: nothing to read
            parts.append("")
    return "\n".join(parts)


def _admitting(rules: Sequence[str], default: Mapping[str, Any]) -> list[str]:
    """``rules`` with each one that excludes the package's own ``default`` config widened to admit
    that config alone.  A rule over the knobs keeps a search out of configs not worth a launch; the
    package's choice runs anyway (it is the baseline), and a space whose default breaks a rule cannot
    be built at all (liger's rule gives rows of 128 columns BLOCK_SIZE 128 with 4 warps: one element
    a thread, below the two-a-thread rule, and QK-norm at head dim 128 could not be tuned)."""
    from kerntune.space.expr import Expression

    pin = " and ".join(f"{k} == {v!r}" for k, v in default.items())
    return [r if Expression(r)(default) else f"({r}) or ({pin})" for r in rules]


def _refresher(inputs: Sequence[Any]) -> Callable[[], None]:
    """What puts the package call's input tensors back as drawn, for the capture to run between the
    call's first run and the caught one (``cap.capture``'s ``fresh``): an in-place kernel's first run
    overwrites its input (liger's training cross-entropy writes the gradient into the logits), and
    the caught launch must see the inputs a step sees.  Only tensors that changed are written."""
    with cap.no_grad():
        drawn = [(t, t.clone()) for t in inputs if cap._is_tensor(t)]

    def fresh() -> None:
        with cap.no_grad():  # the inputs may be weights that require gradients
            for t, copy in drawn:
                if not cap._same(t, copy):
                    t.copy_(copy)
    return fresh


def _triton_config(flat: Mapping[str, Any], pre_hook: Any = None) -> Any:
    """A ``triton.Config`` of a flat config; ``pre_hook``: the list's own (a descriptor kernel's
    hook sets the TMA block shapes from the config's tiles; without it the launch keeps the
    package's placeholder shapes and fails to compile)."""
    import triton

    kw = dict(flat)
    opts = {k: kw.pop(k) for k in cap.LAUNCH_OPTIONS if k in kw}
    return triton.Config(kw, **opts, pre_hook=pre_hook)


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    if not package:
        return "unknown"
    try:
        return version(package)
    except (PackageNotFoundError, ValueError):
        return "unknown"
