"""The dispatch table: one kernel's winner per shape, as a file a program ships.

``kerntune tune --shapes`` (``kerntune.run.shapes``) writes the winners to the store's
``best_configs`` keyed by ``MxNxK``; ``kerntune cache export --json`` turns them into this
table and ``@kerntune.autotune(dispatch=...)`` reads it back.  Kept apart from the tuning
so that reading a table at run time loads no search code.

A row may name its key arguments (``key``) and the dtypes of the call it was tuned for (``dtypes``:
argument -> dtype, as the decorator's own cache key holds them); the decorator launches such a row
only for a call of those dtypes.  Why: a row launched for calls of every dtype, so an fp64 call
launched the tile picked for fp16.  Rows of ``MxNxK`` keys (``tune``) name no dtypes: the store does
not know them.  A table holding such a row is ``kerntune-dispatch/2``: a reader that predates the
fields would have read its shape in the key's sorted order as M, N, K and ignored its dtypes, so it
must refuse the file; a table of ``MxNxK`` rows alone stays ``kerntune-dispatch/1``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Optional, Sequence

from kerntune.errors import KerntuneError

if TYPE_CHECKING:
    from kerntune.space import Space

Shape = tuple[int, ...]
DISPATCH_FORMAT = "kerntune-dispatch/1"
#: A table with rows that name their key arguments or dtypes (older readers refuse it).
DISPATCH_FORMAT_KEYED = "kerntune-dispatch/2"


class DispatchRow(NamedTuple):
    """One row of a table: the device is the one it was measured on (``cache export --json`` writes
    it; a hand-written table may leave it out); ``key``: the key arguments the shape's values are of,
    in its order, and ``dtypes``: the call's tensor dtypes by argument (None: the row names none)."""

    shape: Shape
    config: dict[str, Any]
    time_ms: float
    device: str | None
    key: tuple[str, ...] | None = None
    dtypes: dict[str, str] | None = None


#: The decorator's table: (shape in its key's order, ``dtypes_text`` of the row's dtypes) -> config.
DispatchConfigs = dict[tuple[Shape, Optional[str]], dict[str, Any]]


def dtypes_text(dtypes: dict[str, str] | None) -> str | None:
    """Dtypes (argument -> dtype) as one comparable text, None for none."""
    return json.dumps(dtypes, sort_keys=True) if dtypes else None


def dispatch_table(entries: Sequence[dict[str, Any]], kernel: str = "") -> dict[str, Any]:
    """The JSON dispatch table of ``Store.iter_best`` entries whose problem key is a shape
    (``MxNxK``); the decorator's ``dispatch=`` and ``cache export --json`` use this form."""
    rows = []
    for e in sorted(entries, key=lambda e: e["problem_key"]):
        parts = str(e["problem_key"]).split("x")
        named: dict[str, Any] = {}
        if all(p.isascii() and p.isdigit() for p in parts):   # "\u00b2".isdigit(), but int() refuses it
            shape = [int(p) for p in parts]
        else:  # the decorator's key: its integer key values, with the call's dtypes
            found = _decorator_row(str(e["problem_key"]))
            if found is None:
                continue
            shape, named = found
        rows.append({"shape": shape, **named, "config": e["config"], "time_ms": e["time_ms"],
                     "device": e["device"], "versions": e["versions"], "kernel_hash": e["kernel_hash"]})
    if not rows:
        raise KerntuneError("no shape-keyed winners to export (tune with `kerntune tune FILE --shapes`)")
    keyed = any("key" in r or "dtypes" in r for r in rows)
    return {"format": DISPATCH_FORMAT_KEYED if keyed else DISPATCH_FORMAT, "kernel": kernel, "entries": rows}


def _decorator_row(problem_key: str) -> tuple[list[int], dict[str, Any]] | None:
    """A decorator problem key (``kerntune.run.decorator_key``) as a row's shape and its ``key`` and
    ``dtypes`` fields; None where it is no shape (a value that is not a positive integer)."""
    from kerntune.run.decorator_key import DTYPES

    try:
        values = json.loads(problem_key)
    except ValueError:
        return None
    if not isinstance(values, dict):
        return None
    dtypes = values.pop(DTYPES, None)
    if not values or not all(type(v) is int and v > 0 for v in values.values()):
        return None
    names = sorted(values)
    return [values[k] for k in names], {"key": names, **({"dtypes": dtypes} if dtypes else {})}


def load_dispatch(source: str | Path | dict[str, Any]) -> list[tuple[Shape, dict[str, Any], float]]:
    """(shape, config, time) rows of a dispatch table file or dict, with a clear error if it is not one."""
    return [(r.shape, r.config, r.time_ms) for r in read_dispatch(source)[1]]


def read_dispatch(source: str | Path | dict[str, Any]) -> tuple[str, list[DispatchRow]]:
    """The name errors give the table (its file), and its rows with their devices."""
    data = source
    if not isinstance(source, dict):
        try:
            data = json.loads(Path(source).read_text())
        except (OSError, ValueError) as exc:
            raise KerntuneError(f"dispatch table {source}: {exc}") from None
    if not isinstance(data, dict) or data.get("format") not in (DISPATCH_FORMAT, DISPATCH_FORMAT_KEYED):
        raise KerntuneError(f"dispatch table {source if not isinstance(source, dict) else ''}: "
                            f"not a {DISPATCH_FORMAT} file (write one with `kerntune cache export --json`)")
    where = f"dispatch table {source if not isinstance(source, dict) else ''}".rstrip()
    entries = data.get("entries")
    if not isinstance(entries, list):
        raise KerntuneError(f"{where}: entries must be a list of {{shape, config, time_ms}} rows")
    rows = []
    for i, r in enumerate(entries, 1):
        # A hand-edited or cut table once raised KeyError/TypeError tracebacks at import of the program.
        try:
            shape = r["shape"]
            if not isinstance(shape, list) or not shape or not all(
                    (isinstance(x, int) and not isinstance(x, bool)) or (isinstance(x, str) and x.isascii()
                                                                      and x.isdigit()) for x in shape) \
                    or not all(int(x) > 0 for x in shape):
                raise ValueError(f"shape {shape!r} is not a list of positive integers")
            if not isinstance(r["config"], dict):
                raise ValueError("config is not an object")
            device = r.get("device")
            names, dtypes = r.get("key"), r.get("dtypes")
            if names is not None and not (isinstance(names, list) and len(names) == len(shape)
                                          and all(isinstance(n, str) for n in names)):
                raise ValueError(f"key {names!r} is not a list of {len(shape)} argument names")
            if dtypes is not None and not (isinstance(dtypes, dict)
                                           and all(isinstance(v, str) for v in dtypes.values())):
                raise ValueError(f"dtypes {dtypes!r} is not an object of argument -> dtype")
            rows.append(DispatchRow(tuple(int(x) for x in shape), dict(r["config"]), float(r["time_ms"]),
                                    device if isinstance(device, str) and device else None,
                                    tuple(names) if names is not None else None, dict(dtypes) if dtypes else None))
        except (KeyError, TypeError, ValueError) as exc:
            what = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
            raise KerntuneError(f"{where}: entry {i}: {what}"[:300]) from None
    return where, rows


def dispatch_configs(source: str | Path | dict[str, Any], space: Space, key: Sequence[str],
                     device: Callable[[], str]) -> DispatchConfigs:
    """The decorator's ``dispatch=`` table: (shape, the row's dtypes as ``dtypes_text``) -> the config to
    launch, each row completed from the space's default where it names only some parameters (as warm
    starts are).  A row that names its ``key`` has its values put in ``key``'s order (one that names
    other arguments is refused); rows of one shape for other dtypes are different rows.

    Why it refuses rather than skips: a row that no longer fits the space (a parameter renamed, a
    value dropped) or a shape given twice (two devices' winners in one table) was left out or
    silently overridden, so a program shipped with a stale table tuned in-process in production
    instead of launching the table's config.  Two rows of one shape are fine where they carry
    devices and exactly one is ``device()`` (this process's device, asked only then): that one is
    kept."""
    where, rows = read_dispatch(source)
    by_shape: dict[tuple[Shape, str | None], list[DispatchRow]] = {}
    for r in rows:
        if len(r.shape) != len(key):
            raise KerntuneError(f"autotune: dispatch table shape {r.shape} has {len(r.shape)} values, "
                                f"key {list(key)} has {len(key)}")
        if r.key is not None:
            if sorted(r.key) != sorted(key):
                raise KerntuneError(f"autotune: {where}: a row keyed by {', '.join(r.key)}, this kernel's key is "
                                    f"{', '.join(key)}")
            r = r._replace(shape=tuple(dict(zip(r.key, r.shape))[k] for k in key))
        by_shape.setdefault((r.shape, dtypes_text(r.dtypes)), []).append(r)
    here: str | None = None
    chosen: dict[tuple[Shape, str | None], DispatchRow] = {}
    twice: list[str] = []
    for (shape, dtypes), same in by_shape.items():
        if len(same) > 1:
            here = device() if here is None else here
            mine = [r for r in same if r.device == here]
            if len(mine) != 1:
                devices = sorted({repr(r.device) for r in same if r.device})
                twice.append(_shape_text(shape) + (f" for {dtypes}" if dtypes else "")
                             + (f" (on {', '.join(devices)})" if devices else ""))
                continue
            same = mine
        chosen[(shape, dtypes)] = same[0]
    if twice:
        on = f" (this device: {here!r})" if any(r.device for r in rows) else ""
        raise KerntuneError(f"autotune: {where}: shape{'s' * (len(twice) > 1)} {', '.join(twice)} given more than once{on};"
                            " a table holds "
                            "one config per shape: export one device's winners (`kerntune cache export --json "
                            "--device NAME`)")
    table: DispatchConfigs = {}
    bad: list[tuple[str, str]] = []  # (shape, first reason)
    for (shape, dtypes), r in chosen.items():
        try:
            cfg = space.normalize(r.config)
            errors = [str(e) for e in space.validate(cfg)]
        except Exception as exc:  # noqa: BLE001 - whatever is wrong with the row, it is named with the reason
            errors = [str(exc) or type(exc).__name__]
        if errors:
            bad.append((_shape_text(shape), errors[0][:150]))
        else:
            table[(shape, dtypes)] = space.canonical(cfg)
    if bad:
        # each shape named, the reasons of the first few (one line however stale the table)
        said = "; ".join(f"{shape}: {why}" for shape, why in bad[:8])
        rest = f"; also {', '.join(shape for shape, _ in bad[8:])}" if len(bad) > 8 else ""
        raise KerntuneError(f"autotune: {where}: {len(bad)} row(s) do not fit the space (a stale table: export it "
                            f"again, or tune these shapes): {said}{rest}")
    return table


def _shape_text(shape: Shape) -> str:
    return "x".join(map(str, shape))
