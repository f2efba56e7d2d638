"""Tensile review fixes: a crashed or killed golden/baseline run whose partial results were reused
and "validated" a subset of the sizes, sizes only the edited run has, `evaluate --runs N` losing
its finished runs to a later failure, `--json` paths that failed after the work, and `count`
leaving multi-valued BenchmarkCommonParameters out of its fork column.  Real `kerntune`
processes, a fake Tensile.sh (a real shell script) copying tests/data/tensile/results."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from cli_runs import one_line, run_cli
from tests.test_tensile import SYNTHETIC

RES = Path(__file__).parent / "data" / "tensile" / "results"
CSV = "Cijk_Ailk_Bljk_HHS_BH_00_CSVWinner.csv"

# Tensile.sh CONFIG OUT [...]: the original config (DepthU 8, 16, 32) gets the full results, an edited
# one the pruned results.  KT_FAIL=WHICH:N:HOW makes the N-th call for WHICH (full or pruned) write the
# first size only, then exit 3 (HOW=crash) or SIGKILL kerntune, its parent (HOW=kill).
FAKE_TENSILE = """#!/bin/sh
config="$1"; out="$2"
mkdir -p "$out/2_BenchmarkData"
echo "$@" >> "$out/args.txt"
if grep -q 'DepthU: \\[8, 16, 32\\]' "$config"; then which=full; else which=pruned; fi
echo "$which" >> "$KT_CALLS"
n=$(grep -c "^$which$" "$KT_CALLS")
src="$KT_RESULTS/$which/2_BenchmarkData"
if [ "$KT_FAIL" = "$which:$n:crash" ] || [ "$KT_FAIL" = "$which:$n:kill" ]; then
  head -2 "$src/""" + CSV + """" > "$out/2_BenchmarkData/""" + CSV + """"
  if [ "$KT_FAIL" = "$which:$n:kill" ]; then kill -9 $PPID; fi
  echo "fake Tensile crashed after the first size"; exit 3
fi
cp "$src/"*_CSVWinner.csv "$out/2_BenchmarkData/"
"""


def setup(tmp: Path) -> dict[str, str]:
    """cfg.yaml (24 kernels), edits.json (DepthU 8 removed: 16 kernels) and the fake Tensile's env."""
    (tmp / "cfg.yaml").write_text(SYNTHETIC)
    (tmp / "edits.json").write_text(json.dumps({"edits": [{"op": "remove_candidate", "param": "DepthU",
                                                            "value": 8}]}))
    root = tmp / "tensile"
    root.mkdir()
    (root / "Tensile.sh").write_text(FAKE_TENSILE)
    (root / "Tensile.sh").chmod(0o755 | stat.S_IXUSR)
    return {"TENSILE_PATH": str(root), "KT_RESULTS": str(RES), "KT_CALLS": str(tmp / "calls"), "COLUMNS": "200"}


def flat(text: str) -> str:
    return " ".join(text.split())


def calls(tmp: Path, folder: str) -> int:
    return (tmp / folder / "args.txt").read_text().count("\n")


# -- 1: a crashed or killed golden/baseline run is run again, not reused -------------------------------------
def test_validate_runs_a_crashed_golden_run_again_instead_of_passing_over_its_one_size(tmp_path: Path) -> None:
    """The golden run crashed (exit code 3 in its kerntune_run.json) after writing 1 of 4 sizes; the
    next `autotune --validate` reused it and printed "validation passed ... over 1 problem sizes"."""
    env = setup(tmp_path)
    args = ("tensile", "autotune", "cfg.yaml", "out", "--edits", "edits.json", "--validate", "golden",
            "--tolerance", "0.15", "--quiet")
    first = run_cli(tmp_path, *args, env={**env, "KT_FAIL": "full:1:crash"})
    one_line(first, "Tensile exited with 3")
    assert json.loads((tmp_path / "golden" / "kerntune_run.json").read_text())["returncode"] == 3
    again = run_cli(tmp_path, *args, env=env)
    assert again.returncode == 0, again.stderr
    assert "over 4 problem sizes" in flat(again.stdout) and "validation passed" in again.stdout
    assert calls(tmp_path, "golden") == 2  # Tensile ran the original config again


def test_validate_runs_a_killed_golden_run_again(tmp_path: Path) -> None:
    """kerntune SIGKILLed while Tensile wrote the golden results leaves no kerntune_run.json of a
    finished run: its 1 size of 4 was reused as the golden, and validation passed over it."""
    env = setup(tmp_path)
    args = ("tensile", "autotune", "cfg.yaml", "out", "--edits", "edits.json", "--validate", "golden",
            "--tolerance", "0.15", "--quiet")
    killed = run_cli(tmp_path, *args, env={**env, "KT_FAIL": "full:1:kill"})
    assert killed.returncode == -9, killed.stderr
    again = run_cli(tmp_path, *args, env=env)
    assert again.returncode == 0, again.stderr
    assert "over 4 problem sizes" in flat(again.stdout) and calls(tmp_path, "golden") == 2


def test_evaluate_runs_a_crashed_baseline_again(tmp_path: Path) -> None:
    """`evaluate CONFIG OUT` reused out/baseline after its Tensile run crashed: "over 1 problem sizes"."""
    env = setup(tmp_path)
    args = ("tensile", "evaluate", "cfg.yaml", "ev", "--edits", "edits.json")
    one_line(run_cli(tmp_path, *args, env={**env, "KT_FAIL": "full:1:crash"}), "Tensile exited with 3")
    again = run_cli(tmp_path, *args, env=env)
    assert again.returncode == 0, again.stderr
    assert "over 4 problem sizes" in flat(again.stdout) and calls(tmp_path, "ev/baseline") == 2


def partial_golden(folder: Path) -> Path:
    """The full results' first size only, as a folder the user gives (Tensile run outside kerntune)."""
    (folder / "2_BenchmarkData").mkdir(parents=True)
    lines = (RES / "full" / "2_BenchmarkData" / CSV).read_text().splitlines(keepends=True)
    (folder / "2_BenchmarkData" / CSV).write_text("".join(lines[:2]))
    return folder


def test_validation_fails_on_sizes_the_given_golden_results_lack(tmp_path: Path) -> None:
    """A golden folder the user gave, holding 1 of the 4 sizes the edited run benchmarked, is still
    read as finished results, but the 3 others were never validated and it passed with exit code 0."""
    env = setup(tmp_path)
    golden = partial_golden(tmp_path / "golden")
    proc = run_cli(tmp_path, "tensile", "autotune", "cfg.yaml", "out", "--edits", "edits.json", "--validate",
                   str(golden), "--tolerance", "0.15", "--quiet", env=env)
    out = flat(proc.stdout)
    assert proc.returncode == 1, proc.stderr
    assert "validation failed: 3 problem size(s) are not in the golden results" in out
    assert "size [4096, 4096, 1, 4096]: not in the golden results" in out
    assert not (golden / "args.txt").exists()  # the given results were used, not re-run


def test_evaluate_names_the_sizes_the_original_lacks(tmp_path: Path) -> None:
    """`sizes_only_here` was counted and never printed: the edited run's extra sizes vanished silently."""
    original = partial_golden(tmp_path / "orig")
    proc = run_cli(tmp_path, "tensile", "evaluate", "--original", str(original), "--pruned", str(RES / "pruned"),
                   "--json", "e.json")
    assert proc.returncode == 0, proc.stderr
    assert "3 problem size(s) not in the original's results, left out of PR and WC" in flat(proc.stdout)
    run = json.loads((tmp_path / "e.json").read_text())["runs"][0]
    assert run["sizes_only_here"] == 3 and len(run["only_here"]) == 3


# -- 2: evaluate --runs N keeps and reuses finished runs ------------------------------------------------------
def test_evaluate_keeps_finished_runs_after_a_failure_and_resumes_scripted_model(tmp_path: Path) -> None:
    """run_2's Tensile crashed: run_1's results were lost (no evaluation.json, nothing printed) and
    the next attempt generated (asked the model) and benchmarked run_1 again."""
    env = setup(tmp_path)
    model = f"cmd:sh -c 'cat >/dev/null; echo asked >> {tmp_path / 'asked'}; cat {tmp_path / 'edits.json'}'"
    args = ("tensile", "evaluate", "cfg.yaml", "ev", "--runs", "3", "--llm", model)
    first = run_cli(tmp_path, *args, env={**env, "KT_FAIL": "pruned:2:crash"})
    one_line(first, "Tensile exited with 3", "1 finished run(s)", "continues from run_2")
    assert "run_1" in first.stdout and "1 edited run(s)" in flat(first.stdout)
    saved = json.loads((tmp_path / "ev" / "evaluation.json").read_text())
    assert [r["label"] for r in saved["runs"]] == ["run_1"]
    again = run_cli(tmp_path, *args, env=env)
    assert again.returncode == 0, again.stderr
    data = json.loads((tmp_path / "ev" / "evaluation.json").read_text())
    assert [r["label"] for r in data["runs"]] == ["run_1", "run_2", "run_3"]
    assert calls(tmp_path, "ev/run_1") == 1 and calls(tmp_path, "ev/run_2") == 2 and calls(tmp_path, "ev/baseline") == 1
    assert (tmp_path / "asked").read_text().count("\n") == 4  # run_1, run_2 | run_2, run_3
    llm_s = json.loads((tmp_path / "ev" / "run_1" / "kerntune_generate.json").read_text())["llm_s"]
    assert data["runs"][0]["llm_s"] == llm_s and data["runs"][0]["winners_kept"] == 0.75


# -- 3: --json checked before the work, written without a traceback -------------------------------------------
def test_evaluate_json_onto_a_directory_is_refused_before_tensile_runs(tmp_path: Path) -> None:
    """`--json DIR` ended in a traceback after the baseline and every run had been benchmarked."""
    env = setup(tmp_path)
    (tmp_path / "adir").mkdir()
    proc = run_cli(tmp_path, "tensile", "evaluate", "cfg.yaml", "ev", "--edits", "edits.json", "--json", "adir",
                   env=env)
    one_line(proc, "--json adir: is a directory")
    assert not (tmp_path / "ev").exists()


def test_evaluate_json_into_a_missing_folder_is_written(tmp_path: Path) -> None:
    """`--json new/e.json` raised FileNotFoundError (a traceback) after the comparison."""
    proc = run_cli(tmp_path, "tensile", "evaluate", "--original", str(RES / "full"), "--pruned",
                   str(RES / "pruned"), "--json", "new/deeper/e.json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "new" / "deeper" / "e.json").read_text())["summary"]["sizes"] == 4


# -- 6: count lists the multi-valued common parameters it multiplies by ---------------------------------------
COMMON = """\
BenchmarkProblems:
  - - {OperationType: GEMM, DataType: s, TransposeA: False, TransposeB: False, UseBeta: True, Batched: True}
    - BenchmarkCommonParameters:
        - KernelLanguage: ["Assembly"]
        - DepthU: [8, 16, 32]
        - PrefetchGlobalRead: [1, 2]
      ForkParameters:
        - ThreadTile: [[4, 4], [8, 8]]
      BenchmarkFinalParameters:
        - ProblemSizes:
          - Exact: [128, 128, 1, 128]
"""


def test_count_lists_multi_valued_common_parameters_among_the_forks(tmp_path: Path) -> None:
    """12 kernels were explained by "ThreadTile×2" alone: DepthU×3 and PrefetchGlobalRead×2 fork from
    BenchmarkCommonParameters and were counted, never listed."""
    (tmp_path / "common.yaml").write_text(COMMON)
    proc = run_cli(tmp_path, "tensile", "count", "common.yaml", env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    out = flat(proc.stdout)
    assert "12 kernels" in out
    assert "ThreadTile×2, DepthU×3 (common), PrefetchGlobalRead×2 (common)" in out, proc.stdout
