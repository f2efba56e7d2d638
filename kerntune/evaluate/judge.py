"""Time several candidates of one problem against each other in one process, by one timer.

A judge is how a figure that compares two things is taken (kerntune.evaluate.protocol says why):
every candidate (a tuned config, a package's own choice, a vendor library's call) gets the same
window of the protocol in every round, the order rotated each round so that none always follows
the same neighbour, after one warm-up that brings a rested GPU to its sustained state.  Each
figure is the median of its rounds with a 95% interval; a ratio is the median of the per-round
ratios (paired: a round's windows saw the same GPU state).  The benchmarks' judges
(``benchmarks/real_kernels/judge.py``, ``benchmarks/vendor_libraries/rerun.py``) are thin
layers over this.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from kerntune.evaluate.protocol import DEFAULT, Protocol, estimate, speedup

#: Warm-up before the first round: the GPU rested while the judge's process started.
REST_WARMUP_MS = 300


def time_interleaved(cands: Mapping[str, Callable[[], Any]], bench: Callable[..., list[float]],
                     protocol: Protocol = DEFAULT, rested: bool = True) -> dict[str, list[float]]:
    """Each candidate's per-round medians (ms), ``protocol.rounds`` rounds, order rotated.

    ``bench(fn, rep_ms, warmup_ms)`` returns one window's samples (``worker.timer``).  ``rested``:
    the GPU rested before (a fresh process), so the rounds follow the rested warm-up; False when it
    is already in its sustained state (``kerntune.evaluate.runoff``'s tie-break)."""
    names = list(cands)
    if not names:
        return {}
    if rested:
        bench(cands[names[0]], REST_WARMUP_MS, REST_WARMUP_MS)
    rounds: dict[str, list[float]] = {n: [] for n in names}
    for r in range(max(protocol.rounds, 1)):
        for i in range(len(names)):
            n = names[(i + r) % len(names)]
            samples = sorted(bench(cands[n], protocol.rep_ms, protocol.warmup_ms))
            rounds[n].append(samples[len(samples) // 2])
    return rounds


def summarize(rounds: Mapping[str, list[float]], ratios: Mapping[str, tuple[str, str]] | None = None,
              protocol: Protocol = DEFAULT) -> dict[str, Any]:
    """Figures with intervals for every candidate, and each named ratio ``(slower, faster)``:
    ``slower``'s time over ``faster``'s, so above 1 means ``faster`` is faster."""
    out: dict[str, Any] = {"rounds_ms": dict(rounds), "protocol": protocol.to_dict()}
    for n, xs in rounds.items():
        e = estimate(xs)
        out[n] = {"ms": e.median, "ci_ms": [e.lo, e.hi]}
    for label, (a, b) in (ratios or {}).items():
        if a in rounds and b in rounds:
            s = speedup(rounds[a], rounds[b])
            out[label] = {"median": s.median, "ci": [s.lo, s.hi], "n": s.n}
    return out
