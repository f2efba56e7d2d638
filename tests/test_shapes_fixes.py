"""``tune --shapes``: a killed run resumes (with the ``--retime`` it was started with), the package's own
choice is measured and the winner re-timed, every shape is checked before anything is tuned, a run where
nothing ran says why, a file with a BOM is read.  Real processes on CPU kernel files (plain Python
launchers in the measuring workers; a refused command runs ``kerntune.cli.main`` in this process), real
SQLite stores; the recorded H100 matmul spaces for the
in-process resume."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from cli_runs import one_line, run_cli, run_main
from kerntune.errors import KerntuneError
from shapes_cli import kernel_file as _kernel
from shapes_cli import rows as _rows
from shapes_cli import shapes_file as _shapes
from shapes_cli import start, wait_for

ROOT = Path(__file__).resolve().parents[1]


def _refused(tmp: Path, *args: str, needles: tuple[str, ...]) -> str:
    """``one_line`` of ``kerntune ARGS`` refused, run as ``run_cli`` runs it but in this process
    (``cli_runs.run_main``): a refusal is checked before any worker or store exists, so the process
    boundary is not what is tested (an uncaught error raises here instead of exiting 2)."""
    return one_line(run_main(tmp, *args), *needles)


def _children(db: Path, parent: str) -> dict[str, list[tuple]]:
    """Each child's label -> its trials (seq, config key, status, time), in order."""
    out = {}
    for run_id, label in _rows(db, "SELECT id, label FROM runs WHERE parent_id=?", (parent,)):
        out[label] = _rows(db, "SELECT seq, config_key, status, time_ms FROM trials WHERE run_id=? ORDER BY seq",
                           (run_id,))
    return out


def test_a_sigkilled_shapes_run_resumes_with_its_own_retime_and_measures_no_finished_shape_or_trial_twice(
        tmp_path: Path) -> None:
    """A killed ``tune --shapes`` could not be resumed (``--resume`` was refused with ``--shapes``) and a
    rerun measured every finished shape again.  Now the run is a parent whose id is printed first; killed
    with SIGKILL during its second shape, ``tune --resume ID`` keeps the finished shape as it is, takes the
    interrupted shape's stored trials in and stays within the budget (a shape not started yet is tuned on
    a resume too: the in-process test below); one shape's run resumed alone is pointed at its parent.

    ``--retime`` was neither stored with a ``--shapes`` run nor checked on its resume: a run started with
    ``--retime 0`` and resumed without it re-timed the shapes left (the default 16), so one dispatch table
    mixed re-timed and screening-only winners, and a resume typed with another ``--retime`` was taken.  Now
    the parent keeps it: a resume without ``--retime`` uses the run's own, one with another is refused."""
    kernel = _kernel(tmp_path, "slow_sum", sleep=0.02)
    shapes = _shapes(tmp_path, "1000\n2000\n")
    db = tmp_path / "store.db"
    proc, parent = start(tmp_path, str(kernel), "--shapes", str(shapes), "--budget", "8", "--strategy", "random",
                         "--retime", "0")
    try:
        wait_for(proc, db, parent, done=1, trials=1)  # into the second shape's trials
        proc.kill()
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    before = _children(db, parent)
    finished = {label: trials for label, trials in before.items()
                if _rows(db, "SELECT status FROM runs WHERE parent_id=? AND label=?", (parent, label))[0][0] == "done"}
    assert len(finished) == 1 and len(before) == 2
    child = _rows(db, "SELECT id FROM runs WHERE parent_id=?", (parent,))[0][0]  # one shape alone: its parent's
    _refused(tmp_path, "tune", "--resume", child, needles=(f"kerntune tune --resume {parent}",))
    _refused(tmp_path, "tune", "--resume", parent, "--retime", "16",
             needles=(f"cannot resume {parent}: it was started with --retime 0, not 16",))

    resumed = run_cli(tmp_path, "tune", "--resume", parent[:6], timeout=300)  # no --retime: the run's own
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert resumed.stdout.startswith(f"run id: {parent} ")
    after = _children(db, parent)
    assert len(after) == 2
    for label, trials in finished.items():  # a finished shape: not one trial more
        assert after[label] == trials
    for label, trials in before.items():    # the interrupted shape: its stored trials kept, none measured again
        assert after[label][:len(trials)] == trials
    for trials in after.values():
        keys = [key for _, key, _, _ in trials]
        assert len(keys) == len(set(keys))
    assert sum(len(t) for t in after.values()) <= 8
    assert sorted(k for (k,) in _rows(db, "SELECT problem_key FROM best_configs")) == ["1000", "2000"]
    assert _rows(db, "SELECT status FROM runs WHERE id=?", (parent,)) == [("done",)]
    assert "(tuned before the resume)" in resumed.stderr
    assert "(re-timed)" not in resumed.stderr and "over the default config" not in resumed.stderr, resumed.stderr
    summaries = [json.loads(s)["shape_result"] for (s,) in
                 _rows(db, "SELECT summary_json FROM runs WHERE parent_id=?", (parent,))]
    assert len(summaries) == 2 and not any(s["retimed"] for s in summaries)
    again = run_cli(tmp_path, "tune", "--resume", parent, "--retime", "0", timeout=300)  # the run's own: taken
    assert again.returncode == 0, again.stderr[-3000:]


def test_sigterm_on_a_shapes_run_says_how_to_resume_and_a_resume_refuses_other_settings(
        tmp_path: Path) -> None:
    """After SIGTERM (or Ctrl-C) ``--shapes`` exited 130 with no run id, no "interrupted" and no hint.  Now it
    says how to continue, as ``tune`` does; a resume given another budget, kernel or shapes is refused."""
    kernel = _kernel(tmp_path, "sum_term", sleep=0.02)
    shapes = _shapes(tmp_path, "1000\n2000\n")
    proc, parent = start(tmp_path, str(kernel), "--shapes", str(shapes), "--budget", "20", "--strategy", "random",
                         "--retime", "0")
    try:
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err[-2000:]
    assert f"continue with: kerntune tune --resume {parent}" in err and "interrupted after" in err, err[-2000:]
    assert "Traceback" not in err
    _refused(tmp_path, "tune", "--resume", parent, "--budget", "30",
             needles=("--budget 20, not 30",))
    other = _kernel(tmp_path, "other_sum")
    _refused(tmp_path, "tune", str(other), "--resume", parent, needles=("other_sum.py",))
    _refused(tmp_path, "tune", str(kernel), "--shapes",
             str(_shapes(tmp_path, "1000\n", "one.txt")), "--resume", parent, needles=("one.txt",))


def test_scripted_package_choice_is_measured_first_and_wins_the_dispatch_entry(tmp_path: Path) -> None:
    """``--shapes`` never measured a package kernel's own choice (``baseline()``) nor re-timed its winner,
    so the dispatch table could hold a config slower than the package's own.  A kernel file whose scripted
    ``baseline()`` is its fastest config: it is measured first, and it is the shape's entry."""
    kernel = _kernel(tmp_path, "pkg_sum", extra="def baseline():\n    return {'work': 1, 'unroll': 1}\n")
    shapes = _shapes(tmp_path, "200000\n")
    out = run_cli(tmp_path, "tune", str(kernel), "--shapes", str(shapes), "--budget", "3", "--strategy", "random",
                  timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    db = tmp_path / "store.db"
    entries = _rows(db, "SELECT problem_key, config_json FROM best_configs")
    assert [(k, json.loads(c)) for k, c in entries] == [("200000", {"work": 1, "unroll": 1})]
    first = _rows(db, "SELECT config_json, source FROM trials WHERE seq=0")
    assert [(json.loads(c), s) for c, s in first] == [({"work": 1, "unroll": 1}, "warm-start")]
    assert "(re-timed)" in out.stderr and "over the package's own choice" in out.stderr, out.stderr[-2000:]


def test_shapes_refuses_device_and_source_as_the_single_shape_does(
        tmp_path: Path) -> None:
    """--device and --source describe a replayed space; with --shapes they were accepted and ignored."""
    kernel = _kernel(tmp_path, "plain_sum")
    shapes = _shapes(tmp_path, "1000\n")
    for extra in (["--device", "NVIDIA H100"], ["--source", str(kernel)]):
        _refused(tmp_path, "tune", str(kernel), "--shapes", str(shapes), "--budget", "1",
                 "--retime", "0", *extra, needles=("--replay",))
    assert not (tmp_path / "store.db").exists()


def test_a_shape_the_kernel_file_rejects_is_refused_before_any_shape_is_tuned(
        tmp_path: Path) -> None:
    """A shape whose ``flops()`` raised was found only at its turn, after the shapes before it were tuned.
    Every shape is checked first: the message names the shapes file's line, and no store is made."""
    kernel = _kernel(tmp_path, "picky_sum", extra="def flops(shape):\n    n, = shape\n    if n % 1000:\n"
                                                  "        raise ValueError('n must be a multiple of 1000')\n"
                                                  "    return 2.0 * n\n")
    shapes = _shapes(tmp_path, "1000\n# a comment\n1500\n")
    line = _refused(tmp_path, "tune", str(kernel), "--shapes", str(shapes), "--budget", "4",
                    needles=("shapes.txt:3", "1500", "multiple of 1000"))
    assert "--shape " not in line
    assert not (tmp_path / "store.db").exists()


def test_every_config_failing_in_every_shape_exits_2_with_the_error(tmp_path: Path) -> None:
    """When every config of every shape failed, --shapes exited 0 and said "within 2% of it after None".
    Now each shape says its error, and the command ends with exit code 2 and the error."""
    kernel = _kernel(tmp_path, "broken_sum", extra="def launch(config, inputs):\n"
                                                   "    raise RuntimeError('CUDA error: no kernel image')\n")
    shapes = _shapes(tmp_path, "1000\n")
    out = run_cli(tmp_path, "tune", str(kernel), "--shapes", str(shapes), "--budget", "2", "--strategy", "random",
                  timeout=300)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "None" not in out.stdout + out.stderr
    assert "1000: no config ran in 2/2 evaluations; every config failed with: RuntimeError: CUDA error: no kernel" \
        " image" in out.stderr, out.stderr
    assert out.stderr.strip().splitlines()[-1] == ("kerntune: error: nothing ran in any shape; every config failed"
                                                   " with: RuntimeError: CUDA error: no kernel image")


def test_a_shapes_file_with_a_utf8_byte_order_mark_is_read(tmp_path: Path) -> None:
    """An editor's UTF-8 BOM made the first line "\\ufeff1000" and the file was refused."""
    from kerntune.run.shapes import read_shapes

    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbf1000\r\n2000\r\n")
    assert read_shapes(path) == [(1000,), (2000,)]


def test_tune_shapes_with_a_parent_reads_finished_shapes_back_on_resume(tmp_path: Path) -> None:
    """In process, on the recorded H100 matmuls: a parent interrupted at its third shape resumes with the
    first two read back (no trial added, their evaluations charged to the budget) and the third tuned."""
    from kerntune.evaluate import ReplayEvaluator
    from kerntune.run.shapes import create_parent, tune_shapes
    from kerntune.store import Store

    files = {(4096, 4096, 4096): "matmul_4096_h100", (8192, 8192, 512): "matmul_8192x8192x512_h100",
             (256, 8192, 8192): "matmul_256x8192x8192_h100"}
    made: list[tuple] = []

    def evaluator(shape: tuple) -> ReplayEvaluator:
        made.append(shape)
        if len(made) == 3 and stop:
            raise KeyboardInterrupt
        return ReplayEvaluator.from_file(ROOT / "examples" / "spaces" / f"{files[shape]}.json.gz")

    store = Store(tmp_path / "kt.db")
    parent = create_parent(store, "replay", {"evaluator": "replay"}, list(files), "random", 0, 30)
    stop = True
    with pytest.raises(KeyboardInterrupt):
        tune_shapes(evaluator, list(files), "random", 30, store, seed=0, parent_id=parent)
    assert store.get_run(parent).status == "interrupted"
    before = {c.label: len(store.trials(c.id)) for c in store.child_runs(parent)}
    assert len(before) == 2
    stop, made[:] = False, []
    results = tune_shapes(evaluator, list(files), "random", 30, store, seed=0, parent_id=parent)
    assert len(made) == 1 and [r.earlier for r in results] == [True, True, False]
    assert {c.label: len(store.trials(c.id)) for c in store.child_runs(parent) if c.label in before} == before
    assert sum(r.evaluations for r in results) == 30 and all(r.best_config for r in results)
    assert store.get_run(parent).status == "done"


def test_report_of_a_shapes_run_names_its_shapes_runs(tmp_path: Path) -> None:
    """``kerntune report last`` after ``tune --shapes`` found the parent run, which holds no trial of its
    own: the report came out empty.  It says which run holds each shape instead."""
    from kerntune.evaluate import ReplayEvaluator
    from kerntune.report.data import load_report
    from kerntune.run.shapes import create_parent, tune_shapes
    from kerntune.store import Store

    files = {(4096, 4096, 4096): "matmul_4096_h100", (256, 8192, 8192): "matmul_256x8192x8192_h100"}
    store = Store(tmp_path / "kt.db")
    parent = create_parent(store, "replay", {"evaluator": "replay"}, list(files), "random", 0, 10)
    tune_shapes(lambda s: ReplayEvaluator.from_file(ROOT / "examples" / "spaces" / f"{files[s]}.json.gz"),
                list(files), "random", 10, store, seed=0, parent_id=parent)
    with pytest.raises(KerntuneError, match="tune --shapes") as err:
        load_report(store, parent)
    for child in store.child_runs(parent):
        assert child.id in str(err.value)
    assert "256x8192x8192" in str(err.value) and "4096x4096x4096" in str(err.value)
