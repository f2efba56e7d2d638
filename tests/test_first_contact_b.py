"""A first-time user's walkthrough, second batch: a misspelled top-level key in a space file, a
``cmd:`` model whose program is not there, ``report`` beside a store whose folder cannot be
written, what ``llm check`` reports, ``kerntune.KerntuneError``, and what ``store export`` keeps
of a replayed recording.  The CLI runs as a real ``python -m kerntune`` process on the kerntune
this test imports."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kerntune
from cli_runs import one_line, run_cli
from kerntune.errors import KerntuneError, SpaceError
from kerntune.space import load_space, space_from_dict

ROOT = Path(__file__).resolve().parent.parent
CONV = ROOT / "examples" / "spaces" / "convolution_A100.json.gz"


def cli(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    return run_cli(tmp, *args, timeout=180)


def _replay_run(store: Path) -> str:
    result = kerntune.tune(CONV, strategy="random", budget=5, seed=0, store=store, report=False)
    return result.run_id


# ------------------------------------------------------------------- 1. unknown top-level keys
SPACE = "params:\n  - {name: A, kind: choice, options: [1, 2, 4]}\n  - {name: B, kind: choice, options: [1, 2]}\n"


@pytest.mark.parametrize("extra, wrong, right", [
    ("constraint:\n  - A * B <= 4\n", "constraint", "constraints"),
    ("defaults: {A: 2}\n", "defaults", "default"),
    ("descripton: x\n", "descripton", "description"),
])
def test_a_misspelled_top_level_key_is_refused_with_the_closest_one(tmp_path, extra, wrong, right) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SPACE + extra)
    with pytest.raises(SpaceError, match=f"unknown top-level key '{wrong}'.*did you mean '{right}'"):
        load_space(path)
    line = one_line(cli(tmp_path, "space", "info", str(path)), wrong, f"did you mean '{right}'", "known keys:")
    assert "constraints" in line and "default" in line and "params" in line


def test_every_key_a_shipped_or_written_space_file_uses_is_accepted(tmp_path) -> None:
    data = {"name": "m", "description": "d",
            "params": [{"name": "A", "kind": "choice", "options": [1, 2, 4]},
                       {"name": "B", "kind": "choice", "options": [1, 2]}],
            "constraints": ["A * B <= 4"], "default": {"A": 1, "B": 1},
            # what space prune/expand read and write
            "groups": [["A", "B"]], "accepts": {}, "implicit": {}, "extensible": [],
            "note": "n", "edits": [], "pruned_from": "x.yaml", "expanded_from": "x.yaml",
            "replayed_with": "r.json", "iterations": [], "stop": "done"}
    assert space_from_dict(data).count() == 5
    # what kerntune itself writes: Space.to_dict (the store, a kerntune table, Helion's dumps)
    space = space_from_dict(data)
    assert space_from_dict(space.to_dict()).names == space.names


def test_space_prune_output_is_read_back(tmp_path) -> None:
    out = tmp_path / "pruned.yaml"
    proc = cli(tmp_path, "space", "prune", "--space", str(CONV), "--rule", "-o", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert load_space(out).params
    proc = cli(tmp_path, "space", "info", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]


# ------------------------------------------------------------------- 2. cmd: without its program
def test_a_cmd_model_whose_program_is_missing_is_refused_before_the_run(tmp_path) -> None:
    from kerntune.llm import make_provider

    with pytest.raises(KerntuneError, match="cmd: cannot run 'nonexistent_prog_xyz'"):
        make_provider("cmd:nonexistent_prog_xyz --flag")
    with pytest.raises(KerntuneError, match="cannot run"):
        make_provider(f"cmd:{tmp_path / 'no_such_model.sh'}")
    assert make_provider(f"cmd:{sys.executable} -c pass").name == "cmd"  # a program that is there
    store = tmp_path / "s.db"
    one_line(cli(tmp_path, "tune", "--replay", str(CONV), "--strategy", "llm", "--llm", "cmd:nonexistent_prog_xyz",
                 "--budget", "5", "--store", str(store)), "nonexistent_prog_xyz")
    if store.exists():  # refused before the run starts: no run, no trial
        with sqlite3.connect(store) as conn:
            assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0


# ------------------------------------------------------------------- 3. report beside a store
def test_report_says_the_default_folder_cannot_be_written_not_an_html_flag(tmp_path) -> None:
    store = tmp_path / "d" / "kerntune.db"
    _replay_run(store)
    (store.parent / "reports").write_text("not a folder")  # where the report would go by default
    line = one_line(cli(tmp_path, "report", "last", "--store", str(store)), "default", "--html PATH")
    assert "--html " + str(store.parent) not in line and "reports" in line
    assert cli(tmp_path, "report", "last", "--store", str(store), "--html", str(tmp_path / "r.html")).returncode == 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_report_of_a_read_only_store_suggests_a_path(tmp_path) -> None:
    store = tmp_path / "d" / "kerntune.db"
    _replay_run(store)
    store.parent.chmod(0o555)
    try:
        line = one_line(cli(tmp_path, "report", "last", "--store", str(store)), "permission denied", "--html PATH")
        assert "default" in line
    finally:
        store.parent.chmod(0o755)


# ------------------------------------------------------------------- 4. llm check
def _model(tmp_path: Path, answer: dict) -> str:
    path = tmp_path / "model.py"
    path.write_text(textwrap.dedent(f"""
        import sys
        sys.stdin.read()
        print({json.dumps(answer)!r})
    """))
    return f"cmd:{sys.executable} {path}"


def test_llm_check_counts_the_configs_it_asked_for_and_names_an_empty_one(tmp_path) -> None:
    proc = cli(tmp_path, "llm", "check", "--llm", _model(tmp_path, {"configs": [{"reasoning": "r", "config": {}}]}))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "valid configs: 1 of 3 asked" in proc.stdout, proc.stdout
    assert "empty" in proc.stdout and "default" in proc.stdout, proc.stdout
    # a cmd: model reports no token counts: no made-up rate
    assert "tokens/s" not in proc.stdout and "no token counts" in proc.stdout, proc.stdout


def test_llm_check_names_the_speed_figure_for_what_it_is() -> None:
    from types import SimpleNamespace

    from kerntune.cli import llm_cmd
    from kerntune.llm.types import Usage

    resp = SimpleNamespace(usage=Usage(100, 8), latency_s=6.5, text="{}", repaired=False, cached=False)
    text = llm_cmd._speed(resp, SimpleNamespace())
    assert "8 tokens in 6.5 s" in text and "prompt" in text and "tokens/s" not in text
    timed = SimpleNamespace(last_timing={"prompt_s": 6.0, "generation_s": 0.5, "tokens": 8})
    assert "then 14.0 tokens/s" in llm_cmd._speed(resp, timed)


def test_the_embedded_provider_times_its_prompt_and_its_generation_apart() -> None:
    import time

    from kerntune.llm import Message
    from kerntune.llm.providers.local import LocalModelProvider

    class FakeLlama:
        n_tokens = 20

        def create_chat_completion(self, **kwargs):  # type: ignore[no-untyped-def]
            time.sleep(0.2)  # the prompt
            for piece in ("{", "}", ""):
                yield {"choices": [{"delta": {"content": piece}, "finish_reason": None if piece else "stop"}]}
                time.sleep(0.01)

    import threading

    provider = LocalModelProvider.__new__(LocalModelProvider)  # no model file loaded: what __init__ sets
    provider.model, provider.llm = "fake", FakeLlama()
    provider._busy, provider._cancel = threading.Lock(), threading.Event()
    raw = provider.send([Message("user", "hi")], None, 0.0, 10, 30.0)
    assert raw.text == "{}" and raw.usage.output_tokens == 2
    timing = provider.last_timing
    assert timing["tokens"] == 2 and timing["prompt_s"] >= 0.2 and timing["generation_s"] < 0.2


# ------------------------------------------------------------------- 5. the public errors
def test_the_public_error_classes_are_kerntune_attributes() -> None:
    from kerntune import errors

    for name in ("KerntuneError", "SpaceError", "FormatError", "StoreError"):
        assert getattr(kerntune, name) is getattr(errors, name)
        assert name in kerntune.__all__
    with pytest.raises(kerntune.KerntuneError, match="unknown strategy"):
        kerntune.tune(CONV, strategy="no-such-strategy", budget=5)


# ------------------------------------------------------------------- 6. export keeps the workload
def test_export_of_a_replay_run_keeps_kernel_problem_size_and_device(tmp_path) -> None:
    store = tmp_path / "s.db"
    run_id = _replay_run(store)
    for flag, name in (("--table", "t.json"), ("--kernel-tuner", "c.json")):
        proc = cli(tmp_path, "store", "export", run_id, flag, name, "--store", str(store))
        assert proc.returncode == 0, proc.stderr[-2000:]
    table = json.loads((tmp_path / "t.json").read_text())["meta"]
    cache = json.loads((tmp_path / "c.json").read_text())
    assert table["kernel_name"] == cache["kernel_name"] == "convolution_kernel"
    assert table["problem_size"] == cache["problem_size"] == [4096, 4096]
    assert table["device_name"] == cache["device_name"] == "NVIDIA A100-PCIE-40GB"
    for name in ("t.json", "c.json"):
        proc = cli(tmp_path, "space", "info", name)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "kernel: convolution_kernel" in proc.stdout and "problem size: [4096, 4096]" in proc.stdout, proc.stdout


def test_a_kernel_tuner_export_writes_a_size_that_is_not_numbers_as_empty() -> None:
    """Kernel Tuner's cache loader compares problem_size item by item: a Helion run's text size, wrapped
    in a list, would make it refuse the exported cache; [] matches any size."""
    from kerntune.store.export import _kt_size

    assert _kt_size([4096, 4096]) == [4096, 4096] and _kt_size(64) == [64]
    assert _kt_size("4096x4096, 4096x4096") == [] and _kt_size(None) == [] and _kt_size([True]) == []
