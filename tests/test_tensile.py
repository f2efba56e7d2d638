"""Tensile benchmark configs: real public configs round-trip byte-identically and
count kernels by Tensile's rule (hand counts in tests/data/tensile/expected_counts.json);
edits are validated, locked sections refused, inputs never modified."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kerntune.tensile import TensileConfig, TensileEdit, TensileError, apply

DATA = Path(__file__).parent / "data" / "tensile"
EXPECTED = json.loads((DATA / "expected_counts.json").read_text()) if (DATA / "expected_counts.json").exists() else {}
REAL = sorted(f for f, e in EXPECTED.items() if not e.get("legacy_keys_nonnull"))
LEGACY = sorted(f for f, e in EXPECTED.items() if e.get("legacy_keys_nonnull"))

SYNTHETIC = """\
# a small config in Tensile's usual layout
GlobalParameters:
  NumElementsToValidate: 0   # no validation
  KernelTime: True

BenchmarkProblems:
  -
    - # ProblemType
      OperationType: GEMM
      DataType: h
      TransposeA: False
      TransposeB: True
      UseBeta: True
      Batched: True

    - # one step
      InitialSolutionParameters:
      BenchmarkCommonParameters:
        - KernelLanguage: ["Assembly"]
      ForkParameters:
        - PrefetchGlobalRead: [True, False]
        - ThreadTile:
          - [ 4, 4 ]
          - [ 8, 8 ]
        - WorkGroup:
          - [ 16, 16,  1 ]   # keep me
        - DepthU: [8, 16, 32]
        - Groups:
          - - {MatrixInstruction: [16, 16, 4, 1]}
            - {MatrixInstruction: [32, 32, 2, 1]}
      BenchmarkFinalParameters:
        - ProblemSizes:
          - Range: [ [127,1,129], 0, [2], [63,1,65] ]
"""


@pytest.mark.skipif(not REAL, reason="no real Tensile fixtures")
@pytest.mark.parametrize("name", REAL)
def test_real_configs_round_trip_and_count_like_tensile(name: str) -> None:
    text = (DATA / name).read_text()
    cfg = TensileConfig(text, name)
    assert cfg.dumps() == text
    expected = [b["kernels"] for b in EXPECTED[name]["benchmarks"]]
    assert [s.kernel_count() for s in cfg.steps()] == expected


def test_at_least_five_real_configs_are_committed() -> None:
    assert len(REAL) >= 5, "tests/data/tensile needs five real configs (see README there)"


def test_count_and_groups() -> None:
    cfg = TensileConfig(SYNTHETIC)
    (step,) = cfg.steps()
    assert step.fork_params()["DepthU"] == [8, 16, 32]
    assert [len(g) for g in step.groups()] == [2]
    assert cfg.kernel_count() == 2 * 2 * 1 * 3 * 2


def test_edits_change_only_their_lines_and_keep_comments() -> None:
    cfg = TensileConfig(SYNTHETIC)
    new, refused = apply(cfg, [TensileEdit("remove_candidate", "DepthU", 8),
                               TensileEdit("add_candidate", "DepthU", 64),
                               TensileEdit("add_group_param", "StaggerU", 32)])
    assert not refused
    out = new.dumps()
    changed = [(a, b) for a, b in zip(SYNTHETIC.splitlines(), out.splitlines()) if a != b]
    assert any("DepthU: [16, 32, 64]" in b for _, b in changed)
    assert "# keep me" in out and "# a small config" in out and "KernelTime: True" in out
    assert new.kernel_count() == 24 and TensileConfig(out).kernel_count() == 24
    assert cfg.dumps() == SYNTHETIC  # the input config object is untouched


@pytest.mark.parametrize("edit, needle", [
    (TensileEdit("remove_fork", "ProblemSizes"), "locked"),
    (TensileEdit("add_fork", "GlobalParameters", values=[1]), "locked"),
    (TensileEdit("add_candidate", "DepthU", 12), "not a value Tensile accepts"),
    (TensileEdit("add_fork", "MatrixInstruction", values=[[16, 16, 4]]), "not a value Tensile accepts"),
    (TensileEdit("add_candidate", "WorkGroup", [16, 16, 8]), "not a value Tensile accepts"),
    (TensileEdit("add_fork", "NoSuchParameter", values=[1]), "unknown Tensile parameter"),
    (TensileEdit("remove_candidate", "WorkGroup", [16, 16, 1]), "without candidates"),
    (TensileEdit("remove_candidate", "DepthU", 128), "no candidate"),
    (TensileEdit("remove_candidate", "DepthU", 8, step=3), "no benchmark step 3"),
])
def test_bad_edits_are_refused_with_a_reason(edit: TensileEdit, needle: str) -> None:
    new, refused = apply(TensileConfig(SYNTHETIC), [edit])
    assert len(refused) == 1 and needle in refused[0][1]
    assert new.dumps() == SYNTHETIC


def test_legacy_step_keys_with_a_value_are_refused_empty_ones_ignored() -> None:
    empty = SYNTHETIC.replace("      BenchmarkFinalParameters:", "      BenchmarkJoinParameters:\n"
                                                                  "      BenchmarkFinalParameters:")
    assert TensileConfig(empty).kernel_count() == 24  # as Tensile: present but empty is accepted
    valued = SYNTHETIC.replace("      BenchmarkFinalParameters:", "      JoinParameters: [MacroTile]\n"
                                                                   "      BenchmarkFinalParameters:")
    with pytest.raises(TensileError, match="legacy key JoinParameters"):
        TensileConfig(valued)


@pytest.mark.parametrize("name", LEGACY)
def test_real_legacy_config_is_refused(name: str) -> None:
    with pytest.raises(TensileError, match="legacy key"):
        TensileConfig.load(DATA / name)


@pytest.mark.parametrize("name", REAL)
def test_one_candidate_removed_from_a_real_config_changes_one_entry(name: str) -> None:
    text = (DATA / name).read_text()
    cfg = TensileConfig(text, name)
    step = next(s for s in cfg.steps() if any(len(v) > 1 for v in s.fork_params().values()))
    param, values = next((k, v) for k, v in step.fork_params().items() if len(v) > 1)
    new, refused = apply(cfg, [TensileEdit("remove_candidate", param, values[-1], problem=step.problem,
                                           step=step.step)])
    if refused:  # the table of valid values does not cover every parameter; then the refusal must say so
        assert "Tensile" in refused[0][1] or "candidate" in refused[0][1]
        return
    out = new.dumps()
    again = TensileConfig(out, name)
    before = [s.kernel_count() for s in cfg.steps()]
    after = [s.kernel_count() for s in again.steps()]
    i = cfg.steps().index(step)
    assert after[i] * len(values) == before[i] * (len(values) - 1)
    assert after[:i] + after[i + 1:] == before[:i] + before[i + 1:]
    old_lines, new_lines = text.splitlines(), out.splitlines()
    assert len([ln for ln in old_lines if ln not in new_lines]) <= len(values) + 2  # only that entry's lines moved


def test_generate_cli_writes_elsewhere_and_explains(tmp_path) -> None:
    src = tmp_path / "cfg.yaml"
    src.write_text(SYNTHETIC)
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    edits = tmp_path / "edits.json"
    edits.write_text(json.dumps({"edits": [{"op": "remove_candidate", "param": "ThreadTile", "value": [4, 4]},
                                           {"op": "remove_fork", "param": "ProblemSizes"}]}))
    proc = subprocess.run([sys.executable, "-m", "kerntune", "tensile", "generate", str(src), str(tmp_path / "out"),
                           "--edits", str(edits)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "24 -> 12 kernels" in (tmp_path / "out" / "explanation.md").read_text()
    assert "ProblemSizes is locked" in (tmp_path / "out" / "explanation.md").read_text()
    assert TensileConfig.load(tmp_path / "out" / "config.yaml").kernel_count() == 12
    assert hashlib.sha256(src.read_bytes()).hexdigest() == digest
    with pytest.raises(TensileError, match="refusing to overwrite"):
        apply(TensileConfig.load(src), [TensileEdit("remove_candidate", "DepthU", 8)])[0].save(src)


def test_run_without_tensile_names_tensile_path(tmp_path) -> None:
    src = tmp_path / "cfg.yaml"
    src.write_text(SYNTHETIC)
    env = {k: v for k, v in __import__("os").environ.items() if k != "TENSILE_PATH"}
    proc = subprocess.run([sys.executable, "-m", "kerntune", "tensile", "run", str(src), str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and "TENSILE_PATH" in proc.stderr


def test_scripted_model_edits_a_real_config_through_the_prompt() -> None:
    from kerntune.llm import LLMClient
    from kerntune.tensile.prompting import ask
    from tests.scripted import ScriptedProvider

    cfg = TensileConfig.load(DATA / "mi32_bf16_nn.yaml")
    step = cfg.steps()[0]
    param, values = next((k, v) for k, v in step.fork_params().items() if len(v) > 1)
    provider = ScriptedProvider(lambda n, m: json.dumps({"edits": [
        {"op": "remove_candidate", "param": param, "value": values[0], "reason": "slow"},
        {"op": "teleport", "param": param}]}))
    edits, dropped, seconds = ask(LLMClient(provider, retries=0), cfg, "MI300X")
    prompt = provider.prompts[0][-1].content
    assert "MI325X" in prompt and "CDNA3" in prompt and f"{cfg.kernel_count()} kernels" in prompt
    assert [e.op for e in edits] == ["remove_candidate"] and "teleport" in dropped[0]
    new, refused = apply(cfg, edits)
    assert not refused and new.kernel_count() * len(values) == cfg.kernel_count() * (len(values) - 1)
