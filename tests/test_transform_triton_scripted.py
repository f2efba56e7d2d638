"""``kerntune transform`` on a Triton kernel file, end to end on the CPU, with a SCRIPTED model.

Triton runs under its CPU interpreter (``TRITON_INTERPRET=1``, set for the worker processes here): the
kernels really run on CPU torch tensors, every output is compared with the original file's reference,
and configs are timed by ``kerntune tune``'s evaluator (its wall-clock timer, as it has no GPU).  The
model is scripted (tests/data/triton_transform/scripted_explicit.yaml): with the Triton step library,
the tile step's rewrite (tunable BLOCK_M/N/K, tl.dot) is checked, tuned with ``auto`` and accepted; the
split-K step's rewrite (it overwrites the accumulator) is rejected as incorrect, never fatal; the
pipelining step's answer (the tiles file again) is "no change".  What is tested is kerntune's machinery,
not a model; the interpreter's timings say nothing about a GPU's.

One explicit run (``explicit``, a module fixture: each run starts some fifteen worker processes) is read
by the tests below, each checking one thing of it; the last replays its transcript through the CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

from kerntune.llm import LLMClient  # noqa: E402
from kerntune.store import Store  # noqa: E402
from kerntune.transform.scripted import ScriptedTransformProvider  # noqa: E402
from kerntune.transform.triton_context import TritonTransformer  # noqa: E402
from test_transform_triton_fixes import unmeasured  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "triton_transform"
SHAPE = (32, 32, 32)
TILES = (DATA / "rewrite_tiles.py").read_text()


def _interpreter_env(mp: pytest.MonkeyPatch) -> None:
    mp.setenv("TRITON_INTERPRET", "1")
    mp.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


@pytest.fixture
def interpreter(monkeypatch):
    _interpreter_env(monkeypatch)


@pytest.fixture(scope="module")
def explicit(tmp_path_factory):
    """The explicit strategy with the Triton step library and the scripted model, run once: its result,
    the labels of its runs in the store, its transcript and its folder."""
    tmp = tmp_path_factory.mktemp("explicit")
    with pytest.MonkeyPatch.context() as mp:
        _interpreter_env(mp)
        transcript = tmp / "transcript.jsonl"
        client = LLMClient(ScriptedTransformProvider(DATA / "scripted_explicit.yaml"), transcript=transcript)
        store = Store(tmp / "kt.db")
        tt = TritonTransformer(DATA / "matmul_small.py", SHAPE, strategy="explicit", llm=client, budget=4, rep_ms=5,
                               retime_rounds=6, store=store, workdir=tmp / "work")
        result = tt.run()
        runs = {r.label for r in store.list_runs()}
        store.close()
        yield SimpleNamespace(result=result, steps={s.id: s for s in result.steps}, runs=runs,
                              transcript=transcript, dir=tmp)


def test_scripted_model_triton_explicit_accepts_tiles_rejects_wrong_split_k(explicit):
    result, steps = explicit.result, explicit.steps
    tiles = steps["tiles"]
    assert tiles.status == "accepted", tiles.reason
    assert set(tiles.tune_params) == {"BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps"}
    assert tiles.evaluations == 4 and tiles.statuses == {"ok": 4}  # tuned by `auto` under --budget 4
    wrong = steps["split_k"]
    assert wrong.status == "rejected" and wrong.reason.startswith("incorrect: at its default config"), wrong.reason
    assert "differs from the reference" in wrong.reason
    assert {steps[s].status for s in ("persistent", "tma", "epilogue", "attention_tiling")} == {"skipped"}
    # the fix round: the rejection goes back to the model once; its answer (the original file: correct,
    # slower than the accepted tiles) is checked and tuned as a step of its own, and "not faster" is not
    # sent back again
    fix = steps["split_k.fix1"]
    assert fix.status == "rejected" and fix.reason.startswith("not faster"), fix.reason
    assert fix.evaluations >= 1 and "split_k.fix2" not in steps

    # the winner: the tile rewrite's kernel file, its best config and a speedup over the original
    assert result.accepted == ["tiles"] and result.speedup > 1.0
    assert result.kernel_source == TILES
    assert Path(result.kernel_file).read_text() == result.kernel_source
    assert set(result.best_config) == {"BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps"}
    assert result.retimed is not None and result.retimed["rounds"] == 6 and result.retimed["speedup"] > 1.0
    combined = Path(result.combined_file).read_text()
    assert "bind(globals()" in combined and "step_tiles.py" in combined

    # acceptance 4: what it took (the pipelining step's "no change" is a rewrite, neither checked nor tuned)
    c = result.counts()
    assert c["model_calls"] == 10 and c["rewrites"] == 4 and (c["accepted"], c["rejected"]) == (1, 3)
    assert c["evaluations"] == 1 + 4 + fix.evaluations + 2 * 6 and c["seconds"] > 0
    assert f"10 model calls, 4 rewrites (1 accepted, 3 rejected), {c['evaluations']} evaluations" in result.summary()

    # every trial in the store; the transcript holds every exchange (replayable)
    assert {"transform original", "transform tiles", "transform split_k.fix1"} <= explicit.runs
    assert "transform split_k" not in explicit.runs and "transform pipelining" not in explicit.runs
    assert len(explicit.transcript.read_text().splitlines()) == 10
    assert json.loads((explicit.dir / "work" / "result.json").read_text())["counts"] == c


def test_scripted_answer_identical_to_the_current_kernel_is_no_change_and_the_run_finishes(explicit):
    """An answer identical to the accepted tiles file (the split-K fix's, when found): keyed by code, its
    variant replaced the accepted one and the run died at the end (KeyError 'tiles'), losing everything.
    Now the identical answer (the pipelining step's here) is "no change", rejected without being checked
    or tuned, and the tiles kernel wins."""
    result, same = explicit.result, explicit.steps["pipelining"]
    assert same.status == "rejected" and same.reason.startswith("no change"), same.reason
    assert same.evaluations == 0 and not same.tune_params
    assert result.accepted == ["tiles"] and result.kernel_source == TILES
    assert Path(result.kernel_file).read_text() == TILES and "step_tiles.py" in Path(result.combined_file).read_text()


def test_scripted_faster_rewrite_is_accepted_on_paired_rounds_and_the_headline_is_the_retime(explicit):
    """The headline speedup was the screening times' ratio while the side-by-side re-time (the one
    measured fairly) said otherwise.  A really faster rewrite (tunable tiles) must be accepted on paired
    rounds, and the headline must be the final re-time's, with its interval."""
    result, tiles = explicit.result, explicit.steps["tiles"]
    assert tiles.status == "accepted" and "paired by round over" in tiles.reason, tiles.reason
    assert result.retimed is not None and result.retimed["rounds"] == 6
    assert result.speedup == result.retimed["speedup"] > 1.0
    assert [result.speedup_lo, result.speedup_hi] == result.retimed["speedup_ci"] and result.speedup_rounds == 6
    assert (result.best_time_ms, result.original_time_ms) == (result.retimed["winner_ms"],
                                                              result.retimed["original_ms"])
    assert "paired by round over 6 rounds" in result.summary().splitlines()[0]


def test_the_transcript_replayed_through_the_cli_gives_the_same_steps_and_kernel(explicit, tmp_path, interpreter):
    """The transcript, replayed with ``--llm replay:`` through the CLI (a smaller budget: the replay
    answers by position), gives the same steps and the same kernel, with every model call answered."""
    result = explicit.result
    out, res = tmp_path / "best.py", tmp_path / "replayed.json"
    cmd = [sys.executable, "-m", "kerntune", "transform", str(DATA / "matmul_small.py"), "--shape", "32x32x32",
           "--strategy", "explicit", "--llm", f"replay:{explicit.transcript}", "--llm-transcript",
           str(tmp_path / "replayed.jsonl"), "--budget", "2", "--rep-ms", "2", "--retime-rounds", "0",
           "--workdir", str(tmp_path / "w3"), "--store", str(tmp_path / "replayed.db"), "-o", str(out),
           "--json", str(res)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr[-3000:]
    again = json.loads(res.read_text())
    assert "model calls" in proc.stdout and out.read_text() == result.kernel_source
    assert [(s["id"], s["status"]) for s in again["steps"]] == [(s.id, s.status) for s in result.steps]
    assert again["kernel_source"] == result.kernel_source and again["counts"]["model_calls"] == 10


def test_scripted_model_without_a_rule_for_one_prompt_fails_the_step_and_keeps_the_original(tmp_path, interpreter,
                                                                                           monkeypatch):
    unmeasured(monkeypatch)
    client = LLMClient(ScriptedTransformProvider(DATA / "scripted_explicit.yaml"))
    first = TritonTransformer(DATA / "matmul_small.py", SHAPE, strategy="one-prompt", llm=client, budget=2,
                              rep_ms=2, retime_rounds=0, workdir=tmp_path / "w1")
    r1 = first.run()
    assert [s.status for s in r1.steps] == ["failed"] and r1.speedup == 1.0 and r1.accepted == []
