"""CLI defects a review found, one test (or a few) each, driving ``kerntune.cli.main`` (what ``python -m kerntune``
runs) in this process, and the real ``python -m kerntune`` where a process is interrupted or runs without
root's capabilities:

1. ``tune`` printed its run id before the store row existed (a package kernel's baseline, minutes,
   came between), so a kill or Ctrl-C there left an id the store did not know, with a ``--resume``
   hint; a read-only store file was found only at the first write, after the id.
2. ``space prune/expand -o`` and ``space evaluate --json`` wrote without making the folder or
   checking the path, a traceback after all the work.
3. ``cache export -o FILE`` and ``--kernel-tuner DIR``: tracebacks for a missing folder, a folder
   given as the file, a file given as the folder.
4. The Ctrl-C hint left out ``--store`` (run as printed, it created the default store); ``--resume``
   with a mistyped ``--store`` created that store.
5. ``llm check --timeout`` was not checked (-5 or nan was blamed on the model).
6. ``tune -o K=1 -o K=2`` silently kept the last value.
7. ``space prune/expand --profile last`` (or an id prefix) was not resolved.

Real stores (SQLite files the CLI writes), the recorded spaces in examples/spaces, and the CPU kernel
file of the measuring-worker tests (tests/data/cpu_kernels.py) for a real kernel run.
"""

from __future__ import annotations

import ctypes
import json
import os
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from cli_runs import PACKAGE_ROOT, interrupt, no_llm_env, one_line
from cli_runs import run_main as run_here

ROOT = Path(__file__).resolve().parent.parent
SPACES = ROOT / "examples" / "spaces"
CONV = SPACES / "convolution_A100.json.gz"
DEDISP = SPACES / "dedispersion_A100.json.gz"
CPU_KERNELS = Path(__file__).resolve().parent / "data" / "cpu_kernels.py"


def _runs(db: Path) -> list[tuple[str, str]]:
    """(id, status) of every run in the store file ``db``."""
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT id, status FROM runs ORDER BY created").fetchall()


def _env(tmp: Path) -> dict[str, str]:
    return dict(no_llm_env(), PYTHONPATH=str(PACKAGE_ROOT), KERNTUNE_STORE=str(tmp / "store.db"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# -- 1 ---------------------------------------------------------------------------------------------------
def test_ctrl_c_during_a_kernels_baseline_prints_no_run_id_and_no_resume_hint(tmp_path: Path) -> None:
    """A kernel whose baseline (a package's own autotuning) is slow: the id was printed before it and the
    run row created after it, so Ctrl-C there left "run id: X" and "--resume X" for a run the store never
    had ("no run 'X'"), and the baseline was outside the try that ends the workers."""
    mark = tmp_path / "baseline.pid"
    kernel = tmp_path / "slow_baseline.py"
    kernel.write_text(CPU_KERNELS.read_text() + "\n\ndef baseline():\n"
                      f"    open({str(mark)!r}, 'w').write(str(os.getpid()))\n    time.sleep(3600)\n")
    store = tmp_path / "store.db"
    proc = subprocess.Popen([sys.executable, "-m", "kerntune", "tune", str(kernel), "--shape", "100", "--budget", "5",
                             "--no-report", "--store", str(store)], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(tmp_path))
    try:
        deadline = time.monotonic() + 120
        while not (mark.exists() and mark.read_text()):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the baseline never started"
            time.sleep(0.1)
        worker = int(mark.read_text())
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    lines = [line for line in err.splitlines() if line.strip()]
    assert proc.returncode == 130 and "Traceback" not in err, err
    assert "run id" not in out, out
    assert lines == ["interrupted before the run started: nothing was stored"], err
    assert not store.exists() or _runs(store) == []
    deadline = time.monotonic() + 20  # the worker running the baseline was ended, not left behind
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(worker), f"the baseline's worker {worker} outlived the interrupted tune"


_CAPS = (1, 2, 3)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER


def _drop_capabilities() -> None:
    """In the child: drop what lets root write where the mode bits say no (tests run as root)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in _CAPS:
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _mode_bits_bind(probe: Path) -> Callable[[], None] | None:
    """How to run a child so that a 0o444 file cannot be written: as is for a normal user; for root,
    with its capabilities dropped, provided that really stops the write (else skip)."""
    if os.geteuid() != 0:
        return None
    try:
        done = subprocess.run([sys.executable, "-c", f"open({str(probe)!r}, 'a')"], preexec_fn=_drop_capabilities,
                              capture_output=True)
    except (subprocess.SubprocessError, OSError):
        pytest.skip("cannot drop capabilities here")
    if done.returncode == 0:
        pytest.skip("dropping capabilities does not stop root's writes here")
    return _drop_capabilities


def test_a_read_only_store_file_is_refused_at_open_before_any_run_id(tmp_path: Path) -> None:
    """A 0o444 store in a folder that can be written: SQLite opened it and failed at the first write,
    after ``tune`` had printed a run id (and a run that was never stored); the README promises
    "cannot open store PATH: the store is read-only" with nothing written."""
    base = tmp_path / "ro"
    base.mkdir()
    os.chmod(tmp_path, 0o755)  # a capability-less root child must still reach the folder
    os.chmod(base, 0o777)
    db = base / "store.db"
    first = run_here(base, "tune", "--replay", str(CONV), "--strategy", "random", "--budget", "5", "--no-report",
                     "--store", str(db))
    assert first.returncode == 0, first.stderr
    before = _runs(db)
    for p in base.iterdir():
        p.chmod(0o444 if p == db else 0o666)
    preexec = _mode_bits_bind(db)
    proc = subprocess.run([sys.executable, "-m", "kerntune", "tune", "--replay", str(CONV), "--strategy", "random",
                           "--budget", "5", "--no-report", "--store", str(db)], cwd=base, capture_output=True,
                          text=True, env=_env(base), preexec_fn=preexec, timeout=120)
    one_line(proc, f"cannot open store {db}", "the store is read-only")
    assert "run id" not in proc.stdout, proc.stdout
    db.chmod(0o644)
    assert _runs(db) == before


# -- 2 ---------------------------------------------------------------------------------------------------
def test_space_prune_writes_its_space_and_diff_into_a_folder_that_does_not_exist_yet(tmp_path: Path) -> None:
    """``-o new/dir/p.yaml`` passed the check and crashed at the write, after the work (FileNotFoundError)."""
    proc = run_here(tmp_path, "space", "prune", "--space", str(CONV), "--rule", "-o", "new/dir/p.yaml")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "accepts:" in (tmp_path / "new/dir/p.yaml").read_text()
    assert (tmp_path / "new/dir/p.yaml.diff").read_text().strip()


def test_space_prune_refuses_a_diff_path_that_is_a_directory_before_the_work(tmp_path: Path) -> None:
    """The diff is written beside the space as OUTPUT.diff: a directory there was a traceback after the space
    had been written; now it is one line before anything is done."""
    (tmp_path / "p.yaml.diff").mkdir()
    proc = run_here(tmp_path, "space", "prune", "--space", str(CONV), "--rule", "-o", "p.yaml")
    one_line(proc, "p.yaml.diff", "is a directory")
    assert proc.stdout == "" and not (tmp_path / "p.yaml").exists()


def test_space_evaluate_checks_its_json_path_before_the_prunings_and_makes_its_folder(tmp_path: Path) -> None:
    """``--json DIR`` was a traceback after every pruning (a model's minutes); ``--json new/e.json`` too."""
    (tmp_path / "adir").mkdir()
    refused = run_here(tmp_path, "space", "evaluate", "--space", str(CONV), "--rule", "--runs", "1", "--json", "adir")
    one_line(refused, "--json adir", "is a directory")
    assert refused.stdout == ""  # refused before the prunings, whose table was printed first
    done = run_here(tmp_path, "space", "evaluate", "--space", str(CONV), "--rule", "--runs", "1", "--json",
                    "new/e.json")
    assert done.returncode == 0, done.stderr
    assert '"runs": 1' in (tmp_path / "new/e.json").read_text()


# -- 3 ---------------------------------------------------------------------------------------------------
@pytest.fixture()
def cache_store(tmp_path: Path) -> Path:
    """A store holding one winner whose run holds its trial, as ``kerntune tune`` leaves it."""
    from kerntune.evaluate.trial import Status, Trial
    from kerntune.store import Store

    db = tmp_path / "store.db"
    with Store(db) as st:
        run = st.create_run("tune", strategy="random", seed=0,
                            evaluator={"evaluator": "triton", "kernel_file": "/src/mm.py", "kernel_name": "mm"})
        st.add_trial(run, 0, "k0", Trial({"BLOCK": 64}, Status.OK, time_ms=0.5), 0.1)
        st.finish_run(run)
        st.put_best("0a1b2c3d", "64x64", "H100", "torch=2,triton=3", {"BLOCK": 64}, 0.5, run)
    return db


@pytest.mark.parametrize("args, needles", [
    (["--json", "-o", "adir"], ["--output adir", "is a directory"]),
    (["--json", "-o", "afile/x.json"], ["--output afile/x.json", "afile is a file"]),
    (["--kernel-tuner", "afile"], ["--kernel-tuner afile", "is a file, not a directory"]),
    (["--kernel-tuner", "afile/sub"], ["--kernel-tuner afile/sub", "afile is a file"]),
])
def test_cache_export_refuses_an_output_it_cannot_write_in_one_line(tmp_path: Path, cache_store: Path,
                                                                    args: list[str], needles: list[str]) -> None:
    """A folder given as the file, a path under a file, a file given as the folder: raw tracebacks before."""
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("x")
    one_line(run_here(tmp_path, "cache", "export", *args), *needles)
    assert (tmp_path / "afile").read_text() == "x"


def test_cache_export_writes_into_folders_that_do_not_exist_yet(tmp_path: Path, cache_store: Path) -> None:
    """``-o missing/x.json`` crashed (FileNotFoundError); ``--kernel-tuner`` already made its folder."""
    proc = run_here(tmp_path, "cache", "export", "--json", "-o", "missing/x.json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "missing/x.json").read_text())["entries"][0]["shape"] == [64, 64]
    kt = run_here(tmp_path, "cache", "export", "--kernel-tuner", "deep/kt")
    assert kt.returncode == 0, kt.stderr
    assert [p.name for p in (tmp_path / "deep/kt").iterdir()] == ["0a1b2c3d_64x64.json"]


# -- 4 ---------------------------------------------------------------------------------------------------
def test_ctrl_c_hint_names_a_store_that_is_not_the_default_and_runs_as_printed(tmp_path: Path) -> None:
    """"continue with: kerntune tune --resume ID" without --store looked in the default store (and created it
    empty): run as printed, the hint now continues the run in the store it was started in."""
    other = tmp_path / "my runs" / "other.db"
    rid, err, code = interrupt(tmp_path, "tune", "--replay", str(DEDISP), "--strategy", "random", "--budget", "2000",
                               "--no-report", "--retime", "0", "--store", str(other))
    assert code == 130 and rid is not None, err
    hint = err.strip().splitlines()[-1].split("continue with: ")[1]
    assert hint == f"kerntune tune --resume {rid} --store {shlex.quote(str(other))}", hint
    resumed = run_here(tmp_path, *shlex.split(hint)[1:])
    assert resumed.returncode == 0, resumed.stderr
    assert _runs(other) == [(rid, "done")]
    assert not (tmp_path / "store.db").exists()  # the default store was not created


def test_resume_hints_name_the_store_only_when_it_is_not_the_default(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The default store ($KERNTUNE_STORE, else .kerntune/kerntune.db) needs no --store in a hint (the
    Ctrl-C test of test_cli_first_contact pins that hint); any other is named, quoted for the shell."""
    from kerntune.cli.common import store_flag

    monkeypatch.setenv("KERNTUNE_STORE", str(tmp_path / "k.db"))
    assert store_flag(None) == "" and store_flag(str(tmp_path / "k.db")) == ""
    assert store_flag("a b/x.db") == " --store 'a b/x.db'"


def test_resume_with_a_store_that_is_not_there_is_refused_and_creates_nothing(tmp_path: Path) -> None:
    """``--resume ID --store typo/path.db`` created that store (and folder), then said the run was not in it."""
    proc = run_here(tmp_path, "tune", "--resume", "abc123", "--store", "typo/path.db")
    one_line(proc, "no store at typo/path.db")
    assert not (tmp_path / "typo").exists()


def test_compare_ctrl_c_hint_names_its_store_and_a_missing_store_is_refused(tmp_path: Path) -> None:
    """compare had both: its Ctrl-C hint left out --store, and ``--resume ID --store typo.db`` created the
    store before saying the run was not in it."""
    other = tmp_path / "my runs" / "cmp.db"
    rid, err, code = interrupt(tmp_path, "compare", "--space", str(DEDISP), "--strategies", "random", "--budget",
                               "100000", "--repeats", "5", "--no-report", "--store", str(other), progress=0)
    assert code == 130 and rid is not None, err
    hint = err.strip().splitlines()[-1].split("continue with: ")[1]
    assert hint == f"kerntune compare --resume {rid} --store {shlex.quote(str(other))}", hint
    missing = run_here(tmp_path, "compare", "--resume", "abc123", "--store", "typo/cmp.db")
    one_line(missing, "no store at typo/cmp.db")
    assert not (tmp_path / "typo").exists()


# -- 5 ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["-5", "nan", "0"])
def test_llm_check_refuses_a_timeout_out_of_range(tmp_path: Path, value: str) -> None:
    """``llm check --timeout -5`` (or nan) reached the model, whose failure was then blamed on it."""
    one_line(run_here(tmp_path, "llm", "check", "--llm", "cmd:true", "--timeout", value), "--timeout", value)


# -- 6 ---------------------------------------------------------------------------------------------------
def test_tune_refuses_an_option_given_twice(tmp_path: Path) -> None:
    """``-o batch_size=2 -o batch_size=8`` silently kept 8; compare and mixed spellings already refused."""
    proc = run_here(tmp_path, "tune", "--replay", str(CONV), "--strategy", "random", "-o", "batch_size=2",
                    "-o", "batch_size=8", "--budget", "5", "--no-report")
    one_line(proc, "--option 'batch_size' is given twice")


def test_compare_says_a_duplicate_option_once_and_takes_distinct_ones(tmp_path: Path) -> None:
    """parse_options now refuses a key given twice: compare's own check (per strategy) is still the one
    line said, and options of two strategies with the same name still work."""
    twice = run_here(tmp_path, "compare", "--space", str(CONV), "--strategies", "random", "-o", "random.batch_size=2",
                     "-o", "random.batch_size=3", "--budget", "5", "--repeats", "1", "--no-report")
    line = one_line(twice, "'random.batch_size' is given twice")
    assert line.count("given twice") == 1
    ok = run_here(tmp_path, "compare", "--space", str(CONV), "--strategies", "random,exhaustive",
                  "-o", "random.batch_size=2", "-o", "exhaustive.batch_size=3", "--budget", "5", "--repeats", "1",
                  "--no-report")
    assert ok.returncode == 0, ok.stderr


# -- 7 ---------------------------------------------------------------------------------------------------
def test_space_prune_resolves_profile_last_and_an_id_prefix(tmp_path: Path) -> None:
    """``--profile last`` was read as a run named "last": "run last has no trials"."""
    tuned = run_here(tmp_path, "tune", "--replay", str(CONV), "--strategy", "random", "--budget", "30", "--no-report")
    assert tuned.returncode == 0, tuned.stderr
    rid = tuned.stdout.split("run id: ")[1].split()[0]
    for profile in ("last", rid[:6]):
        proc = run_here(tmp_path, "space", "prune", "--space", str(CONV), "--rule", "--profile", profile)
        assert proc.returncode == 0 and "configs: 4,362 ->" in proc.stdout, proc.stderr
    one_line(run_here(tmp_path, "space", "prune", "--space", str(CONV), "--rule", "--profile", "zzz"), "no run 'zzz'")


def test_an_empty_kerntune_store_means_the_default_store_for_the_cli(tmp_path: Path) -> None:
    """``KERNTUNE_STORE=`` (an empty line of a launch script) opened "." and failed as a directory."""
    proc = run_here(tmp_path, "tune", "--replay", str(CONV), "--strategy", "random", "--budget", "3", "--no-report",
                    env={"KERNTUNE_STORE": ""})
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / ".kerntune" / "kerntune.db").exists()


def test_prompt_show_refuses_a_run_of_another_recording_with_the_same_parameters(tmp_path: Path) -> None:
    """A run replaying convolution_A4000 was shown as round 2 of convolution_A100 (the parameter names
    match): A4000 times under "Device: NVIDIA A100"."""
    other = CONV.parent / "convolution_A4000.json.gz"
    tuned = run_here(tmp_path, "tune", "--replay", str(other), "--strategy", "random", "--budget", "5", "--no-report")
    assert tuned.returncode == 0, tuned.stderr
    one_line(run_here(tmp_path, "prompt", "show", "--space", str(CONV), "--round", "2", "--run", "last"),
             "replayed another recording")
    same = run_here(tmp_path, "prompt", "show", "--space", str(other), "--round", "2", "--run", "last")
    assert same.returncode == 0 and "Best so far" in same.stdout, same.stderr
