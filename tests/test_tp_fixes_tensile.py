"""Tensile configs and results that kerntune read or wrote wrongly while reporting success: duplicate
keys (Tensile keeps the last, ruamel the first), a file without a final newline, flow-style and empty
ForkParameters, the read-back check of every edited file, CSVWinner rows of distinct problems that
share their sizes, and a missing --results file.  Real YAML files and real `kerntune` processes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cli_runs import one_line, run_cli
from kerntune.tensile import TensileConfig, TensileEdit, TensileError, apply

DATA = Path(__file__).parent / "data" / "tensile"

DUPLICATE_IN_ENTRY = """\
BenchmarkProblems:
  - - OperationType: GEMM
      DataType: s
      TransposeA: False
      TransposeB: False
      UseBeta: True
      Batched: True
    - ForkParameters:
        - ThreadTile: [[4, 4], [8, 8]]
        - DepthU: [8]
          DepthU: [8, 16, 32]
      BenchmarkFinalParameters:
        - ProblemSizes:
          - Exact: [128, 128, 1, 128]
"""

NO_FINAL_NEWLINE = """\
BenchmarkProblems:
  - - {OperationType: GEMM, DataType: s, TransposeA: False, TransposeB: False, UseBeta: True, Batched: True}
    - BenchmarkFinalParameters:
        - ProblemSizes:
          - Exact: [128, 128, 1, 128]
      ForkParameters:
        - DepthU: [8, 16]
        - ThreadTile:
          - [4, 4]
          - [8, 8]"""

FLOW = """\
GlobalParameters:
  MinimumRequiredVersion: 4.4.0
BenchmarkProblems:
  - - {OperationType: GEMM, DataType: s, TransposeA: False, TransposeB: False, UseBeta: True, Batched: True}
    - BenchmarkCommonParameters: [{KernelLanguage: ["Assembly"]}]
      ForkParameters: %s
      BenchmarkFinalParameters: [{ProblemSizes: [{Exact: [128, 128, 1, 128]}]}]
"""

EMPTY_FORKS = """\
GlobalParameters:
  MinimumRequiredVersion: 4.4.0
BenchmarkProblems:
  - - {OperationType: GEMM, DataType: s, TransposeA: False, TransposeB: False, UseBeta: True, Batched: True}
    - BenchmarkCommonParameters:
        - DepthU: [8, 16]
      ForkParameters: []
      BenchmarkFinalParameters:
        - ProblemSizes:
          - Exact: [128, 128, 1, 128]
"""


def generate(tmp: Path, text: str, edits: list[dict], name: str = "cfg.yaml"):
    src, edits_file = tmp / name, tmp / "edits.json"
    src.write_text(text)
    edits_file.write_text(json.dumps({"edits": edits}))
    return run_cli(tmp, "tensile", "generate", str(src), str(tmp / "out"), "--edits", str(edits_file))


def written(tmp: Path) -> TensileConfig:
    return TensileConfig.load(tmp / "out" / "config.yaml")


# -- 2: duplicate keys -----------------------------------------------------------------------------------------
def test_a_duplicate_key_in_a_fork_entry_is_refused_naming_it_and_its_line(tmp_path: Path) -> None:
    """Tensile (PyYAML) benchmarks DepthU [8, 16, 32]; ruamel read [8]: kerntune counted 2 kernels
    where Tensile builds 6, and edited values Tensile never uses."""
    with pytest.raises(TensileError, match=r"line 11: duplicate key 'DepthU' \(first on line 10\)"):
        TensileConfig(DUPLICATE_IN_ENTRY, "dup.yaml")
    (tmp_path / "dup.yaml").write_text(DUPLICATE_IN_ENTRY)
    one_line(run_cli(tmp_path, "tensile", "count", "dup.yaml"), "duplicate key 'DepthU'", "line 11")
    proc = generate(tmp_path, DUPLICATE_IN_ENTRY, [{"op": "remove_candidate", "param": "DepthU", "value": 8}])
    one_line(proc, "duplicate key 'DepthU'")
    assert not (tmp_path / "out" / "config.yaml").exists()


@pytest.mark.parametrize("text, key", [
    ("BenchmarkProblems:\n  - - {OperationType: GEMM, DataType: s}\n    - ForkParameters:\n        - DepthU: [8]\n"
     "      ForkParameters:\n        - DepthU: [8, 16]\n", "ForkParameters"),
    ("BenchmarkProblems:\n  - - {OperationType: GEMM, DataType: s, DataType: h}\n    - ForkParameters:\n"
     "        - DepthU: [8]\n", "DataType"),
    ("BenchmarkProblems:\n  - - {OperationType: GEMM}\n    - ForkParameters:\n        - Groups:\n"
     "          - - {StaggerU: 0, StaggerU: 32}\n            - {StaggerU: 4}\n", "StaggerU"),
    ("BenchmarkProblems:\n  - - {OperationType: GEMM}\n    - ForkParameters: [{DepthU: [8]}]\n"
     "BenchmarkProblems:\n  - - {OperationType: GEMM}\n    - ForkParameters: [{DepthU: [8, 16]}]\n",
     "BenchmarkProblems"),
])
def test_duplicate_keys_anywhere_kerntune_reads_are_refused(text: str, key: str) -> None:
    with pytest.raises(TensileError, match=f"duplicate key '{key}'"):
        TensileConfig(text)


def test_duplicate_global_parameters_of_real_configs_still_load() -> None:
    # mi32_bf16_nn.yaml repeats PrintTensorB under GlobalParameters: neither counted nor edited
    for name in ("mi32_bf16_nn.yaml", "xdlops_mtscaling_test.yaml"):
        assert TensileConfig.load(DATA / name).kernel_count() > 0


# -- 3: no final newline; the read-back check -----------------------------------------------------------------
def test_an_item_appended_to_a_file_without_a_final_newline_starts_its_own_line(tmp_path: Path) -> None:
    proc = generate(tmp_path, NO_FINAL_NEWLINE, [{"op": "add_candidate", "param": "ThreadTile", "value": [16, 16]}])
    assert proc.returncode == 0, proc.stderr
    assert "4 -> 6 kernels" in proc.stdout
    again = written(tmp_path)
    assert again.kernel_count() == 6 and again.steps()[0].fork_params()["ThreadTile"] == [[4, 4], [8, 8], [16, 16]]


def test_a_real_config_without_its_final_newline_gets_a_new_fork(tmp_path: Path) -> None:
    text = (DATA / "vega20-example.yaml").read_text().rstrip("\n")  # ends inside its Groups
    proc = generate(tmp_path, text, [{"op": "add_fork", "param": "StoreVectorWidth", "values": [1, 2]}])
    assert proc.returncode == 0, proc.stderr
    again, before = written(tmp_path), TensileConfig(text)
    assert again.kernel_count() == 2 * before.kernel_count()
    assert again.steps()[0].groups() == before.steps()[0].groups()
    assert again.steps()[0].fork_params()["StoreVectorWidth"] == [1, 2]


def test_an_edited_text_that_does_not_read_back_as_edited_is_never_written(tmp_path: Path, monkeypatch) -> None:
    """Whatever the splice gets wrong, the file is read back before it is written: a text that reads
    differently from the edited document is a TensileError, and no file appears."""
    import kerntune.tensile.config as config

    cfg = TensileConfig((DATA / "vega20-example.yaml").read_text(), "vega20-example.yaml")
    new, refused = apply(cfg, [TensileEdit("remove_candidate", "FractionalLoad", 1)])
    assert not refused and new.kernel_count() == cfg.kernel_count() // 2
    monkeypatch.setattr(config, "splice", lambda original, doc: original)  # an edit lost in writing
    with pytest.raises(TensileError, match=r"read back differently \(problem 0 step 0: 1,536 kernels written, 768 "
                                           r"edited.*nothing written"):
        new.save(tmp_path / "edited.yaml")
    assert not (tmp_path / "edited.yaml").exists()
    monkeypatch.setattr(config, "splice", lambda original, doc: original + "  - [oops\n")  # not YAML any more
    with pytest.raises(TensileError, match="would not read back"):
        new.dumps()


# -- 4: flow-style ForkParameters -----------------------------------------------------------------------------
@pytest.mark.parametrize("forks, edit, expect", [
    # the ValueError traceback: no "-" on the line of a flow list
    ("[{DepthU: [8, 16]}, {ThreadTile: [[4, 4], [8, 8]]}]",
     {"op": "remove_candidate", "param": "DepthU", "value": 16}, {"DepthU": [8], "ThreadTile": [[4, 4], [8, 8]]}),
    # the "-" of -1 taken for an item's dash: corrupt YAML, exit 0
    ("[{LdsPadA: [-1, 0]}, {DepthU: [8, 16]}]",
     {"op": "remove_candidate", "param": "LdsPadA", "value": -1}, {"LdsPadA": [0], "DepthU": [8, 16]}),
    ("[{LdsPadA: [-1, 0]}, {DepthU: [8, 16]}]",
     {"op": "add_fork", "param": "ThreadTile", "values": [[4, 4], [8, 8]]},
     {"LdsPadA": [-1, 0], "DepthU": [8, 16], "ThreadTile": [[4, 4], [8, 8]]}),
    # a flow list over two lines, with a comment after it
    ("[{DepthU: [8, 16]},\n                       {ThreadTile: [[4, 4], [8, 8]]}]   # two forks",
     {"op": "remove_fork", "param": "ThreadTile"}, {"DepthU": [8, 16]}),
])
def test_flow_style_fork_parameters_are_rewritten_as_one_flow_list(tmp_path: Path, forks: str, edit: dict,
                                                                   expect: dict) -> None:
    text = FLOW % forks
    proc = generate(tmp_path, text, [edit])
    assert proc.returncode == 0, proc.stderr
    assert "1 edits applied" in proc.stdout
    again = written(tmp_path)
    assert again.steps()[0].fork_params() == expect
    out = (tmp_path / "out" / "config.yaml").read_text()
    old_lines = text.splitlines()
    assert [ln for ln in out.splitlines() if "ForkParameters" not in ln and ln not in old_lines] == []
    assert "BenchmarkFinalParameters: [{ProblemSizes: [{Exact: [128, 128, 1, 128]}]}]" in out


# -- 8: an empty ForkParameters --------------------------------------------------------------------------------
def test_a_fork_added_to_an_empty_fork_list_is_written(tmp_path: Path) -> None:
    """`ForkParameters: []` had no entry lines to splice into: "1 edits applied", file unchanged."""
    proc = generate(tmp_path, EMPTY_FORKS, [{"op": "add_fork", "param": "ThreadTile", "values": [[4, 4], [8, 8]]}])
    assert proc.returncode == 0, proc.stderr
    assert "2 -> 4 kernels; 1 edits applied" in proc.stdout
    again = written(tmp_path)
    assert again.kernel_count() == 4 and again.steps()[0].fork_params() == {"ThreadTile": [[4, 4], [8, 8]]}


def test_removing_every_fork_writes_an_empty_list_not_null() -> None:
    text = FLOW.replace("ForkParameters: %s", "ForkParameters:\n        - DepthU: [8, 16]   # the only one")
    new, refused = apply(TensileConfig(text), [TensileEdit("remove_fork", "DepthU")])
    assert not refused
    again = TensileConfig(new.dumps())
    assert again.doc["BenchmarkProblems"][0][1]["ForkParameters"] == [] and again.kernel_count() == 1


# -- 5: CSVWinner rows of distinct problems with the same sizes --------------------------------------------------
HEADER = ("GFlops, SizeI, SizeJ, SizeK, SizeL, LDD, LDC, LDA, LDB, TotalFlops, WinnerGFlops, WinnerTimeUS, WinnerIdx,"
          " WinnerName, SolA, SolB\n")


def _results(folder: Path, rows: str) -> Path:
    (folder / "2_BenchmarkData").mkdir(parents=True)
    (folder / "2_BenchmarkData" / "Cijk_Ailk_Bljk_SB_00_CSVWinner.csv").write_text(HEADER + rows)
    return folder


def test_problems_that_differ_only_in_strides_are_compared_apart(tmp_path: Path) -> None:
    """Two problems of one size, one with padded LDA/LDB: the edited config loses the first (SolA,
    100 -> 80 GFLOPS).  Merged by size, the best of both hid the loss (PR 1.0, WC 1.0)."""
    full = _results(tmp_path / "full", "0, 1024, 1024, 1, 1024, 1024, 1024, 1024, 1024, 2147483648, 100, 21.5, 0,"
                                       " SolA, 100, 80\n"
                                       "1, 1024, 1024, 1, 1024, 1024, 1024, 1056, 1056, 2147483648, 120, 17.9, 1,"
                                       " SolB, 90, 120\n")
    pruned = _results(tmp_path / "pruned", "0, 1024, 1024, 1, 1024, 1024, 1024, 1024, 1024, 2147483648, 80, 26.8, 1,"
                                           " SolB, -1, 80\n"
                                           "1, 1024, 1024, 1, 1024, 1024, 1024, 1056, 1056, 2147483648, 120, 17.9, 1,"
                                           " SolB, -1, 120\n")
    out = tmp_path / "eval.json"
    proc = run_cli(tmp_path, "tensile", "evaluate", "--original", str(full), "--pruned", str(pruned), "--json",
                   str(out))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert data["summary"]["sizes"] == 2
    assert data["summary"]["PR"] == pytest.approx(0.9) and data["summary"]["PR_min"] == pytest.approx(0.8)
    assert data["summary"]["WC"] == 0.5
    sizes = {s["label"]: (s["pr"], s["winner_kept"]) for s in data["runs"][0]["sizes"]}
    assert sizes == {"size [1024, 1024, 1, 1024] LD [1024, 1024, 1024, 1024]": (0.8, False),
                     "size [1024, 1024, 1, 1024] LD [1024, 1024, 1056, 1056]": (1.0, True)}
    from kerntune.tensile.evaluate import validate
    from kerntune.tensile.results import read_results

    problems = validate(read_results(full), read_results(pruned))
    assert len(problems) == 1 and "LD [1024, 1024, 1024, 1024]: winner SolB" in problems[0], problems


def test_a_true_repeat_of_a_problem_is_still_merged(tmp_path: Path) -> None:
    from kerntune.tensile.results import read_results

    res = read_results(_results(tmp_path / "r", "0, 64, 64, 1, 64, 64, 64, 64, 64, 524288, 90, 5.8, 0, SolA, 90, 80\n"
                                                "1, 64, 64, 1, 64, 64, 64, 64, 64, 524288, 95, 5.5, 1, SolB, 70, 95\n"))
    assert list(res.sizes) == [("Cijk_Ailk_Bljk_SB_00", (64, 64, 1, 64))]
    r = res.sizes[("Cijk_Ailk_Bljk_SB_00", (64, 64, 1, 64))]
    assert r.solutions == {"SolA": 90, "SolB": 95} and r.label == "size [64, 64, 1, 64]"


# -- lesser: a missing --results file ----------------------------------------------------------------------------
def test_generate_with_a_missing_results_file_is_one_line(tmp_path: Path) -> None:
    shutil.copy(DATA / "vega20-example.yaml", tmp_path / "cfg.yaml")
    (tmp_path / "edits.json").write_text(json.dumps({"edits": []}))
    proc = run_cli(tmp_path, "tensile", "generate", "cfg.yaml", "out", "--edits", "edits.json",
                   "--results", "missing.txt")
    one_line(proc, "--results missing.txt: not found")


def test_a_group_parameter_removed_from_a_real_config_keeps_the_groups_order(tmp_path: Path) -> None:
    """The read-back check found this: every group of vega20-example.yaml's Groups changes when WorkGroup
    leaves its alternatives, and the changed group was re-appended after the unchanged one: the same
    kernels, enumerated in another order than the edited document says."""
    proc = generate(tmp_path, (DATA / "vega20-example.yaml").read_text(),
                    [{"op": "remove_group_param", "param": "WorkGroup"}])
    assert proc.returncode == 0, proc.stderr
    again = written(tmp_path)
    assert again.steps()[0].groups() == [[{"ThreadTile": [8, 8]}, {"ThreadTile": [4, 4]}],
                                         [{"DepthU": 16, "WorkGroupMapping": 1}, {"DepthU": 16, "WorkGroupMapping": 15},
                                          {"DepthU": 8, "WorkGroupMapping": 8}]]


def test_a_run_that_lost_one_of_two_problems_of_a_size_still_matches_the_other(tmp_path: Path) -> None:
    from kerntune.tensile.evaluate import compare
    from kerntune.tensile.results import read_results

    full = read_results(_results(tmp_path / "full", "0, 512, 512, 1, 512, 512, 512, 512, 512, 268435456, 50, 5.4, 0,"
                                                    " SolA, 50, 40\n"
                                                    "1, 512, 512, 1, 512, 512, 512, 544, 544, 268435456, 60, 4.5, 1,"
                                                    " SolB, 45, 60\n"))
    pruned = read_results(_results(tmp_path / "pruned", "1, 512, 512, 1, 512, 512, 512, 544, 544, 268435456, 60, 4.5,"
                                                        " 1, SolB, -1, 60\n"))
    run = compare(full, pruned)
    assert [(s.label, s.pr, s.note) for s in run.sizes] == [
        ("size [512, 512, 1, 512] LD [512, 512, 512, 512]", 0.0, "not benchmarked by the edited config"),
        ("size [512, 512, 1, 512] LD [512, 512, 544, 544]", 1.0, "")]
    assert run.sizes_only_here == 0
