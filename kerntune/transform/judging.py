"""How a variant's search result is judged beyond its screening: the runoff among close leaders, and
the side-by-side rounds that re-time it against the current kernel and the original.

The side-by-side rounds also re-check correctness: every turn is a full run compared with the original
kernel's outputs, so a rewrite that is wrong only sometimes (a race between threads) can pass its
screening and then differ in a round.  Such a result must reject the step, and so must a rewrite that
crashes, fails to compile or hangs in its own turn; only failures that say nothing about the rewrite (the
original's or the current kernel's turn timing out, the worker or session failing) leave the verdict to
the screening times.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from kerntune.errors import KerntuneError
from kerntune.evaluate.trial import Status, Trial
from kerntune.space import jsonable

def settled_best(evaluator: Any, history: Sequence[Trial], best: Trial | None,
                 note: Callable[[str], None]) -> Trial | None:
    """The search's best, or the runoff's pick among its close leaders where the evaluator has a runoff
    (``kerntune.evaluate.retime.settle_leaders``): a variant is judged, and the next rewrite built, on the
    config that is fastest beyond one screening window's noise.  Its screening time stays the figure that
    is compared across variants.  A variant with wrong configs is rejected anyway: no runoff."""
    from kerntune.evaluate.retime import settle_leaders

    if best is None or any(t.status is Status.WRONG_RESULT for t in history):
        return best
    picked, reply = settle_leaders(evaluator, history)
    if picked is None:
        return best
    if reply is not None:
        note(f"runoff of {len(reply.get('screen') or {})} leaders: "
             + ("the screening best stands" if picked.config == best.config else
                f"{json.dumps(jsonable(picked.config))} ({picked.time_ms:.4g} ms screened) over the screening best"
                f" ({best.time_ms:.4g} ms)"))
    return picked


@dataclass
class RoundFailure:
    """Why the side-by-side rounds stopped: whose turn failed (``original``, ``current`` or
    ``candidate``), in which round, and its trial (None: the session raised or returned nothing)."""

    entrant: str
    round: int
    trial: Trial | None = None
    error: str = ""

    @property
    def status(self) -> Status | None:
        return self.trial.status if self.trial is not None else None

    def rejection(self) -> str | None:
        """The reason the step is rejected for, or None when the failure says nothing about the kernels
        (the step is then judged on its screening times).  A wrong result of any entrant rejects it: the
        outputs are compared with the original's, so the kernels together are not reliably correct, and
        accepting would build the next step on that.  A candidate that compiled and ran during its
        screening and now crashes, fails to compile or hangs is not reliable either: a rewrite that hung in
        its own turn (a deadlock that strikes now and then) was accepted on its screening times.  A timeout
        of the original's or the current kernel's turn says nothing about the rewrite."""
        s = self.status
        where = f"when re-run side by side (round {self.round + 1}, {self._who()})"
        if s is Status.WRONG_RESULT:
            return f"incorrect {where}: {self._error()} (it was correct while screened: a race or uninitialised data?)"
        if self.entrant == "candidate" and s in (Status.RUNTIME_ERROR, Status.COMPILE_ERROR):
            return f"does not run reliably: {s.value} {where}: {self._error()}"
        if self.entrant == "candidate" and s is Status.TIMEOUT:
            return f"hangs {where}: {self._error()} (it ran within the time limit while screened)"
        return None

    def fallback_note(self) -> str:
        what = self.status.value if self.status is not None else "no result"
        return (f"side-by-side re-time failed ({what} of the {self._who()} in round {self.round + 1}"
                + (f": {self._error()}" if self._error() else "") + "): judged on screening times")

    def _who(self) -> str:
        return {"candidate": "rewrite", "current": "current kernel", "original": "original kernel"}.get(
            self.entrant, self.entrant)

    def _error(self) -> str:
        text = self.error or (self.trial.error if self.trial is not None and self.trial.error else "")
        return " ".join(text.split())[:300]


def side_by_side_rounds(session: Any, entrants: Sequence[tuple[str, Any, Mapping[str, Any]]],
                        rounds: int) -> dict[str, list[float]] | RoundFailure:
    """Each entrant (name, spec, config) timed in turns for ``rounds`` rounds, the order rotating every
    round: every entrant's time in every round (ms), or the first turn that failed."""
    times: dict[str, list[float]] = {name: [] for name, _, _ in entrants}
    for r in range(rounds):
        k = r % len(entrants)
        for name, spec, config in list(entrants[k:]) + list(entrants[:k]):
            try:
                trial = next((t for _, t in session.bench(spec, [dict(config)])), None)
            except KerntuneError as exc:
                return RoundFailure(name, r, None, str(exc))
            if trial is None:
                return RoundFailure(name, r, None, "the session returned no result")
            if not trial.ok or trial.time_ms is None:
                return RoundFailure(name, r, trial)
            times[name].append(float(trial.time_ms))
    return times


def failure_reason(history: Sequence[Trial]) -> str:
    """Why a variant's search found no usable kernel, by the most telling status of its trials."""
    by = {s: [t for t in history if t.status is s] for s in Status}
    if by[Status.WRONG_RESULT]:
        return f"incorrect: {by[Status.WRONG_RESULT][0].error}"
    if by[Status.COMPILE_ERROR]:
        err = by[Status.COMPILE_ERROR][0].error or ""
        lines = [ln for ln in err.splitlines() if "error" in ln.lower()]
        return "does not compile: " + (lines[1] if len(lines) > 1 else err[:300]).strip()[:400]
    for s in (Status.TIMEOUT, Status.RUNTIME_ERROR, Status.INVALID):
        if by[s]:
            return f"no config ran ({s.value}): {(by[s][0].error or '')[:300]}"
    return "no config was measured"
