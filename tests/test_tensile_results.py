"""Tensile results and the workflow after generation: the CSVWinner reader (hand-made
fixtures in Tensile's format, tests/data/tensile/results), TR/PR/WC over every problem
size, validation against a golden run, library logic files as prompt evidence, and
`tensile autotune` / `tensile evaluate` driven through a fake Tensile.sh: a real shell
script run as a subprocess in Tensile's place, which copies the fixture CSVs."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from kerntune.llm import LLMClient
from kerntune.tensile import TensileConfig, TensileError
from kerntune.tensile.autotune import generate
from kerntune.tensile.evaluate import compare, validate
from kerntune.tensile.logic import evidence, read_logic
from kerntune.tensile.results import read_csv_winner, read_results
from tests.scripted import ScriptedProvider
from tests.test_tensile import SYNTHETIC

DATA = Path(__file__).parent / "data" / "tensile"
RES = DATA / "results"
LOGIC = DATA / "logic" / "aquavanjaram_Cijk_Ailk_Bljk_HHS_BH_hand.yaml"
HHS = "Cijk_Ailk_Bljk_HHS_BH"


def name(mt: str) -> str:
    return next(n for r in read_results(RES / "full").sizes.values() for n in r.solutions if f"_{mt}_" in n)


def test_reads_every_size_of_a_csv_winner_file() -> None:
    res = read_results(RES / "full")
    assert res.files == [str(RES / "full" / "2_BenchmarkData" / f"{HHS}_00_CSVWinner.csv")]
    assert sorted(size for _, size in res.sizes) == [(512, 8192, 1, 2048), (1024, 1024, 1, 1024),
                                                     (4096, 4096, 1, 4096), (8192, 512, 1, 8192)]
    small = res.sizes[(f"{HHS}_00", (1024, 1024, 1, 1024))]
    assert small.winner == name("MT128x128x64") and small.gflops == 210000 and small.time_us == 10.2261
    assert len(small.solutions) == 6 and small.failed == 1 and small.solutions[name("MT256x256x32")] is None
    big = res.sizes[(f"{HHS}_00", (4096, 4096, 1, 4096))]
    assert big.winner == name("MT256x256x32") and big.gflops == 601000


def test_tolerates_bom_crlf_quotes_truncation_and_repeated_rows(tmp_path: Path) -> None:
    text = ("\ufeffGFlops, SizeI, SizeJ, SizeK, SizeL, LDD, LDC, LDA, LDB, TotalFlops, WinnerGFlops, WinnerTimeUS, "
            'WinnerIdx, WinnerName, "sol,a", sol_b\r\n'
            '0, 64, 64, 1, 64, 64, 64, 64, 64, 524288, 90, 5.8, 0, "sol,a", 90, 80\r\n'
            "\r\n"
            "1, 64, 64, 1, 64, 64, 64, 64, 64, 524288, 95, 5.5, 1, sol_b, 70, 95\r\n"   # a second benchmark run
            "2, 128, 128, 1, 128, 128, 128, 128, 128, 4194304, 120, 35, 1, sol_b, -1, 120\r\n"
            "3, 256, 2")                                                                 # killed mid-row
    path = tmp_path / "Cijk_X_00_CSVWinner.csv"
    path.write_text(text)
    rows, skipped = read_csv_winner(path)
    assert skipped == 1
    by = {r.size: r for r in rows}
    assert set(by) == {(64, 64, 1, 64), (128, 128, 1, 128)}
    merged = by[(64, 64, 1, 64)]
    assert merged.solutions == {"sol,a": 90, "sol_b": 95} and merged.winner == "sol_b" and merged.gflops == 95
    assert by[(128, 128, 1, 128)].failed == 1 and by[(128, 128, 1, 128)].solutions["sol,a"] is None
    assert merged.benchmark == "Cijk_X_00"


def test_without_winner_columns_the_best_valid_solution_wins() -> None:
    res = read_results(RES / "nowinner")
    first = res.sizes[("Cijk_Ailk_Bjlk_SB_00", (1024, 1024, 1, 1024))]
    assert "MT128x128x8" in first.winner and first.gflops == 13500.3 and first.failed == 1
    assert first.time_us == pytest.approx(2147483648 / (13500.3 * 1e3))
    second = res.sizes[("Cijk_Ailk_Bjlk_SB_00", (2048, 2048, 1, 2048))]  # its last cell never written
    assert "MT64x64x16" in second.winner and list(second.solutions.values())[-1] is None


def test_files_that_are_not_results_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "x_CSVWinner.csv"
    bad.write_text("a, b, c\n1, 2, 3\n")
    with pytest.raises(TensileError, match="no SizeI"):
        read_csv_winner(bad)
    (tmp_path / "empty" / "2_BenchmarkData").mkdir(parents=True)
    with pytest.raises(TensileError, match="did Tensile finish"):
        read_results(tmp_path / "empty")


def test_pr_wc_and_tr_cover_every_problem_size() -> None:
    full, pruned = read_results(RES / "full"), read_results(RES / "pruned")
    run = compare(full, pruned, "p", t_original_s=100.0, t_pruned_s=40.0, llm_s=5.0)
    prs = {tuple(s.size): s.pr for s in run.sizes}
    assert prs[(1024, 1024, 1, 1024)] == pytest.approx(209500 / 210000)
    assert prs[(512, 8192, 1, 2048)] == pytest.approx(301000 / 335000)  # its winner was pruned away
    assert prs[(8192, 512, 1, 8192)] == pytest.approx(471000 / 470000)
    assert run.pr == pytest.approx(sum(prs.values()) / 4) and run.pr_min == pytest.approx(301000 / 335000)
    assert run.winners_kept == 0.75  # the first row alone would say 1.0
    assert run.tr == pytest.approx((100 - (40 + 5)) / 100)
    assert compare(full, full).pr == 1.0 and compare(full, full).winners_kept == 1.0


def test_validation_accepts_a_lost_winner_only_within_tolerance() -> None:
    full, pruned = read_results(RES / "full"), read_results(RES / "pruned")
    problems = validate(full, pruned, tolerance=0.02)
    assert len(problems) == 1 and "size [512, 8192, 1, 2048]" in problems[0] and "10.1% below" in problems[0]
    assert validate(full, pruned, tolerance=0.15) == []
    assert validate(full, read_results(RES / "nowinner")) == [
        f"{HHS}_00 size {list(s)}: not benchmarked by the edited config"
        for s in [(512, 8192, 1, 2048), (1024, 1024, 1, 1024), (4096, 4096, 1, 4096), (8192, 512, 1, 8192)]]


def test_evaluate_cli_on_finished_output_folders(tmp_path: Path) -> None:
    for which, wall in (("full", 120.0), ("pruned", 30.0)):
        shutil.copytree(RES / which, tmp_path / which)
        (tmp_path / which / "kerntune_run.json").write_text(json.dumps({"wall_s": wall, "returncode": 0}))
    (tmp_path / "pruned" / "kerntune_generate.json").write_text(json.dumps({"llm_s": 6.0}))
    out = tmp_path / "eval.json"
    cmd = [sys.executable, "-m", "kerntune", "tensile", "evaluate", "--original", str(tmp_path / "full"),
           "--pruned", str(tmp_path / "pruned"), "--pruned", str(tmp_path / "full"), "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    s = json.loads(out.read_text())["summary"]
    assert s["sizes"] == 4 and s["runs"] == 2
    assert s["TR"] == pytest.approx(((120 - (30 + 6)) / 120 + 0.0) / 2)  # the full folder against itself saves 0
    assert s["WC"] == pytest.approx((3 + 4) / 8) and s["WC_all"] == 0.5
    given = subprocess.run(cmd[:-2] + ["--time-original", "200", "--time-pruned", "50", "--time-pruned", "200",
                                       "--llm-seconds", "10", "--json", str(out)],
                           capture_output=True, text=True, timeout=120)
    assert given.returncode == 0, given.stderr
    assert json.loads(out.read_text())["runs"][0]["TR"] == pytest.approx((200 - 60) / 200)
    bad = subprocess.run(cmd[:-2] + ["--time-pruned", "1", "--time-pruned", "2", "--time-pruned", "3"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "one per --pruned" in bad.stderr


def test_logic_yaml_winners_become_evidence(tmp_path: Path) -> None:
    logic = read_logic(LOGIC)
    assert logic.arch == "gfx942" and logic.cu_count == 304 and len(logic.solutions) == 4 and len(logic.exact) == 4
    assert logic.winners() == {0: [(4096, 4096, 1, 4096), (8192, 8192, 1, 8192)], 1: [(1024, 1024, 1, 1024)],
                               2: [(512, 512, 1, 16384)]}  # solution 3 never won: not evidence
    text = evidence(logic, ["DepthU"])
    assert "4 problem sizes, 3 winning solutions" in text
    assert "- DepthU: 64 (3), 32 (1)" in text and "- MatrixInstruction: [16, 16, 16, 1, 1, 4, 4, 4, 4] (2)" in text
    assert "- [1024, 1024, 1, 1024] -> 1: DepthU=32" in text and "MT32x32" not in text and "DepthU=16" not in text
    as_map = tmp_path / "map.yaml"
    as_map.write_text("MinimumRequiredVersion: 5.0.0\nScheduleName: gfx1250\nArchitectureName: gfx1250\n"
                      "Solutions:\n- {SolutionIndex: 0, DepthU: 32, WorkGroup: [16, 2, 1]}\n"
                      "ExactLogic:\n- - [128, 128, 1, 128]\n  - [0, 0.0]\n")
    assert "- WorkGroup: [16, 2, 1] (1)" in evidence(read_logic(as_map))
    (tmp_path / "bad.yaml").write_text("- a\n- b\n")
    with pytest.raises(TensileError, match="not a Tensile library logic file"):
        read_logic(tmp_path / "bad.yaml")


def test_generate_with_a_logic_yaml_shows_the_winners_to_a_scripted_model(tmp_path: Path) -> None:
    src = tmp_path / "cfg.yaml"
    src.write_text(SYNTHETIC)
    provider = ScriptedProvider(lambda n, m: json.dumps({"edits": [
        {"op": "remove_candidate", "param": "DepthU", "value": 8, "reason": "the logic file's winners use 32-64"}]}))
    gen = generate(src, tmp_path / "out", LLMClient(provider, retries=0), logic=LOGIC)
    prompt = provider.prompts[0][-1].content
    assert "## Winners of a previous tuning (aquavanjaram_Cijk_Ailk_Bljk_HHS_BH_hand.yaml: gfx942" in prompt
    assert "- DepthU: 64 (3), 32 (1)" in prompt
    assert "TransposeA is True, this config's is False" in prompt  # the logic file is for another layout
    assert gen.before == 24 and gen.after == 16
    assert "Evidence: the winners of" in (tmp_path / "out" / "explanation.md").read_text()
    meta = json.loads((tmp_path / "out" / "kerntune_generate.json").read_text())
    assert meta["kernels_after"] == 16 and meta["llm_s"] >= 0 and meta["logic"] == str(LOGIC)


FAKE_TENSILE = """#!/bin/sh
# Stands in for TensileLite's Tensile.sh: CONFIG OUT [--prebuilt-client=...]. The original config
# (DepthU 8, 16, 32) gets the full results, an edited one the pruned results.
config="$1"; out="$2"
mkdir -p "$out/2_BenchmarkData"
echo "$@" >> "$out/args.txt"
if grep -q 'DepthU: \\[8, 16, 32\\]' "$config"; then which=full; sleep 0.6; else which=pruned; sleep 0.1; fi
cp "$KERNTUNE_FAKE_RESULTS/$which/2_BenchmarkData/"*_CSVWinner.csv "$out/2_BenchmarkData/"
echo "fake Tensile wrote $which results"
"""


def _env(tmp_path: Path, with_tensile: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TENSILE_PATH"}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not (Path(p) / "Tensile.sh").exists() and not (Path(p) / "Tensile").exists())
    if with_tensile:
        root = tmp_path / "tensile"
        root.mkdir(exist_ok=True)
        script = root / "Tensile.sh"
        script.write_text(FAKE_TENSILE)
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
        env.update(TENSILE_PATH=str(root), KERNTUNE_FAKE_RESULTS=str(RES))
    return env


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    src = tmp_path / "cfg.yaml"
    src.write_text(SYNTHETIC)
    edits = tmp_path / "edits.json"
    edits.write_text(json.dumps({"edits": [{"op": "remove_candidate", "param": "DepthU", "value": 8}]}))
    return src, edits


def kerntune(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kerntune", "tensile", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_autotune_without_tensile_keeps_the_edited_config_and_names_tensile_path(tmp_path: Path) -> None:
    src, edits = _setup(tmp_path)
    proc = kerntune("autotune", str(src), str(tmp_path / "out"), "--edits", str(edits),
                    env=_env(tmp_path, with_tensile=False))
    assert proc.returncode == 2 and "TENSILE_PATH" in proc.stderr
    assert "the edited config is in" in proc.stderr and "24 -> 16 kernels" in proc.stderr
    assert TensileConfig.load(tmp_path / "out" / "config.yaml").kernel_count() == 16
    empty = tmp_path / "empty"
    empty.mkdir()
    env = dict(_env(tmp_path, with_tensile=False), TENSILE_PATH=str(empty))
    proc = kerntune("run", str(src), str(tmp_path / "o2"), env=env)
    assert proc.returncode == 2 and f"TENSILE_PATH={empty} holds no executable Tensile launcher" in proc.stderr


def test_autotune_with_a_fake_tensile_sh_subprocess_validates_and_reports(tmp_path: Path) -> None:
    src, edits = _setup(tmp_path)
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    env = _env(tmp_path, with_tensile=True)
    answer = tmp_path / "answer.json"
    shutil.copy(edits, answer)
    llm = f"cmd:sh -c 'cat >/dev/null; sleep 0.3; cat {answer}'"  # a model that takes 0.3 s
    out, golden = tmp_path / "out", tmp_path / "golden"
    proc = kerntune("autotune", str(src), str(out), "--llm", llm, "--validate", str(golden),
                    "--prebuilt-client", "/opt/client", "--quiet", env=env)
    assert proc.returncode == 1, proc.stderr  # one size lost its winner by 10%: validation fails
    assert "validation failed: 1 problem size(s)" in proc.stdout and "[512, 8192, 1, 2048]" in proc.stdout
    assert "--prebuilt-client=/opt/client" in (out / "args.txt").read_text()
    assert "fake Tensile wrote full" in (golden / "tensile.log").read_text()  # golden had no results: Tensile ran
    report = json.loads((out / "kerntune_autotune.json").read_text())
    t0 = json.loads((golden / "kerntune_run.json").read_text())["wall_s"]
    t1 = json.loads((out / "kerntune_run.json").read_text())["wall_s"]
    cmp_ = report["comparison"]
    assert report["llm_s"] >= 0.3 and cmp_["llm_s"] == report["llm_s"]
    assert cmp_["TR"] == pytest.approx((t0 - (t1 + report["llm_s"])) / t0)
    assert cmp_["winners_kept"] == 0.75 and len(cmp_["sizes"]) == 4
    assert report["kernels_before"] == 24 and report["kernels_after"] == 16
    again = kerntune("autotune", str(src), str(tmp_path / "out2"), "--edits", str(edits), "--validate", str(golden),
                     "--tolerance", "0.15", "--quiet", env=env)
    assert again.returncode == 0, again.stderr
    assert "validation passed" in again.stdout
    assert (golden / "args.txt").read_text().count("\n") == 1  # the golden results were reused, not re-run
    assert hashlib.sha256(src.read_bytes()).hexdigest() == digest


def test_evaluate_end_to_end_with_a_fake_tensile_sh_subprocess(tmp_path: Path) -> None:
    src, edits = _setup(tmp_path)
    out = tmp_path / "eval"
    proc = kerntune("evaluate", str(src), str(out), "--runs", "2", "--edits", str(edits), "--json",
                    str(tmp_path / "e.json"), env=_env(tmp_path, with_tensile=True))
    assert proc.returncode == 0, proc.stderr
    data = json.loads((out / "evaluation.json").read_text())
    assert data["summary"]["runs"] == 2 and data["summary"]["WC"] == 0.75 and data["summary"]["TR"] > 0
    t0 = json.loads((out / "baseline" / "kerntune_run.json").read_text())["wall_s"]
    for i, run in enumerate(data["runs"], 1):
        t1 = json.loads((out / f"run_{i}" / "kerntune_run.json").read_text())["wall_s"]
        assert run["TR"] == pytest.approx((t0 - t1) / t0)
        assert TensileConfig.load(out / f"run_{i}" / "config.yaml").kernel_count() == 16
    assert json.loads((tmp_path / "e.json").read_text())["summary"] == data["summary"]
