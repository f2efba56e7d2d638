"""Iterative editing: edit, measure a sample of the edited space, show the model what
was measured, ask again; stop after K iterations or when the model returns no edits.

Why a sample and not the whole edited space: the loop is there to steer the
model (an added value that fails, a removal that lost the best config), which
a few configs show; the exhaustive search of the final space is the tuning run
itself.  The last iteration is not sampled: nothing would read the results.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from kerntune.evaluate import ReplayEvaluator
from kerntune.evaluate.trial import Status, Trial
from kerntune.prune.edits import Edit, EditOutcome, SpaceState, apply_edits
from kerntune.space import Config, jsonable

#: (state, profile, feedback) -> (edits, model seconds, note)
Editor = Callable[[SpaceState, Sequence[Trial], str], tuple[list[Edit], float, str]]


def measure(evaluator: ReplayEvaluator, configs: Sequence[Config],
            implicit: Mapping[str, Any] | None = None) -> list[Trial]:
    """Replay ``configs``.  A parameter the recording lacks (one an edit added) at the value the
    kernel uses without it (``implicit``) is the recorded config; at any other value the config
    is unmeasured, never answered by the recording of a different config."""
    names, implicit = set(evaluator.space.names), implicit or {}
    out = []
    for cfg in configs:
        added = {n: v for n, v in cfg.items() if n not in names}
        differ = sorted(n for n, v in added.items() if n not in implicit or v != implicit[n])
        missing = sorted(names - set(cfg))
        if differ or missing:
            why = f"parameter {(differ or missing)[0]}" + (f" = {jsonable(cfg[differ[0]])!r}" if differ else " missing")
            out.append(Trial(dict(cfg), Status.UNMEASURED, error=f"not in the recording: {why}"))
            continue
        t = evaluator.evaluate([{n: v for n, v in cfg.items() if n in names}])[0]
        t.config = dict(cfg)
        out.append(t)
    return out


def _line(t: Trial) -> str:
    cfg = json.dumps({k: jsonable(v) for k, v in t.config.items()}, separators=(",", ":"))
    if t.ok:
        return f"{t.time_ms:.4g}  {cfg}"
    what = "not measured" if t.status is Status.UNMEASURED else t.status.value
    return f"{what}  {cfg}" + (f"  ({t.error})" if t.error and t.status is Status.UNMEASURED else "")


@dataclass
class Iteration:
    index: int
    applied: list[dict[str, Any]]
    refused: list[str]
    configs_before: int
    configs_after: int
    llm_s: float
    note: str = ""
    measured: list[Trial] = field(default_factory=list)
    refused_edits: list[tuple[Edit, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"iteration": self.index, "applied": self.applied, "refused": self.refused,
                "configs_before": self.configs_before, "configs_after": self.configs_after,
                "llm_s": round(self.llm_s, 3), "note": self.note,
                "measured": [_line(t) for t in self.measured]}


@dataclass
class IterationResult:
    start: SpaceState
    state: SpaceState
    iterations: list[Iteration]
    stop: str
    measured: list[Trial]  # the profile plus every sample

    @property
    def llm_s(self) -> float:
        return sum(i.llm_s for i in self.iterations)

    @property
    def applied(self) -> list[Edit]:
        return [Edit.from_dict(d) for i in self.iterations for d in i.applied]

    @property
    def outcome(self) -> EditOutcome:
        """Every iteration as one outcome: edits applied and refused, counts from the start to the end."""
        before = self.iterations[0].configs_before if self.iterations else self.start.space.count()
        return EditOutcome(self.state, self.applied, [r for i in self.iterations for r in i.refused_edits], before,
                           self.state.space.count())


def feedback(it: Iteration, best_before: float | None) -> str:
    """What the next prompt shows about iteration ``it``: its edits, refusals and measured sample."""
    ok = sorted((t for t in it.measured if t.ok), key=lambda t: t.time_ms)  # type: ignore[arg-type,return-value]
    rest = [t for t in it.measured if not t.ok]
    lines = [f"## Iteration {it.index}: what you changed and what it measured", "",
             f"Applied ({it.configs_before:,} -> {it.configs_after:,} configs): "
             + ("; ".join(Edit.from_dict(d).text() for d in it.applied) or "nothing")]
    if it.refused:
        lines.append("Refused: " + "; ".join(it.refused[:10]))
    lines.append("")
    lines.append(f"Measured after iteration {it.index} ({len(it.measured)} configurations sampled from the edited "
                 "space, fastest first; times in ms):")
    if ok and best_before is not None:
        best = ok[0].time_ms
        lines.append(f"best in this sample {best:.4g} ms; best measured before {best_before:.4g} ms"
                     + (" (a new best)" if best < best_before else ""))  # type: ignore[operator]
    lines += [_line(t) for t in ok + rest] or ["(nothing could be measured)"]
    return "\n".join(lines)


def iterate(state: SpaceState, editor: Editor, profile: Sequence[Trial], iterations: int,
            evaluator: ReplayEvaluator | None = None, sample: int = 20, seed: int = 0) -> IterationResult:
    """Up to ``iterations`` rounds of edit -> apply -> (measure a sample) -> feed back."""
    start, measured = state, list(profile)
    rng = random.Random(seed)
    history: list[Iteration] = []
    text, stop = "", f"{iterations} iteration(s) done"
    for i in range(1, iterations + 1):
        edits, llm_s, note = editor(state, measured, text)
        if not edits:
            history.append(Iteration(i, [], [], state.space.count(), state.space.count(), llm_s, note))
            stop = f"the model returned no edits in iteration {i}"
            break
        outcome = apply_edits(state, edits)
        state = outcome.state
        it = Iteration(i, [e.to_dict() for e in outcome.applied], [f"{e.text()}: {why}" for e, why in outcome.refused],
                       outcome.before, outcome.after, llm_s, note, refused_edits=outcome.refused)
        history.append(it)
        if i < iterations and evaluator is not None:
            ok_before = [t.time_ms for t in measured if t.ok]
            space = state.space
            done = {space.key(t.config) for t in measured if all(n in t.config for n in space.names)}
            it.measured = measure(evaluator, space.sample(rng, sample, exclude=done), state.implicit)
            measured += it.measured
            text = feedback(it, min(ok_before) if ok_before else None)  # type: ignore[type-var]
        elif i < iterations:
            text = feedback(it, None).split("\n\nMeasured after")[0] + "\n\n(no recording: nothing was measured)"
    return IterationResult(start, state, history, stop, measured)
