"""Helion's ConfigSpec as a kerntune Space, and back: a pure mapping.

Helion flattens a kernel's ConfigSpec into a list of *fragments*
(``ConfigGeneration.flat_spec``): one per tunable slot, in the order of
``ConfigSpec.flat_key_layout()``.  A list-valued key such as ``block_sizes`` spreads
over one slot per element; a scalar key holds one slot, which may itself be a
``ListOf`` fragment (``indexing``, ``load_eviction_policies``: one element per memory
access).  ``ConfigGeneration.unflatten`` turns a flat list back into a
``helion.Config``.

Here every slot, and every element of a ``ListOf`` slot, becomes one kerntune
parameter with the fragment's exact bounds or choices, so list lengths are exact by
construction (a list of n elements is n parameters named ``key_0 … key_{n-1}``).
Slots that admit a single value (e.g. a block size pinned to 1) are kept as constants
and re-inserted on the way back.

This module never imports Helion: it works on *descriptions* of fragments (plain
dicts, see :class:`Frag`), which ``kerntune.helion.tuner.describe_fragments`` reads
off a live ``ConfigGeneration`` and which tests can write by hand.  ``helion_hints`` (the
prompt's Helion hints) is built from a layout here too, so a Space dumped on the GPU machine
gives the same prompt elsewhere.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from string import Template
from typing import Any

from kerntune.errors import SpaceError
from kerntune.space import (
    Boolean,
    Choice,
    Config,
    IntRange,
    Param,
    Permutation,
    PowerOfTwo,
    Space,
    canonical,
)

#: What each Helion config key means, for prompts and ``space info`` (``{i}`` is the slot).
DESCRIPTIONS: dict[str, str] = {
    "block_sizes": "tile size of tiled dimension {i} (Helion block_sizes[{i}], hl.tile dimensions in order of "
                   "appearance{hint})",
    "reduction_loops": "chunk size of the looped reduction over a dimension of size {size}; a value >= {size} "
                       "is a persistent reduction (the whole row in one tile, no loop)",
    "loop_orders": "order in which the dimensions of hl.tile group {i} are mapped to program ids",
    "flatten_loops": "flatten the dimensions of hl.tile group {i} into one program-id dimension",
    "l2_groupings": "L2 grouping of program ids for tile group {i} (1 = off; >1 walks tiles in groups that "
                    "share operands in L2)",
    "range_unroll_factors": "unroll factor of device loop {i} (0 = Triton's default)",
    "range_warp_specializes": "warp specialization of device loop {i} (null = default)",
    "range_num_stages": "software-pipelining stages of device loop {i} (0 = num_stages)",
    "range_multi_buffers": "multi-buffering of device loop {i} (null = default)",
    "range_flattens": "flatten device loop {i} (null = default)",
    "static_ranges": "unroll device loop {i} completely at compile time",
    "num_warps": "warps per program",
    "num_stages": "software-pipelining stages of the kernel's loops",
    "indexing": "how memory access {j} is addressed: pointer arithmetic, block pointers or tensor descriptors "
                "(TMA)",
    "atomic_indexing": "how atomic access {j} is addressed",
    "pid_type": "program-id mapping: flat / xyz grids launch one program per tile; persistent_blocked and "
                "persistent_interleaved launch num_SMs x num_sm_multiplier programs that loop over tiles",
    "num_sm_multiplier": "persistent kernels launch num_SMs x this many programs",
    "load_eviction_policies": "cache eviction hint of load {j} ('' = none, first, last)",
    "load_cache_modifiers": "cache modifier of load {j}",
    "store_cache_modifiers": "cache modifier of store {j}",
    "maxnreg": "register cap per thread (null = no cap)",
    "xcd_remap": "remap program ids across XCDs (AMD)",
    "num_threads": "CuTe threads for tile dimension {i} (0 = auto)",
    "epilogue_subtile": "epilogue subtiling",
    "advanced_controls_file": "PTXAS advanced controls file",
}

KINDS = ("pow2", "int", "enum", "bool", "perm", "list", "const")


@dataclass
class Frag:
    """One flat slot of Helion's ConfigGeneration, described without Helion.

    ``kind``: ``pow2`` (low/high powers of two), ``int`` (low/high), ``enum`` (choices),
    ``bool``, ``perm`` (a permutation of ``range(length)``), ``list`` (``length``
    elements, each described by ``inner``), ``const`` (not tunable; ``default`` is kept).
    ``default`` is the slot's value in Helion's default flat config.
    """

    key: str
    kind: str
    slot: int = 0
    sequence: bool = False
    default: Any = None
    low: int | None = None
    high: int | None = None
    choices: tuple[Any, ...] = ()
    length: int = 0
    inner: Frag | None = None
    block_size: bool = False
    size_hint: int | None = None
    names: list[str] = field(default_factory=list)  # filled by build_space

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise SpaceError(f"helion fragment {self.key}[{self.slot}]: unknown kind {self.kind!r}")
        self.choices = tuple(self.choices)
        if self.kind == "list" and self.inner is None:
            raise SpaceError(f"helion fragment {self.key}[{self.slot}]: a list needs an inner fragment")

    @property
    def base_name(self) -> str:
        return f"{self.key}_{self.slot}" if self.sequence else self.key

    def to_dict(self) -> dict[str, Any]:
        out = {"key": self.key, "kind": self.kind, "slot": self.slot, "sequence": self.sequence,
               "default": _jsonable(self.default)}
        for name in ("low", "high", "size_hint"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.choices:
            out["choices"] = [_jsonable(c) for c in self.choices]
        if self.kind in ("list", "perm"):
            out["length"] = self.length
        if self.inner is not None:
            out["inner"] = self.inner.to_dict()
        if self.block_size:
            out["block_size"] = True
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Frag:
        data = dict(data)
        inner = data.pop("inner", None)
        data.pop("names", None)
        if "choices" in data:
            data["choices"] = tuple(canonical(c) for c in data["choices"])
        return cls(inner=cls.from_dict(inner) if inner is not None else None, **data)


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def _element_param(frag: Frag, name: str, description: str) -> Param | None:
    """The kerntune parameter for one scalar fragment, or None if it admits one value only."""
    if frag.kind == "pow2":
        if frag.low is None or frag.high is None:
            raise SpaceError(f"{name}: pow2 fragment needs low and high")
        low, high = max(int(frag.low), 1), int(frag.high)
        if low & (low - 1) or high & (high - 1):  # Helion clamps; keep the powers of two inside
            low, high = 1 << (low - 1).bit_length(), 1 << (high.bit_length() - 1)
        if low >= high:
            return None
        return PowerOfTwo(name=name, low=low, high=high, description=description)
    if frag.kind == "int":
        if frag.low is None or frag.high is None:
            raise SpaceError(f"{name}: int fragment needs low and high")
        if frag.low >= frag.high:
            return None
        return IntRange(name=name, low=int(frag.low), high=int(frag.high), description=description)
    if frag.kind == "enum":
        if len(frag.choices) <= 1:
            return None
        return Choice(name=name, options=frag.choices, description=description)
    if frag.kind == "bool":
        return Boolean(name=name, description=description)
    if frag.kind == "perm":
        if frag.length <= 1:
            return None
        return Permutation(name=name, items=tuple(range(frag.length)), description=description)
    if frag.kind == "const":
        return None
    raise SpaceError(f"{name}: cannot map a nested {frag.kind} fragment")


def _describe(frag: Frag, i: int, j: int | None = None) -> str:
    text = DESCRIPTIONS.get(frag.key, "")
    if not text:
        return ""
    hint = f"; extent {frag.size_hint}" if frag.size_hint else ""
    size = frag.size_hint if frag.size_hint else frag.high
    return text.format(i=i, j=j if j is not None else i, hint=hint, size=size)


@dataclass
class HelionLayout:
    """The fragments behind a Space, and the conversions between kerntune configs and
    Helion flat configs."""

    frags: list[Frag]
    space: Space
    #: Per fragment: constant value where the slot is not a parameter.
    notes: list[str] = field(default_factory=list)
    #: The bound on the block sizes' product in force (None: no such constraint); kept in ``to_dict``
    #: so a layout rebuilt from a dump keeps a bound that seeds raised, and with it the seeds.
    block_numel_limit: int | None = None

    def to_flat(self, config: Mapping[str, Any]) -> list[Any]:
        """A kerntune config (full) as Helion's flat list (feed to ``ConfigGeneration.unflatten``)."""
        cfg = self.space.normalize(config)
        flat: list[Any] = []
        for frag in self.frags:
            if frag.kind == "list":
                values = []
                for j, name in enumerate(frag.names):
                    values.append(_to_helion(cfg[name]) if name else _to_helion(_list_default(frag, j)))
                flat.append(values)
            elif frag.names and frag.names[0]:
                flat.append(_to_helion(cfg[frag.names[0]]))
            else:
                flat.append(_to_helion(frag.default))
        return flat

    def from_flat(self, flat: Sequence[Any]) -> Config:
        """Helion's flat list (``ConfigGeneration.flatten`` / ``default_flat``) as a kerntune config.

        Values outside the space (a slot Helion normalised past its fragment's bounds) are
        kept as they are: ``Space.validate`` then says which field is off.
        """
        if len(flat) != len(self.frags):
            raise SpaceError(f"helion flat config has {len(flat)} slots, the space {len(self.frags)}")
        cfg: Config = {}
        for frag, value in zip(self.frags, flat):
            if frag.kind == "list":
                items = list(value) if isinstance(value, (list, tuple)) else [value] * frag.length
                for name, item in zip(frag.names, items):
                    if name:
                        cfg[name] = canonical(item)
            elif frag.names and frag.names[0]:
                cfg[frag.names[0]] = canonical(value)
        return cfg

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"frags": [f.to_dict() for f in self.frags], "notes": list(self.notes)}
        if self.block_numel_limit is not None:
            out["block_numel_limit"] = self.block_numel_limit
        return out


def _to_helion(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _list_default(frag: Frag, j: int) -> Any:
    default = frag.default if isinstance(frag.default, (list, tuple)) else []
    if j < len(default):
        return default[j]
    return frag.inner.default if frag.inner is not None else None


def _block_numel(probe: HelionLayout, flat: Sequence[Any], blocks: Sequence[str]) -> int:
    """The block sizes' product of a Helion flat config; 0 where its block sizes are not the
    space's values (such a seed is left out anyway, and must not widen the bound)."""
    try:
        cfg = probe.from_flat(flat)
        by_name = probe.space.by_name
        if not all(b in cfg and by_name[b].contains(cfg[b]) for b in blocks):
            return 0
        return math.prod(int(cfg[b]) for b in blocks)
    except (SpaceError, TypeError, ValueError):
        return 0


def build_space(frags: Sequence[Frag], name: str = "", description: str = "",
                max_block_numel: int | None = 2**22, seeds: Sequence[Sequence[Any]] = ()) -> HelionLayout:
    """One kerntune parameter per tunable slot (and per element of a list slot).

    ``max_block_numel`` bounds the product of the block-size slots, as Helion's own
    ``ConfigGeneration.shrink_config`` bounds random and mutated configs (there: the
    per-thread element budget, at most 2**20 on Triton); 2**22 keeps 128x256x64 matmul tiles
    reachable.  ``None`` adds no constraint.  The bound is raised to the default config's
    product when that is larger, so Helion's default always stays a member, and likewise to
    each of ``seeds`` (Helion flat configs: the user's ``autotune_seed_configs`` and the
    compiler's seeds, which Helion measures whatever their size), so none is dropped by it.
    """
    frags = [f if isinstance(f, Frag) else Frag.from_dict(f) for f in frags]
    params: list[Param] = []
    default: dict[str, Any] = {}
    notes: list[str] = []
    for frag in frags:
        frag.names = []
        if frag.kind == "list":
            assert frag.inner is not None
            values = frag.default if isinstance(frag.default, (list, tuple)) else []
            for j in range(frag.length):
                pname = f"{frag.base_name}_{j}"
                param = _element_param(frag.inner, pname, _describe(frag, frag.slot, j))
                frag.names.append(pname if param is not None else "")
                if param is not None:
                    params.append(param)
                    if j < len(values):
                        default[pname] = values[j]
            continue
        param = _element_param(frag, frag.base_name, _describe(frag, frag.slot))
        frag.names.append(frag.base_name if param is not None else "")
        if param is not None:
            params.append(param)
            if frag.default is not None or frag.kind == "enum":
                default[frag.base_name] = frag.default
        elif frag.kind != "const":
            notes.append(f"{frag.base_name}: a single value ({_jsonable(frag.default)!r}), kept constant")
    if not params:
        raise SpaceError("the Helion kernel has no tunable slot with more than one value")
    by_name = {p.name: p for p in params}
    for pname, value in list(default.items()):
        if not by_name[pname].contains(value):
            notes.append(f"{pname}: Helion's default {_jsonable(value)!r} is outside the fragment's values; "
                         f"using {_jsonable(by_name[pname].default_value)!r}")
            del default[pname]
    constraints = []
    limit: int | None = None
    blocks = [n for f in frags if f.block_size and f.kind == "pow2" for n in f.names if n]
    if max_block_numel and len(blocks) > 1:
        space0 = Space(params, default=default)
        at_default = math.prod(int(space0.default[b]) for b in blocks)
        probe = HelionLayout(frags, space0)
        limit = max(int(max_block_numel), at_default, *(_block_numel(probe, flat, blocks) for flat in seeds))
        constraints.append(" * ".join(blocks) + f" <= {limit}")
    space = Space(params, constraints=constraints, default=default, name=name, description=description)
    return HelionLayout(frags, space, notes, block_numel_limit=limit)


def layout_from_dict(data: Mapping[str, Any], name: str = "", max_block_numel: int | None = 2**22) -> HelionLayout:
    """Rebuild a layout from ``HelionLayout.to_dict()`` (e.g. a space dumped on the GPU machine);
    a block-size bound the dump's seeds raised is kept, so the dumped seeds stay members."""
    dumped = data.get("block_numel_limit")
    if max_block_numel and isinstance(dumped, int):
        max_block_numel = max(int(max_block_numel), dumped)
    return build_space([Frag.from_dict(f) for f in data["frags"]], name=name, max_block_numel=max_block_numel)


# -- prompts ---------------------------------------------------------------------------------------
def helion_hints(layout: HelionLayout, compile_timeout_s: float | None = None) -> str:
    """Helion-specific hints for the model, from ``kerntune/prompts/helion_hints.md`` (needs no Helion)."""
    space = layout.space
    indexing = sorted({str(v) for p in space.params if p.name.startswith("indexing_") for v in p.values()})
    pid = space.by_name.get("pid_type")
    pid_types = ", ".join(map(str, pid.values())) if pid is not None else "(fixed)"
    reductions = [f for f in layout.frags if f.key == "reduction_loops" and f.names and f.names[0]]
    if reductions:
        names = ", ".join(f"{f.names[0]} >= {f.size_hint or f.high}" for f in reductions)
        reduction = (f"Reductions: {names} is a persistent reduction, which keeps a whole row on chip and is usually "
                     "fastest for rows that fit (one pass over memory); smaller values loop over the row in chunks. "
                     "The tiled dimension (rows per program) then trades parallelism against per-program work.")
    else:
        reduction = "This kernel has no reduction-loop parameter."
    text = Template(resources.files("kerntune.prompts").joinpath("helion_hints.md").read_text()).substitute(
        indexing=", ".join(indexing) if indexing else "(fixed)",
        descriptor="available" if "tensor_descriptor" in indexing else "not available on this GPU/Triton",
        pid_types=pid_types,
        reduction=reduction,
        compile_timeout=f"{compile_timeout_s:g} s" if compile_timeout_s else "Helion's compile timeout",
    )
    return text.strip()
