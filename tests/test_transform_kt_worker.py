"""The Kernel Tuner worker's limits as the user sets them: ``--timeout`` is the limit a request gets (the
start-up allowance only where a worker starts, and named in the message), a crash or a hang costs its
config only, a hanging argument generator is reported as the generator's failure, and processes model code
starts end with the worker."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("kernel_tuner")

from kerntune.evaluate.trial import Status  # noqa: E402
from kerntune.transform.kernel import KernelSpec  # noqa: E402
from kerntune.transform.kt_backend import KernelTunerSession, WorkerFailed  # noqa: E402
from opencl import has_opencl  # noqa: E402
from processes import alive  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "transform"
NAIVE = (DATA / "matmul_naive.cl").read_text()


def test_hanging_generator_is_the_generators_failure_within_the_timeout():
    with KernelTunerSession("opencl", (32, 32), timeout_s=2, first_result_s=40, memory_mb=4096) as s:
        s._ensure()  # the worker's start has its own limit (startup_s)
        t0 = time.monotonic()
        with pytest.raises(WorkerFailed) as err:
            s.make_args(code="def make_args(problem_size):\n    while True: pass\n")
        took = time.monotonic() - t0
    assert str(err.value).startswith("the argument generator failed: no result within 2 s; worker killed")
    assert took < 20, took  # not 2 s + the 40 s allowance for a device's set-up


def test_children_of_model_code_end_with_the_worker(tmp_path):
    pidfile = tmp_path / "child.pid"
    code = ("import subprocess\n\ndef make_args(problem_size):\n"
            "    p = subprocess.Popen(['sleep', '300'])\n"
            f"    open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
            "    return [np.zeros(4, dtype=np.float32)]\n")
    with KernelTunerSession("opencl", (4,), timeout_s=30, memory_mb=4096) as s:
        s.make_args(code=code)
        pid = int(pidfile.read_text())
        assert alive(pid)
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid), "a process the model's code started outlived the worker"



@pytest.mark.skipif(not has_opencl(), reason="no OpenCL platform (install pocl-binary-distribution)")
def test_warm_worker_gets_the_timeout_alone_a_new_one_its_allowance_named_and_a_crash_or_hang_costs_one_config():
    """One session: a hang in a warm worker is given the timeout alone; then a crash (signal 11) and a hang in
    one batch each cost their config only, the hang (a new worker's first bench) given the device set-up
    allowance, named in its message, and a fresh worker measures the rest of the batch."""
    hang = NAIVE.replace("C[y * n + x] = sum;", "C[y * n + x] = sum;\n"
                         "        if (CRASH && x == 0 && y == 0) { C[((long)1 << 40) + get_global_id(0)] = 1.0f; }\n"
                         "        while (HANG && C[0] < 1e30f) { C[0] = C[0] * 1.0f + 0.0f; }")
    base = {"block_size_x": 16, "block_size_y": 16}
    spec = KernelSpec("matmul", hang, {"block_size_x": [16], "block_size_y": [16], "CRASH": [0, 1], "HANG": [0, 1]})
    with KernelTunerSession("opencl", (32, 32), iterations=3, timeout_s=3, first_result_s=40, memory_mb=4096) as s:
        s.make_args(file=DATA / "matmul_args.py")
        assert [t.status for _, t in s.bench(KernelSpec("matmul", NAIVE), [base], save_reference=True)] == [Status.OK]
        t0 = time.monotonic()
        got = dict(s.bench(spec, [dict(base, CRASH=0, HANG=1)]))
        took = time.monotonic() - t0
        assert got[0].status is Status.TIMEOUT and got[0].error.startswith("no result within 3 s; worker killed")
        assert took < 25, took  # the warm worker's device was set up: no allowance
        # the next bench is a new worker's first: the hang gets the allowance, and the message says so
        s.first_result_s = 2
        got = dict(s.bench(spec, [dict(base, CRASH=1, HANG=0), dict(base, CRASH=0, HANG=1),
                                  dict(base, CRASH=0, HANG=0)]))
        assert got[0].status is Status.RUNTIME_ERROR and "signal 11" in got[0].error
        assert got[1].status is Status.TIMEOUT
        assert "no result within 5 s (3 s plus 2 s for the new worker to set the device up)" in got[1].error
        assert got[2].status is Status.OK  # a fresh worker measured the rest of the batch
        assert s.restarts == 3
