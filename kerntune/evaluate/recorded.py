"""Readers for recorded search spaces: every config of a kernel measured once,
so strategies can be compared by replaying the measurements.

Formats: Kernel Tuner cache files (``.json``/``.json.gz``, also truncated ones
that Kernel Tuner left without closing braces), Kernel Tuner's T4 results
format, and kerntune's own table (``kerntune-table``).
"""

from __future__ import annotations

import gzip
import json
import re
import statistics
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from kerntune.errors import FormatError
from kerntune.evaluate.known_kernels import describe_kernel
from kerntune.evaluate.trial import Status, Trial
from kerntune.space import Constraint, Space, canonical, space_from_dict
from kerntune.space.params import infer_param

KT_FAILURES = {
    "InvalidConfig": Status.INVALID,
    "CompilationFailedConfig": Status.COMPILE_ERROR,
    "RuntimeFailedConfig": Status.RUNTIME_ERROR,
}
T4_FAILURES = {
    "timeout": Status.TIMEOUT,
    "compile": Status.COMPILE_ERROR,
    "runtime": Status.RUNTIME_ERROR,
    "correctness": Status.WRONG_RESULT,
    "constraints": Status.INVALID,
}
TABLE_FORMAT = "kerntune-table"


@dataclass
class Recording:
    """A space plus one Trial per recorded config, keyed by ``space.key``."""

    space: Space
    trials: dict[str, Trial]
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def ok_times(self) -> list[float]:
        return [t.time_ms for t in self.trials.values() if t.ok]  # type: ignore[misc]

    @property
    def optimum(self) -> Trial:
        return min((t for t in self.trials.values() if t.ok), key=lambda t: t.time_ms)  # type: ignore[arg-type]

    def summary(self) -> dict[str, Any]:
        times = self.ok_times
        opt = min(times) if times else None
        median = statistics.median(times) if times else None
        counts: dict[str, int] = {}
        for t in self.trials.values():
            counts[t.status.value] = counts.get(t.status.value, 0) + 1
        return {
            "kernel": self.meta.get("kernel_name", ""),
            "device": self.meta.get("device_name", ""),
            "problem_size": self.meta.get("problem_size"),
            "format": self.meta.get("format"),
            "params": len(self.space.params),
            "cartesian": self.space.cartesian_size,
            "recorded": len(self.trials),
            "ok": len(times),
            "valid_share": len(times) / self.space.cartesian_size,
            "status_counts": counts,
            "optimum_ms": opt,
            "optimum_config": self.optimum.config if times else None,
            "median_ms": median,
            "median_over_optimum": (median / opt) if times else None,
        }


# ---------------------------------------------------------------------------- file access
def _read_text(path: Path) -> str:
    if not path.exists():
        raise FormatError(f"file not found: {path}")
    if path.is_dir():
        raise FormatError(f"{path} is a directory, not a recorded space file")
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw) if len(raw) < 2**31 else raw
            try:
                return raw.decode("utf-8")
            except UnicodeDecodeError:
                raise FormatError(f"{path}: not a text file") from None
        return raw.decode("utf-8")
    except EOFError:
        # A truncated gzip stream: keep what decompresses.
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        return d.decompress(path.read_bytes()).decode("utf-8", errors="ignore")
    except UnicodeDecodeError:
        raise FormatError(f"{path}: not a text file (not JSON)") from None
    except (OSError, zlib.error) as exc:
        raise FormatError(f"{path}: corrupt gzip file ({exc})") from None


# A JSON string (also one cut off at the end of the text) or a bracket outside strings.
_JSON_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[{}\[\]]', re.DOTALL)
_CLOSING = {"{": "}", "[": "]"}


def _close_truncated(text: str) -> str | None:
    """``text`` cut back to its last complete entry, with the open brackets closed.

    An entry is a value inside the top-level object's ``cache`` (or ``results``),
    i.e. at nesting depth 2.  Cutting only where such a value, or a header value,
    has just closed (or the ``cache`` object has just opened) drops a partly
    written last entry entirely: closing it instead would keep e.g. ``time``
    2.06 from a cut inside 2.0625, or an entry without its compile time.
    None when the text is not an unclosed object (then it is not truncated).
    """
    stack: list[str] = []
    cut: tuple[int, str] | None = None
    for match in _JSON_TOKENS.finditer(text):
        token = match.group()
        if token in _CLOSING:
            stack.append(_CLOSING[token])
        elif token in ("}", "]"):
            if not stack or stack.pop() != token:
                return None
        else:
            continue   # a string
        if 0 < len(stack) <= 2:
            cut = (match.end(), "".join(reversed(stack)))
    if not stack or cut is None:
        return None
    return text[: cut[0]] + cut[1]


def _loads_lenient(text: str, path: Path) -> Any:
    """Parse JSON, closing what Kernel Tuner left open when a run was cut off."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as first_error:
        if not text.lstrip().startswith("{"):
            raise FormatError(f"{path}: not JSON ({first_error.msg} at line {first_error.lineno})") from None
    repaired = _close_truncated(text)
    if repaired is not None:
        try:
            return json.loads(repaired)
        except json.JSONDecodeError:
            pass
    raise FormatError(f"{path}: not JSON, and not a truncated Kernel Tuner cache file either")


def _recorded_space(names: list[str], values: Mapping[str, list[Any]], keys: Iterable[tuple], name: str) -> Space:
    """A Space of the recorded params whose constraint is 'was recorded'.

    Recordings do not keep the restrictions they were made under, so the set of
    recorded configs is the only faithful description of the valid space.
    """
    described = describe_kernel(name).get("params", {})
    params = [infer_param(n, list(values[n]), described.get(n, "")) for n in names]
    recorded = frozenset(keys)

    def recorded_config(cfg: Mapping[str, Any]) -> bool:
        return tuple(cfg[n] for n in names) in recorded

    note = (f"only the {len(recorded):,} recorded combinations are valid (the others were rejected by the"
            " kernel's restrictions when the space was recorded)")
    return Space(params, [Constraint(recorded_config, description=note)], name=name)


# ---------------------------------------------------------------------------- Kernel Tuner cache
def _kt_trial(config: dict[str, Any], entry: Mapping[str, Any]) -> Trial:
    ms = lambda key: float(entry.get(key) or 0.0) / 1000.0  # noqa: E731 - KT stores ms
    compile_s = ms("compile_time")
    bench_s = ms("benchmark_time") + ms("verification_time")
    value = entry.get("time")
    if isinstance(value, str):
        status = KT_FAILURES.get(value, Status.RUNTIME_ERROR)
        return Trial(config, status, compile_s=compile_s, bench_s=bench_s, error=value)
    if not isinstance(value, (int, float)) or value != value or value >= 1e20:
        return Trial(config, Status.RUNTIME_ERROR, compile_s=compile_s, bench_s=bench_s, error=f"time={value!r}")
    extra = {k: entry[k] for k in ("GFLOP/s", "GB/s", "TFLOP/s") if isinstance(entry.get(k), (int, float))}
    times = [float(x) for x in entry.get("times") or [] if isinstance(x, (int, float))]
    return Trial(config, Status.OK, time_ms=float(value), times_ms=times, compile_s=compile_s,
                 bench_s=bench_s, extra=extra)


def _from_kernel_tuner(data: Mapping[str, Any], path: Path) -> Recording:
    names = list(data.get("tune_params_keys") or data.get("tune_params", {}).keys())
    cache = data.get("cache")
    if not names or not isinstance(cache, Mapping):
        raise FormatError(f"{path}: Kernel Tuner cache without tune_params_keys/cache")
    declared = {n: [canonical(v) for v in vals] for n, vals in (data.get("tune_params") or {}).items()}
    trials = [_kt_trial({n: canonical(entry[n]) for n in names}, entry) for entry in cache.values()
              if isinstance(entry, Mapping) and all(n in entry for n in names)]
    if not trials:
        raise FormatError(f"{path}: Kernel Tuner cache holds no entries")
    meta = {k: data.get(k) for k in ("device_name", "kernel_name", "problem_size", "objective")}
    meta["format"] = "kernel_tuner_cache"
    return _finish(names, trials, meta, str(data.get("kernel_name") or path.stem), declared)


def _finish(names: list[str], trials: list[Trial], meta: dict[str, Any], name: str,
            declared: Mapping[str, list[Any]] | None = None) -> Recording:
    """The recorded space (declared values plus every value seen) and its trials by key."""
    values: dict[str, list[Any]] = {n: list((declared or {}).get(n, [])) for n in names}
    for t in trials:
        for n in names:
            if t.config[n] not in values[n]:
                values[n].append(t.config[n])
    for n in names:
        try:
            values[n] = sorted(values[n])
        except TypeError:
            pass
    space = _recorded_space(names, values, [tuple(t.config[n] for n in names) for t in trials], name)
    return Recording(space, {space.key(t.config): t for t in trials}, meta)


# ---------------------------------------------------------------------------- T4
def _from_t4(data: Mapping[str, Any], path: Path) -> Recording:
    results = data.get("results")
    if not isinstance(results, list) or not results:
        raise FormatError(f"{path}: T4 file without results")
    names = list(results[0].get("configuration", {}).keys())
    trials: list[Trial] = []
    for res in results:
        conf = res.get("configuration")
        if not isinstance(conf, Mapping) or list(conf.keys()) != names:
            continue
        cfg = {n: canonical(conf[n]) for n in names}
        times = res.get("times") or {}
        compile_s = float(times.get("compilation_time") or 0.0)
        bench_s = float(times.get("benchmark") or 0.0) + float(times.get("validation") or 0.0)
        invalidity = res.get("invalidity", "correct")
        if invalidity != "correct":
            trials.append(Trial(cfg, T4_FAILURES.get(invalidity, Status.RUNTIME_ERROR), compile_s=compile_s,
                                bench_s=bench_s, error=invalidity))
        else:
            trials.append(_t4_ok(cfg, res, compile_s, bench_s))
    if not trials:
        raise FormatError(f"{path}: T4 file holds no usable results")
    meta = {"format": "t4", "kernel_name": data.get("kernel_name", path.stem),
            "device_name": data.get("device_name", ""), "problem_size": data.get("problem_size")}
    return _finish(names, trials, meta, str(meta["kernel_name"]))


def _t4_ok(cfg: dict[str, Any], res: Mapping[str, Any], compile_s: float, bench_s: float) -> Trial:
    scale = {"ms": 1.0, "s": 1000.0, "us": 1e-3, "ns": 1e-6}
    for m in res.get("measurements") or []:
        if isinstance(m, Mapping) and m.get("name") == "time" and isinstance(m.get("value"), (int, float)):
            factor = scale.get(str(m.get("unit", "ms")), 1.0)
            runtimes = [float(x) * factor for x in (res.get("times") or {}).get("runtimes") or []
                        if isinstance(x, (int, float))]
            if not bench_s:
                bench_s = sum(runtimes) / 1000.0
            return Trial(cfg, Status.OK, time_ms=float(m["value"]) * factor, times_ms=runtimes,
                         compile_s=compile_s, bench_s=bench_s)
    return Trial(cfg, Status.RUNTIME_ERROR, compile_s=compile_s, bench_s=bench_s, error="no time measurement")


# ---------------------------------------------------------------------------- kerntune table
def _from_table(data: Mapping[str, Any], path: Path) -> Recording:
    declared = space_from_dict(data.get("space") or {})
    rows: list[Trial] = []
    for row in data.get("trials") or []:
        try:
            trial = Trial.from_dict(row)
        except (KeyError, ValueError, TypeError) as exc:
            raise FormatError(f"{path}: bad trial row ({exc})") from None
        if declared.validate(trial.config, check_constraints=False):
            raise FormatError(f"{path}: trial config {trial.config} does not fit the table's space")
        trial.config = declared.canonical(trial.config)
        rows.append(trial)
    if not rows:
        raise FormatError(f"{path}: kerntune table holds no trials")
    # Replay can only answer recorded configs, so 'recorded' joins the declared constraints.
    recorded = {declared.key(t.config) for t in rows}
    membership = Constraint(lambda cfg: declared.key(cfg) in recorded, description="config is in the recording")
    default = declared.default if declared.key(declared.default) in recorded else None
    space = Space(declared.params, declared.constraints + [membership], default=default, name=declared.name,
                  description=declared.description)
    trials = {space.key(t.config): t for t in rows}
    return Recording(space, trials, {**(data.get("meta") or {}), "format": TABLE_FORMAT})


def table_dict(space: Space, trials: Iterable[Trial], meta: Mapping[str, Any]) -> dict[str, Any]:
    """kerntune's own recording format (what ``store export --table`` writes)."""
    return {"format": TABLE_FORMAT, "version": 1, "meta": dict(meta), "space": space.to_dict(),
            "trials": [t.to_dict() for t in trials]}


def load_recording(path: str | Path) -> Recording:
    """Read any supported recording, deciding the format from its content."""
    path = Path(path)
    data = _loads_lenient(_read_text(path), path)
    if not isinstance(data, Mapping):
        raise FormatError(f"{path}: unknown recording format (top level is not an object)")
    if data.get("format") == TABLE_FORMAT:
        return _from_table(data, path)
    if "cache" in data and ("tune_params_keys" in data or "tune_params" in data):
        return _from_kernel_tuner(data, path)
    if "results" in data and "schema_version" in data:
        return _from_t4(data, path)
    raise FormatError(
        f"{path}: unknown recording format (expected a Kernel Tuner cache, a T4 results file or a kerntune table)"
    )
