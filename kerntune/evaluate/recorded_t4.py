"""Reader for T4, the autotuning results format (``{"schema_version", "results": [...], "metadata"}``).

Why its own reader: Kernel Tuner writes it (``--output-file``, ``file_utils.get_t4_results``) and the
autotuning methodology's tools read full search spaces in it.  What a file holds, and how it maps to a
Trial, as Kernel Tuner 1.5 writes it and the methodology's ``searchspace_statistics`` reads it:

- ``metadata.timeunit`` is the unit of every value under a result's ``times``: ``compilation``,
  ``benchmark``, ``validation``, ``runtimes`` (the kernel's individual runs).  The methodology's files
  declare it.  Kernel Tuner's ``store_output_file`` writes no ``metadata`` at all: its ``times`` are its
  own milliseconds, and its ``time`` measurement says ``"unit": "ms"``.  Without a declared unit the
  runtimes tell: on the scale of the ``time`` measurement they are ms, on its scale / 1000 seconds,
  anything else is refused.  Reading an undeclared unit as seconds once made a Kernel Tuner file's
  replay cost 1000 times its cache's.
- ``compilation`` is the compile time (the schema spells it ``compilation_time``; either is read).
  ``benchmark`` plus ``validation`` is the measuring cost; without ``benchmark`` the runtimes' sum is.
- ``configuration`` maps names to values; Kernel Tuner builds it from each result's own keys, so
  their order may differ between results (results in another order were once silently dropped,
  the optimum among them): any order of the same names is read.
- ``invalidity`` is "correct" or the failure (compile, runtime, constraints, correctness, timeout).
- The ``measurements`` named ``time`` is the objective, in its own ``unit``.  ``objectives`` other
  than time are named in the recording's ``meta["note"]``: kerntune ranks by time all the same.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Mapping

from kerntune.errors import FormatError
from kerntune.evaluate.recorded import Recording, _finish, _numbers, _positive_ms, _seconds, objective_note
from kerntune.evaluate.trial import Status, Trial
from kerntune.space import canonical

T4_FAILURES = {
    "timeout": Status.TIMEOUT,
    "compile": Status.COMPILE_ERROR,
    "runtime": Status.RUNTIME_ERROR,
    "correctness": Status.WRONG_RESULT,
    "constraints": Status.INVALID,
}
#: Milliseconds per unit, for the spellings T4 files use (Kernel Tuner's "ms" and "milliseconds", the
#: methodology's long and short names).  Any other unit is refused: it once counted as ms, unseen.
T4_UNITS = {"ms": 1.0, "milliseconds": 1.0, "s": 1e3, "seconds": 1e3, "us": 1e-3, "microseconds": 1e-3,
            "ns": 1e-6, "nanoseconds": 1e-6}


def _ms_per(unit: Any, what: str, where: str) -> float:
    if not isinstance(unit, str) or unit.lower() not in T4_UNITS:
        raise FormatError(f"{where}: {what} {unit!r} is not a time unit (one of {', '.join(T4_UNITS)})")
    return T4_UNITS[unit.lower()]


def _runtime_ratios(results: list[Any]) -> list[float]:
    """Per result holding both: median raw runtime / the ``time`` measurement in ms.

    Tolerant by design: a malformed result is skipped here and refused, with its own message, when
    it is read."""
    ratios: list[float] = []
    for res in results:
        if not isinstance(res, Mapping) or res.get("invalidity", "correct") != "correct":
            continue
        times, measurements = res.get("times"), res.get("measurements")
        if not isinstance(times, Mapping) or not isinstance(measurements, list):
            continue
        try:
            runtimes = [r for r in _numbers(times.get("runtimes"), "runtimes", "") if r > 0]
            time_ms = _time_ms(res, "")
        except FormatError:
            continue
        if runtimes and time_ms:
            ratios.append(statistics.median(runtimes) / time_ms)
    return ratios


def _timeunit(data: Mapping[str, Any], path: Path) -> tuple[float | None, str]:
    """Milliseconds per unit of the file's ``times`` and the unit's name (for the recording's meta);
    None when undeclared and the runtimes do not tell (the caller refuses the file after reading its
    results, so a bad result is still named first)."""
    metadata = data.get("metadata") if data.get("metadata") is not None else {}
    if not isinstance(metadata, Mapping):
        raise FormatError(f"{path}: T4 metadata must be an object")
    if metadata.get("timeunit") is not None:
        return _ms_per(metadata["timeunit"], "metadata.timeunit", str(path)), str(metadata["timeunit"])
    # Kernel Tuner declares none and writes ms; the runtimes, measured in the times' unit, say which.
    ratios = _runtime_ratios(data.get("results") or [])
    if ratios:
        ratio = statistics.median(ratios)
        if 0.1 <= ratio <= 10:
            return T4_UNITS["milliseconds"], "milliseconds (not declared: the runtimes are on the time's scale)"
        if 0.1 <= ratio * 1e3 <= 10:
            return T4_UNITS["seconds"], "seconds (not declared: the runtimes are on the time's scale / 1000)"
    return None, ""


def _time_ms(res: Mapping[str, Any], where: str) -> float | None:
    """The ``time`` measurement in ms, or None when the result holds none."""
    measurements = res.get("measurements") or []
    if not isinstance(measurements, list):
        raise FormatError(f"{where}: measurements must be a list")
    for m in measurements:
        if isinstance(m, Mapping) and m.get("name") == "time" and "value" in m:
            value = _positive_ms(m["value"], "time", where)
            return value * _ms_per(m.get("unit"), "the time measurement's unit", where)
    return None


def _trial(cfg: dict[str, Any], res: Mapping[str, Any], to_ms: float, where: str) -> Trial:
    times = res.get("times") or {}
    if not isinstance(times, Mapping):
        raise FormatError(f"{where}: times must be an object")
    if "compilation" in times and "compilation_time" in times:
        raise FormatError(f"{where}: times holds both compilation and compilation_time; which is the compile"
                          " time is unknowable")
    compile_s = _seconds(times, "compilation_time" if "compilation_time" in times else "compilation", where,
                         to_ms / 1e3)
    runtimes = [x * to_ms for x in _numbers(times.get("runtimes"), "runtimes", where)]
    bench_s = (_seconds(times, "benchmark", where, to_ms / 1e3) if "benchmark" in times else sum(runtimes) / 1e3) \
        + _seconds(times, "validation", where, to_ms / 1e3)
    invalidity = res.get("invalidity", "correct")
    if invalidity != "correct":
        if not isinstance(invalidity, str) or invalidity not in T4_FAILURES:
            raise FormatError(f"{where}: invalidity {str(invalidity)[:40]!r} is not one of correct,"
                              f" {', '.join(T4_FAILURES)}")
        return Trial(cfg, T4_FAILURES[invalidity], compile_s=compile_s, bench_s=bench_s, error=invalidity)
    time_ms = _time_ms(res, where)
    if time_ms is None:
        return Trial(cfg, Status.RUNTIME_ERROR, compile_s=compile_s, bench_s=bench_s, error="no time measurement")
    return Trial(cfg, Status.OK, time_ms=time_ms, times_ms=runtimes, compile_s=compile_s, bench_s=bench_s)


def from_t4(data: Mapping[str, Any], path: Path) -> tuple[list[str], list[Trial], dict[str, Any]]:
    """Parameter names (in the first result's order), one Trial per result, and the recording's meta."""
    results = data.get("results")
    if not isinstance(results, list) or not results:
        raise FormatError(f"{path}: T4 file without results")
    to_ms, unit = _timeunit(data, path)
    names: list[str] = []
    trials: list[Trial] = []
    objectives: list[Any] = []
    for i, res in enumerate(results):
        where = f"{path}: result {i + 1}"
        conf = res.get("configuration") if isinstance(res, Mapping) else None
        if not isinstance(conf, Mapping) or not conf:
            raise FormatError(f"{where}: T4 result without a configuration object")
        names = names or list(conf)
        if set(conf) != set(names):
            raise FormatError(f"{where}: configuration names {list(conf)[:20]} differ from the first"
                              f" result's {names[:20]}")
        if isinstance(res.get("objectives"), list):
            objectives.extend(o for o in res["objectives"] if o not in objectives)
        trials.append(_trial({n: canonical(conf[n]) for n in names}, res, to_ms or 1.0, where))
    if to_ms is None:
        raise FormatError(f"{path}: the unit of the results' times is undeclared and their runtimes do not match"
                          " the time measurement in ms or s: add metadata.timeunit (e.g. \"milliseconds\")")
    meta = {"format": "t4", "kernel_name": data.get("kernel_name", path.stem),
            "device_name": data.get("device_name", ""), "problem_size": data.get("problem_size"),
            "timeunit": unit, **objective_note(objectives)}
    return names, trials, meta


def read_t4(data: Mapping[str, Any], path: Path) -> Recording:
    names, trials, meta = from_t4(data, path)
    return _finish(names, trials, meta, str(meta["kernel_name"]))
