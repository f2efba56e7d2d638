"""A first-time user's walkthrough: each defect it found, pinned by a real ``kerntune`` process.

1. a kernel file's flops(shape) failing at a shape is one line, before any run id is printed
2. --llm / --llm-base-url / --llm-transcript with a strategy that asks no model is said, not ignored
3. transform refuses Kernel Tuner's options on a Triton file, and a misspelt --search before measuring
4. Ctrl-C in tune / compare says how far the run got and how to continue it
5. prompt show refuses --n below 1
"""

from __future__ import annotations

import sqlite3

import pytest

from cli_runs import interrupt, one_line
from cli_runs import run_cli as cli
from test_hardening_inputs import ROOT

SPACES = ROOT / "examples" / "spaces"
CONV = SPACES / "convolution_A100.json.gz"
MATMUL = ROOT / "examples" / "triton" / "matmul.py"


# -- 1 ---------------------------------------------------------------------------------------------------
def test_a_shape_the_kernel_files_flops_cannot_take_is_one_line_before_a_run_id(tmp_path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    proc = cli(tmp_path, "tune", str(MATMUL), "--shape", "64x64", "--budget", "3", "--no-report")
    line = one_line(proc, "matmul.py", "--shape 64x64", "does not fit the kernel file", "flops()", "ValueError")
    assert "run id" not in proc.stdout, proc.stdout
    assert "Traceback" not in line
    db = tmp_path / "store.db"
    if db.exists():   # nothing was stored under an id that was never shown
        with sqlite3.connect(db) as conn:
            assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0


def test_the_kernel_files_own_functions_are_guarded() -> None:
    from kerntune.errors import KerntuneError
    from kerntune.evaluate.triton_backend.kernel_file import describe, module_space

    class File:
        __file__ = "/somewhere/k.py"
        name = "k"

        @staticmethod
        def flops(shape):  # noqa: ANN001, ANN205
            m, n, k = shape
            return m * n * k

        @staticmethod
        def space_for(shape):  # noqa: ANN001, ANN205
            raise IndexError("tuple index out of range")

    assert describe(File, (2, 3, 4))["flops"] == 24
    with pytest.raises(KerntuneError, match=r"k\.py: --shape 2x3 does not fit the kernel file \(flops\(\): ValueError"):
        describe(File, (2, 3))
    with pytest.raises(KerntuneError, match=r"--shape 8 does not fit .*space_for\(\): IndexError: tuple index"):
        module_space(File, (8,))


# -- 2 ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flags, said", [
    (["--llm-transcript", "x.jsonl"], "--llm-transcript x.jsonl is not used by strategy pattern"),
    (["--llm", "openai:gpt-4o"], "--llm openai:gpt-4o is not used by strategy pattern"),
    (["--llm", "openai:gpt-4o", "--llm-base-url", "http://localhost:1"], "--llm-base-url http://localhost:1"),
])
def test_model_options_with_a_strategy_that_asks_no_model_are_said(tmp_path, flags, said) -> None:
    proc = cli(tmp_path, "tune", "--replay", str(CONV), "--strategy", "pattern", "--budget", "5", "--no-report",
                     *flags)
    assert proc.returncode == 0, proc.stderr[-2000:]
    notes = [line for line in proc.stderr.splitlines() if "not used" in line]
    assert len(notes) == 1 and said in notes[0], proc.stderr
    assert not (tmp_path / "x.jsonl").exists()


def test_a_model_from_the_environment_alone_is_not_noted(tmp_path) -> None:
    proc = cli(tmp_path, "tune", "--replay", str(CONV), "--strategy", "pattern", "--budget", "5",
                     "--no-report", env={"KERNTUNE_LLM": "openai:gpt-4o"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "not used" not in proc.stderr, proc.stderr
    # a strategy that does take a model is not told so either
    proc = cli(tmp_path, "tune", "--replay", str(CONV), "--strategy", "random", "--budget", "5", "--no-report")
    assert "not used" not in proc.stderr, proc.stderr


# -- 3 ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flag, value", [("--iterations", "3"), ("--backend", "cuda"), ("--kernel-name", "k"),
                                         ("--params", "{}"), ("--grid-div", "{}"), ("--args-generator", "gen.py")])
def test_transform_refuses_kernel_tuner_options_on_a_triton_file(tmp_path, flag, value) -> None:
    proc = cli(tmp_path, "transform", str(MATMUL), "--shape", "64x64x64", "--llm", "replay:none.jsonl",
                     flag, value)
    one_line(proc, flag, "applies to Kernel Tuner kernels (.cu/.cl/.c), not to a Triton file")


def test_transform_says_which_options_are_kernel_tuners_in_its_help(tmp_path) -> None:
    proc = cli(tmp_path, "transform", "--help", env={"COLUMNS": "400", "TERMINAL_WIDTH": "400"})
    assert proc.returncode == 0, proc.stderr
    for flag in ("--iterations", "--backend", "--kernel-name", "--params", "--grid-div", "--args-generator"):
        line = next(line for line in proc.stdout.splitlines() if f" {flag} " in line)
        assert "Kernel Tuner kernels" in line, line


def test_transform_checks_the_search_strategy_before_measuring(tmp_path) -> None:
    (tmp_path / "k.c").write_text("void k(float *a) { a[0] = 1.0f; }\n")
    (tmp_path / "empty.jsonl").write_text("")
    proc = cli(tmp_path, "transform", "k.c", "--backend", "c", "--problem-size", "64",
                     "--llm", "replay:empty.jsonl", "--search", "patern")
    one_line(proc, "unknown strategy", "patern")


# -- 4 ---------------------------------------------------------------------------------------------------


def test_ctrl_c_in_tune_says_how_far_it_got_and_how_to_continue(tmp_path) -> None:
    rid, err, code = interrupt(tmp_path, "tune", "--replay", str(SPACES / "dedispersion_A100.json.gz"), "--strategy",
                               "random", "--budget", "100000", "--no-report", "--retime", "0")
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 130 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("interrupted after ") and " evaluations (best " in lines[0], lines[0]
    assert lines[0].endswith(f"continue with: kerntune tune --resume {rid}"), lines[0]
    with sqlite3.connect(tmp_path / "store.db") as conn:
        assert conn.execute("SELECT status FROM runs WHERE id=?", (rid,)).fetchone()[0] == "interrupted"


def test_ctrl_c_in_compare_says_how_to_continue(tmp_path) -> None:
    rid, err, code = interrupt(tmp_path, "compare", "--space", str(SPACES / "dedispersion_A100.json.gz"),
                               "--strategies", "random", "--budget", "100000", "--repeats", "5", "--no-report", progress=0)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 130 and len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("interrupted after ") and " evaluations" in lines[0], lines[0]
    assert lines[0].endswith(f"continue with: kerntune compare --resume {rid}"), lines[0]


# -- 5 ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", ["0", "-3"])
def test_prompt_show_refuses_n_below_one(tmp_path, n) -> None:
    one_line(cli(tmp_path, "prompt", "show", "--space", str(CONV), "--n", n), "--n", "1 or more", n)
