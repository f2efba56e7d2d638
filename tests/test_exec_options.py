"""`kerntune exec`'s options and environment: an option not given leaves the KERNTUNE_AUTOTUNE_*
variable the user exported as it is; a bad option stops `kerntune exec` itself (exit 2, one line)
before the program starts, instead of turning the switch off in it; and the program's own
``sitecustomize`` still runs behind the one `kerntune exec` puts first on its PYTHONPATH."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SHOW_ENV = """
import json, os, sys
names = ("KERNTUNE_AUTOTUNE", "KERNTUNE_AUTOTUNE_BUDGET", "KERNTUNE_AUTOTUNE_STRATEGY", "KERNTUNE_AUTOTUNE_CUT")
print(json.dumps({**{k: os.environ.get(k) for k in names},
                  "user_site": getattr(sys, "user_sitecustomize_ran", False),
                  "sitecustomize": getattr(sys.modules.get("sitecustomize"), "__file__", None)}))
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNTUNE_AUTOTUNE")}
    env.update(TRITON_INTERPRET="1", **extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH", ""), str(ROOT)) if p)
    return env


def _exec(tmp_path: Path, options: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    prog = tmp_path / "prog.py"
    prog.write_text(SHOW_ENV)
    return subprocess.run([sys.executable, "-m", "kerntune", "exec", "--store", str(tmp_path / "kt.db"), *options,
                           "--", sys.executable, str(prog)], capture_output=True, text=True, env=env, timeout=600,
                          cwd=tmp_path)


def test_exec_keeps_the_users_exported_strategy_and_budget_unless_given(tmp_path: Path) -> None:
    env = _env(KERNTUNE_AUTOTUNE_BUDGET="0.5", KERNTUNE_AUTOTUNE_STRATEGY="random")
    proc = _exec(tmp_path, [], env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["KERNTUNE_AUTOTUNE"] == "1"
    assert out["KERNTUNE_AUTOTUNE_BUDGET"] == "0.5" and out["KERNTUNE_AUTOTUNE_STRATEGY"] == "random", out
    proc = _exec(tmp_path, ["--budget", "3", "--strategy", "tpe"], env)  # given: the options win
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["KERNTUNE_AUTOTUNE_BUDGET"] == "3" and out["KERNTUNE_AUTOTUNE_STRATEGY"] == "tpe", out
    proc = _exec(tmp_path, [], _env())  # neither given nor exported: the switch's own defaults apply
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["KERNTUNE_AUTOTUNE_BUDGET"] is None and out["KERNTUNE_AUTOTUNE_STRATEGY"] is None, out


@pytest.mark.parametrize("option, value", [("--budget", "0"), ("--budget", "half"), ("--cut", "0.5"),
                                           ("--runoff", "two"), ("--overlap", "maybe"), ("--strategy", "nope")])
def test_exec_refuses_a_bad_option_before_starting_the_program(tmp_path: Path, option: str, value: str) -> None:
    proc = _exec(tmp_path, [option, value], _env())
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == "", proc.stdout  # the program never ran
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kerntune: error:") and option in lines[0], proc.stderr


def test_exec_accepts_the_documented_option_values(tmp_path: Path) -> None:
    proc = _exec(tmp_path, ["--budget", "0.5", "--cut", "0", "--runoff", "auto", "--overlap", "0",
                            "--strategy", "random"], _env())
    assert proc.returncode == 0 and "retuning is off" not in proc.stderr, proc.stderr


def test_exec_runs_the_programs_own_sitecustomize_too(tmp_path: Path) -> None:
    user = tmp_path / "usersite"
    user.mkdir()
    (user / "sitecustomize.py").write_text("import sys\nsys.user_sitecustomize_ran = True\n")
    env = _env()
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(user)])
    proc = _exec(tmp_path, [], env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["KERNTUNE_AUTOTUNE"] == "1" and out["user_site"] is True, out
    assert Path(out["sitecustomize"]).resolve() == (user / "sitecustomize.py").resolve(), out
