"""``--source`` and ``--device`` for replayed spaces: the model sees the kernel and the GPU as
a real run would show them, even where the recording holds neither (the MI250X dedispersion
file's device name is empty).  Real subprocesses, real files."""

from __future__ import annotations

import json
from pathlib import Path

from kerntune.evaluate.replay import ReplayEvaluator, replay_extras
from tests.test_cli import assert_one_line_error, run

ROOT = Path(__file__).resolve().parent.parent

MI250X = str(ROOT / "examples" / "spaces" / "dedispersion_MI250X.json.gz")


def test_prompt_shows_the_given_source_and_device(tmp_path: Path) -> None:
    src = tmp_path / "dedisp.cu"
    src.write_text("__global__ void dedispersion_kernel(float *out) { /* unique-marker-42 */ }\n")
    proc = run(["prompt", "show", "--space", MI250X, "--source", str(src), "--device", "AMD Instinct MI250X"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "unique-marker-42" in proc.stdout
    assert "AMD Instinct MI250X" in proc.stdout and "Device: unknown" not in proc.stdout
    assert "Wavefront" in proc.stdout or "Compute units" in proc.stdout  # known facts looked up by name


def test_without_them_the_prompt_says_unknown(tmp_path: Path) -> None:
    proc = run(["prompt", "show", "--space", MI250X], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "unknown" in proc.stdout


def test_device_file_json_and_text(tmp_path: Path) -> None:
    js = tmp_path / "gpu.json"
    js.write_text(json.dumps({"name": "Some GPU", "sms": 99}))
    _, info = replay_extras(None, str(js))
    assert info == {"name": "Some GPU", "sms": 99}
    ev = ReplayEvaluator.from_file(MI250X, device_info=info)
    assert ev.device()["sms"] == 99 and ev.device()["name"] == "Some GPU"
    txt = tmp_path / "gpu.txt"
    txt.write_text("A GPU with 7 compute dies\n")
    _, info = replay_extras(None, str(txt))
    assert ReplayEvaluator.from_file(MI250X, device_info=info).device()["description"] == "A GPU with 7 compute dies"


def test_tune_refuses_source_without_replay_and_missing_files(tmp_path: Path) -> None:
    proc = run(["tune", "--replay", MI250X, "--source", str(tmp_path / "missing.cu"), "--budget", "3"], tmp_path)
    assert_one_line_error(proc, "--source", "not found")
