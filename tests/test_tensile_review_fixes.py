"""Tensile review fixes: results with no usable size that validated and evaluated as a success,
group/fork overrides that edits ignored, multi-valued BenchmarkCommonParameters the prompt and
edits could not see, ForkParameters shared through a YAML anchor, and sizes no original kernel
ran that scored PR 1.0.  Real YAML and CSV files, real `kerntune` processes, a fake Tensile.sh."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from cli_runs import one_line, run_cli
from kerntune.tensile import TensileConfig, TensileEdit, TensileError, apply
from kerntune.tensile.evaluate import validate
from kerntune.tensile.results import read_results
from tests.test_tensile import SYNTHETIC

DATA = Path(__file__).parent / "data" / "tensile"
HEADER = ("GFlops, SizeI, SizeJ, SizeK, SizeL, LDD, LDC, LDA, LDB, TotalFlops, WinnerGFlops, WinnerTimeUS, WinnerIdx,"
          " WinnerName, SolA, SolB\n")
ROW_1024 = "0, 1024, 1024, 1, 1024, 1024, 1024, 1024, 1024, 2147483648, 100, 21.5, 0, SolA, 100, 80\n"
ROW_1024_PRUNED = "0, 1024, 1024, 1, 1024, 1024, 1024, 1024, 1024, 2147483648, 80, 26.8, 1, SolB, -1, 80\n"
ROW_2048_FAILED = "1, 2048, 2048, 1, 2048, 2048, 2048, 2048, 2048, 17179869184, -1, -1, -1, , -1, -1\n"
ROW_2048_FOUND = "1, 2048, 2048, 1, 2048, 2048, 2048, 2048, 2048, 17179869184, 50, 343.6, 1, SolB, -1, 50\n"
TRUNCATED = "1, 2048, 20"  # a killed run: cut before its strides


def results(folder: Path, rows: str) -> Path:
    (folder / "2_BenchmarkData").mkdir(parents=True)
    (folder / "2_BenchmarkData" / "Cijk_Ailk_Bljk_SB_00_CSVWinner.csv").write_text(HEADER + rows)
    return folder


def generate(tmp: Path, text: str, edits: list[dict]) -> dict:
    """`kerntune tensile generate` on ``text`` with ``edits``; its kerntune_generate.json."""
    (tmp / "cfg.yaml").write_text(text)
    (tmp / "edits.json").write_text(json.dumps({"edits": edits}))
    proc = run_cli(tmp, "tensile", "generate", "cfg.yaml", "out", "--edits", "edits.json")
    assert proc.returncode == 0, proc.stderr
    return json.loads((tmp / "out" / "kerntune_generate.json").read_text())


# -- 1: original/golden results with no complete size row ----------------------------------------------------
FAKE_TENSILE = """#!/bin/sh
# Tensile.sh CONFIG OUT [...]: writes the complete results of $KT_RESULTS.
mkdir -p "$2/2_BenchmarkData"
cp "$KT_RESULTS"/*_CSVWinner.csv "$2/2_BenchmarkData/"
"""


def test_autotune_validate_refuses_a_golden_run_with_no_complete_size_row(tmp_path: Path) -> None:
    """The golden CSVWinner of a killed run (its header and one truncated row) held no size: the
    comparison ran over none, and `--validate` said "validation passed" with exit code 0."""
    golden = results(tmp_path / "golden", TRUNCATED)
    edited = results(tmp_path / "edited", ROW_1024)
    root = tmp_path / "tensile"
    root.mkdir()
    (root / "Tensile.sh").write_text(FAKE_TENSILE)
    (root / "Tensile.sh").chmod(0o755 | stat.S_IXUSR)
    (tmp_path / "cfg.yaml").write_text(SYNTHETIC)
    (tmp_path / "edits.json").write_text(json.dumps({"edits": [{"op": "remove_candidate", "param": "DepthU",
                                                                "value": 8}]}))
    proc = run_cli(tmp_path, "tensile", "autotune", "cfg.yaml", "out", "--edits", "edits.json", "--validate",
                   str(golden), "--quiet",
                   env={"TENSILE_PATH": str(root), "KT_RESULTS": str(edited / "2_BenchmarkData")})
    line = one_line(proc, f"{golden}: no complete problem-size row", "1 truncated row(s) skipped",
                    "re-run Tensile there")
    assert "validation passed" not in proc.stdout and "the edited config is in" in line
    assert not (tmp_path / "out" / "2_BenchmarkData").exists()  # refused before Tensile ran


def test_evaluate_refuses_an_original_with_no_complete_size_row(tmp_path: Path) -> None:
    """`tensile evaluate` printed "TR 0.900 PR 0.000 WC 0.00 over 0 problem sizes" with exit code 0."""
    original = results(tmp_path / "orig", TRUNCATED)
    pruned = results(tmp_path / "pruned", ROW_1024)
    proc = run_cli(tmp_path, "tensile", "evaluate", "--original", str(original), "--pruned", str(pruned))
    one_line(proc, "no complete problem-size row", "1 truncated row(s) skipped", "re-run Tensile there")
    assert "over 0 problem sizes" not in proc.stdout


def test_evaluate_reports_truncated_rows_of_the_original_and_the_edited_run(tmp_path: Path) -> None:
    """A truncated row is a size missing from the comparison; it was counted and never shown."""
    original = results(tmp_path / "orig", ROW_1024 + TRUNCATED)
    pruned = results(tmp_path / "pruned", ROW_1024_PRUNED + TRUNCATED)
    proc = run_cli(tmp_path, "tensile", "evaluate", "--original", str(original), "--pruned", str(pruned),
                   "--json", "e.json")
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    assert "the original's results: 1 truncated row(s) skipped" in out
    assert f"{pruned}: 1 truncated row(s) skipped" in out
    run = json.loads((tmp_path / "e.json").read_text())["runs"][0]
    assert run["original_skipped_rows"] == 1 and run["skipped_rows"] == 1


# -- 5: sizes where every original solution failed -----------------------------------------------------------
def test_a_size_no_original_kernel_ran_is_left_out_of_pr_and_wc(tmp_path: Path) -> None:
    """Every original solution failed at 2048 (-1 everywhere, no winner): that size was scored PR 1.0
    ("no valid kernel in the original either") although the edited run found SolB there, and it
    entered PR's mean and WC.  PR is over the sizes it can be measured at; the others are counted."""
    original = results(tmp_path / "orig", ROW_1024 + ROW_2048_FAILED)
    pruned = results(tmp_path / "pruned", ROW_1024_PRUNED + ROW_2048_FOUND)
    proc = run_cli(tmp_path, "tensile", "evaluate", "--original", str(original), "--pruned", str(pruned),
                   "--json", "e.json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads((tmp_path / "e.json").read_text())
    s, run = data["summary"], data["runs"][0]
    assert s["PR"] == pytest.approx(0.8) and s["PR_min"] == pytest.approx(0.8) and s["WC"] == 0.0
    assert s["sizes"] == 1 and s["unmeasurable_sizes"] == 1 and run["unmeasurable_sizes"] == 1
    assert [x["label"] for x in run["sizes"]] == ["size [1024, 1024, 1, 1024]"]
    (gone,) = run["unmeasurable"]
    assert gone["label"] == "size [2048, 2048, 1, 2048]" and gone["pr"] is None
    assert gone["note"] == "no valid kernel in the original; the edited config found SolB at 50.0 GFLOPS"
    assert ("1 problem size(s) with no valid kernel in the original left out of PR and WC"
            in " ".join(proc.stdout.split()))


def test_an_original_where_every_kernel_failed_is_refused(tmp_path: Path) -> None:
    """With no valid original kernel anywhere, nothing can be measured; validation passed."""
    golden = read_results(results(tmp_path / "orig", ROW_2048_FAILED))
    with pytest.raises(TensileError, match="no valid kernel at any of its 1 problem size"):
        validate(golden, read_results(results(tmp_path / "pruned", ROW_2048_FOUND)))


# -- 2: Groups override forks of the same name ---------------------------------------------------------------
GROUPED = """\
BenchmarkProblems:
  - - {OperationType: GEMM, DataType: s, TransposeA: False, TransposeB: False, UseBeta: True, Batched: True}
    - BenchmarkCommonParameters:
        - KernelLanguage: ["Assembly"]
        - PrefetchGlobalRead: [1, 2]
      ForkParameters:
        - DepthU: [32, 64]
        - Groups:
          - - {WorkGroupMapping: 1, StaggerU: 0}
            - {WorkGroupMapping: 8, StaggerU: 32}
      BenchmarkFinalParameters:
        - ProblemSizes:
          - Exact: [128, 128, 1, 128]
"""


def test_add_group_param_refuses_a_fork_or_multi_valued_common_parameter(tmp_path: Path) -> None:
    """A group wins over a fork of the same name: `add_group_param DepthU 32` wrote DepthU: 32 into
    every alternative, the 64 candidate silently gone while the count still said 8 -> 8."""
    meta = generate(tmp_path, GROUPED, [{"op": "add_group_param", "param": "DepthU", "value": 32},
                                        {"op": "add_group_param", "param": "PrefetchGlobalRead", "value": 1}])
    assert meta["applied"] == [] and meta["kernels_before"] == meta["kernels_after"] == 8
    assert meta["refused"] == [
        "add_group_param DepthU: DepthU is a fork parameter: a group value would override its candidates",
        "add_group_param PrefetchGlobalRead: PrefetchGlobalRead is a multi-valued BenchmarkCommonParameters entry: "
        "a group value would override its candidates"]
    assert (tmp_path / "out" / "config.yaml").read_text() == GROUPED


def test_add_fork_refuses_a_parameter_the_groups_set(tmp_path: Path) -> None:
    """Every alternative of a vega20-example.yaml group sets WorkGroupMapping: `add_fork
    WorkGroupMapping [1, 8, 16]` reported 1,536 -> 4,608 kernels, all of them duplicates."""
    meta = generate(tmp_path, (DATA / "vega20-example.yaml").read_text(),
                    [{"op": "add_fork", "param": "WorkGroupMapping", "values": [1, 8, 16]}])
    assert meta["kernels_before"] == meta["kernels_after"] == 1536
    assert meta["refused"] == ["add_fork WorkGroupMapping: WorkGroupMapping is set by Groups, which override forks"]
    new, refused = apply(TensileConfig(GROUPED), [TensileEdit("add_fork", "StaggerU", values=[0, 4])])
    assert [why for _, why in refused] == ["StaggerU is set by Groups, which override forks"]


def test_add_candidate_refuses_a_fork_the_groups_override(tmp_path: Path) -> None:
    """A fork parameter that group alternatives also set is overridden by them (RULES.md): a candidate
    added to it only multiplied the kernel count with duplicates, as add_fork did; both are refused."""
    overridden = GROUPED.replace("        - DepthU: [32, 64]\n", "        - DepthU: [32, 64]\n        - StaggerU: [0, 32]\n")
    assert overridden != GROUPED
    meta = generate(tmp_path, overridden, [{"op": "add_candidate", "param": "StaggerU", "value": 64},
                                          {"op": "add_candidate", "param": "DepthU", "value": 16}])
    assert meta["refused"] == ["add_candidate StaggerU: StaggerU is set by Groups, which override forks"], meta
    assert [a for a in meta["applied"] if "DepthU" in str(a)], meta  # a fork no group sets still takes one


# -- 3: multi-valued BenchmarkCommonParameters fork too ------------------------------------------------------
COMMON = """\
GlobalParameters:
  NumElementsToValidate: 0   # no validation
BenchmarkProblems:
  - - {OperationType: GEMM, DataType: s, TransposeA: False, TransposeB: False, UseBeta: True, Batched: True}
    - BenchmarkCommonParameters:
        - KernelLanguage: ["Assembly"]   # the only language
        - DepthU:
          - 8
          # deep unrolls
          - 16
          - 32
        - PrefetchGlobalRead: [1, 2]
      ForkParameters:
        - ThreadTile:
          - [ 4, 4 ]
          - [ 8, 8 ]   # keep me
      BenchmarkFinalParameters:
        - ProblemSizes:
          - Exact: [128, 128, 1, 128]
"""


def test_the_prompt_lists_multi_valued_common_parameters() -> None:
    """The prompt said "12 kernels. Forks: ThreadTile: [[4, 4], [8, 8]]": DepthU and
    PrefetchGlobalRead, which fork from BenchmarkCommonParameters, were invisible to the model."""
    from kerntune.tensile.prompting import messages, schema

    prompt = messages(TensileConfig(COMMON), "MI300X")[-1].content
    assert ("- problem 0 step 0: 12 kernels. Forks: ThreadTile: [[4, 4], [8, 8]]. Forks in BenchmarkCommonParameters:"
            " DepthU: [8, 16, 32]; PrefetchGlobalRead: [1, 2]") in prompt
    assert "KernelLanguage" not in prompt.split("## Benchmark steps")[1].split("## Operations")[0]  # one value
    names = schema(TensileConfig(COMMON))["properties"]["edits"]["items"]["properties"]["param"]["enum"]
    assert {"DepthU", "PrefetchGlobalRead", "ThreadTile"} <= set(names)


def test_remove_candidate_and_remove_fork_reach_common_parameters(tmp_path: Path) -> None:
    """`remove_candidate DepthU 32` was refused ("not a fork parameter") though DepthU forks from
    BenchmarkCommonParameters; the written file keeps every other line and comment."""
    meta = generate(tmp_path, COMMON, [{"op": "remove_candidate", "param": "DepthU", "value": 32},
                                       {"op": "remove_fork", "param": "PrefetchGlobalRead"},
                                       {"op": "remove_candidate", "param": "KernelLanguage", "value": "Assembly"}])
    assert meta["kernels_before"] == 12 and meta["kernels_after"] == 4
    assert meta["refused"] == ["remove_candidate KernelLanguage: KernelLanguage is not a fork parameter of problem 0"
                               " step 0"]
    text = (tmp_path / "out" / "config.yaml").read_text()
    assert text == COMMON.replace("          - 32\n", "").replace("        - PrefetchGlobalRead: [1, 2]\n", "")
    step = TensileConfig(text).steps()[0]
    assert step.common_forks() == {"DepthU": [8, 16]} and step.kernel_count() == 4
    locked = COMMON.replace("        - PrefetchGlobalRead: [1, 2]\n",
                            "        - PrefetchGlobalRead: [1, 2]\n        - ProblemSizes: [1, 2]\n")
    new, refused = apply(TensileConfig(locked), [TensileEdit("remove_fork", "ProblemSizes"),
                                                 TensileEdit("remove_candidate", "ProblemSizes", 1)])
    assert [why for _, why in refused] == ["ProblemSizes is locked: it defines the problem, not the search"] * 2


def test_a_flow_style_common_section_is_rewritten_as_one_flow_list(tmp_path: Path) -> None:
    """A common section written as one flow list has no entry lines: the edit reaches it there too,
    re-written as one flow list as flow-style ForkParameters are (it was refused before)."""
    text = COMMON.replace("""    - BenchmarkCommonParameters:
        - KernelLanguage: ["Assembly"]   # the only language
        - DepthU:
          - 8
          # deep unrolls
          - 16
          - 32
        - PrefetchGlobalRead: [1, 2]
""", """    - BenchmarkCommonParameters: [{KernelLanguage: ["Assembly"]}, {DepthU: [8, 16, 32]}]
""")
    meta = generate(tmp_path, text, [{"op": "remove_candidate", "param": "DepthU", "value": 8}])
    assert meta["kernels_before"] == 6 and meta["kernels_after"] == 4 and meta["refused"] == []
    out = (tmp_path / "out" / "config.yaml").read_text()
    assert out == text.replace("[{KernelLanguage: [\"Assembly\"]}, {DepthU: [8, 16, 32]}]",
                               "[{KernelLanguage: [Assembly]}, {DepthU: [16, 32]}]")


# -- 4: ForkParameters shared through a YAML anchor ---------------------------------------------------------
ANCHORED = """\
BenchmarkProblems:
  - - {OperationType: GEMM, DataType: s, TransposeA: False, TransposeB: False, UseBeta: True, Batched: True}
    - ForkParameters: &forks
        - ThreadTile:
          - [ 4, 4 ]
          - [ 8, 8 ]
        - DepthU: [8, 16]   # shared
      BenchmarkFinalParameters:
        - ProblemSizes:
          - Exact: [128, 128, 1, 128]
  - - {OperationType: GEMM, DataType: s, TransposeA: True, TransposeB: False, UseBeta: True, Batched: True}
    - ForkParameters: *forks
      BenchmarkFinalParameters:
        - ProblemSizes:
          - Exact: [256, 256, 1, 256]
"""


def test_an_edit_of_fork_parameters_shared_through_an_anchor_is_refused(tmp_path: Path) -> None:
    """Every edit of an aliased ForkParameters failed with "the edited config would read back
    differently (problem 0 step 0: 4 kernels written, 4 edited ...)": it changed both problems, and
    the splice wrote the shared lines once per step."""
    meta = generate(tmp_path, ANCHORED, [{"op": "remove_candidate", "param": "DepthU", "value": 8},
                                         {"op": "add_fork", "param": "StaggerU", "values": [0, 32], "problem": 1}])
    assert meta["applied"] == [] and meta["kernels_before"] == meta["kernels_after"] == 8
    assert meta["refused"] == [
        "remove_candidate DepthU: ForkParameters of problem 0 step 0 is a YAML anchor shared with problem 1 step 0;"
        " edit a copy",
        "add_fork StaggerU: ForkParameters of problem 1 step 0 is a YAML anchor shared with problem 0 step 0;"
        " edit a copy"]


def test_an_anchored_value_list_refuses_its_own_edit_but_not_the_others() -> None:
    """Only DepthU's values are shared (`&d` / `*d`): removing one changed both problems; ThreadTile,
    each problem's own, is still edited, and the anchor's line is kept."""
    text = ANCHORED.replace("ForkParameters: &forks", "ForkParameters:")
    text = text.replace("DepthU: [8, 16]", "DepthU: &d [8, 16]")
    text = text.replace("    - ForkParameters: *forks\n", "    - ForkParameters:\n        - DepthU: *d\n")
    cfg = TensileConfig(text)
    new, refused = apply(cfg, [TensileEdit("remove_candidate", "DepthU", 8),
                               TensileEdit("remove_candidate", "ThreadTile", [8, 8])])
    assert [why for _, why in refused] == [
        "ForkParameters DepthU of problem 0 step 0 is a YAML anchor shared with problem 1 step 0; edit a copy"]
    again = TensileConfig(new.dumps())
    assert [s.kernel_count() for s in again.steps()] == [2, 2] and "DepthU: &d [8, 16]" in new.dumps()


def test_splice_writes_a_node_shared_by_two_steps_once() -> None:
    """The splice re-wrote the anchor's lines once per step that named it, duplicating its entries."""
    cfg = TensileConfig(ANCHORED)
    cfg.doc["BenchmarkProblems"][0][1]["ForkParameters"][1]["DepthU"].remove(8)  # both steps: one node
    cfg.edited = True
    again = TensileConfig(cfg.dumps())
    assert [s.fork_params() for s in again.steps()] == [{"ThreadTile": [[4, 4], [8, 8]], "DepthU": [16]}] * 2
