"""``make demo``'s replay path (examples/demo.py) in a subprocess: its table must show the
replayed strong-model transcript scoring above the best classical strategy, as the README says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_demo_replay_path_shows_the_llm_guided_search_ahead(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KERNTUNE_DEMO_PATH": "replay",
           "KERNTUNE_DEMO_STORE": str(tmp_path / "demo.db")}
    proc = subprocess.run([sys.executable, str(ROOT / "examples/demo.py")], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "replay path" in out and "REPLAYED" in out
    scores = dict(re.findall(r"│ (llm \(replayed strong-model transcript\)|pattern)\s*│\s*\d+ │ ([0-9.]+) │", out))
    assert set(scores) == {"llm (replayed strong-model transcript)", "pattern"}, out
    assert float(scores["llm (replayed strong-model transcript)"]) > float(scores["pattern"])
    reports = re.findall(r"(\S+\.html)", out.split("report:")[1])
    assert len(reports) == 2 and all((tmp_path / r).is_file() or Path(r).is_file() for r in reports)
