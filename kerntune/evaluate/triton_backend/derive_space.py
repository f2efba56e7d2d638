"""A search space from what a shipped kernel already says about its configs.

Two sources, both without launching anything:

* a ``triton.autotune`` list: every knob its configs set (constexprs, ``num_warps``,
  ``num_stages``, ...) becomes a parameter whose values are the list's; ``widen`` adds each
  knob's neighbours (half the smallest and twice the largest power of two, one stage more
  and one fewer), so that the search may leave a list written for another GPU.  Without
  widening, a constraint keeps the search inside the list itself (``in_list``);
* explicit knobs (a launcher's heuristic: the adapter names the knobs and their values, and the
  package's own rule gives the default).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from kerntune.errors import KerntuneError
from kerntune.space import Choice, Space

#: Knobs of a triton.Config besides its kwargs, and the values they may take when widened.
OPTION_LIMITS = {"num_warps": (1, 32), "num_stages": (1, 7), "num_ctas": (1, 1)}

#: What Triton uses for a launch option a config leaves unset (``triton.Config``'s own defaults;
#: ``maxnreg`` None = no register cap; ``ir_override`` None = compiled from the source).  Why:
#: packages set ``maxnreg`` (or ``ir_override``) on some configs of a list only, and a dict config
#: may leave ``num_warps`` out; the unset value is a real choice that the space must hold, not a
#: disagreement.
OPTION_DEFAULTS: dict[str, Any] = {"num_warps": 4, "num_stages": 3, "num_ctas": 1, "maxnreg": None,
                                   "ir_override": None}

#: Launch options whose values are files or caps the list's author chose: never widened.
_NOT_WIDENED = ("maxnreg", "ir_override")


def config_dict(config: Any) -> dict[str, Any]:
    """A ``triton.Config`` (or a dict) as one flat dict of knobs.  ``ir_override`` (the IR file Triton
    compiles instead of the source) is one of them: configs differing only in it are distinct."""
    if isinstance(config, Mapping):
        return dict(config)
    out = dict(getattr(config, "kwargs", {}) or {})
    for opt in OPTION_DEFAULTS:
        v = getattr(config, opt, None)
        if v is not None:
            out[opt] = v
    return out


def _is_pow2(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0 and v & (v - 1) == 0


def _widen(name: str, values: list[Any]) -> list[Any]:
    ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    if len(ints) != len(values) or name in _NOT_WIDENED:  # a register cap beyond the list's is a guess
        return values  # strings, bools, floats: nothing sensible to add
    lo, hi = OPTION_LIMITS.get(name, (1, 1 << 17))
    extra: set[int] = set()
    if name == "num_stages":
        extra = {min(ints) - 1, max(ints) + 1}
    elif all(_is_pow2(v) for v in ints):
        extra = {min(ints) // 2, max(ints) * 2}
    return sorted({*ints, *(v for v in extra if lo <= v <= hi)})


def fill_options(configs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The configs with every launch option that some of them set filled in where others leave it
    out, at Triton's own default (``OPTION_DEFAULTS``); kwargs are left as they are."""
    flat = [dict(c) for c in configs]
    for opt, default in OPTION_DEFAULTS.items():
        if any(opt in c for c in flat):
            for c in flat:
                c.setdefault(opt, default)
    return flat


def knob_values(configs: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Each knob's distinct values, in order of first appearance sorted where numeric (an unset
    ``maxnreg``, None, first).  ``configs`` as ``fill_options`` gives them: a launch option some configs
    leave out counts at Triton's default, not as a disagreement."""
    names: list[str] = []
    for c in configs:
        names += [k for k in c if k not in names]
    out = {}
    for n in names:
        vals = []
        for c in configs:
            if n not in c:
                raise KerntuneError(f"autotune configs disagree on their knobs: {n!r} is missing from {dict(c)}")
            if c[n] not in vals:
                vals.append(c[n])
        numbers = [v for v in vals if v is not None]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in numbers):
            vals = [None] * (len(numbers) < len(vals)) + sorted(numbers)
        out[n] = vals
    return out


def space_from_configs(configs: Iterable[Any], name: str = "", widen: bool = True,
                       default: Mapping[str, Any] | None = None, description: str = "",
                       launch_knobs: Mapping[str, Sequence[Any]] | None = None,
                       launch_default: Mapping[str, Any] | None = None) -> Space:
    """The Space of an autotune list (``triton.Config`` objects or dicts).

    ``launch_knobs``: constexprs the kernel's launcher sets outside the list, with the values worth
    trying; ``launch_default`` holds the launcher's own values, which join the options and start
    the search there."""
    flat = fill_options([config_dict(c) for c in configs])
    if not flat:
        raise KerntuneError("an autotune list with no configs gives no space")
    values = knob_values(flat)
    params = [Choice(k, options=tuple(_widen(k, v) if widen else v), description=_describe(k, v, widen))
              for k, v in values.items() if len(v) > 1 or widen]
    own = {k: v for k, v in (launch_default or {}).items() if k in (launch_knobs or {})}
    for k, vals in (launch_knobs or {}).items():
        if k in values:
            raise KerntuneError(f"{k!r} is in the autotune list already; a launch knob is one the list leaves out")
        if launch_default is None or k not in launch_default:
            raise KerntuneError(f"launch knob {k!r} needs the launcher's own value (the adapter's default)")
        opts = sorted({*vals, own[k]})
        params.append(Choice(k, options=tuple(opts), description=f"kernel constexpr the launcher sets to {own[k]}"))
    fixed = {k: v[0] for k, v in values.items() if len(v) == 1 and not widen}
    if not params:  # a single config: nothing to choose unless widened
        raise KerntuneError("an autotune list of one config has nothing to search (widen it)")
    names = [p.name for p in params]
    constraints = []
    if not widen and len(flat) > 1:
        listed = sorted({tuple(c[n] for n in names) for c in flat}, key=repr)
        constraints.append(f"({', '.join(names)},) in {tuple(listed)!r}")  # a tuple even for one knob
    start = {**(dict(default) if default is not None else flat[0]), **own}
    space = Space(params, constraints=constraints, default={k: start[k] for k in names if k in start}, name=name,
                  description=description)
    space.fixed = fixed  # type: ignore[attr-defined]  # knobs every listed config shares
    return space


def space_from_knobs(knobs: Mapping[str, Sequence[Any]], default: Mapping[str, Any], name: str = "",
                     descriptions: Mapping[str, str] | None = None, description: str = "",
                     constraints: Sequence[str] = ()) -> Space:
    """The Space of a heuristic launcher: the adapter's knobs, the package's rule as default."""
    params = []
    for k, vals in knobs.items():
        opts = list(vals)
        if k in default and default[k] not in opts:
            opts.append(default[k])
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in opts):
            opts = sorted(opts)
        params.append(Choice(k, options=tuple(opts), description=(descriptions or {}).get(k, "")))
    return Space(params, constraints=list(constraints), default={k: v for k, v in default.items() if k in knobs},
                 name=name, description=description)


def _describe(name: str, listed: list[Any], widen: bool) -> str:
    what = {"num_warps": "warps per program", "num_stages": "software pipelining stages",
            "num_ctas": "CTAs per cluster", "ir_override": "IR file compiled instead of the source"}.get(
                name, "kernel constexpr")
    return f"{what}; the shipped list uses {listed}" + (" (widened by one step each way)" if widen else "")
