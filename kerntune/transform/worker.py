"""The worker process: the only place generated code is compiled and run.

``python -m kerntune.transform.worker`` reads one JSON request per line on stdin and
answers JSON lines on its own stdout (Kernel Tuner's and the compilers' prints go to
stderr).  It runs under the limits the parent passes in ``KERNTUNE_TRANSFORM_LIMITS``:
an address-space (or data) limit set with ``resource.setrlimit`` before anything is
imported, no core files; the parent kills it (its whole process group) when a request
takes longer than its time limit, and starts a fresh one.

Requests:
- ``inputs``: run ``make_args(problem_size)`` from a file or from model-written code, save
  the arguments (``correctness.save_args``);
- ``bench``: compile, check and time configs of one kernel through Kernel Tuner's
  ``tune_kernel`` with a strategy object that runs exactly the given configs, one result
  line per config as it ends; with ``save_outputs`` (the original kernel) the first correct run's
  outputs are saved as the reference, and every further config is compared with them.  A C
  function's time is this process's clock around each call (``wall_clock``), never the number the
  function returns.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
import traceback
from typing import Any, Callable

LIMITS_ENV = "KERNTUNE_TRANSFORM_LIMITS"


def _lower(which: int, soft: int, hard: int) -> None:
    """Set a limit, never above the one the worker inherited: raising a hard limit needs privileges, and a
    parent that already set a tighter limit meant it."""
    cur_soft, cur_hard = resource.getrlimit(which)
    if cur_hard != resource.RLIM_INFINITY:
        hard = min(hard, cur_hard)
        soft = min(soft, hard)
    resource.setrlimit(which, (soft, hard))


def apply_limits(limits: dict[str, Any]) -> None:
    mb = int(limits.get("memory_mb") or 0)
    if mb > 0:
        which = resource.RLIMIT_AS if limits.get("memory_kind", "as") == "as" else resource.RLIMIT_DATA
        _lower(which, mb << 20, mb << 20)
    cpu = int(limits.get("cpu_s") or 0)
    if cpu > 0:
        _lower(resource.RLIMIT_CPU, cpu, cpu + 5)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


class GivenConfigs:
    """A Kernel Tuner strategy object (``tune_kernel(strategy=...)``) that runs the given configs
    in order and reports each through ``report(index, result, exception, verdict)``.

    Kernel Tuner's own budget is replaced by an unbounded one: the parent's kerntune search
    decides what is measured; configs a device cannot launch come back as InvalidConfig.
    """

    def __init__(self, configs: list[dict[str, Any]], verdicts: list[Any],
                 report: Callable[[int, Any, BaseException | None, Any], None]) -> None:
        self.configs, self.verdicts, self.report = configs, verdicts, report
        self.done: set[int] = set()
        self.max_threads: int | None = None

    def tune(self, searchspace: Any, runner: Any, tuning_options: Any) -> list[dict[str, Any]]:
        from kernel_tuner import util

        tuning_options["budget"] = util.TuningBudget(None, None)
        self.max_threads = getattr(getattr(runner, "dev", None), "max_threads", None)
        names = list(tuning_options.tune_params)
        results = []
        for i, cfg in enumerate(self.configs):
            self.verdicts.clear()
            try:
                r = runner.run([tuple(cfg[n] for n in names)], tuning_options)[0]
            except Exception as exc:  # a compile or launch error Kernel Tuner re-raises
                self.done.add(i)
                self.report(i, None, exc, None)
                continue
            self.done.add(i)
            results.append(r)
            self.report(i, r, None, self.verdicts[-1] if self.verdicts else None)
        return results


def _status_of(result: dict[str, Any] | None, exc: BaseException | None, verdict: Any) -> tuple[str, str]:
    if exc is not None:
        text = f"{type(exc).__name__}: {exc}"
        low = text.lower()
        compile_words = ("build", "compil", "nvrtc", "nvcc", "syntax", "undeclared", "error:")
        status = "compile_error" if verdict is None and any(w in low for w in compile_words) else "runtime_error"
        return status, text[:3000]
    assert result is not None
    err = result.get("__error__")
    if err is not None:
        name = type(err).__name__
        return {"InvalidConfig": "invalid", "CompilationFailedConfig": "compile_error"}.get(name, "runtime_error"), \
            {"InvalidConfig": "Kernel Tuner: invalid config (e.g. more threads per block than the device allows)",
             "CompilationFailedConfig": "Kernel Tuner: compilation failed (e.g. shared memory over the limit)",
             }.get(name, f"Kernel Tuner: {name}")
    if verdict is not None and not verdict[0]:
        return "wrong_result", verdict[1]
    t = result.get("time")
    if not isinstance(t, (int, float)) or not t > 0:
        # Kernel Tuner's C backend times nothing itself: a C function returns its own time in ms
        return "runtime_error", f"no positive time measured ({t!r}; a C function must return its time in ms)"
    return "ok", ""


def wall_clock() -> Any:
    """A Kernel Tuner observer timing each benchmark iteration's call with this process's clock
    (``wall_time``/``wall_times``, ms).

    Why: Kernel Tuner's C backend takes as the time whatever the C function returns, and a rewrite's C
    code is the model's: one ending ``return 0.0001f * UNUSED_SCALE;`` was accepted at 9093x.  With no
    asynchronous launch in C, the time from ``before_start`` to ``after_start`` is the call itself."""
    from kernel_tuner.observers.observer import BenchmarkObserver

    class WallClock(BenchmarkObserver):
        def __init__(self) -> None:
            self.times: list[float] = []
            self.t0 = 0.0

        def before_start(self) -> None:
            self.t0 = time.perf_counter()

        def after_start(self) -> None:
            self.times.append((time.perf_counter() - self.t0) * 1000.0)

        def get_results(self) -> dict[str, Any]:
            times, self.times = self.times, []
            return {"wall_time": sum(times) / len(times) if times else None, "wall_times": times}

    return WallClock()


def bench(req: dict[str, Any], emit: Callable[[dict[str, Any]], None]) -> None:
    import numpy as np

    import kernel_tuner
    from kerntune.transform.correctness import compare, load_args, load_outputs, save_outputs
    from kerntune.transform.kernel import divisor_function

    spec, configs = req["kernel"], req["configs"]
    args = load_args(req["args"])
    # the C backend runs on the host arrays themselves: outputs are found against untouched copies
    pristine = [a.copy() if isinstance(a, np.ndarray) else a for a in args] if not req.get("reference") else args
    reference = load_outputs(req["reference"]) if req.get("reference") else None
    tolerances = req.get("tolerances") or None
    names = list(spec["tune_params"]) or list(configs[0])
    tune_params = {n: list(dict.fromkeys(c[n] for c in configs)) for n in names}
    verdicts: list[Any] = []
    save_path = req.get("save_outputs")
    saved: list[Any] = []  # the reference the original's first config saved, once loaded

    def verify(answer: Any, result_host: list[Any], atol: Any = None) -> bool:
        outs = [np.array(r) if isinstance(r, np.ndarray) else None for r in result_host]
        if reference is None:
            # the original kernel: its outputs are the arrays it changed; only those are kept and compared
            changed = [o if o is not None and not np.array_equal(o, pristine[i]) else None for i, o in enumerate(outs)]
            if all(c is None for c in changed):
                verdicts.append((False, "the original kernel changed none of its array arguments: no output to "
                                        "compare (outputs must start different from their results, e.g. zeros)", 0.0))
                return True
            if save_path and os.path.exists(save_path):
                # a further config of the original: its configs must agree with the first one's outputs, the
                # reference (an UNROLL that dropped the loop's remainder was the baseline, and every correct
                # rewrite was rejected)
                if not saved:
                    saved.append(load_outputs(save_path))
                ok, why, err = compare(saved[0], outs, tolerances)
                verdicts.append((ok, why and f"{why} (the reference: the output of the original kernel's first"
                                             " config that ran)", err))
                return True
            if save_path:
                save_outputs(changed, save_path)
            verdicts.append((True, "", 0.0))
        else:
            verdicts.append(compare(reference, outs, tolerances))
        return True  # never raise inside Kernel Tuner: the verdict travels with the result

    def report(i: int, result: Any, exc: BaseException | None, verdict: Any) -> None:
        status, error = _status_of(result, exc, verdict)
        line: dict[str, Any] = {"id": req["id"], "i": i, "status": status, "error": error or None}
        if result is not None:
            line["compile_s"] = float(result.get("compile_time") or 0) / 1000
            line["bench_s"] = (float(result.get("benchmark_time") or 0) + float(result.get("verification_time") or 0)) / 1000
            if status == "ok" and req.get("lang") == "C":  # the worker's clock, not the C function's answer
                if not result.get("wall_time"):
                    line["status"], line["error"] = "runtime_error", "no time measured"
                else:
                    line["time_ms"] = float(result["wall_time"])
                    line["times_ms"] = [float(t) for t in result.get("wall_times") or []]
            elif status == "ok":
                line["time_ms"] = float(result["time"])
                line["times_ms"] = [float(t) for t in result.get("times") or []]
        if verdict is not None:
            line["max_abs_err"] = verdict[2] if np.isfinite(verdict[2]) else None
        emit(line)

    strategy = GivenConfigs(configs, verdicts, report)
    kwargs: dict[str, Any] = {}
    for axis, exprs in (spec.get("grid_div") or {}).items():
        kwargs[f"grid_div_{axis}"] = divisor_function(exprs, names)
    if req.get("compiler_options"):
        kwargs["compiler_options"] = list(req["compiler_options"])
    if req.get("lang") == "OpenCL":
        kwargs["platform"] = int(req.get("platform") or 0)
    if req.get("lang") == "C":
        kwargs["observers"] = [wall_clock()]
    # An answer list marks which arguments Kernel Tuner copies back for ``verify`` (all arrays for the
    # original kernel, then only its outputs); passing none trips Kernel Tuner 1.5 when CuPy is not
    # installed.  Its contents are never compared.
    answer = [np.zeros_like(a) if isinstance(a, np.ndarray) and (
        reference is None or (i < len(reference) and reference[i] is not None)) else None for i, a in enumerate(args)]
    env: dict[str, Any] = {}
    try:
        _, env = kernel_tuner.tune_kernel(
            spec["name"], spec["source"], tuple(req["problem_size"]), args, tune_params, lang=req["lang"],
            iterations=int(req.get("iterations") or 7), answer=answer, verify=verify, strategy=strategy, quiet=True,
            verbose=False, device=int(req.get("device") or 0), **kwargs)
    except Exception as exc:
        text = f"{type(exc).__name__}: {exc}"
        if "max_fevals must be greater than zero" in text:
            status, text = "invalid", "no config fits the device (threads per block over its limit)"
        else:
            status = "compile_error" if isinstance(exc, TypeError) or "argument" in text.lower() else "runtime_error"
        for i in range(len(configs)):
            if i not in strategy.done:
                emit({"id": req["id"], "i": i, "status": status, "error": text[:3000]})
    device = env.get("device_name") or ("host CPU (Kernel Tuner's C backend)" if req.get("lang") == "C" else None)
    emit({"id": req["id"], "done": True, "device_name": device, "max_threads": strategy.max_threads})


def inputs(req: dict[str, Any], emit: Callable[[dict[str, Any]], None]) -> None:
    from kerntune.transform.correctness import run_generator, save_args

    args = run_generator(req["problem_size"], req.get("file"), req.get("code"))
    manifest = save_args(args, req["out"])
    emit({"id": req["id"], "done": True, "ok": True, "args": manifest})


def main() -> None:
    results = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # prints from Kernel Tuner, compilers and generators go to stderr
    sys.stdout = sys.stderr
    limits = json.loads(os.environ.get(LIMITS_ENV) or "{}")
    apply_limits(limits)

    def emit(obj: dict[str, Any]) -> None:
        results.write(json.dumps(obj) + "\n")
        results.flush()

    if limits.get("preload"):
        import kernel_tuner  # noqa: F401 - imported once, before 'ready', so request timeouts exclude it
    emit({"ready": True, "pid": os.getpid()})
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        t0 = time.perf_counter()
        try:
            {"bench": bench, "inputs": inputs}[req["op"]](req, emit)
        except MemoryError:
            emit({"id": req.get("id"), "done": True, "ok": False,
                  "error": "out of memory (the worker's memory limit)"})
        except BaseException as exc:  # noqa: BLE001 - a user's or a model's generator may raise anything
            if isinstance(exc, KeyboardInterrupt):
                raise
            tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
            emit({"id": req.get("id"), "done": True, "ok": False, "error": tb[:3000]})
        print(f"[kerntune worker] {req.get('op')} took {time.perf_counter() - t0:.2f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
