"""The check of a Triton rewrite must be out of the rewrite's reach.

A rewrite's import-time code used to run in the process that then took the reference and compared
(``torch.allclose = lambda *a, **k: True`` made a launch that only zeroes its output pass).  Now the
judge (``triton_check``) never imports the variant; the harness's tripwire (``ComparisonGuard``) refuses
such patches where a variant and a comparison do share a process (the evaluator's workers); and a
worker's leftovers die with it.  Triton runs under its CPU interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("triton")

from kerntune.transform.triton_backend import TritonSession  # noqa: E402
from kerntune.transform.triton_check import judge  # noqa: E402
from processes import alive  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "triton_transform"
ORIG = (DATA / "matmul_small.py").read_text()
GOOD = (DATA / "rewrite_tiles.py").read_text()
SHAPE = (32, 32, 32)
#: the original file's kernel, with a launch that only zeroes the output
ZEROES = ORIG.split("def reference")[0].replace(
    "def launch(config, inputs):\n", "def launch(config, inputs):\n    inputs[2].zero_()\n    return inputs[2]\n\n"
    "def _unused(config, inputs):\n")
PATCH = "import torch as _t\n_t.allclose = lambda *a, **k: True\n"


@pytest.fixture
def env(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return dict(os.environ)


def session(tmp_path: Path) -> TritonSession:
    return TritonSession(DATA / "matmul_small.py", SHAPE, workdir=tmp_path, timeout_s=60, memory_mb=4096)


def _verdict(harness: Path) -> dict:
    """The judge's verdict on a harness.  The judge runs here, as it would in its own process: it never
    imports the variant (its runner process does), and one more interpreter would only repeat torch's
    import.  ``TritonSession.check`` (the judge in a process group of its own) is used where the check's
    processes are what is tested."""
    return judge(str(DATA / "matmul_small.py"), str(harness), SHAPE, {})


def test_check_rejects_a_rewrite_patching_the_comparison_at_import_and_ends_what_a_good_one_starts(tmp_path, env):
    """A rewrite that patches the comparison at import is rejected (and so is the same rewrite without the
    patch: plainly incorrect); a correct one passes, and a process it started dies with the check."""
    s = session(tmp_path)
    v = _verdict(s.write_variant("cheat", PATCH + ZEROES).harness)
    assert not v["ok"], v
    assert "torch.allclose" in v["error"]
    # the same rewrite without the patch: plainly incorrect
    v = _verdict(s.write_variant("zeroes", ZEROES).harness)
    assert not v["ok"] and v["stage"] == "compare" and "differs from the reference" in v["error"], v
    # a correct rewrite that leaves a child behind: it passes the session's check, and its child ends with it
    pidfile = tmp_path / "child.pid"
    spawn = (f"import subprocess as _sp\n_p = _sp.Popen(['sleep', '300'])\n"
             f"open({str(pidfile)!r}, 'w').write(str(_p.pid))\n")
    assert s.check(s.write_variant("spawns", spawn + GOOD))["ok"]
    pid = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid), "the variant's child outlived the check"


def _judge(tmp_path: Path, kernel_file: str) -> dict:
    """The judge on a kernel file given as the harness itself: no ``bind``, so no tripwire either."""
    path = tmp_path / "variants" / "raw.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(kernel_file)
    return _verdict(path)


SUBCLASS = """
class _Agree(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return True if func is torch.allclose else super().__torch_function__(func, types, args, kwargs or {})


def launch(config, inputs):
    return inputs[2].zero_().as_subclass(_Agree)
"""


def test_judge_compares_where_the_variant_never_ran(tmp_path, env):
    # whatever the variant does to torch in its own process, the judge's comparison is its own
    hook = ("import sys as _s\n_s.setprofile(lambda f, e, a: setattr(_t, 'allclose', lambda *x, **k: True)"
            " if f.f_code.co_name == 'compare_outputs' else None)\n")
    v = _judge(tmp_path, PATCH + hook + ZEROES + "\n\ndef reference(inputs):\n    return inputs[2]\n")
    assert not v["ok"] and v["stage"] == "compare" and "differs from the reference" in v["error"], v
    # an output that answers the comparison itself (a tensor subclass) never reaches it
    v = _judge(tmp_path, ZEROES + SUBCLASS)
    assert not v["ok"] and v["stage"] == "compare" and "cannot be compared" in v["error"], v
    assert _judge(tmp_path, GOOD)["ok"]


#: Loads each harness given (a JSON shape, then harness paths) and launches its default config, in a child
#: forked per harness from one process that has imported torch and Triton, as a worker has before it loads
#: one: a single interpreter start-up for all the cases, and each case's patches stay in its own child.
#: A child's stdout and stderr go to HARNESS.out and HARNESS.err.
LOAD_EACH = """
import json, os, sys, traceback
import torch, triton  # noqa: F401
from kerntune.evaluate.triton_backend.kernel_file import load_kernel_module
shape = tuple(json.loads(sys.argv[1]))
for harness in sys.argv[2:]:
    pid = os.fork()
    if pid == 0:
        for fd, ext in ((1, ".out"), (2, ".err")):
            os.dup2(os.open(harness + ext, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
        try:
            m = load_kernel_module(harness)
            m.launch(m.space.default, m.make_inputs(shape))
            print("LAUNCHED")
        except BaseException:
            traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    os.waitpid(pid, 0)
"""


def test_harness_tripwire_in_processes_that_import_the_variant(tmp_path, env):
    """The evaluator's workers import the harness and compare in the same process: ``bind`` refuses a
    variant that replaced a comparison function, the original's reference, or returns a subclass."""
    s = session(tmp_path)
    steal = ("import sys as _s\nfor _m in list(_s.modules.values()):\n"
             "    if getattr(_m, '__name__', '').startswith('kerntune_user_kernel_') and hasattr(_m, 'reference'):\n"
             "        _m.reference.__code__ = (lambda inputs: inputs[2]).__code__\n")
    cases = {"patch": (PATCH + ZEROES, "torch.allclose"), "steal": (steal + ZEROES, "the original's reference"),
             "subclass": (ZEROES + SUBCLASS, "subclass of torch.Tensor"),
             # the check's own module (split from the worker): its helpers are guarded too
             "norm": ("import kerntune.evaluate.triton_backend.output_check as _oc\n"
                      "_oc._relative_error = lambda *a: 0.0\n" + ZEROES, "_relative_error")}
    harnesses = {label: str(s.write_variant(label, code).harness) for label, (code, _) in cases.items()}
    subprocess.run([sys.executable, "-c", LOAD_EACH, json.dumps(SHAPE), *harnesses.values()], env=env, timeout=300,
                   check=True)
    for label, (_, expected) in cases.items():
        out, err = (Path(harnesses[label] + ext).read_text() for ext in (".out", ".err"))
        assert "LAUNCHED" not in out and expected in err, (label, err[-800:])
