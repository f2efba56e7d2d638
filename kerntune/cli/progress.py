"""The run id first, then progress lines, for runs whose stdout is a log file.

A ``compare`` or ``tune`` killed early must have said which run it was, or
the ``--resume RUN_ID`` it needs has to be dug out of the store; and a log
file must show where a long run is.  So both commands print ``run id: ...``
as their first line, and, when stdout is not a terminal (where a live bar
would be drawn), one plain line per ``every`` evaluations.  Each line is
flushed at once: a file that is read while the run goes on shows it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, TextIO


def is_terminal(stream: TextIO | None = None) -> bool:
    stream = stream or sys.stdout
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class RunLog:
    """Plain, flushed lines on stdout: the run id once, then progress.

    ``min_interval_s`` keeps a fast replayed comparison (thousands of evaluations a
    second) from writing a line per 25 evaluations; a slow run still writes every one.
    """

    def __init__(self, every: int = 25, min_interval_s: float = 0.0, stream: TextIO | None = None) -> None:
        self.every = max(1, every)
        self.min_interval_s = min_interval_s
        self.stream = stream
        self.plain = not is_terminal(stream)
        self.started = time.monotonic()
        self.announced: str | None = None
        self.evaluations = 0
        self._last_line = float("-inf")

    def _out(self) -> TextIO:
        return self.stream or sys.stdout

    def line(self, text: str) -> None:
        out = self._out()
        out.write(text + "\n")
        out.flush()
        self._last_line = time.monotonic()

    def run_id(self, run_id: str, store: str | Path) -> None:
        """Print the run id once (a comparison's children are not announced)."""
        if self.announced is None:
            self.announced = run_id
            self.line(f"run id: {run_id} (store {store})")

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def evaluation(self, best_ms: float | None = None, label: str = "") -> None:
        """Count one evaluation; every ``every``-th one writes a line (plain output only)."""
        self.evaluations += 1
        if not self.plain or self.evaluations % self.every:
            return
        if time.monotonic() - self._last_line < self.min_interval_s:
            return
        best = f", best {best_ms:.4g} ms" if best_ms is not None else ""
        self.line(f"progress: {label}{self.evaluations} evaluations{best}, {self.elapsed():.0f} s")

    def repeat_done(self, label: str, done: int, total: int) -> None:
        """One comparison repeat finished (plain output only)."""
        if self.plain:
            self.line(f"progress: {label} done, {done}/{total} repeats, {self.evaluations} evaluations, "
                      f"{self.elapsed():.0f} s")

    def watch(self, store: Any, kind: str) -> None:
        """Announce the first top-level run of ``kind`` the store creates, and count its trials."""

        def created(run_id: str, run_kind: str, parent_id: str | None) -> None:
            if run_kind == kind and parent_id is None:
                self.run_id(run_id, store.path)

        store.on_run_created = created
        store.on_trial_added = lambda run_id, trial: self.evaluation()
