"""``tune --resume`` of a ``tune --shapes`` run: one process at a time on a parent, ``--retime`` kept with the
run and checked on its resume, and the messages of a resume given ``--shape`` or a shape's own run.  Real
``kerntune`` processes on CPU kernel files (plain Python launchers in the measuring workers), real SQLite
stores."""

from __future__ import annotations

import json
from pathlib import Path

from cli_runs import one_line, run_cli
from shapes_cli import kernel_file as _kernel
from shapes_cli import rows as _rows
from shapes_cli import shapes_file as _shapes
from shapes_cli import start as _start
from shapes_cli import wait_for as _wait_for


def _status(db: Path, run_id: str) -> str:
    return _rows(db, "SELECT status FROM runs WHERE id=?", (run_id,))[0][0]


def _killed_after_first_shape(tmp: Path, *args: str) -> str:
    """A ``tune --shapes`` run SIGKILLed once its first shape is done and its second has a trial: its id."""
    db = tmp / "store.db"
    proc, parent = _start(tmp, *args)
    try:
        _wait_for(proc, db, parent, done=1, trials=1)
    finally:
        proc.kill()
        proc.communicate(timeout=60)
    return parent


def test_a_second_process_on_a_live_shapes_run_is_refused_and_the_run_keeps_its_budget(tmp_path: Path) -> None:
    """Two processes on one ``--shapes`` run (a resume of a run still alive, or two resumes) both tuned every
    shape left: each measured twice (20 trials for a budget of 12), duplicate children, the last writer won
    the dispatch entry; a second process refused on a child's lock marked the live parent failed.  Now the
    parent is held for the whole run: a second process, with or without ``--shapes``, gets one line and
    touches nothing, and the first finishes within its budget with one child per shape."""
    kernel = _kernel(tmp_path, "held_sum", sleep=0.05)
    shapes = _shapes(tmp_path, "1000\n2000\n4000\n")
    db = tmp_path / "store.db"
    proc, parent = _start(tmp_path, str(kernel), "--shapes", str(shapes), "--budget", "12", "--strategy", "random",
                          "--retime", "0")
    try:
        _wait_for(proc, db, parent, done=0, trials=1)
        for extra in ([], [str(kernel), "--shapes", str(shapes)]):
            one_line(run_cli(tmp_path, "tune", "--resume", parent, *extra, timeout=300),
                     f"run {parent} is in use by another kerntune process")
            assert proc.poll() is None, "the first process ended before the second was refused"
            assert _status(db, parent) == "running"
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err[-3000:]
    labels = [label for (label,) in _rows(db, "SELECT label FROM runs WHERE parent_id=?", (parent,))]
    assert sorted(labels) == ["shapes 1000", "shapes 2000", "shapes 4000"]
    [(trials,)] = _rows(db, "SELECT count(*) FROM trials t JOIN runs r ON t.run_id=r.id WHERE r.parent_id=?",
                        (parent,))
    assert trials == 12
    assert _status(db, parent) == "done"


def test_retime_is_kept_with_a_shapes_run_and_its_resume_keeps_or_checks_it(tmp_path: Path) -> None:
    """``--retime`` was neither stored with a ``--shapes`` run nor checked on its resume: a run started with
    ``--retime 0`` and resumed without it re-timed the shapes left (the default 16), so one dispatch table
    mixed re-timed and screening-only winners, and a resume typed with another ``--retime`` was taken.  Now
    the parent keeps it: a resume without ``--retime`` uses the run's own, one with another is refused."""
    kernel = _kernel(tmp_path, "retime_sum", sleep=0.02)
    shapes = _shapes(tmp_path, "1000\n2000\n")
    db = tmp_path / "store.db"
    parent = _killed_after_first_shape(tmp_path, str(kernel), "--shapes", str(shapes), "--budget", "8",
                                       "--strategy", "random", "--retime", "0")
    one_line(run_cli(tmp_path, "tune", "--resume", parent, "--retime", "16"),
             f"cannot resume {parent}: it was started with --retime 0, not 16")
    resumed = run_cli(tmp_path, "tune", "--resume", parent, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "(re-timed)" not in resumed.stderr and "over the default config" not in resumed.stderr, resumed.stderr
    summaries = [json.loads(s)["shape_result"] for (s,) in
                 _rows(db, "SELECT summary_json FROM runs WHERE parent_id=?", (parent,))]
    assert len(summaries) == 2 and not any(s["retimed"] for s in summaries)
    again = run_cli(tmp_path, "tune", "--resume", parent, "--retime", "0", timeout=300)  # the run's own: taken
    assert again.returncode == 0, again.stderr[-3000:]


def test_a_new_shapes_run_keeps_the_default_retime_and_a_single_shape_still_retimes(tmp_path: Path) -> None:
    """``--retime`` is None where it is not typed (so that a resume can tell): a new ``--shapes`` run stores
    the default 16 and re-times, as a single shape's ``tune`` still does by default."""
    kernel = _kernel(tmp_path, "default_sum")
    shapes = _shapes(tmp_path, "1000\n")
    out = run_cli(tmp_path, "tune", str(kernel), "--shapes", str(shapes), "--budget", "2", "--strategy", "random",
                  timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    [(options,)] = _rows(tmp_path / "store.db", "SELECT options_json FROM runs WHERE kind='shapes'")
    assert json.loads(options)["retime"] == 16
    assert "(re-timed)" in out.stderr, out.stderr[-2000:]
    single = run_cli(tmp_path, "tune", str(kernel), "--shape", "1000", "--budget", "2", "--strategy", "random",
                     "--no-report", timeout=300)
    assert single.returncode == 0, single.stderr[-3000:]
    assert "re-timed" in single.stdout + single.stderr, (single.stdout + single.stderr)[-2000:]


def test_a_resume_of_a_shapes_run_given_shape_or_of_its_shape_given_shapes_says_what_to_do(tmp_path: Path) -> None:
    """``tune --resume PARENT --shape 1000`` said "--shapes needs a kernel file and no --shape or --replay",
    though --shapes was not typed; ``tune --resume CHILD --shapes FILE`` said to continue it without
    --shapes, and that then said to resume the parent.  Now the first says a --shapes run takes no --shape
    and the second names the parent at once."""
    kernel = _kernel(tmp_path, "msg_sum")
    shapes = _shapes(tmp_path, "1000\n2000\n")
    out = run_cli(tmp_path, "tune", str(kernel), "--shapes", str(shapes), "--budget", "2", "--strategy", "random",
                  "--retime", "0", timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    [(parent,)] = _rows(tmp_path / "store.db", "SELECT id FROM runs WHERE kind='shapes'")
    child = _rows(tmp_path / "store.db", "SELECT id FROM runs WHERE parent_id=?", (parent,))[0][0]
    line = one_line(run_cli(tmp_path, "tune", "--resume", parent, "--shape", "1000"),
                    f"run {parent} is a --shapes run: it takes no --shape")
    assert "needs a kernel file" not in line
    line = one_line(run_cli(tmp_path, "tune", "--resume", child, "--shapes", str(shapes)),
                    f"run {child} is one shape of the --shapes run {parent}", f"kerntune tune --resume {parent}")
    assert "without --shapes" not in line
