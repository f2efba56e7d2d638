"""Space expansion and iterative editing: the rules an added value or parameter must pass,
additive groups counted like Tensile's, space files that keep groups and rules, the
`space expand` CLI, iterations that feed measured results back to a scripted model,
and the model's time charged to TR by `space evaluate`."""

from __future__ import annotations

import hashlib
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from kerntune.errors import SpaceError
from kerntune.llm import LLMClient
from kerntune.prune import Edit, apply_edits, llm_pruner, prune_once
from kerntune.prune.edits import SpaceState
from kerntune.prune.iterate import _line, iterate
from kerntune.prune.pruners import llm_expander
from kerntune.prune.spacefile import load_state, save_state, state_from_dict
from kerntune.space import Choice, Space, load_space
from tests.scripted import ScriptedProvider, synthetic_evaluator

NARROW = {
    "name": "synthetic",
    "params": [{"name": "BM", "kind": "pow2", "low": 16, "high": 32},
               {"name": "W", "kind": "choice", "options": [2, 4]},
               {"name": "bs", "kind": "list", "length": 2, "element": {"kind": "pow2", "low": 16, "high": 64}}],
    "default": {"BM": 16, "W": 2, "bs": [16, 16]},
    "accepts": {"W": {"low": 1, "high": 8}},
    "extensible": [{"name": "GROUP_M", "kind": "choice", "options": [1, 4, 8], "default": 1}],
}


def narrow() -> SpaceState:
    return state_from_dict(NARROW)


def refusal(state: SpaceState, edit: Edit) -> str:
    out = apply_edits(state, [edit])
    assert not out.applied and out.after == out.before
    return out.refused[0][1]


def test_added_values_must_pass_the_parameters_rule() -> None:
    s = narrow()
    assert "48 is not a power of two" in refusal(s, Edit("add_value", "BM", 48))
    assert "16 is above the highest value the kernel accepts (8)" in refusal(s, Edit("add_value", "W", 16))
    assert "'8' is not an integer" in refusal(s, Edit("add_value", "W", "8"))
    assert "nothing can be added" in refusal(s, Edit("add_value", "bs", [128, 128]))
    out = apply_edits(s, [Edit("add_value", "BM", 64), Edit("remove_value", "BM", 32), Edit("add_value", "BM", 12),
                          Edit("add_value", "W", 8)])
    # After a removal BM is stored as a plain choice, yet it is still a power of two: 12 is refused.
    assert [e.value for e in out.applied] == [64, 32, 8]
    assert "12 is not a power of two" in out.refused[0][1]
    assert list(out.space.by_name["BM"].values()) == [16, 64]
    assert list(out.space.by_name["W"].values()) == [2, 4, 8]
    assert out.after == 2 * 3 * 9


def test_declared_list_orders_additions_and_strings_stay_strings() -> None:
    space = Space([Choice("layout", options=("row",)), Choice("v", options=(4, 1))])
    out = apply_edits(space, [Edit("add_value", "layout", "col"), Edit("add_value", "layout", 3),
                              Edit("add_value", "v", 2)], accepts={"v": [1, 2, 4, 8]})
    assert list(out.space.by_name["layout"].values()) == ["row", "col"]
    assert "3 is not a string" in out.refused[0][1]
    assert list(out.space.by_name["v"].values()) == [1, 2, 4]


def test_parameters_are_added_only_when_the_kernel_reads_them() -> None:
    s = narrow()
    assert "declare it under 'extensible:'" in refusal(s, Edit("add_param", "SPLIT_K", values=[1, 2]))
    assert "16 is not a value the kernel accepts" in refusal(s, Edit("add_param", "GROUP_M", values=[4, 16]))
    out = apply_edits(s, [Edit("add_param", "GROUP_M", values=[8])])
    gm = out.space.by_name["GROUP_M"]
    assert list(gm.values()) == [1, 8] and out.space.default["GROUP_M"] == 1  # the kernel's own value stays
    assert out.after == 2 * out.before and "+GROUP_M: new parameter" in out.diff(s)
    assert "already a parameter" in refusal(out.state, Edit("add_param", "GROUP_M", values=[4]))
    allowed = apply_edits(s, [Edit("add_param", "SPLIT_K", values=[3], kind="pow2"),
                              Edit("add_param", "SPLIT_K", values=[1, 2, 4], kind="pow2")], allow_new=["SPLIT_K"])
    assert "3 is not a power of two" in allowed.refused[0][1]
    assert list(allowed.space.by_name["SPLIT_K"].values()) == [1, 2, 4] and allowed.after == 3 * allowed.before


def test_groups_add_within_and_multiply_across_like_tensile() -> None:
    space = Space([Choice("A", options=(1, 2, 3, 4)), Choice("B", options=("x", "y", "z")),
                   Choice("C", options=(True, False)), Choice("D", options=(8, 16))], default={"A": 2, "B": "y"})
    out = apply_edits(space, [Edit("split_group", params=["A", "B", "C"])])
    assert out.before == 4 * 3 * 2 * 2
    assert out.after == (1 + 3 + 2 + 1) * 2  # alternatives add in the group, the group multiplies with D
    for cfg in out.space.enumerate():
        assert sum(cfg[n] != space.default[n] for n in "ABC") <= 1
    assert "+group (A, B, C): additive, 7 combinations instead of 4 x 3 x 2" in out.diff(space)
    assert "already in the group" in refusal(out.state, Edit("split_group", params=["A", "D"]))
    # Removing a group member's base value moves the default, but the group keeps its bases: the edited
    # space is a subset (A is now always off its base, so B and C stay at theirs), never a new config.
    moved = apply_edits(out.state, [Edit("remove_value", "A", 2)])
    assert moved.space.default["A"] != 2 and moved.after == 3 * 2
    before = {out.space.key(c) for c in out.space.enumerate()}
    assert all(out.space.key(c) in before for c in moved.space.enumerate())
    joined = apply_edits(moved.state, [Edit("join_groups", params=["B"])])
    assert joined.after == 3 * 3 * 2 * 2 and not joined.state.groups
    assert "-group (A, B, C)" in joined.diff(moved.state)


def test_an_addition_no_constraint_admits_is_refused() -> None:
    recorded = Space([Choice("a", options=(1, 2)), Choice("b", options=(1, 2))],
                     constraints=[lambda c: (c["a"], c["b"]) in {(1, 1), (2, 2)}])
    why = refusal(SpaceState.of(recorded), Edit("add_value", "a", 4))
    assert "adds no valid config" in why and "expand a space file instead" in why


def test_space_files_keep_groups_rules_and_added_parameters(tmp_path: Path) -> None:
    out = apply_edits(narrow(), [Edit("add_value", "BM", 64), Edit("remove_value", "BM", 32),
                                 Edit("split_group", params=["BM", "W"]), Edit("add_param", "GROUP_M", values=[4])])
    path = tmp_path / "edited.yaml"
    save_state(out.state, path, {"edits": [e.to_dict() for e in out.applied]})
    again, _ = load_state(path)
    assert again.groups == [("BM", "W")] and again.space.count() == out.after
    assert again.rule("BM").kind == "pow2" and again.rule("W").high == 8
    assert load_space(path).count() == out.after  # every other command enumerates the same configs
    assert "12 is not a power of two" in refusal(again, Edit("add_value", "BM", 12))
    with pytest.raises(SpaceError, match="unknown parameter 'Q'"):
        state_from_dict(dict(NARROW, groups=[["BM", "Q"]]))


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    ev = synthetic_evaluator(tmp_path)  # writes tmp_path/synthetic.json: BM 16..128, W 2,4,8, bs
    assert ev.space.count() == 108
    (tmp_path / "narrow.json").write_text(json.dumps(NARROW))
    return {"recording": tmp_path / "synthetic.json", "space": tmp_path / "narrow.json"}


def test_expand_cli_writes_the_space_a_diff_and_counts(tmp_path: Path, files: dict[str, Path]) -> None:
    edits = tmp_path / "edits.json"
    edits.write_text(json.dumps({"edits": [
        {"op": "add_value", "param": "BM", "value": 64}, {"op": "add_value", "param": "BM", "value": 48},
        {"op": "add_param", "param": "GROUP_M", "values": [4]}, {"op": "split_group", "params": ["BM", "W"]}]}))
    before = hashlib.sha256(files["space"].read_bytes()).hexdigest()
    out = tmp_path / "expanded.json"
    proc = subprocess.run([sys.executable, "-m", "kerntune", "space", "expand", "--space", str(files["space"]),
                           "--replay", str(files["recording"]), "--edits", str(edits), "-o", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "configs: 36 -> 72" in proc.stdout  # (1 + 2 + 1) combinations x 9 bs x 2 GROUP_M
    assert "refused: add BM = 48: BM: 48 is not a power of two" in proc.stdout
    assert "BM: +64" in proc.stdout and "+GROUP_M" in proc.stdout and "+group (BM, W)" in proc.stdout
    data = json.loads(out.read_text())
    assert data["groups"] == [["BM", "W"]] and data["expanded_from"] == str(files["space"])
    assert [e["op"] for e in data["edits"]] == ["add_value", "add_param", "split_group"]
    assert "configs: 36 -> 72" in (tmp_path / "expanded.json.diff").read_text()
    assert load_space(out).count() == 72
    assert hashlib.sha256(files["space"].read_bytes()).hexdigest() == before
    no_rec = subprocess.run([sys.executable, "-m", "kerntune", "space", "expand", "--space", str(files["space"]),
                             "--edits", str(edits), "--iterations", "2"], capture_output=True, text=True, timeout=120)
    assert no_rec.returncode == 2 and "give a recording" in no_rec.stderr


def test_prune_cli_iterates_on_a_kerntune_table_recording(tmp_path: Path, files: dict[str, Path]) -> None:
    out = tmp_path / "pruned.yaml"
    proc = subprocess.run([sys.executable, "-m", "kerntune", "space", "prune", "--space", str(files["recording"]),
                           "--rule", "--iterations", "3", "--sample", "5", "--profile-size", "30", "-o", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "configs: 108 ->" in proc.stdout and "iteration 1:" in proc.stdout and "stopped:" in proc.stdout
    saved = load_state(out)[0]
    iterations = YAML(typ="safe").load(out.read_text())["iterations"]
    assert iterations[0]["measured"] and len(iterations[0]["measured"]) <= 5
    assert saved.space.count() == iterations[-1]["configs_after"]


def test_scripted_expander_sees_what_its_first_iteration_measured(files: dict[str, Path]) -> None:
    def script(n, messages):
        if n == 1:
            return json.dumps({"edits": [{"op": "add_value", "param": "BM", "value": 64, "reason": "bigger tile"},
                                         {"op": "add_value", "param": "W", "value": 8},
                                         {"op": "add_param", "param": "GROUP_M", "values": [4]}]})
        return json.dumps({"edits": []})

    provider = ScriptedProvider(script)
    state, ev = load_state(files["space"], files["recording"])
    prof = ev.evaluate(state.space.sample(random.Random(0), 8))
    result = iterate(state, llm_expander(LLMClient(provider, retries=0), ev.workload(), ev.device()), prof,
                     iterations=3, evaluator=ev, sample=12, seed=1)
    assert len(provider.prompts) == 2 and result.stop == "the model returned no edits in iteration 2"
    first, second = provider.prompts[0][-1].content, provider.prompts[1][-1].content
    assert "GROUP_M (the kernel reads it)" in first and "Measured after iteration" not in first
    it1 = result.iterations[0]
    assert len(it1.measured) == 12 and it1.configs_before == 36 and it1.configs_after == 3 * 3 * 9 * 2
    assert "Measured after iteration 1 (12 configurations" in second
    for t in it1.measured:
        assert _line(t) in second  # every measured config, with its time or why it was not measured
    # Configs with the added parameter are not in the recording: reported, never answered by another config.
    assert any(t.config["GROUP_M"] == 4 and "not in the recording" in _line(t) for t in it1.measured)
    assert any(t.ok and t.config["BM"] == 64 for t in it1.measured)
    assert result.state.space.count() == it1.configs_after


def test_scripted_pruner_iterations_measure_and_charge_every_sample(conv_evaluator) -> None:
    def script(n, messages):
        drop = {1: 16, 2: 8}.get(n)
        return json.dumps({"edits": [{"op": "remove_value", "param": "block_size_y", "value": drop}] if drop else []})

    provider = ScriptedProvider(script)
    outcome, run = prune_once(conv_evaluator, llm_pruner(LLMClient(provider, retries=0)), 30, seed=2, iterations=4,
                              sample=10)
    assert len(provider.prompts) == 3 and run.iterations == 3  # stopped when the model returned no edits
    assert "Measured after iteration 1 (10 configurations" in provider.prompts[1][-1].content
    assert "Measured after iteration 2" in provider.prompts[2][-1].content
    assert list(outcome.space.by_name["block_size_y"].values()) == [1, 2, 4]
    rec, space = conv_evaluator.recording, conv_evaluator.space
    assert run.tr == pytest.approx((run.t_full_s - (run.t_pruned_s + run.llm_s)) / run.t_full_s)
    kept = {space.key(c) for c in outcome.space.enumerate()}
    prof = {space.key(c) for c in space.sample(random.Random(2), 30)}
    without_samples = sum(rec.trials[k].cost_s for k in kept | prof if k in rec.trials)
    # T(K1) also charges the samples measured between iterations (those outside the final space cost extra).
    assert run.t_pruned_s > without_samples


def test_space_evaluate_counts_the_model_time_in_tr(tmp_path: Path, conv_path: Path) -> None:
    answer = tmp_path / "answer.json"
    answer.write_text(json.dumps({"edits": [{"op": "remove_value", "param": "block_size_x", "value": 256}]}))
    numbers = {}
    for label, pause in (("slow", 0.6), ("fast", 0.0)):
        out = tmp_path / f"{label}.json"
        cmd = f"cmd:sh -c 'cat >/dev/null; sleep {pause}; cat {answer}'"
        proc = subprocess.run([sys.executable, "-m", "kerntune", "space", "evaluate", "--space", str(conv_path),
                               "--llm", cmd, "--runs", "2", "--profile-size", "20", "--json", str(out)],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        numbers[label] = json.loads(out.read_text())["runs"]
    for slow, fast in zip(numbers["slow"], numbers["fast"]):
        assert slow["llm_s"] >= 0.6 > fast["llm_s"]
        assert slow["tr"] == pytest.approx((slow["t_full_s"] - (slow["t_pruned_s"] + slow["llm_s"])) / slow["t_full_s"])
        assert slow["t_pruned_s"] == pytest.approx(fast["t_pruned_s"])  # same edits, same measurements
        assert fast["tr"] - slow["tr"] == pytest.approx((slow["llm_s"] - fast["llm_s"]) / slow["t_full_s"])


def test_an_edit_without_its_param_is_one_error_naming_the_field(tmp_path: Path) -> None:
    """``{"op": "add_param", "name": "SPLIT_K", ...}`` was read as a parameter named '' and refused with
    advice (--allow-new) that could not help, and ``space expand`` still wrote its output and exited 0;
    now the edit is malformed, said by field, as a misspelt op already was (exit 2, nothing written)."""
    with pytest.raises(SpaceError, match=r"add_param: 'param' \(the parameter's name\) is missing; unknown field"
                                         r"\(s\) 'name'"):
        Edit.from_dict({"op": "add_param", "name": "SPLIT_K", "values": [1, 2, 4], "default": 1})
    Edit.from_dict({"op": "join_groups", "params": ["B"]})  # a group op names no single parameter
    space = tmp_path / "sp.yaml"
    space.write_text("params:\n  BM: [32, 64]\n  W: [4, 8]\ndefault: {BM: 32, W: 4}\n")
    edits = tmp_path / "e.json"
    edits.write_text(json.dumps({"edits": [{"op": "add_param", "name": "SPLIT_K", "values": [1, 2], "default": 1}]}))
    out = tmp_path / "wider.yaml"
    proc = subprocess.run([sys.executable, "-m", "kerntune", "space", "expand", "--space", str(space), "--edits",
                           str(edits), "--allow-new", "SPLIT_K", "-o", str(out)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "'param' (the parameter's name) is missing" in proc.stderr, proc.stderr
    assert not out.exists()
