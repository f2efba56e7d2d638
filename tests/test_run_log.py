"""The run id and progress reach a log file while the run goes on (issue 21).

``compare`` runs in a real subprocess with stdout redirected to a file.  Its
``llm`` strategy is answered through ``files:DIR``, and no answer is ever
written: the process is still waiting for the model when the file is read,
so what the file holds was written (and flushed) before the run ended.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from kerntune.store import Store

ROOT = Path(__file__).resolve().parent.parent
SPACE = ROOT / "examples/spaces/matmul_4096_h100.json.gz"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("KERNTUNE_LLM", None)
    return env


def test_compare_log_file_names_the_run_and_its_progress_before_it_ends(tmp_path: Path) -> None:
    answers = tmp_path / "answers"
    log = tmp_path / "compare.log"
    store = tmp_path / "k.db"
    cmd = [sys.executable, "-m", "kerntune", "compare", "--space", str(SPACE), "--strategies", "random,llm",
           "--llm", f"files:{answers}", "--llm-timeout", "120", "--budget", "30", "--repeats", "2",
           "--store", str(store), "--no-report"]
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, env=_env(), cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not (answers / "0001.prompt.md").exists():  # random's repeats are done, llm waits for us
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "the llm strategy never asked its first question"
            time.sleep(0.1)
        time.sleep(0.3)
        lines = log.read_text().splitlines()
        assert proc.poll() is None  # still running: everything read was written before the end
    finally:
        proc.kill()
        proc.wait()
    assert lines, "nothing reached the log file while the comparison ran"
    assert lines[0].startswith("run id: ")
    run_id = lines[0].split()[2]
    with Store(store, readonly=True) as st:  # the id names the comparison in the store
        run = st.get_run(run_id)
        assert run.kind == "compare" and run.status == "running"
    progress = [ln for ln in lines if ln.startswith("progress: ")]
    assert any("random#0 done, 1/4 repeats" in ln for ln in progress), lines
    assert any("random#1 done, 2/4 repeats, 60 evaluations" in ln for ln in progress), lines
    assert "\x1b[" not in log.read_text()  # plain text, no terminal codes


def test_tune_prints_the_run_id_first_and_plain_progress_lines(tmp_path: Path) -> None:
    store = tmp_path / "k.db"
    proc = subprocess.run([sys.executable, "-m", "kerntune", "tune", "--replay", str(SPACE), "--strategy", "random",
                           "--budget", "60", "--store", str(store), "--no-report"],
                          capture_output=True, text=True, env=_env(), cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("run id: ")
    run_id = lines[0].split()[2]
    assert [ln.split(",")[0] for ln in lines if ln.startswith("progress: ")] == \
        ["progress: 25 evaluations", "progress: 50 evaluations"]
    with Store(store, readonly=True) as st:
        assert st.get_run(run_id).kind == "tune"
        assert len(st.trials(run_id)) == 60
