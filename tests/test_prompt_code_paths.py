"""On/off switches in the prompts: the code paths a model is asked to cover and is shown.

A field whose values are exactly 0 and 1 (or False and True) picks a code path: shared memory or
not, a read-only cache or not.  A model left to its reasoning spent whole first batches on the path
it believed in, and later rounds, whose rules ask mostly for one-field mutations of the best, reached
another path only by chance.  So the first round asks for every joint setting the constraints allow,
and later rounds show each path's best, count and failures and the paths not measured yet.  Spaces
without such fields get the prompts as before (the committed transcripts of the matmul recordings
were answered to them).

Real recorded spaces (examples/spaces) and hand-built spaces; no model is called.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from kerntune.evaluate import ReplayEvaluator
from kerntune.evaluate.trial import Status, Trial
from kerntune.space import Boolean, Choice, PowerOfTwo, Space
from kerntune.strategies.llm import feedback
from kerntune.strategies.llm.prompting import first_round, refine_round

ROOT = Path(__file__).resolve().parent.parent
SPACES = ROOT / "examples" / "spaces"
PATHS = "## Code paths"


def _space(constraints: tuple[str, ...] = (), members: list[dict] | None = None) -> Space:
    return Space([PowerOfTwo("BLOCK", low=16, high=128, default=32), Choice("use_shmem", options=(0, 1)),
                  Boolean("read_only"), Choice("GROUP", options=(1, 8), default=8),
                  Choice("unroll", options=(0, 1, 2))], constraints=constraints, members=members)


def _trial(cfg: dict, ms: float | None) -> Trial:
    return Trial(cfg, Status.OK if ms is not None else Status.COMPILE_ERROR, time_ms=ms)


def test_switches_are_the_fields_of_exactly_zero_and_one() -> None:
    # {1, 8} is two-valued but a size, {0, 1, 2} a count: neither picks a code path
    assert feedback.switches(_space()) == ["use_shmem", "read_only"]
    conv = ReplayEvaluator.from_file(SPACES / "convolution_A100.json.gz").space
    assert feedback.switches(conv) == ["read_only", "use_padding", "use_shmem"]
    assert feedback.switches(ReplayEvaluator.from_file(SPACES / "matmul_4096_h100.json.gz").space) == []


def test_first_round_asks_for_every_code_path_only_where_there_are_switches() -> None:
    text = first_round(_space(), {}, {}, 25)[1].content
    line = next(x for x in text.splitlines() if "on/off switches" in x)
    assert "(use_shmem, read_only)" in line and "every combination" in line
    # more switches than can be listed one by one (or than the batch holds): each set both ways
    many = Space([Choice(f"s{i}", options=(0, 1)) for i in range(5)])
    line = next(x for x in first_round(many, {}, {}, 25)[1].content.splitlines() if "on/off switches" in x)
    assert "both ways" in line and "every combination" not in line
    few = next(x for x in first_round(_space(), {}, {}, 3)[1].content.splitlines() if "on/off switches" in x)
    assert "both ways" in few  # 4 joint settings do not fit a batch of 3
    # No switch: the prompt is the template with nothing added (what the matmul transcripts answered)
    mm = ReplayEvaluator.from_file(SPACES / "matmul_4096_h100.json.gz")
    plain = first_round(mm.space, mm.workload(), mm.device(), 25)[1].content
    assert "on/off" not in plain
    assert "not near-duplicates.\n- Give each one a one-sentence reasoning." in plain


def test_later_rounds_show_each_code_paths_best_and_the_paths_not_measured() -> None:
    space = _space()
    base = {"BLOCK": 32, "GROUP": 8, "unroll": 0}
    history = [_trial({**base, "use_shmem": 1, "read_only": False}, 2.0),
               _trial({**base, "BLOCK": 64, "use_shmem": 1, "read_only": False}, 1.0),
               _trial({**base, "use_shmem": 0, "read_only": False}, 1.5),
               _trial({**base, "BLOCK": 64, "use_shmem": 0, "read_only": False}, None),
               _trial({**base, "use_shmem": 0, "read_only": True}, None)]
    text = refine_round(space, {}, {}, history, 15, 1, False)[1].content
    section = text.split(PATHS, 1)[1].split("\n## ", 1)[0]
    rows = [x for x in section.splitlines() if x.startswith("- ")]
    # best first, each with its best time, the gap to the best of all, and its counts
    assert rows[0] == "- use_shmem=1, read_only=false: best 1 ms (the best), 2 ran"
    assert rows[1] == "- use_shmem=0, read_only=false: best 1.5 ms (+50.0% vs the best), 1 ran, 1 failed"
    assert rows[2] == "- use_shmem=0, read_only=true: none ran, 1 failed"
    # no constraint: every joint setting is allowed, and the one never tried is named
    assert rows[3] == "- not measured yet: use_shmem=1, read_only=true"
    assert text.index(PATHS) < text.index("## Next step")


def test_paths_the_constraints_exclude_are_not_asked_for() -> None:
    base = {"BLOCK": 32, "GROUP": 8, "unroll": 0}
    members = [{**base, "use_shmem": s, "read_only": r} for s in (0, 1) for r in (False, True) if s or not r]
    recorded = _space(members=members)  # a recording: (use_shmem=0, read_only=true) was never valid
    history = [_trial(members[0], 1.0)]
    missing = re.search(r"- not measured yet: (.*)", feedback.code_paths(recorded, history)).group(1)
    assert missing == "use_shmem=1, read_only=false; use_shmem=1, read_only=true"
    # Constraints on a space not held in memory: walked (the prompt counts it too), so the same settings,
    # and the same text before and after anything has put the valid set in memory (a prompt rebuilt from
    # the store says what the run's said)
    constrained = _space(constraints=("use_shmem == 1 or not read_only",))
    fresh = feedback.code_paths(constrained, history)
    assert re.search(r"- not measured yet: (.*)", fresh).group(1) == missing
    constrained.valid_configs()
    assert constrained.materialised and feedback.code_paths(constrained, history) == fresh
    # too large to walk: the settings are named with a caveat, and the space is not walked
    big = Space([PowerOfTwo(f"p{i}", low=1, high=2 ** 15) for i in range(6)]
                + [Choice("use_shmem", options=(0, 1)), Boolean("read_only")],
                constraints=("use_shmem == 1 or not read_only",))
    assert big.cartesian_size > feedback.WALK_LIMIT
    cfg = {**{f"p{i}": 1 for i in range(6)}, "use_shmem": 0, "read_only": False}
    text = feedback.code_paths(big, [_trial(cfg, 1.0)])
    assert "not measured yet (where the constraints allow them): " in text
    assert "use_shmem=0, read_only=true" in text and not big.materialised


def test_the_first_round_counts_only_switch_settings_that_exist() -> None:
    base = {"BLOCK": 32, "GROUP": 8, "unroll": 0}
    three = [{**base, "use_shmem": s, "read_only": r} for s in (0, 1) for r in (False, True) if s or not r]
    line = next(x for x in first_round(_space(members=three), {}, {}, 3)[1].content.splitlines() if "on/off" in x)
    assert "every combination" in line  # 3 settings exist, and a batch of 3 holds them
    # a field the valid set holds at one value is no switch: not named, and "both ways" not asked of it
    fixed = [{**base, "use_shmem": 1, "read_only": r} for r in (False, True)]
    text = first_round(_space(members=fixed), {}, {}, 25)[1].content
    line = next(x for x in text.splitlines() if "on/off" in x)
    assert "(read_only)" in line and "use_shmem" not in line
    assert "use_shmem" not in feedback.code_paths(_space(members=fixed), [_trial(fixed[0], 1.0)]).split("\n- ")[1]
    none = [{**base, "use_shmem": 1, "read_only": True}]
    assert "on/off" not in first_round(_space(members=none), {}, {}, 25)[1].content


def test_no_code_path_section_without_switches_or_with_too_many() -> None:
    mm = ReplayEvaluator.from_file(SPACES / "matmul_4096_h100.json.gz")
    history = mm.evaluate(mm.space.sample(random.Random(0), 10))
    assert feedback.code_paths(mm.space, history) == ""
    assert PATHS not in refine_round(mm.space, {}, {}, history, 15, 1, False)[1].content
    many = Space([Choice(f"s{i}", options=(0, 1)) for i in range(feedback.PATH_SWITCHES + 1)])
    assert feedback.code_paths(many, [_trial(dict.fromkeys(many.names, 0), 1.0)]) == ""


def test_a_constrained_space_is_walked_once_for_its_paths_and_its_count() -> None:
    """The first prompt shows the valid count and the switch settings that exist: on a constrained space
    both came from walking the cartesian product, which the prompt did twice (a 5-million-point space
    walked twice before the first model call).  The walk for the settings now counts the space too."""
    calls = 0

    def rule(cfg: dict) -> bool:
        nonlocal calls
        calls += 1
        return not (cfg["use_shmem"] and cfg["BLOCK"] == 128)

    space = _space(constraints=(rule,))
    calls = 0  # the space's construction checked its default
    text = first_round(space, {}, {}, 25)[1].content
    assert calls == space.cartesian_size, calls  # every point checked once: one walk
    assert f"{space.count():,}" in text and calls == space.cartesian_size  # the count came with it
    assert space.count() == sum(1 for _ in space.enumerate()) == space.cartesian_size * 7 // 8
