"""Tensile inputs from a model or a user's file that are malformed are refused with one line: a bad
edit item is dropped with its reason, a bad YAML is one TensileError, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kerntune.tensile import TensileConfig, TensileEdit, TensileError

DATA = Path(__file__).parent / "data" / "tensile"


def _ask(answer: str):
    from kerntune.llm import LLMClient
    from kerntune.tensile.prompting import ask
    from tests.scripted import ScriptedProvider

    cfg = TensileConfig.load(DATA / "mi32_bf16_nn.yaml")
    return ask(LLMClient(ScriptedProvider(lambda n, m: answer), retries=0), cfg, "MI300X")


def test_a_string_edit_item_is_dropped_and_the_others_kept():
    # TensileEdit.from_dict("remove DepthU 16") raised AttributeError, which ended the run.
    edits, dropped, _ = _ask(json.dumps({"edits": ["remove DepthU 16",
                                                   {"op": "remove_fork", "param": "DepthU"}]}))
    assert [e.op for e in edits] == ["remove_fork"]
    assert len(dropped) == 1 and "object" in dropped[0]


@pytest.mark.parametrize("problem", ["1e400", "-1e400", "1.5", "-1", "true", '"a"'])
def test_a_bad_problem_index_drops_the_item(problem):
    # 1e400 is inf in JSON: int(inf) raised OverflowError, which ended the run.
    edits, dropped, _ = _ask('{"edits": [{"op": "remove_fork", "param": "DepthU", "problem": %s},'
                             ' {"op": "remove_fork", "param": "DepthU", "problem": 0.0}]}' % problem)
    assert [(e.op, e.problem) for e in edits] == [("remove_fork", 0)]
    assert len(dropped) == 1 and "problem" in dropped[0]


@pytest.mark.parametrize("item", [["remove_fork"], {"op": "add_fork", "param": "DepthU", "values": "16"},
                                  {"op": "remove_fork", "param": {"x": 1}}, {"op": "add_fork", "step": 1e400}])
def test_from_dict_refuses_malformed_items_with_a_tensile_error(item):
    with pytest.raises(TensileError):
        TensileEdit.from_dict(item)


STEP = "BenchmarkProblems:\n  -\n    - {OperationType: GEMM, DataType: s}\n    - %s\n"


@pytest.mark.parametrize("step, needle", [
    ("ForkParameters:\n        - DepthU: 5", "DepthU: 5 is a number, not a list"),
    ("ForkParameters:\n        - DepthU: null", "DepthU has no values"),
    ("ForkParameters:\n        - Groups: 5", "Groups must be a list of groups"),
    ("ForkParameters:\n        - Groups: [5]", "Groups[0] must be a list of alternative mappings"),
    ("ForkParameters:\n        - 5", "entry 5 must be a mapping"),
    ("ForkParameters:\n        DepthU: [16, 32]", "ForkParameters must be a list"),
    ("BenchmarkCommonParameters: 5", "BenchmarkCommonParameters must be a list"),
    # Tensile iterates the value: a string is its letters (8 invalid values), not one value
    ("BenchmarkCommonParameters:\n        - KernelLanguage: Assembly", "KernelLanguage: Assembly is a string"),
])
def test_malformed_parameter_shapes_are_one_tensile_error(step, needle):
    with pytest.raises(TensileError, match="step 0") as exc:
        TensileConfig(STEP % step).kernel_count()
    assert needle in str(exc.value)


def test_the_alternate_format_is_checked_too():
    with pytest.raises(TensileError, match="DepthU: 5 is a number"):
        TensileConfig("ProblemType: {OperationType: GEMM}\nForkParameters:\n  - DepthU: 5\n")


def test_well_formed_shapes_still_count():
    cfg = TensileConfig(STEP % "ForkParameters:\n        - DepthU: [16, 32]\n        - KernelLanguage: [Assembly]"
                        "\n        - WorkGroupMapping: []\n        - Groups:\n          -\n            - {StaggerU: 0}"
                        "\n            - {StaggerU: 32}")
    assert cfg.kernel_count() == 4


def test_a_non_utf8_file_is_one_tensile_error(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_bytes(b"\xff\xfe garbage")
    with pytest.raises(TensileError, match="not UTF-8"):
        TensileConfig.load(path)


G2 = """\
BenchmarkProblems:
  -
    - {OperationType: GEMM, DataType: s}
    - ForkParameters:
        - DepthU: [16, 32]
        - Groups:
          -
            - {StaggerU: 0, WorkGroupMapping: 1}
            - {StaggerU: 32, WorkGroupMapping: 8}
        - WorkGroup:
          - [16, 16, 1]   # keep me
          -
            - 32
            - 8
            - 1
"""


@pytest.mark.parametrize("edit", [{"op": "remove_group_param", "param": "StaggerU"},
                                  {"op": "remove_candidate", "param": "WorkGroup", "value": [16, 16, 1]},
                                  {"op": "add_candidate", "param": "WorkGroup", "value": [64, 4, 1]}])
def test_edits_of_lists_with_a_dash_on_its_own_line_write_what_they_report(edit):
    # The Groups group's "-" stands alone on its line: the splice cut at the first child's line and
    # wrote [{WorkGroupMapping: 1}, {WorkGroupMapping: 8}] as one alternative, keeping the old one too.
    from kerntune.tensile import apply

    cfg = TensileConfig(G2)
    new, refused = apply(cfg, [TensileEdit.from_dict(edit)])
    assert not refused
    again = TensileConfig(new.dumps())
    assert [s.fork_params() for s in again.steps()] == [s.fork_params() for s in new.steps()]
    assert [s.groups() for s in again.steps()] == [s.groups() for s in new.steps()]
    assert again.kernel_count() == new.kernel_count()
