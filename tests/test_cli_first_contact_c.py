"""A first-contact review's third batch, each defect pinned through the real CLI (``kerntune.cli.main``
in-process, on the recorded spaces in examples/spaces/):

1. a --device value that names a file which is not there is refused, not taken as the GPU's name; a
   --device naming a known GPU other than the recording's is said in one note
2. tune --replay refuses the flags that act on a kernel file only (--gpus, --retime, --compile-timeout)
3. every option of every command has a help text
"""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from kerntune.cli import app, main

ROOT = Path(__file__).resolve().parent.parent
SPACES = ROOT / "examples" / "spaces"
CONV = SPACES / "convolution_A100.json.gz"           # recorded on "NVIDIA A100-PCIE-40GB"
MATMUL = SPACES / "matmul_4096_h100.json.gz"         # recorded on "NVIDIA H100 80GB HBM3"
NAMELESS = SPACES / "dedispersion_MI250X.json.gz"    # a recording without a device name


@pytest.fixture
def kt(tmp_path, monkeypatch, capsys):
    """``kerntune ARGS`` in-process, in ``tmp_path`` with the store ``tmp_path/store.db`` and no model from
    the environment: (exit code, stdout, stderr)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KERNTUNE_STORE", str(tmp_path / "store.db"))
    for name in ("KERNTUNE_LLM", "KERNTUNE_LLM_BASE_URL"):
        monkeypatch.delenv(name, raising=False)

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            main([str(a) for a in args])
        out = capsys.readouterr()
        return exit_info.value.code or 0, out.out, out.err

    return run


def refused(result: tuple[int, str, str], *needles: str) -> str:
    """The one error line of a refused command (exit code 2), holding each needle."""
    code, _, err = result
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (code, err[-2000:])
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def notes(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("note:")]


COMMANDS = {
    "prompt show": ["prompt", "show", "--space", CONV],
    "tune --replay": ["tune", "--replay", MATMUL, "--budget", "3", "--no-report", "--retime", "0"],
    "compare": ["compare", "--space", MATMUL, "--budget", "3", "--repeats", "1", "--strategies", "random",
                "--no-report"],
}


# -- 1 ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("device", ["/tmp/nonexistent/mygpu.json", "gpus/mygpu", "mygpu.txt"])
def test_a_device_file_that_is_not_there_is_refused_not_taken_as_the_gpus_name(kt, tmp_path, command,
                                                                                device) -> None:
    """A mistyped --device path was silently the GPU's name: the prompt said "Device: /tmp/.../mygpu.json"
    without the recording's GPU facts, and tune lost its "% of peak" figures.  It is refused as a
    --source that is not there is, before a store is made."""
    line = refused(kt(*COMMANDS[command], "--device", device), f"--device {device}: file not found")
    assert line == f"kerntune: error: --device {device}: file not found", line
    assert not (tmp_path / "store.db").exists()


def test_a_gpu_name_with_a_spaced_slash_is_still_a_name(kt) -> None:
    """ROCm names an MI250X "AMD Instinct MI250X / MI250": a name, not a path, so not refused."""
    code, out, err = kt("prompt", "show", "--space", NAMELESS, "--device", "AMD Instinct MI250X / MI250")
    assert code == 0, err
    assert "- Device: AMD Instinct MI250X / MI250" in out and "Compute units: 110" in out, out[:3000]


def test_a_known_gpu_other_than_the_recordings_is_said_in_one_note_and_described(kt) -> None:
    """--device H100 on an A100 recording is allowed (a recording's name may be wrong), but the prompt's
    GPU facts then describe another GPU than the one that measured the times: said in one note."""
    code, out, err = kt("prompt", "show", "--space", CONV, "--device", "H100")
    assert code == 0, err
    assert notes(err) == ["note: the recording was measured on NVIDIA A100-PCIE-40GB; the prompt's GPU facts"
                          " now describe --device H100"], err
    assert "- Device: H100" in out and "Streaming multiprocessors (SMs): 132" in out, out[:3000]


@pytest.mark.parametrize("space, device", [(CONV, "A100-PCIE-40GB"), (NAMELESS, "MI250X"), (CONV, "Tesla X9")])
def test_no_device_note_for_the_same_gpu_a_nameless_recording_or_an_unknown_gpu(kt, space, device) -> None:
    """The note is for a known GPU other than the recording's known one only: the same GPU by another
    spelling, a recording without a name (where --device is how one is given) and a GPU kerntune has no
    facts of say nothing."""
    code, _, err = kt("prompt", "show", "--space", space, "--device", device)
    assert code == 0 and notes(err) == [], err


def test_tune_and_compare_say_the_other_gpu_too(kt) -> None:
    """tune's "% of peak" figures and compare's prompts describe the --device GPU: both say so once."""
    code, out, err = kt(*COMMANDS["tune --replay"], "--device", "A100")
    assert code == 0, err
    assert notes(err) == ["note: the recording was measured on NVIDIA H100 80GB HBM3; the % of peak figures and"
                          " a model's prompts now describe --device A100"], err
    assert "of the 312 TFLOP/s fp16 peak" in out, out
    code, _, err = kt(*COMMANDS["compare"], "--device", "A100")
    assert code == 0, err
    assert notes(err) == ["note: the recording was measured on NVIDIA H100 80GB HBM3; a model's prompts now"
                          " describe --device A100"], err


# -- 2 ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flag, value", [("--gpus", "2"), ("--retime", "4"), ("--compile-timeout", "5")])
def test_tune_replay_refuses_the_flags_of_a_kernel_file(kt, tmp_path, flag, value) -> None:
    """--gpus 2, --retime 4 and --compile-timeout 5 with --replay ran with the same output, silently
    ignored, where --shape is refused in one line: they are refused alike, before a store is made."""
    refused(kt("tune", "--replay", MATMUL, "--budget", "3", "--no-report", flag, value),
            f"{flag} {value} acts on a kernel file only", "--replay")
    assert not (tmp_path / "store.db").exists()


def test_tune_replay_names_every_kernel_file_flag_in_one_line(kt) -> None:
    """Several such flags are one error line naming each of them."""
    refused(kt("tune", "--replay", MATMUL, "--no-report", "--gpus", "2", "--retime", "4", "--compile-timeout", "5"),
            "--compile-timeout 5, --gpus 2 and --retime 4 act on a kernel file only")


def test_tune_replay_still_runs_with_their_defaults_and_retime_0(kt) -> None:
    """Only a value the user gave is refused: the defaults are not, nor --retime 0 (it asks for no
    re-timing, which is what a replay does), which scripts pass to replays."""
    code, out, err = kt("tune", "--replay", MATMUL, "--budget", "3", "--no-report", "--retime", "0")
    assert code == 0 and "best: " in out, err


def test_gpus_with_ray_address_is_the_replays_actor_count() -> None:
    """With --ray-address a replay runs on --gpus Ray actors: not refused (checked without a Ray cluster)."""
    from kerntune.cli.tune_cmd import _refuse_kernel_only_flags

    _refuse_kernel_only_flags(60.0, "2", None, "auto")


# -- 3 ---------------------------------------------------------------------------------------------------
def _commands(cmd, path=()):  # noqa: ANN001, ANN202
    if hasattr(cmd, "commands"):
        for name, sub in sorted(cmd.commands.items()):
            yield from _commands(sub, (*path, name))
    else:
        yield " ".join(path), cmd


def test_every_option_of_every_command_has_a_help_text() -> None:
    """`--help` listed options with no description (--llm-base-url, --store, --limit, --seed, --timeout
    ...): a user could not tell what they do without reading the code."""
    missing = [f"{path} {param.opts[0]}" for path, cmd in _commands(typer.main.get_command(app))
               for param in cmd.params if not (getattr(param, "help", None) or "").strip()]
    assert not missing, missing
