"""Tensile's benchmark results (``2_BenchmarkData/*_CSVWinner.csv``) and TR, PR, WC from them.

The file is written by the Tensile client (``ResultFileReporter`` through
``CSVStackFile``): cells separated by ", " (so headers after the first carry a
leading space), a cell holding a comma quoted.  Columns: ``GFlops`` (the
problem index, despite its name; ``GFlopsPerCU`` with that metric), ``SizeI``,
``SizeJ``, ... (one per index, M N batch K for a GEMM), ``LDD, LDC, LDA, LDB,
TotalFlops``, then with ``CSVExportWinner`` ``WinnerGFlops, WinnerTimeUS,
WinnerIdx, WinnerName``, then one column per solution holding its GFLOPS: -1
when it failed validation, empty when it did not run.  One row per problem
size (several when ``NumBenchmarks`` > 1 and rows are not merged).

Reading is tolerant because these files come from long runs that get killed:
a truncated last row, blank lines, CRLF, a BOM, stray spaces, missing winner
columns (the winner is then the solution column with the highest GFLOPS) and
repeated rows for one problem (the best of each solution is kept) are all read;
a row too short to hold its sizes and strides is skipped and counted.

A problem is its Size columns and its strides (``LDD, LDC, LDA, LDB``): a config may
benchmark one size with padded leading dimensions too, and those are other problems
with other winners.  Rows are merged only when both agree (a true repeat).  Where one
file holds a size with several strides, those problems are keyed by size and strides
(``SizeResult.key``, shown as ``size [...] LD [...]``); elsewhere by size alone.
"""

from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kerntune.tensile.config import TensileError

#: Headers that are not solutions (lower-cased); Size* columns are recognised by name.
META = {"gflops", "gflopspercu", "ldd", "ldc", "lda", "ldb", "totalflops", "winnergflops", "winnertimeus",
        "winneridx", "winnername", "tilespercu", "totalgranularity", "numcus", "problemindex"}
#: The stride columns that, with the sizes, tell one problem from another (lower-cased headers).
STRIDES = ("ldd", "ldc", "lda", "ldb")
_SIZE = re.compile(r"^Size[A-Z]$")


def _num(cell: str) -> float | None:
    try:
        v = float(cell.strip())
    except (ValueError, AttributeError):
        return None
    return v if math.isfinite(v) else None


@dataclass
class SizeResult:
    """One problem size of one benchmark (a CSVWinner file)."""

    benchmark: str                  # the file name without _CSVWinner.csv: problem type and step, e.g. ..._00
    size: tuple[int, ...]
    strides: tuple[int, ...] = ()   # LDD, LDC, LDA, LDB (those the file has)
    solutions: dict[str, float | None] = field(default_factory=dict)  # GFLOPS; None: failed validation or not run
    winner: str | None = None
    gflops: float | None = None     # the winner's
    time_us: float | None = None    # the winner's kernel time
    failed: int = 0                 # solutions that failed validation (-1)
    #: the file benchmarks this size with other strides too: the strides are part of the key
    shared_size: bool = False

    @property
    def key(self) -> tuple[str, tuple[int, ...]]:
        """(benchmark, sizes), or (benchmark, sizes + strides) where the size alone names several problems."""
        return self.benchmark, self.size + self.strides if self.shared_size else self.size

    @property
    def label(self) -> str:
        """How reports name the problem: ``size [M, N, B, K]``, with ``LD [...]`` where it needs them."""
        return f"size {list(self.size)}" + (f" LD {list(self.strides)}" if self.shared_size else "")

    def merge(self, other: "SizeResult") -> None:
        """A repeated row for the same problem (sizes and strides): keep each solution's best and the
        better winner."""
        for name, g in other.solutions.items():
            old = self.solutions.get(name)
            if g is not None and (old is None or g > old):
                self.solutions[name] = g
        if other.gflops is not None and (self.gflops is None or other.gflops > self.gflops):
            self.winner, self.gflops, self.time_us = other.winner, other.gflops, other.time_us


@dataclass
class Results:
    """Every CSVWinner file of one Tensile output folder, keyed by (benchmark, size)."""

    source: str
    sizes: dict[tuple[str, tuple[int, ...]], SizeResult]
    skipped_rows: int = 0
    files: list[str] = field(default_factory=list)


def read_csv_winner(path: str | Path) -> tuple[list[SizeResult], int]:
    """The sizes of one CSVWinner file, and how many rows were too short to read."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig", errors="replace")
    except OSError as exc:
        raise TensileError(f"{p}: cannot read ({exc.strerror})") from None
    rows = [r for r in csv.reader(text.splitlines(), skipinitialspace=True) if any(c.strip() for c in r)]
    if not rows:
        raise TensileError(f"{p}: empty CSV (Tensile wrote no results)")
    header = [h.strip() for h in rows[0]]
    sizes = [i for i, h in enumerate(header) if _SIZE.match(h)]
    if not sizes:
        raise TensileError(f"{p}: no SizeI/SizeJ/... columns: not a Tensile results CSV "
                           f"(header: {', '.join(header[:6])})")
    col = {h.lower(): i for i, h in enumerate(header)}
    strides = [col[h] for h in STRIDES if h in col]
    sols = [(i, h) for i, h in enumerate(header) if h and h.lower() not in META and not _SIZE.match(h)]
    bench = p.name[: -len("_CSVWinner.csv")] if p.name.endswith("_CSVWinner.csv") else p.stem
    out: dict[tuple[tuple[int, ...], tuple[int, ...]], SizeResult] = {}
    skipped = 0
    for row in rows[1:]:
        cells = [c.strip() for c in row] + [""] * (len(header) - len(row))
        dims = [_num(cells[i]) for i in sizes + strides]
        if any(d is None for d in dims):  # cut before its strides: no results either
            skipped += 1
            continue
        ints = tuple(int(d) for d in dims)  # type: ignore[arg-type]
        r = SizeResult(bench, ints[: len(sizes)], ints[len(sizes):])
        for i, name in sols:
            g = _num(cells[i])
            if g is not None and g < 0:
                r.failed += 1
            r.solutions[name] = g if g is not None and g > 0 else None
        g = _num(cells[col["winnergflops"]]) if "winnergflops" in col else None
        name = cells[col["winnername"]] if "winnername" in col else ""
        if g is not None and g > 0 and name:
            r.winner, r.gflops = name, g
            r.time_us = _num(cells[col["winnertimeus"]]) if "winnertimeus" in col else None
        else:  # no winner columns (CSVExportWinner off) or an empty winner: the best solution column
            best = max(((v, n) for n, v in r.solutions.items() if v is not None), default=None)
            if best is not None:
                r.gflops, r.winner = best
                total = _num(cells[col["totalflops"]]) if "totalflops" in col else None
                r.time_us = total / (best[0] * 1e3) if total else None
        if (r.size, r.strides) in out:  # a repeat (NumBenchmarks > 1): the same problem again
            out[(r.size, r.strides)].merge(r)
        else:
            out[(r.size, r.strides)] = r
    per_size: dict[tuple[int, ...], int] = {}
    for size, _ in out:
        per_size[size] = per_size.get(size, 0) + 1
    for (size, _), r in out.items():
        r.shared_size = per_size[size] > 1
    return list(out.values()), skipped


def read_results(path: str | Path) -> Results:
    """A Tensile output folder (or its 2_BenchmarkData, or one CSVWinner file)."""
    p = Path(path)
    if p.is_file():
        files = [p]
    elif (p / "2_BenchmarkData").is_dir():
        files = sorted((p / "2_BenchmarkData").glob("*_CSVWinner.csv"))
    elif p.is_dir():
        files = sorted(p.glob("*_CSVWinner.csv"))
    else:
        raise TensileError(f"not found: {p}")
    if not files:
        raise TensileError(f"{p}: no 2_BenchmarkData/*_CSVWinner.csv (did Tensile finish?)")
    res = Results(str(p), {}, files=[str(f) for f in files])
    for f in files:
        rows, skipped = read_csv_winner(f)
        res.skipped_rows += skipped
        for r in rows:
            if r.key in res.sizes:
                res.sizes[r.key].merge(r)
            else:
                res.sizes[r.key] = r
    return res


def run_seconds(folder: str | Path) -> float | None:
    """Tensile's wall time from the ``kerntune_run.json`` that ``kerntune tensile run`` writes."""
    p = Path(folder) / "kerntune_run.json"
    try:
        data = json.loads(p.read_text())
        return float(data["wall_s"]) if data.get("returncode", 0) == 0 else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def model_seconds(folder: str | Path) -> float | None:
    """The model's time from the ``kerntune_generate.json`` that ``generate``/``autotune`` write."""
    try:
        return float(json.loads((Path(folder) / "kerntune_generate.json").read_text())["llm_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def summary_text(res: Results, limit: int = 30) -> str:
    """The results as the model's prompt shows them: per size, the winner and its GFLOPS."""
    lines = []
    for (bench, _), r in list(sorted(res.sizes.items()))[:limit]:
        ok = sum(1 for v in r.solutions.values() if v is not None)
        lines.append(f"- {bench} {r.label}: winner {r.winner or 'none'} at "
                     f"{r.gflops or 0:.1f} GFLOPS ({ok} of {len(r.solutions)} solutions valid, {r.failed} failed)")
    return "\n".join(lines)


def as_dict(res: Results) -> dict[str, Any]:
    return {"source": res.source, "files": res.files, "skipped_rows": res.skipped_rows,
            "sizes": [{"benchmark": r.benchmark, "size": list(r.size), "strides": list(r.strides), "winner": r.winner, "gflops": r.gflops,
                       "time_us": r.time_us, "failed": r.failed} for r in res.sizes.values()]}
