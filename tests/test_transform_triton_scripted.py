"""``kerntune transform`` on a Triton kernel file, end to end on the CPU, with a SCRIPTED model.

Triton runs under its CPU interpreter (``TRITON_INTERPRET=1``, set for the worker processes here): the
kernels really run on CPU torch tensors, every output is compared with the original file's reference,
and configs are timed by ``kerntune tune``'s evaluator (its wall-clock timer, as it has no GPU).  The
model is scripted (tests/data/triton_transform/scripted_explicit.yaml): with the Triton step library,
the tile step's rewrite (tunable BLOCK_M/N/K, tl.dot) is checked, tuned with ``auto`` and accepted; the
split-K step's rewrite (it overwrites the accumulator) is rejected as incorrect, never fatal.  What is
tested is kerntune's machinery, not a model; the interpreter's timings say nothing about a GPU's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

from kerntune.llm import LLMClient  # noqa: E402
from kerntune.store import Store  # noqa: E402
from kerntune.transform.scripted import ScriptedTransformProvider  # noqa: E402
from kerntune.transform.triton_context import TritonTransformer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "triton_transform"
SHAPE = (32, 32, 32)


@pytest.fixture
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def test_scripted_model_triton_explicit_accepts_tiles_rejects_wrong_split_k(tmp_path, interpreter):
    transcript = tmp_path / "transcript.jsonl"
    client = LLMClient(ScriptedTransformProvider(DATA / "scripted_explicit.yaml"), transcript=transcript)
    store = Store(tmp_path / "kt.db")
    tt = TritonTransformer(DATA / "matmul_small.py", SHAPE, strategy="explicit", llm=client, budget=4, rep_ms=5,
                           retime_rounds=3, store=store, workdir=tmp_path / "work")
    result = tt.run()
    steps = {s.id: s for s in result.steps}

    tiles = steps["tiles"]
    assert tiles.status == "accepted", tiles.reason
    assert set(tiles.tune_params) == {"BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps"}
    assert tiles.evaluations == 4 and tiles.statuses == {"ok": 4}  # tuned by `auto` under --budget 4
    wrong = steps["split_k"]
    assert wrong.status == "rejected" and wrong.reason.startswith("incorrect: at its default config"), wrong.reason
    assert "differs from the reference" in wrong.reason
    assert {steps[s].status for s in ("persistent", "tma", "pipelining", "epilogue", "attention_tiling")} == {"skipped"}
    # the fix round: the rejection goes back to the model once; its answer (the original file: correct,
    # slower than the accepted tiles) is checked and tuned as a step of its own, and "not faster" is not
    # sent back again
    fix = steps["split_k.fix1"]
    assert fix.status == "rejected" and fix.reason.startswith("not faster"), fix.reason
    assert fix.evaluations >= 1 and "split_k.fix2" not in steps

    # the winner: the tile rewrite's kernel file, its best config and a speedup over the original
    assert result.accepted == ["tiles"] and result.speedup > 1.0
    assert result.kernel_source == (DATA / "rewrite_tiles.py").read_text()
    assert Path(result.kernel_file).read_text() == result.kernel_source
    assert set(result.best_config) == {"BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps"}
    assert result.retimed is not None and result.retimed["rounds"] == 3 and result.retimed["speedup"] > 1.0
    combined = Path(result.combined_file).read_text()
    assert "bind(globals()" in combined and "step_tiles.py" in combined

    # acceptance 4: what it took
    c = result.counts()
    assert c["model_calls"] == 9 and c["rewrites"] == 3 and (c["accepted"], c["rejected"]) == (1, 2)
    assert c["evaluations"] == 1 + 4 + fix.evaluations + 2 * 3 and c["seconds"] > 0
    assert f"9 model calls, 3 rewrites (1 accepted, 2 rejected), {c['evaluations']} evaluations" in result.summary()

    # every trial in the store; the transcript holds every exchange (replayable)
    runs = {r.label for r in store.list_runs()}
    assert {"transform original", "transform tiles", "transform split_k.fix1"} <= runs and "transform split_k" not in runs
    store.close()
    assert len(transcript.read_text().splitlines()) == 9
    assert json.loads((tmp_path / "work" / "result.json").read_text())["counts"] == c

    # the transcript, replayed with ``--llm replay:`` through the CLI (a smaller budget: the replay
    # answers by position), gives the same steps and the same kernel, with every model call answered
    out, res = tmp_path / "best.py", tmp_path / "replayed.json"
    cmd = [sys.executable, "-m", "kerntune", "transform", str(DATA / "matmul_small.py"), "--shape", "32x32x32",
           "--strategy", "explicit", "--llm", f"replay:{transcript}", "--llm-transcript",
           str(tmp_path / "replayed.jsonl"), "--budget", "2", "--rep-ms", "2", "--retime-rounds", "0",
           "--workdir", str(tmp_path / "w3"), "--store", str(tmp_path / "replayed.db"), "-o", str(out),
           "--json", str(res)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr[-3000:]
    again = json.loads(res.read_text())
    assert "model calls" in proc.stdout and out.read_text() == result.kernel_source
    assert [(s["id"], s["status"]) for s in again["steps"]] == [(s.id, s.status) for s in result.steps]
    assert again["kernel_source"] == result.kernel_source and again["counts"]["model_calls"] == 9


def test_scripted_model_without_a_rule_for_one_prompt_fails_the_step_and_keeps_the_original(tmp_path, interpreter):
    client = LLMClient(ScriptedTransformProvider(DATA / "scripted_explicit.yaml"))
    first = TritonTransformer(DATA / "matmul_small.py", SHAPE, strategy="one-prompt", llm=client, budget=2,
                              rep_ms=2, retime_rounds=0, workdir=tmp_path / "w1")
    r1 = first.run()
    assert [s.status for s in r1.steps] == ["failed"] and r1.speedup == 1.0 and r1.accepted == []


