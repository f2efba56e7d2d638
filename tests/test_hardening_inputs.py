"""Issue 22's input items, one test each (4, 12-18): real files, real SQLite stores, real
kerntune processes (every refused command runs in a process of its own; set-up runs and several
commands whose output or files are checked run the CLI's ``main`` in this process: ``run_main``).  The corpus
of ``test_bad_inputs.py`` covers the breadth; these pin the behaviour each fix promised."""

from __future__ import annotations

import csv
import gzip
import hashlib
import inspect
import json
import os
import random
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bad_inputs import kt_cache
from cli_runs import one_line, run_main
from cli_runs import run_cli as cli
from kerntune.errors import FormatError, StoreError
from kerntune.evaluate.recorded import load_recording
from kerntune.store import Store
from kerntune.store.schema import CURRENT
from kerntune.strategies import STRATEGIES, get_strategy
from kerntune.strategies.options import MODELS, validate_options

ROOT = Path(__file__).resolve().parent.parent


def write(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data))
    return path


def setup_run(tmp: Path, *args: str) -> str:
    """The run id of ``kerntune ARGS`` (a tune or compare that must succeed), run by ``run_main``.  For the runs
    whose stored trials a test checks, or that it then resumes, exports or refuses."""
    proc = run_main(tmp, *args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.split("run id: ")[1].split()[0]


def trial_rows(db: Path, rid: str) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT seq, config_key, time_ms FROM trials WHERE run_id=? ORDER BY seq", (rid,)).fetchall()


# -- item 4 ---------------------------------------------------------------------------------------------
def test_item4_a_resume_against_another_recording_or_other_options_is_refused(tmp_path) -> None:
    a = write(tmp_path / "a.json", kt_cache())
    b_data = kt_cache()
    for entry in b_data["cache"].values():
        entry["time"] *= 3   # the same kernel and parameters, other measurements
    b = write(tmp_path / "b.json", b_data)
    rid = setup_run(tmp_path, "tune", "--replay", str(a), "--budget", "8", "--no-report", "--retime", "0")
    before = trial_rows(tmp_path / "store.db", rid)
    one_line(cli(tmp_path, "tune", "--replay", str(b), "--resume", rid, "--no-report"), "cannot resume", rid)
    one_line(cli(tmp_path, "tune", "--replay", str(a), "--resume", rid, "--no-report", "-o", "population=4"),
             "cannot resume", "population")
    # The same file rewritten in place is another recording too.
    a.write_text(json.dumps(b_data))
    one_line(cli(tmp_path, "tune", "--replay", str(a), "--resume", rid, "--no-report"), "cannot resume")
    one_line(cli(tmp_path, "tune", "--resume", rid, "--no-report"), "cannot resume")  # by the id alone too
    assert trial_rows(tmp_path / "store.db", rid) == before   # nothing was mixed in
    comp = setup_run(tmp_path, "compare", "--space", str(b), "--strategies", "random", "--budget", "5",
                     "--repeats", "1", "--no-report")
    b.write_text(json.dumps(kt_cache()))
    one_line(cli(tmp_path, "compare", "--resume", comp, "--no-report"), "cannot resume")
    one_line(cli(tmp_path, "tune", "--replay", str(b), "--resume", comp, "--no-report"), "compare --resume")
    one_line(cli(tmp_path, "tune", "--resume", comp, "--no-report"), "compare --resume")
    a.unlink()
    one_line(cli(tmp_path, "tune", "--resume", rid, "--no-report"), "recording", "is gone")


def test_tune_says_what_it_needs_and_refuses_a_shape_for_a_recording(tmp_path) -> None:
    one_line(cli(tmp_path, "tune", "--no-report"), "nothing to tune", "--resume")
    a = write(tmp_path / "a.json", kt_cache())
    one_line(cli(tmp_path, "tune", "--replay", str(a), "--shape", "64x64", "--no-report"), "--shape", "recording")


# -- item 12 --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("field,value,needle", [
    ("time", -1.97, "not a time"), ("time", True, "not a time"), ("time", 0, "not a time"),
    ("compile_time", "slow", "compile_time"), ("times", 3, "times"),
])
def test_item12_bad_values_inside_a_recording_are_refused(tmp_path, field, value, needle) -> None:
    data = kt_cache()
    next(iter(data["cache"].values()))[field] = value
    with pytest.raises(FormatError, match=needle):
        load_recording(write(tmp_path / "r.json", data))


def test_item12_a_key_that_disagrees_with_its_config_overrides_nothing(tmp_path) -> None:
    data = kt_cache()
    first_key, first = next(iter(data["cache"].items()))
    data["cache"]["128,8,2"] = dict(first)   # claims another config, records the first one's values again
    proc = cli(tmp_path, "space", "info", str(write(tmp_path / "r.json", data)))
    one_line(proc, "disagrees", "128,8,2")


def test_item12_a_negative_time_never_becomes_the_optimum(tmp_path) -> None:
    data = kt_cache()
    next(iter(data["cache"].values()))["time"] = -1.97
    one_line(cli(tmp_path, "compare", "--space", str(write(tmp_path / "r.json", data)), "--budget", "5",
                 "--repeats", "1", "--strategies", "random", "--no-report"), "not a time")


# -- item 13 --------------------------------------------------------------------------------------------
def _sparse(path: Path) -> Path:
    rng = random.Random(7)
    names, vals = [f"p{i}" for i in range(8)], [1, 2, 4, 8, 16, 32, 64, 128]
    cache: dict[str, dict] = {}
    while len(cache) < 300:
        cfg = [rng.choice(vals) for _ in names]
        cache[",".join(map(str, cfg))] = {**dict(zip(names, cfg)), "time": rng.uniform(1, 10)}
    return write(path, {"tune_params_keys": names, "tune_params": {n: vals for n in names}, "cache": cache})


def test_item13_a_sparse_recording_is_its_recorded_set(tmp_path) -> None:
    path = _sparse(tmp_path / "sparse.json")
    rec = load_recording(path)
    assert rec.space.cartesian_size == 8**8 and rec.space.materialised and rec.space.count() == 300
    assert rec.space.key(rec.space.default) in rec.trials
    for strategy in ("random", "genetic", "bayes", "pattern"):
        rid = setup_run(tmp_path, "tune", "--replay", str(path), "--strategy", strategy, "--budget", "40",
                        "--no-report", "--retime", "0")
        rows = trial_rows(tmp_path / "store.db", rid)
        assert len(rows) == 40 and all(t is not None and t > 0 for _, _, t in rows), strategy
    info = cli(tmp_path, "space", "info", str(path), "--json", timeout=60)
    assert info.returncode == 0 and json.loads(info.stdout)["recorded"] == 300


# -- item 14 --------------------------------------------------------------------------------------------
def test_item14_space_info_reads_what_store_export_table_writes(tmp_path) -> None:
    rid = setup_run(tmp_path, "tune", "--replay", str(write(tmp_path / "r.json", kt_cache())), "--budget", "12",
                    "--no-report", "--retime", "0")
    assert run_main(tmp_path, "store", "export", rid, "--table", "t.json").returncode == 0
    info = run_main(tmp_path, "space", "info", "t.json", "--json")
    assert info.returncode == 0, info.stderr
    facts = json.loads(info.stdout)
    assert facts["format"] == "kerntune-table" and facts["recorded"] == 12
    assert facts["optimum_ms"] == min(t for _, _, t in trial_rows(tmp_path / "store.db", rid) if t)


def test_store_export_and_prompt_show_take_last_or_a_prefix_and_a_comparison(tmp_path) -> None:
    """A comparison exports whole: its CSV names each row's repeat, its table is the stored space's;
    ``last`` and an id prefix work as in ``report``; ``prompt show`` refuses a comparison and a run on
    another space with one line each."""
    rec = write(tmp_path / "r.json", kt_cache())
    comp = setup_run(tmp_path, "compare", "--space", str(rec), "--strategies", "random,genetic", "--budget", "6",
                     "--repeats", "2", "--no-report")
    proc = run_main(tmp_path, "store", "export", "last", "--csv", "c.csv", "--table", "t.json")
    assert proc.returncode == 0, proc.stderr
    with open(tmp_path / "c.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 24 and len({r["repeat"] for r in rows}) == 4, {r["repeat"] for r in rows}
    facts = json.loads(run_main(tmp_path, "space", "info", "t.json", "--json").stdout)
    assert facts["format"] == "kerntune-table" and 6 <= facts["recorded"] <= 24
    assert run_main(tmp_path, "store", "export", comp[:6], "--csv", "c2.csv").returncode == 0
    for wildcard in ("_", "%", comp[:3] + "_"):  # a prefix is a prefix, not a LIKE pattern
        one_line(cli(tmp_path, "store", "export", wildcard, "--csv", "w.csv"), "no run")
    assert (tmp_path / "c2.csv").read_text() == (tmp_path / "c.csv").read_text()
    one_line(cli(tmp_path, "prompt", "show", "--space", str(rec), "--round", "2", "--run", comp), "comparison",
             "repeat")
    other = kt_cache()
    other["tune_params"] = {("other_" + k): v for k, v in other["tune_params"].items()}
    other["tune_params_keys"] = list(other["tune_params"])
    other["cache"] = {k: {("other_" + f if f in kt_cache()["tune_params"] else f): v for f, v in e.items()}
                      for k, e in other["cache"].items()}
    tune = setup_run(tmp_path, "tune", "--replay", str(write(tmp_path / "o.json", other)), "--budget", "4",
                     "--no-report", "--retime", "0")
    one_line(cli(tmp_path, "prompt", "show", "--space", str(rec), "--round", "2", "--run", tune), "another space")
    shown = run_main(tmp_path, "prompt", "show", "--space", str(tmp_path / "o.json"), "--round", "2", "--run", "last")
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr


# -- item 15 --------------------------------------------------------------------------------------------
def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_item15_store_versions(tmp_path) -> None:
    db = tmp_path / "store.db"
    rid = setup_run(tmp_path, "tune", "--replay", str(write(tmp_path / "r.json", kt_cache())), "--budget", "5",
                    "--no-report", "--retime", "0")
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == CURRENT
        conn.execute("PRAGMA user_version=0")   # a store from before versioning
    with Store(db) as st:
        assert st.get_run(rid).status == "done" and len(st.trials(rid)) == 5
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == CURRENT
    conn.execute(f"PRAGMA user_version={CURRENT + 1}")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")   # all in the main file, so its bytes show any write
    conn.close()
    digest = _digest(db)
    for args in (["store", "runs"], ["store", "export", rid, "--csv", "x.csv"], ["report", rid],
                 ["tune", "--replay", "r.json", "--resume", rid, "--no-report"]):
        one_line(cli(tmp_path, *args), "newer", str(db))
    assert _digest(db) == digest
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE runs (id TEXT PRIMARY KEY, owner TEXT)")
    digest = _digest(foreign)
    one_line(cli(tmp_path, "store", "runs", "--store", str(foreign)), "not a kerntune store")
    one_line(cli(tmp_path, "tune", "--replay", "r.json", "--store", str(foreign)), "not a kerntune store")
    assert _digest(foreign) == digest
    corrupt = tmp_path / "corrupt.db"
    raw = bytearray((tmp_path / "store.db").read_bytes())
    raw[4096:12288] = bytes(8192)
    corrupt.write_bytes(bytes(raw))
    for args in (["store", "runs"], ["store", "export", rid, "--csv", "y.csv"]):
        proc = cli(tmp_path, *args, "--store", str(corrupt))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr


def test_item15_best_configs_are_written_by_column_name(tmp_path) -> None:
    db = tmp_path / "s.db"
    Store(db).close()
    with sqlite3.connect(db) as conn:
        conn.execute("ALTER TABLE best_configs ADD COLUMN note TEXT")   # an additive migration of a later version
    with Store(db) as st:
        st.put_best("k", "64", "gpu", "v", {"BX": 32}, 1.5, "run1")
        assert st.get_best("k", "64", "gpu", "v") == ({"BX": 32}, 1.5)
        assert st.iter_best()[0]["run_id"] == "run1"
    (tmp_path / "y.db").write_text("plain text, no database")
    with pytest.raises(StoreError, match="not a kerntune store"):
        Store(tmp_path / "y.db")


# -- items 16 and 17: one place for options, and it matches the strategies --------------------------------
def test_items16_17_every_strategy_option_is_modelled_and_checked() -> None:
    from kerntune.strategies.llm.rounds import _rounds

    # auto (added later) checks its own options against its engine's dataclass.
    assert set(STRATEGIES) - set(MODELS) <= {"auto"}
    for name in MODELS:
        fns = [get_strategy(name)] + ([_rounds] if name in ("llm", "llm-seeded") else [])
        params = {p.name for fn in fns for p in inspect.signature(fn).parameters.values()
                  if p.kind is p.KEYWORD_ONLY or (p.kind is p.POSITIONAL_OR_KEYWORD and p.name != "ctx")}
        fields = set(MODELS[name].model_fields)
        assert params <= fields, f"{name}: options {params - fields} are not validated"
    for bad in ({"population": 0}, {"population": 10**9}, {"mutation_rate": 5}, {"population": "abc"},
                {"tournament": 0}, {"elite": 20}):
        with pytest.raises(Exception, match="genetic"):
            validate_options("genetic", bad)
    with pytest.raises(Exception, match="kappa"):
        validate_options("bayes", {"kappa": float("nan")})
    assert validate_options("ga", {"population": 4}) == {"population": 4}


# -- item 18 --------------------------------------------------------------------------------------------
def test_item18_a_gzip_bomb_stops_at_the_cap(tmp_path) -> None:
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b'{"cache": {' + b" " * (8 * 2**20) + b"}}"))
    one_line(cli(tmp_path, "space", "info", str(bomb), env={"KERNTUNE_MAX_RECORDING_MB": "2"}),
             "decompresses to over")


def test_item18_a_fifo_is_refused_not_waited_on(tmp_path) -> None:
    os.mkfifo(tmp_path / "space.json")
    one_line(cli(tmp_path, "space", "info", "space.json", timeout=30), "not a regular file")
    one_line(cli(tmp_path, "tune", "--replay", "space.json", timeout=30), "not a regular file")


def test_item18_store_runs_on_a_mistyped_path_creates_nothing(tmp_path) -> None:
    one_line(cli(tmp_path, "store", "runs", "--store", "stroe.db"), "no store at stroe.db")
    assert not (tmp_path / "stroe.db").exists()


def test_item18_the_markdown_report_escapes_model_text(tmp_path) -> None:
    """A scripted model (a `cmd:` process printing a fixed answer) whose reason carries HTML."""
    answer = tmp_path / "answer.json"
    evil = "<script>alert(1)</script><img src=x onerror=alert(2)> [click](javascript:alert(3))"
    answer.write_text(json.dumps({"configs": [{"reasoning": evil, "config": {"BX": 32, "BY": 2, "U": 1}},
                                              {"reasoning": evil, "config": {"BX": 64, "BY": 4, "U": 2}}]}))
    rid = setup_run(tmp_path, "tune", "--replay", str(write(tmp_path / "r.json", kt_cache())), "--strategy", "llm",
                    "--llm", f"cmd:cat {answer}", "--budget", "6", "-o", "max_rounds=1", "-o", "warmup=0",
                    "--no-report", "--retime", "0")
    proc = run_main(tmp_path, "report", rid, "--md", "r.md")
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "r.md").read_text()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text   # the reason is shown, as text
    shown = text.split("<details>")[0]
    assert "<script>" not in shown and "<img" not in shown
    assert not re.search(r"(?<!\\)\]\(javascript:", shown)   # the link's bracket is escaped: no link


# -- item 16: a kernel file on a machine without torch ------------------------------------------------
def test_item16_a_kernel_file_on_a_machine_without_torch_is_one_line(tmp_path) -> None:
    """The machine is made torch-less for the subprocess: a ``torch`` package that cannot be imported
    stands first on its path, as a missing install would behave."""
    fake = tmp_path / "no_torch" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('raise ModuleNotFoundError("No module named \'torch\'", name="torch")\n')
    env = dict(os.environ, PYTHONPATH=f"{fake.parent}{os.pathsep}{ROOT}", KERNTUNE_STORE=str(tmp_path / "s.db"))
    proc = subprocess.run([sys.executable, "-m", "kerntune", "tune", str(ROOT / "examples/triton/matmul.py"),
                           "--shape", "256x256x256", "--budget", "2"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env=env)
    one_line(proc, "matmul.py", "install torch")
    broken = tmp_path / "broken.py"  # a kernel file that raises on import: named, no traceback
    broken.write_text("space = {}\nraise RuntimeError('the author left a bug here')\n")
    one_line(cli(tmp_path, "tune", str(broken), "--shape", "4", "--budget", "2"), "broken.py", "RuntimeError",
             "the author left a bug here")


def test_a_kernel_file_whose_configs_all_fail_alike_stops_early_with_one_line(tmp_path) -> None:
    """Without a GPU every config of the example matmul fails with the same error: the run stops after
    the first few instead of spending its whole budget, and says why in one line (exit 2).  The search is
    random (the stop is the tune command's, whatever the strategy): in its first batch of eight the compile
    worker's three failed start-ups (each importing torch) fail the other five at once, where the default
    strategy's smaller batches (the default config alone, then two on two cores) each try one more."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the example's configs run")
    proc = cli(tmp_path, "tune", str(ROOT / "examples/triton/matmul.py"), "--shape", "64x64x64", "--budget", "100",
               "--strategy", "random", "--no-report")
    one_line(proc, "nothing ran", "every config failed with")
    assert "the first 8 configs all failed the same way" in " ".join(proc.stdout.split()), proc.stdout


def test_first_contact_version_prune_output_and_live_model_lines(tmp_path) -> None:
    """``--version``; ``space prune -o`` refuses a name that is no space file (tune's ``-o NAME=VALUE`` typed
    there); a replayed llm run says, as it goes, when it waits for the model and ends with how far the
    recording's optimum is."""
    ver = cli(tmp_path, "--version")
    assert ver.returncode == 0 and ver.stdout.startswith("kerntune 0."), ver.stdout + ver.stderr
    one_line(cli(tmp_path, "space", "prune", "--space", str(ROOT / "examples/spaces/convolution_A100.json.gz"),
                 "--rule", "-o", "iterations=3"), "--output", "unknown file type")
    assert not (tmp_path / "iterations=3").exists()
    space = ROOT / "examples/spaces/matmul_256x8192x8192_h100.json.gz"
    transcript = ROOT / "benchmarks/llm/transcripts/matmul_256x8192x8192_h100.llm.jsonl"
    proc = cli(tmp_path, "tune", "--replay", str(space), "--strategy", "llm", "--llm", f"replay:{transcript}",
               "--budget", "100", "--no-report", "--retime", "0")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    waits = [i for i, line in enumerate(lines) if line.startswith("progress: model asked for 25 configs")]
    best = next(i for i, line in enumerate(lines) if line.startswith("best:"))
    assert waits and waits[0] < best, proc.stdout
    assert "the recording's optimum:" in proc.stdout and "note:" in proc.stderr, proc.stdout + proc.stderr


def test_resume_by_id_alone_from_another_directory_after_a_relative_recording_path(tmp_path) -> None:
    """The recording was named relative to where the run started; the store keeps it absolute."""
    start, elsewhere = tmp_path / "start", tmp_path / "elsewhere"
    start.mkdir()
    elsewhere.mkdir()
    write(start / "r.json", kt_cache())
    rid = setup_run(start, "tune", "--replay", "r.json", "--budget", "8", "--no-report", "--retime", "0")
    store = ["--store", str(start / "store.db")]
    done = cli(elsewhere, "tune", "--resume", rid, "--no-report", "--retime", "0", *store)
    assert done.returncode == 0, done.stderr
    assert "the recording's optimum" in done.stdout, done.stdout
    one_line(cli(elsewhere, "tune", "--resume", rid, "--shape", "64", "--no-report", *store), "--shape")


def test_prompt_show_of_a_later_round_is_the_stored_prompt_or_the_first_n_trials(tmp_path) -> None:
    """``prompt show --round K --run R`` prints what round K of R sent (stored), not a prompt over R's whole
    history; ``--trials N`` builds it from R's first N trials.  The model is a real ``cmd:`` program that
    answers every round with two configs it has not given before (a scripted model)."""
    from bad_inputs import VALUES

    rec = write(tmp_path / "r.json", kt_cache())
    script = tmp_path / "model.py"
    script.write_text(
        "import itertools, json, sys, pathlib\n"
        "sys.stdin.read()\n"
        "n = pathlib.Path(sys.argv[1]); k = int(n.read_text()) if n.exists() else 0; n.write_text(str(k + 2))\n"
        f"grid = list(itertools.product(*{[list(v) for v in VALUES.values()]!r}))\n"
        f"names = {list(VALUES)!r}\n"
        "print(json.dumps({'configs': [{'reasoning': 'r', 'config': dict(zip(names, g))} for g in grid[k:k + 2]]}))\n")
    rid = setup_run(tmp_path, "tune", "--replay", str(rec), "--strategy", "llm", "--budget", "9",
                    "--llm", f"cmd:{sys.executable} {script} {tmp_path / 'n'}", "-o", "llm.initial=2",
                    "-o", "llm.refine=2", "-o", "llm.patience=9", "--no-report", "--retime", "0")
    with sqlite3.connect(tmp_path / "store.db") as conn:
        stored = dict(conn.execute("SELECT round, prompt FROM llm_exchanges WHERE run_id=?", (rid,)).fetchall())
    assert {2, 3} <= set(stored), sorted(stored)
    shown = run_main(tmp_path, "prompt", "show", "--space", str(rec), "--round", "2", "--run", rid)
    assert shown.returncode == 0 and "as stored" in shown.stderr, shown.stderr
    assert shown.stdout.strip() == stored[2].strip()
    assert stored[2] != stored[3]
    first3 = run_main(tmp_path, "prompt", "show", "--space", str(rec), "--round", "2", "--run", rid, "--trials", "3")
    assert first3.returncode == 0, first3.stderr
    assert "/ 3 measured" in first3.stdout, first3.stdout
    one_line(cli(tmp_path, "prompt", "show", "--space", str(rec), "--round", "2", "--run", rid, "--trials", "0"),
             "--trials")
    # compare's spelling of an option works in tune for the run's own strategy, and only for it
    one_line(cli(tmp_path, "tune", "--replay", str(rec), "--strategy", "genetic", "--budget", "4", "-o",
                 "auto.stall=3", "--no-report"), "auto", "genetic")


def test_tune_shapes_refuses_what_it_cannot_use_and_needs_a_model_for_llm(tmp_path) -> None:
    """``tune FILE --shapes`` used to drop --ray-address, --resume and --report silently, and said
    "--strategy llm needs a model" with --llm given."""
    (tmp_path / "s.txt").write_text("64x64x64\n128x128x128\n")
    kernel = str(ROOT / "examples" / "triton" / "matmul.py")
    for extra, needle in ((["--ray-address", "local"], "--ray-address"), (["--resume", "abc"], "--resume"),
                          (["--report", "r.html"], "--report"), (["--strategy", "llm"], "needs a model")):
        one_line(cli(tmp_path, "tune", kernel, "--shapes", "s.txt", *extra), needle)
    # with --llm the model is built (a missing transcript is its error, not "needs a model")
    one_line(cli(tmp_path, "tune", kernel, "--shapes", "s.txt", "--strategy", "llm", "--llm",
                 f"replay:{tmp_path / 'none.jsonl'}"), "none.jsonl")
