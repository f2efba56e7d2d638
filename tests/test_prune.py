"""Space pruning: edit validation, the rule pruner, an LLM pruner driven by a
scripted provider (deterministic, no real model), TR/PR/WC on the real
recorded convolution space, and the CLI's promise never to modify its input."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time

import pytest

from kerntune.llm import LLMClient
from kerntune.prune import Edit, apply_edits, evaluate_pruner, llm_pruner, prune_once, rule_pruner
from kerntune.space import Choice, IntRange, Space
from tests.scripted import ScriptedProvider


def small() -> Space:
    return Space([Choice("a", options=(1, 2, 4, 8)), IntRange("b", low=0, high=3), Choice("c", options=("x", "y"))],
                 constraints=["a * b <= 8"], default={"a": 2, "b": 1, "c": "x"})


def test_valid_edits_apply_in_order_and_keep_parameters() -> None:
    out = apply_edits(small(), [Edit("remove_value", "a", 8), Edit("remove_param", "c", "y")])
    assert [e.op for e in out.applied] == ["remove_value", "remove_param"] and not out.refused
    assert out.space.names == ["a", "b", "c"]  # pinned, not deleted: keys stay comparable
    assert list(out.space.by_name["a"].values()) == [1, 2, 4]
    assert list(out.space.by_name["c"].values()) == ["y"] and out.space.default["c"] == "y"
    assert out.after == out.space.count() < out.before == small().count()
    assert "a: -8" in out.diff(small()) and "c: -x" in out.diff(small())


@pytest.mark.parametrize("edit, needle", [
    (Edit("remove_value", "z", 1), "unknown parameter 'z'"),
    (Edit("remove_value", "a", 3), "has no value 3"),
    (Edit("remove_param", "b", 7), "has no value 7"),
    (Edit("add_value", "a", "16"), "'16' is not an integer"),
    (Edit("add_value", "a", 16.0), "is not an integer"),
    (Edit("add_value", "c", 3), "3 is not a string"),
    (Edit("add_value", "a", 2), "already has the value 2"),
    (Edit("add_param", "d", values=[1, 2]), "cannot be added"),
    (Edit("split_group", params=["a", "z"]), "unknown parameter 'z'"),
    (Edit("split_group", params=["a"]), "at least two parameters"),
    (Edit("join_groups", params=["a"]), "no group holds"),
])
def test_invalid_edits_are_refused_with_a_reason_naming_them(edit: Edit, needle: str) -> None:
    out = apply_edits(small(), [edit])
    assert not out.applied and len(out.refused) == 1
    assert needle in out.refused[0][1]
    assert out.after == out.before  # a refused edit leaves the space as it was


def test_an_edit_that_would_empty_the_space_is_refused() -> None:
    space = Space([Choice("a", options=(1, 2)), Choice("b", options=(1, 2))], constraints=["a != b"])
    out = apply_edits(space, [Edit("remove_value", "a", 2), Edit("remove_value", "b", 2)])
    assert len(out.applied) == 1 and "would leave no valid config" in out.refused[0][1]
    one = apply_edits(space, [Edit("remove_value", "a", 1), Edit("remove_value", "a", 2)])
    assert "without values" in one.refused[0][1]


def test_add_value_takes_only_what_the_kernel_accepts_in_its_order() -> None:
    space = Space([Choice("a", options=(1, 4))])
    out = apply_edits(space, [Edit("add_value", "a", 2), Edit("add_value", "a", 16)], accepts={"a": [1, 2, 4, 8]})
    assert list(out.space.by_name["a"].values()) == [1, 2, 4]
    assert "16 is not a value the kernel accepts (one of [1, 2, 4, 8])" in out.refused[0][1]


def test_rule_pruner_numbers_match_their_definition(conv_evaluator) -> None:
    rec = conv_evaluator.recording
    outcome, run = prune_once(conv_evaluator, rule_pruner(), 40, seed=3)
    full = sum(t.cost_s for t in rec.trials.values())
    prof = conv_evaluator.evaluate(conv_evaluator.space.sample(__import__("random").Random(3), 40))
    seen = {conv_evaluator.space.key(t.config) for t in prof}
    kept = {conv_evaluator.space.key(c) for c in outcome.space.enumerate()}
    cost = sum(t.cost_s for t in prof) + sum(rec.trials[k].cost_s for k in kept - seen if k in rec.trials)
    assert run.tr == pytest.approx((full - cost) / full)
    best = min((rec.trials[k] for k in kept | seen if k in rec.trials and rec.trials[k].ok), key=lambda t: t.time_ms)
    assert run.pr == pytest.approx(rec.optimum.time_ms / best.time_ms)
    assert run.winner_kept == (best.config == rec.optimum.config)
    assert 0 < run.configs_after < run.configs_before


def test_llm_pruner_with_a_scripted_provider(conv_evaluator) -> None:
    def script(n, messages):
        time.sleep(0.3)  # model time must be charged to TR
        return json.dumps({"edits": [
            {"op": "remove_value", "param": "block_size_x", "value": 16, "reason": "slow in the profile"},
            {"op": "remove_value", "param": "no_such", "value": 1},
            {"op": "remove_param", "param": "use_cmem", "value": 1},
            {"op": "explode", "param": "tile_size_x"}]})

    provider = ScriptedProvider(script)
    pruner = llm_pruner(LLMClient(provider, retries=0))
    outcome, run = prune_once(conv_evaluator, pruner, 30, seed=0)
    prompt = provider.prompts[0][-1].content
    assert "Measured profile (30 configurations" in prompt and "block_size_x" in prompt
    assert [e.to_dict()["param"] for e in outcome.applied] == ["block_size_x", "use_cmem"]
    assert any("unknown parameter 'no_such'" in why for _, why in outcome.refused)
    assert "unknown edit op 'explode'" in run.note
    assert run.llm_s >= 0.3
    same, no_llm = prune_once(conv_evaluator, rule_pruner(tolerance=1e9), 30, seed=0)  # prunes nothing
    assert no_llm.tr < 0.01  # nothing pruned: no saving


def test_evaluate_aggregates_runs(conv_evaluator) -> None:
    summary = evaluate_pruner(conv_evaluator, rule_pruner(), runs=3, profile_size=30)
    t = summary.table()
    assert t["runs"] == 3 and 0 <= t["WC"] <= 1 and t["PR_min"] <= t["PR"] <= 1
    assert t["WC"] == sum(r.winner_kept for r in summary.runs) / 3


def test_cli_never_modifies_its_input(tmp_path, conv_path) -> None:
    before = hashlib.sha256(conv_path.read_bytes()).hexdigest()
    out = tmp_path / "pruned.json"
    proc = subprocess.run([sys.executable, "-m", "kerntune", "space", "prune", "--space", str(conv_path), "--rule",
                           "-o", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "configs: 4,362 ->" in proc.stdout
    assert json.loads(out.read_text())["edits"]
    assert hashlib.sha256(conv_path.read_bytes()).hexdigest() == before
    same = subprocess.run([sys.executable, "-m", "kerntune", "space", "prune", "--space", str(conv_path), "--rule",
                           "-o", str(conv_path)], capture_output=True, text=True, timeout=300)
    assert same.returncode == 2 and "never modified in place" in same.stderr
    assert hashlib.sha256(conv_path.read_bytes()).hexdigest() == before
