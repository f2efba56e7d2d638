"""Space pruning defects: `space evaluate` on a Kernel Tuner cache without compile or benchmark times
(ZeroDivisionError; TR is now unavailable, with a note), and additive groups whose constraint followed a
moved default, so that removing a value ADDED configs the space never had (an edited space must be a
subset of the space it was edited from).  Real recorded spaces, real space files, real `kerntune` runs."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from cli_runs import run_cli
from kerntune.prune.edits import Edit, SpaceState, apply_edits
from kerntune.prune.spacefile import load_state, save_state
from kerntune.space import Choice, Space
from kerntune.space.io import load_space


def configs(space: Space) -> set[tuple]:
    return {tuple(sorted((k, repr(v)) for k, v in c.items())) for c in space.enumerate()}


# -- 6: a recording without compile/benchmark times ---------------------------------------------------------------
def kernel_tuner_cache_without_costs(path: Path) -> Path:
    """A Kernel Tuner cache that kept kernel times only (no compile_time, no benchmark_time)."""
    tp = {"block_size_x": [16, 32, 64, 128], "tile": [1, 2, 4]}
    cache = {f"{bx},{t}": {"block_size_x": bx, "tile": t, "time": 1.0 + abs(bx - 64) / 64 + t * 0.1,
                           "times": [1.0, 1.0]} for bx, t in itertools.product(*tp.values())}
    path.write_text(json.dumps({"device_name": "X", "kernel_name": "k", "problem_size": [1024],
                                "tune_params_keys": list(tp), "tune_params": tp, "objective": "time",
                                "cache": cache}))
    return path


def test_space_evaluate_on_a_cache_without_costs_reports_tr_unavailable(tmp_path: Path) -> None:
    cache = kernel_tuner_cache_without_costs(tmp_path / "nocost.json")
    out = tmp_path / "eval.json"
    proc = run_cli(tmp_path, "space", "evaluate", "--space", str(cache), "--rule", "--runs", "2",
                   "--profile-size", "4", "--json", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "TR unavailable: the recording holds no compile or benchmark times" in " ".join(proc.stdout.split())
    data = json.loads(out.read_text())
    assert data["summary"]["TR"] is None and data["summary"]["PR"] == pytest.approx(1.0)
    assert all(r["tr"] is None and "TR unavailable" in r["note"] for r in data["runs"])


def test_a_recording_with_costs_still_has_its_tr(conv_evaluator) -> None:
    from kerntune.prune import evaluate_pruner, rule_pruner

    s = evaluate_pruner(conv_evaluator, rule_pruner(), runs=1, profile_size=10).table()
    assert isinstance(s["TR"], float)


# -- 7: additive groups keep their base values --------------------------------------------------------------------
SPACE = Space([Choice("A", options=(1, 2, 3, 4)), Choice("B", options=("x", "y", "z")),
               Choice("C", options=(True, False)), Choice("D", options=(8, 16))], default={"A": 2, "B": "y"})


@pytest.fixture()
def grouped() -> SpaceState:
    out = apply_edits(SPACE, [Edit("split_group", params=["A", "B", "C"])])
    assert out.after == (1 + 3 + 2 + 1) * 2
    return out.state


@pytest.mark.parametrize("edits, count", [
    ([Edit("remove_value", "A", 2)], 3 * 2),                     # A always off its base: B and C keep theirs
    ([Edit("remove_param", "A", 3)], 1 * 2),                     # pinned off its base: likewise
    ([Edit("remove_value", "B", "y"), Edit("remove_value", "A", 4)], 2 * 2),
    ([Edit("remove_value", "D", 8), Edit("remove_value", "A", 2)], 3 * 1),
])
def test_removing_a_grouped_parameters_base_value_leaves_a_subset(grouped: SpaceState, edits, count) -> None:
    before = configs(grouped.space)
    out = apply_edits(grouped, edits)
    assert not out.refused, out.refused
    after = configs(out.space)
    assert after <= before, sorted(after - before)[:3]
    assert out.after == len(after) == count
    assert out.space.satisfies(out.space.default)


def test_removing_the_base_of_two_parameters_of_one_group_is_refused(grouped: SpaceState) -> None:
    """Two parameters off their bases at once: no config of the group is left."""
    out = apply_edits(grouped, [Edit("remove_value", "A", 2), Edit("remove_value", "B", "y")])
    assert [e.param for e in out.applied] == ["A"]
    assert "would leave no valid config" in out.refused[0][1]


def test_group_bases_survive_a_space_file_and_old_files_still_load(grouped: SpaceState, tmp_path: Path) -> None:
    moved = apply_edits(grouped, [Edit("remove_value", "A", 2)])
    path = tmp_path / "moved.yaml"
    save_state(moved.state, path, {})
    again, _ = load_state(path)
    assert again.groups == [("A", "B", "C")] and again.bases == {"A": 2, "B": "y", "C": True}
    assert configs(again.space) == configs(moved.space) == configs(load_space(path))
    further = apply_edits(again, [Edit("remove_value", "A", 1)])
    assert configs(further.space) <= configs(grouped.space) and further.after == 2 * 2
    # a group whose bases are the default's is written as its names, as before
    path2 = tmp_path / "grouped.json"
    save_state(grouped, path2, {})
    assert json.loads(path2.read_text())["groups"] == [["A", "B", "C"]]


OLD_FILE = """\
params:
- {name: a, kind: choice, options: [1, 2, 4]}
- {name: b, kind: choice, options: [1, 2]}
- {name: c, kind: choice, options: [x, y]}
constraints: [(a != 1) + (b != 1) <= 1]
default: {a: 1, b: 1, c: x}
groups:
- [a, b]
"""


def test_space_expand_removing_a_group_base_writes_a_subset(tmp_path: Path) -> None:
    """The reviewer's reproduction: `groups: [[a, b]]` with base a=1, b=1; removing a = 1 moved the
    default to a = 2 and the constraint to (a != 2) + (b != 1) <= 1, which admits a = 2, b = 2."""
    src = tmp_path / "g.yaml"
    src.write_text(OLD_FILE)
    (tmp_path / "e.json").write_text(json.dumps({"edits": [{"op": "remove_value", "param": "a", "value": 1}]}))
    proc = run_cli(tmp_path, "space", "expand", "--space", "g.yaml", "--edits", "e.json", "-o", "out.yaml")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "configs: 8 -> 4" in proc.stdout
    before, after = configs(load_space(src)), configs(load_space(tmp_path / "out.yaml"))
    assert after <= before and len(after) == 4, sorted(after - before)
    state, _ = load_state(tmp_path / "out.yaml")
    assert state.bases == {"a": 1, "b": 1} and state.space.count() == 4
