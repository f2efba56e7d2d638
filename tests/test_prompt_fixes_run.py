"""``kerntune prompt show --round N --run R`` where run R stored its round-N prompt.

The stored prompt was printed before any check and whatever the options: a run on the matmul recording
was shown for ``--space convolution_A100`` without an error (the same mismatch is refused for a run
without a stored prompt), and ``--n 3``, ``--no-source``, ``--source`` and ``--device`` were silently
ignored ("Suggest up to 15" under ``--n 3``).

Real runs: ``kerntune tune --strategy llm`` replaying the recorded transcripts on the recorded spaces
of examples/spaces, into a real store file; ``python -m kerntune`` as a user runs it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_runs import one_line, run_cli

ROOT = Path(__file__).resolve().parent.parent
SPACES = ROOT / "examples" / "spaces"
TRANSCRIPTS = ROOT / "benchmarks" / "llm" / "transcripts"
MATMUL = SPACES / "matmul_256x8192x8192_h100.json.gz"
CONV = SPACES / "convolution_A100.json.gz"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A store (``tmp/store.db``) holding an llm run on the matmul recording and one on convolution_A100,
    each with its prompts stored; (tmp, {"matmul": id, "conv": id})."""
    tmp = tmp_path_factory.mktemp("prompt_runs")
    ids = {}
    for name, space, budget in (("matmul", MATMUL, "60"), ("conv", CONV, "100")):
        transcript = TRANSCRIPTS / space.name.replace(".json.gz", ".llm.jsonl")
        proc = run_cli(tmp, "tune", "--replay", str(space), "--strategy", "llm", "--llm", f"replay:{transcript}",
                       "--budget", budget, "--no-report", timeout=300)
        assert proc.returncode == 0, proc.stderr
        ids[name] = proc.stdout.split("run id: ")[1].split()[0]
    return tmp, ids


def show(tmp: Path, run: str, round_no: int, *args: str, space: Path = MATMUL):
    return run_cli(tmp, "prompt", "show", "--space", str(space), "--round", str(round_no), "--run", run, *args)


def content(text: str) -> list[str]:
    """The prompt's lines without the role headings (``## system`` as stored, a rule as rebuilt) or blanks."""
    return [line for line in text.splitlines()
            if line.strip() and "─" not in line and line not in ("## system", "## user")]


def test_prompt_show_refuses_a_stored_prompt_of_another_space(runs: tuple[Path, dict[str, str]]) -> None:
    """The matmul run's stored prompt was printed for --space convolution_A100 with exit code 0."""
    tmp, ids = runs
    one_line(show(tmp, ids["matmul"], 2, space=CONV), "measured another space")


def test_prompt_show_refuses_a_stored_prompt_of_another_recording(runs: tuple[Path, dict[str, str]]) -> None:
    """Same parameter names, other recording (A4000 for an A100 run): refused only without a stored prompt."""
    tmp, ids = runs
    one_line(show(tmp, ids["conv"], 2, space=SPACES / "convolution_A4000.json.gz"), "replayed another recording")
    own = show(tmp, ids["conv"], 2, space=CONV)
    assert own.returncode == 0 and "as stored" in own.stderr, own.stderr


def test_prompt_show_n_rebuilds_the_stored_prompt_with_that_many_configs(runs: tuple[Path, dict[str, str]]) -> None:
    """``--n 3`` printed the stored prompt's "Suggest up to 15"."""
    tmp, ids = runs
    proc = show(tmp, ids["matmul"], 2, "--n", "3")
    assert proc.returncode == 0, proc.stderr
    assert "Suggest up to 3 NEW UNIQUE" in proc.stdout and "up to 15" not in proc.stdout
    assert "rebuilt" in proc.stderr and "first 28 trials" in proc.stderr, proc.stderr


def test_prompt_show_no_source_source_and_device_rebuild_the_stored_prompt(
        runs: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """--no-source, --source and --device were ignored when the run had stored the round's prompt."""
    tmp, ids = runs
    stored = show(tmp, ids["matmul"], 2)
    assert stored.returncode == 0 and "```" in stored.stdout and "NVIDIA H100" in stored.stdout, stored.stderr
    bare = show(tmp, ids["matmul"], 2, "--no-source")
    assert bare.returncode == 0 and "```" not in bare.stdout and "rebuilt" in bare.stderr, bare.stderr
    src = tmp_path / "kernel.py"
    src.write_text("def marker_kernel_for_the_test():\n    pass\n")
    mine = show(tmp, ids["matmul"], 2, "--source", str(src))
    assert mine.returncode == 0 and "marker_kernel_for_the_test" in mine.stdout, mine.stderr
    other = show(tmp, ids["matmul"], 2, "--device", "NVIDIA A100")
    assert other.returncode == 0 and "Device: NVIDIA A100" in other.stdout, other.stderr
    assert "NVIDIA H100" not in other.stdout


@pytest.mark.parametrize("round_no", [2, 4])
def test_prompt_show_rebuilt_with_the_runs_own_options_equals_the_stored_prompt(
        runs: tuple[Path, dict[str, str]], round_no: int) -> None:
    """A rebuild reports on the trials that round saw (not the run's later ones) and keeps its
    "no improvement" rules (round 4 of this run was stuck), so only the options given change it."""
    tmp, ids = runs
    stored = show(tmp, ids["conv"], round_no, space=CONV)
    rebuilt = show(tmp, ids["conv"], round_no, "--n", "15", space=CONV)
    assert stored.returncode == 0 and rebuilt.returncode == 0, rebuilt.stderr
    assert "as stored" in stored.stderr and "rebuilt" in rebuilt.stderr, rebuilt.stderr
    assert content(rebuilt.stdout) == content(stored.stdout)
    assert ("escape the current region" in stored.stdout) == (round_no == 4)
