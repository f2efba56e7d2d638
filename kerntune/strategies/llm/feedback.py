"""What a later round is told about the search so far: state, anchors,
results, and the patterns that separate winners from failures.

Pure functions of the history, so a prompt can be rebuilt from the store
(``kerntune prompt show --run``) exactly as the strategy saw it.
"""

from __future__ import annotations

import itertools
import json
import weakref
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


# -- code paths ------------------------------------------------------------------------------------
#: Most on/off switches whose joint settings are listed one by one (2**4 = 16 code paths); beyond that
#: the prompts ask only that each switch be tried both ways.
PATH_SWITCHES = 4


def switches(space: Space) -> list[str]:
    """The on/off fields: exactly two values, 0 and 1 or False and True.  Each picks a code path
    (shared memory or not, a read-only cache or not, strided or consecutive work), a jump in speed
    that the sizes around it hardly predict, so neither a model's reasoning nor a surrogate's
    neighbours tell which setting wins: the model is asked to measure them, not to guess."""
    out = []
    for p in space.params:
        values = p.values()
        if len(values) == 2 and all(type(v) in (int, bool) for v in values) and {int(v) for v in values} == {0, 1}:
            out.append(p.name)
    return out


def _path_text(names: Sequence[str], combo: Sequence[Any]) -> str:
    return ", ".join(f"{n}={json.dumps(jsonable(v))}" for n, v in zip(names, combo))


def first_round_paths(space: Space, n: int) -> str:
    """The first round's line on code paths ("" without switches: the prompt is then as before).
    With few switches, every joint setting the constraints allow gets a configuration; otherwise each
    switch is set both ways.  A model left to its reasoning spends a whole first batch on the path it
    believes in, and measures the others only after rounds of mutations that change one field each.
    Where the valid set is known, a switch that it holds at one value is no switch, and the settings
    counted against the batch are those that exist."""
    names, allowed = _live_switches(space)
    if not names:
        return ""
    settings = len(allowed) if allowed is not None else 2 ** len(names)
    if len(names) <= PATH_SWITCHES and settings <= n:
        return (f"\n- The on/off switches ({', '.join(names)}) choose between code paths whose speed is hard to"
                " predict from first principles: give every combination of them that the constraints allow at"
                " least one configuration, with the other parameters set to suit that path.")
    return (f"\n- The on/off switches ({', '.join(names)}) choose between code paths whose speed is hard to"
            " predict from first principles: set each of them both ways in several configurations.")


#: Spaces walked for their switch settings: those whose valid configs the prompt counts as well
#: (``prompting._common``, ``rounds._unmeasured_left``); larger ones with constraints are not walked.
WALK_LIMIT = 5_000_000
_PATHS_CACHE: "weakref.WeakKeyDictionary[Space, dict[tuple[str, ...], frozenset[tuple[Any, ...]]]]" = \
    weakref.WeakKeyDictionary()


def _allowed_paths(space: Space, names: Sequence[str]) -> set[tuple[Any, ...]] | None:
    """The joint switch settings that some valid config has: from the valid set where it is in memory
    (a recording's), every one without constraints, else by walking the space where the prompt counts it
    too; None for a larger space.  Walked lazily, never materialised (that would change how the space
    is sampled), and kept per space, so a prompt rebuilt later says the same as the run's."""
    if not space.constraints and not space.materialised:
        return set(itertools.product(*(space.by_name[n].values() for n in names)))
    if not space.materialised and space.cartesian_size > WALK_LIMIT:
        return None
    key = tuple(names)
    cached = _PATHS_CACHE.setdefault(space, {})
    if key not in cached:
        configs = space.valid_configs() if space.materialised else space.enumerate()
        cached[key] = frozenset(tuple(c[n] for n in names) for c in configs)
    return set(cached[key])


def _live_switches(space: Space) -> tuple[list[str], set[tuple[Any, ...]] | None]:
    """The switches, less those the valid set (where known) holds at one value, and their joint
    settings that exist (None where unknown)."""
    names = switches(space)
    allowed = _allowed_paths(space, names) if names else None
    if allowed is None:
        return names, None
    keep = [i for i in range(len(names)) if len({c[i] for c in allowed}) > 1]
    return [names[i] for i in keep], {tuple(c[i] for i in keep) for c in allowed}


def code_paths(space: Space, history: Sequence[Trial]) -> str:
    """A later round's section on code paths: per joint setting of the switches, how many configs ran
    and failed and its best time against the best of all, then the settings not measured yet.  The
    results table shows the 30 best configs, which on a space whose paths differ by 1.5x can all sit
    on one path: the others' standing is then nowhere in the prompt ("" without switches or with too
    many to list)."""
    names, allowed = _live_switches(space)
    if not names or len(names) > PATH_SWITCHES:
        return ""
    ok = ranked(history)
    best_all = ok[0].time_ms if ok else None
    seen: dict[tuple[Any, ...], list[Trial]] = {}
    for t in history:
        seen.setdefault(tuple(space.by_name[n].own(t.config[n]) for n in names), []).append(t)
    rows = []
    for combo, trials in sorted(seen.items(), key=lambda kv: min((t.time_ms for t in kv[1] if t.ok), default=float("inf"))):
        good = [t.time_ms for t in trials if t.ok]
        failed = len(trials) - len(good)
        fails = f", {failed} failed" if failed else ""
        if good and best_all is not None:
            rel = "the best" if min(good) == best_all else f"+{(min(good) / best_all - 1) * 100:.1f}% vs the best"
            rows.append(f"- {_path_text(names, combo)}: best {min(good):.4g} ms ({rel}), {len(good)} ran{fails}")
        else:
            rows.append(f"- {_path_text(names, combo)}: none ran{fails}")
    values = [space.by_name[n].values() for n in names]
    missing = [c for c in itertools.product(*values) if c not in seen and (allowed is None or c in allowed)]
    if missing:
        where = "" if allowed is not None else " (where the constraints allow them)"
        rows.append(f"- not measured yet{where}: " + "; ".join(_path_text(names, c) for c in missing))
    rows.append("- A path measured in few configurations, or only with sizes that suit another path, is not"
                " ruled out yet.")
    return (f"\n## Code paths (joint settings of the on/off switches {', '.join(names)})\n\n" + "\n".join(rows)
            + "\n")
