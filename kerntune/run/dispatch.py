"""The dispatch table: one kernel's winner per shape, as a file a program ships.

``kerntune tune --shapes`` (``kerntune.run.shapes``) writes the winners to the store's
``best_configs`` keyed by ``MxNxK``; ``kerntune cache export --json`` turns them into this
table and ``@kerntune.autotune(dispatch=...)`` reads it back.  Kept apart from the tuning
so that reading a table at run time loads no search code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from kerntune.errors import KerntuneError

Shape = tuple[int, ...]
DISPATCH_FORMAT = "kerntune-dispatch/1"


def dispatch_table(entries: Sequence[dict[str, Any]], kernel: str = "") -> dict[str, Any]:
    """The JSON dispatch table of ``Store.iter_best`` entries whose problem key is a shape
    (``MxNxK``); the decorator's ``dispatch=`` and ``cache export --json`` use this form."""
    rows = []
    for e in sorted(entries, key=lambda e: e["problem_key"]):
        parts = str(e["problem_key"]).split("x")
        if not all(p.isascii() and p.isdigit() for p in parts):   # "\u00b2".isdigit(), but int() refuses it
            continue
        rows.append({"shape": [int(p) for p in parts], "config": e["config"], "time_ms": e["time_ms"],
                     "device": e["device"], "versions": e["versions"], "kernel_hash": e["kernel_hash"]})
    if not rows:
        raise KerntuneError("no shape-keyed winners to export (tune with `kerntune tune FILE --shapes`)")
    return {"format": DISPATCH_FORMAT, "kernel": kernel, "entries": rows}


def load_dispatch(source: str | Path | dict[str, Any]) -> list[tuple[Shape, dict[str, Any], float]]:
    """(shape, config, time) rows of a dispatch table file or dict, with a clear error if it is not one."""
    data = source
    if not isinstance(source, dict):
        try:
            data = json.loads(Path(source).read_text())
        except (OSError, ValueError) as exc:
            raise KerntuneError(f"dispatch table {source}: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != DISPATCH_FORMAT:
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
            rows.append((tuple(int(x) for x in shape), dict(r["config"]), float(r["time_ms"])))
        except (KeyError, TypeError, ValueError) as exc:
            what = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
            raise KerntuneError(f"{where}: entry {i}: {what}"[:300]) from None
    return rows
