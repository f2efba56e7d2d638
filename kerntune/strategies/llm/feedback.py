"""What a later round is told about the search so far: state, anchors,
results, and the patterns that separate winners from failures.

Pure functions of the history, so a prompt can be rebuilt from the store
(``kerntune prompt show --run``) exactly as the strategy saw it.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Sequence

from kerntune.evaluate.trial import Trial
from kerntune.space import Space, jsonable


def sparse_json(space: Space, config: dict[str, Any]) -> str:
    return json.dumps({k: jsonable(v) for k, v in space.sparse(config).items()}, separators=(", ", ": "))


def ranked(history: Sequence[Trial]) -> list[Trial]:
    return sorted((t for t in history if t.ok), key=lambda t: t.time_ms)  # type: ignore[arg-type,return-value]


def search_state(space: Space, history: Sequence[Trial]) -> str:
    ok = ranked(history)
    failures = [t for t in history if not t.ok]
    if not ok:
        return f"- No successful configuration yet: {len(failures)} of {len(history)} failed."
    best = ok[0]
    lines = [f"- Best so far: {best.time_ms:.4g} ms — {sparse_json(space, best.config)}"]
    if len(ok) > 1:
        margin = (ok[1].time_ms / best.time_ms - 1.0) * 100  # type: ignore[operator]
        lines.append(f"- Margin vs runner-up: {margin:.1f}%")
    lines.append(f"- Coverage: {len(ok)} successful / {len(history)} measured configurations")
    lines.append(f"- Failed configurations so far: {len(failures)}")
    return "\n".join(lines)


def anchors(space: Space, history: Sequence[Trial], k: int = 2) -> str:
    ok = ranked(history)
    if not ok:
        return "- none yet"
    best = ok[0].time_ms
    out = []
    for i, t in enumerate(ok[:k], 1):
        rel = "best" if i == 1 else f"+{(t.time_ms / best - 1) * 100:.1f}%"  # type: ignore[operator]
        out.append(f"- Anchor {i} ({rel}): {t.time_ms:.4g} ms — {sparse_json(space, t.config)}")
    return "\n".join(out)


def results_table(space: Space, history: Sequence[Trial], cap: int = 30) -> str:
    ok = ranked(history)
    lines = [f"#{i}: {t.time_ms:.4g} ms — {sparse_json(space, t.config)}" for i, t in enumerate(ok[:cap], 1)]
    if len(ok) > cap:
        lines.append(f"(… {len(ok) - cap} slower successful configurations not shown)")
    failed = len(history) - len(ok)
    if failed:
        lines.append(f"({failed} configurations failed; see the failure patterns)")
    return "\n".join(lines) if lines else "- nothing measured yet"


def _value_summary(values: list[Any]) -> str:
    counts = Counter(json.dumps(jsonable(v)) for v in values)
    if len(counts) == 1:
        return f"always {next(iter(counts))}"
    parts = [f"{v} x{n}" for v, n in counts.most_common(4)]
    return "mostly " + parts[0] + (" (also " + ", ".join(parts[1:]) + ")" if len(parts) > 1 else "")


#: The top configurations whose patterns are shown, and that a failure pattern must be absent from.
TOP = 5


def top_patterns(space: Space, history: Sequence[Trial], k: int = TOP) -> str:
    top = ranked(history)[:k]
    if len(top) < 2:
        return "- not enough successful configurations yet"
    return "\n".join(f"- {n}: {_value_summary([t.config[n] for t in top])}" for n in space.names
                     if len({json.dumps(jsonable(t.config[n])) for t in history}) > 1 or len(top) > 1)


#: A value every failure of a kind shares is a pattern only where chance explains that this rarely:
#: ``share among successes ** failures`` at most this.
CHANCE = 0.05


def _over_represented(value: Any, name: str, failures: int, ok: Sequence[Trial]) -> bool:
    """Whether ``value`` of ``name``, shared by all ``failures`` failures of a kind, marks them rather than
    the space: no top configuration has it, and as many failures drawn like the successful configurations
    would rarely all have it.  A value merely shared (a flag set in all 3 failures and in half the
    successes, top configurations among them) was listed to be avoided, steering the model from good regions.
    With no success yet there is nothing to compare: every shared value is listed."""
    if any(t.config[name] == value for t in ok[:TOP]):
        return False
    share = sum(t.config[name] == value for t in ok) / len(ok) if ok else 0.0
    return share ** failures <= CHANCE


def failure_patterns(space: Space, history: Sequence[Trial], examples: int = 3) -> str:
    failed = [t for t in history if not t.ok]
    if not failed:
        return "- no failures so far"
    ok = ranked(history)
    by_status = Counter(t.status.value for t in failed)
    lines = ["- Counts: " + ", ".join(f"{s}={n}" for s, n in by_status.most_common())]
    for status in by_status:
        group = [t for t in failed if t.status.value == status]
        # Fields whose value is the same in every failure of this kind, and rare among the successes,
        # are the likely cause (``_over_represented``).
        common = {n: group[0].config[n] for n in space.names
                  if all(t.config[n] == group[0].config[n] for t in group) and group[0].config[n] != space.default[n]
                  and _over_represented(group[0].config[n], n, len(group), ok)}
        if len(group) > 1 and common:
            lines.append(f"- {status}: every one has " + json.dumps({k: jsonable(v) for k, v in common.items()}))
        for t in group[:examples]:
            lines.append(f"- {status}: {sparse_json(space, t.config)}")
    return "\n".join(lines)


def next_step_rules(n: int, stuck: bool) -> str:
    if stuck:
        return ("- The last rounds brought no improvement: escape the current region.\n"
                f"- Use about half of the {n} configurations for clearly different families (other tile shapes,"
                " other scheduling), and the rest for 2-field mutations of Anchor 1.\n"
                "- Avoid everything listed under the failure patterns.")
    return (f"- About two thirds of the {n} configurations should be 1-field mutations of Anchor 1.\n"
            "- Use most of the rest for 1-2 field mutations of Anchor 2.\n"
            "- Reserve at most a small minority for one clearly different family, not random noise.\n"
            "- Keep each configuration sparse and do not repeat any measured configuration.")
