"""Readers for recorded search spaces: every config of a kernel measured once,
so strategies can be compared by replaying the measurements.

Formats: Kernel Tuner cache files (``.json``/``.json.gz``, also truncated ones that Kernel Tuner
left without closing braces), Kernel Tuner's T4 results format (``recorded_t4``), KTT's JSON results
(``recorded_ktt``), and kerntune's own table (``kerntune-table``).  Every recording is ranked by kernel
time; one tuned for another objective (GFLOP/s, energy) says so in ``meta["note"]``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from kerntune.errors import FormatError
from kerntune.evaluate.known_kernels import describe_kernel
from kerntune.evaluate.recorded_files import _loads_lenient, _read_text
from kerntune.evaluate.trial import Status, Trial
from kerntune.space import Constraint, Space, canonical, jsonable, space_from_dict
from kerntune.space.params import infer_param

#: Kernel Tuner's failures (util.py), in ``"__error__"`` since 1.5, in ``"time"`` before.  Its reader
#: also accepts the base class ErrorConfig, which names no stage: a runtime error (named in ``error``).
KT_FAILURES = {"InvalidConfig": Status.INVALID, "CompilationFailedConfig": Status.COMPILE_ERROR,
               "RuntimeFailedConfig": Status.RUNTIME_ERROR, "ErrorConfig": Status.RUNTIME_ERROR}
TABLE_FORMAT = "kerntune-table"


@dataclass
class Recording:
    """A space plus one Trial per recorded config, keyed by ``space.key``."""

    space: Space
    trials: dict[str, Trial]
    meta: dict[str, Any] = field(default_factory=dict)
    #: SHA-256 of the file's text: a resume checks it, so two recordings never mix in one run.
    digest: str = ""

    @property
    def ok_times(self) -> list[float]:
        return [t.time_ms for t in self.trials.values() if t.ok]  # type: ignore[misc]

    @property
    def optimum(self) -> Trial:
        return min((t for t in self.trials.values() if t.ok), key=lambda t: t.time_ms)  # type: ignore[arg-type]

    def optimum_ties(self) -> int | None:
        """How many configs (the optimum included) the recording cannot tell from its optimum.

        A config ties when its time is within two combined standard errors of the optimum's, the
        errors from each config's individual runs (Kernel Tuner's ``times``).  Why: on a space whose
        top is a plateau the methodology score rewards telling apart configs 0.1% apart; when a dozen
        lie inside the measurement's noise, the score near the top measures which one the noise
        favoured (``benchmarks/search_quality/PASSES.md``, twenty-second pass).  ``None`` when the
        optimum was recorded without its runs.
        """
        best = self.optimum if self.ok_times else None
        if best is None or len(best.times_ms) < 2:
            return None

        def mean_se(t: Trial) -> tuple[float, float]:
            return float(t.time_ms), statistics.stdev(t.times_ms) / math.sqrt(len(t.times_ms))  # type: ignore[arg-type]

        m0, s0 = mean_se(best)
        ties = 0
        for t in self.trials.values():
            if t.ok and len(t.times_ms) >= 2:
                m, s = mean_se(t)
                ties += (m - m0) <= 2.0 * math.hypot(s, s0)
        return ties

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
            "optimum_ties": self.optimum_ties(),
            **({"note": self.meta["note"]} if self.meta.get("note") else {}),
        }


def _recorded_space(names: list[str], values: Mapping[str, list[Any]], trials: Iterable[Trial],
                    name: str) -> tuple[Space, dict[str, Trial]]:
    """A Space of the recorded params whose constraint is 'was recorded', and the trials by key.

    Recordings do not keep the restrictions they were made under, so the set of recorded configs is
    the only faithful description of the valid space.  Membership is the trials' key (``Space.key``),
    not ``==``: ``1 == 1.0 == True`` merged Kernel Tuner's ``["test", 1, true, 2.45]`` into 3 configs.
    """
    described = describe_kernel(name, values).get("params", {})
    params = [infer_param(n, list(values[n]), described.get(n, "")) for n in names]
    keyer = Space(params, name=name)   # for its key only; the constraint below needs it before `space` exists
    by_key = _by_key(keyer, trials, f"recording {name}")
    recorded = frozenset(by_key)

    def recorded_config(cfg: Mapping[str, Any]) -> bool:
        return keyer.key(cfg) in recorded

    note = (f"only the {len(recorded):,} recorded combinations are valid (the others were rejected by the"
            " kernel's restrictions when the space was recorded)")
    # The recorded set is the valid set: handed over as members, it is never searched for in the
    # cartesian product (16.7 million points for a sparse 8 x 8 recording took 31 s, then failed).
    space = Space(params, [Constraint(recorded_config, description=note)], name=name,
                  members=[t.config for t in by_key.values()])
    return space, by_key


# ---------------------------------------------------------------------------- Kernel Tuner cache
def _seconds(entry: Mapping[str, Any], key: str, where: str, scale: float = 1.0) -> float:
    """A recorded duration: a finite number >= 0 (missing is 0); anything else is a bad file."""
    value = entry.get(key)
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise FormatError(f"{where}: {key} {value!r} is not a duration (a number >= 0)")
    return float(value) * scale


def _positive_ms(value: Any, what: str, where: str) -> float:
    """A measured time: a finite number > 0.  A negative time once became the optimum, `true`
    counted as 1 ms and 0 divided by zero; none of them is a measurement."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise FormatError(f"{where}: {what} {value!r} is not a time (a positive number)")
    return float(value)


def _numbers(value: Any, what: str, where: str) -> list[float]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise FormatError(f"{where}: {what} must be a list of numbers, got {type(value).__name__}")
    return [float(x) for x in value if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)]


def _kt_failure(entry: Mapping[str, Any], where: str, names: Iterable[str] = ()) -> str | None:
    """The Kernel Tuner failure an entry records, or None.  Kernel Tuner 1.5 writes ``"__error__":
    "InvalidConfig"`` and no ``time`` (once read as an unknown failure, ``time=None``), older ones put it
    in ``time``; ``__error__`` wins over a time measured before the failure, as in Kernel Tuner.  Other
    strings are refused: Kernel Tuner writes times as numbers, and "2.0" is neither time nor failure."""
    marks = [(k, entry[k]) for k in ("__error__", "time") if (k == "__error__" and k in entry)
             or isinstance(entry.get(k), str)]
    for key, mark in marks:
        if not isinstance(mark, str) or mark not in KT_FAILURES:
            raise FormatError(f"{where}: {key} {str(mark)[:40]!r} is neither a time nor one of Kernel Tuner's"
                              f" failures ({', '.join(KT_FAILURES)})")
    if len({m for _, m in marks}) > 1:
        raise FormatError(f"{where}: __error__ and time name different failures ({marks[0][1]}, {marks[1][1]})")
    if marks:
        return marks[0][1]
    # Kernel Tuner before 1.0 wrote the failure under the objective's key ("GFLOP/s": "InvalidConfig"),
    # and its reader takes a failure under any key: read as a time-less runtime error, the failure's
    # kind (a restriction, a compile error) was lost.
    skip = set(names)
    return next((v for k, v in entry.items() if k not in skip and isinstance(v, str) and v in KT_FAILURES), None)


def _kt_trial(config: dict[str, Any], entry: Mapping[str, Any], where: str = "entry",
              names: Iterable[str] = ()) -> Trial:
    compile_s = _seconds(entry, "compile_time", where, 1e-3)  # Kernel Tuner stores ms
    bench_s = _seconds(entry, "benchmark_time", where, 1e-3) + _seconds(entry, "verification_time", where, 1e-3)
    failure = _kt_failure(entry, where, names)
    if failure is not None:
        return Trial(config, KT_FAILURES[failure], compile_s=compile_s, bench_s=bench_s, error=failure)
    value = entry.get("time")
    if value is None or (isinstance(value, float) and (value != value or value >= 1e20)) \
            or (isinstance(value, int) and not isinstance(value, bool) and value >= 10**20):
        # Kernel Tuner's own marks of a failed config (no time, NaN, 1e20).
        return Trial(config, Status.RUNTIME_ERROR, compile_s=compile_s, bench_s=bench_s, error=f"time={value!r}")
    time_ms = _positive_ms(value, "time", where)
    extra = {k: entry[k] for k in ("GFLOP/s", "GB/s", "TFLOP/s")
             if isinstance(entry.get(k), (int, float)) and not isinstance(entry.get(k), bool)}
    times = _numbers(entry.get("times"), "times", where)
    return Trial(config, Status.OK, time_ms=time_ms, times_ms=times, compile_s=compile_s,
                 bench_s=bench_s, extra=extra)


def _key_matches(key: str, entry: Mapping[str, Any], names: list[str]) -> bool:
    """Whether a cache key ("16,8,2") names the values its entry records."""
    parts = key.split(",")
    if len(parts) != len(names):
        return True   # another key layout: nothing to compare
    for part, name in zip(parts, names):
        value = entry[name]
        if part.strip() == str(value):
            continue
        try:
            if float(part) == float(value):
                continue
        except (TypeError, ValueError):
            pass
        return False
    return True


def _cache_entries(cache: Mapping[str, Any], names: list[str], path: Path) -> list[tuple[str, Mapping[str, Any]]]:
    """The cache's entries; one that is not an object or lacks a tuned parameter is refused.  Such
    entries were once dropped without a word, the optimum among them (no shipped recording has one)."""
    for key, entry in cache.items():
        where = f"{path}: cache entry {str(key)[:60]!r}"
        if not isinstance(entry, Mapping):
            raise FormatError(f"{where} is not an object (got {type(entry).__name__})")
        missing = [n for n in names if n not in entry]
        if missing:
            raise FormatError(f"{where} lacks tuned parameter(s) {', '.join(missing)[:120]}")
    return list(cache.items())


def _from_kernel_tuner(data: Mapping[str, Any], path: Path) -> Recording:
    tune_params = data.get("tune_params") or {}
    if not isinstance(tune_params, Mapping) or not all(isinstance(v, list) for v in tune_params.values()):
        raise FormatError(f"{path}: tune_params must map each parameter to its list of values")
    keys = data.get("tune_params_keys")
    if keys is not None and (not isinstance(keys, list) or not all(isinstance(k, str) for k in keys)):
        raise FormatError(f"{path}: tune_params_keys must be a list of parameter names")
    names = list(keys or tune_params.keys())
    cache = data.get("cache")
    if not names or not isinstance(cache, Mapping):
        raise FormatError(f"{path}: Kernel Tuner cache without tune_params_keys/cache")
    entries = _cache_entries(cache, names, path)
    # Kernel Tuner tells values apart by str() alone (its cache key): 16 and "16" are one value to it.
    # A file giving a number as a string on one side (tune_params or the entries) and as a number on
    # the other once doubled the parameter's values (16, 32, "16", "32") and replayed the string.
    as_number: dict[str, dict[str, Any]] = {n: {} for n in names}
    for n in names:
        for v in list(tune_params.get(n, [])) + [e[n] for _, e in entries]:
            if not isinstance(v, str):
                as_number[n].setdefault(str(v), v)

    def unify(n: str, v: Any) -> Any:
        return canonical(as_number[n].get(v, v) if isinstance(v, str) else v)

    declared: dict[str, list[Any]] = {}
    for n, vals in tune_params.items():
        declared[n] = []
        for v in vals:
            u = unify(n, v) if n in as_number else canonical(v)
            if value_id(u) not in {value_id(d) for d in declared[n]}:
                declared[n].append(u)
    trials = []
    for key, entry in entries:
        where = f"{path}: cache entry {str(key)[:60]!r}"
        if not _key_matches(str(key), entry, names):
            raise FormatError(f"{where}: the key disagrees with the entry's parameters "
                              f"({', '.join(f'{n}={entry[n]!r}' for n in names)[:120]})")
        trials.append(_kt_trial({n: unify(n, entry[n]) for n in names}, entry, where, names))
    if not trials:
        raise FormatError(f"{path}: Kernel Tuner cache holds no entries")
    meta = {k: data.get(k) for k in ("device_name", "kernel_name", "problem_size", "objective")}
    meta.update(format="kernel_tuner_cache", **objective_note([data.get("objective")]))
    return _finish(names, trials, meta, str(data.get("kernel_name") or path.stem), declared)


def objective_note(objectives: Iterable[Any]) -> dict[str, str]:
    """``{"note": ...}`` where a file was tuned for another objective than time (GFLOP/s, energy):
    kerntune still ranks by time, the one objective every recording holds, and says so."""
    other = sorted({o if isinstance(o, str) else json.dumps(o) for o in objectives if o not in (None, "time")})
    return {"note": f"ranked by time; the file's objective is {' / '.join(other)}"} if other else {}


def value_id(value: Any) -> str:
    """A parameter value's identity: its JSON text, as in ``Space.key``.  1, 1.0 and true are
    three values there (and to Kernel Tuner, whose keys are "1", "1.0", "True"), not one."""
    return json.dumps(jsonable(canonical(value)))


def _finish(names: list[str], trials: list[Trial], meta: dict[str, Any], name: str,
            declared: Mapping[str, list[Any]] | None = None) -> Recording:
    """The recorded space (declared values plus every value seen) and its trials by key."""
    values: dict[str, list[Any]] = {n: list((declared or {}).get(n, [])) for n in names}
    for n in names:
        seen = {value_id(v) for v in values[n]}
        values[n] += [v for i, v in {value_id(t.config[n]): t.config[n] for t in trials}.items() if i not in seen]
        try:
            values[n] = sorted(values[n])
        except TypeError:
            pass
    space, by_key = _recorded_space(names, values, trials, name)
    return Recording(space, by_key, meta)


def _by_key(space: Space, trials: Iterable[Trial], where: str) -> dict[str, Trial]:
    """Trials by config key; a config recorded twice is refused: which measurement is right is
    unknowable, and silently keeping the last one once overrode a real measurement."""
    out: dict[str, Trial] = {}
    for t in trials:
        key = space.key(t.config)
        if key in out:
            raise FormatError(f"{where}: config {space.to_json(t.config)[:160]} is recorded twice")
        out[key] = t
    return out


# ---------------------------------------------------------------------------- kerntune table
def _from_table(data: Mapping[str, Any], path: Path) -> Recording:
    declared = space_from_dict(data.get("space") or {})
    rows: list[Trial] = []
    outside = 0  # rows the table's own constraints exclude (a constraint added to restrict a table)
    for row in data.get("trials") or []:
        try:
            trial = Trial.from_dict(row)
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            raise FormatError(f"{path}: bad trial row ({type(exc).__name__}: {exc})") from None
        where = f"{path}: trial {len(rows) + 1}"
        if trial.ok:
            trial.time_ms = _positive_ms(trial.time_ms, "time_ms", where)
        elif trial.time_ms is not None:
            trial.time_ms = None  # a failed config has no time; a stray one must not rank it
        trial.times_ms = _numbers(trial.times_ms, "times_ms", where)
        if not (math.isfinite(trial.compile_s) and trial.compile_s >= 0 and math.isfinite(trial.bench_s)
                and trial.bench_s >= 0):
            raise FormatError(f"{where}: compile_s/bench_s must be durations (numbers >= 0)")
        if declared.validate(trial.config, check_constraints=False):
            raise FormatError(f"{path}: trial config {trial.config} does not fit the table's space")
        trial.config = declared.canonical(trial.config)
        # A row the table's constraints exclude can never be proposed in the replay space: kept, it
        # became an optimum no search could reach (an exhausted space scored "never within 5%").
        if not declared.is_valid(trial.config):
            outside += 1
            continue
        rows.append(trial)
    if not rows:
        raise FormatError(f"{path}: kerntune table holds no trials" + (f" its constraints allow ({outside} recorded"
                                                                      " configs are outside them)" if outside else ""))
    # Replay can only answer recorded configs, so 'recorded' joins the declared constraints.
    recorded = {declared.key(t.config) for t in rows}
    membership = Constraint(lambda cfg: declared.key(cfg) in recorded, description="config is in the recording")
    default = declared.default if declared.key(declared.default) in recorded else None
    space = Space(declared.params, declared.constraints + [membership], default=default, name=declared.name,
                  description=declared.description, members=[t.config for t in rows])
    trials = _by_key(space, rows, str(path))
    meta = {**(data.get("meta") or {}), "format": TABLE_FORMAT}
    if outside:
        said = f"{outside} recorded config(s) outside the table's constraints are left out"
        meta["note"] = f"{meta['note']}; {said}" if meta.get("note") else said
    return Recording(space, trials, meta)


def table_dict(space: Space, trials: Iterable[Trial], meta: Mapping[str, Any]) -> dict[str, Any]:
    """kerntune's own recording format (what ``store export --table`` writes)."""
    return {"format": TABLE_FORMAT, "version": 1, "meta": dict(meta), "space": space.to_dict(),
            "trials": [t.to_dict() for t in trials]}


_FORMATS = "a Kernel Tuner cache, a T4 results file, KTT results or a kerntune table"
_SPACE_FILE_HINT = ("; it looks like a space file, which describes a kernel's space, not measurements: "
                    f"a replay needs a recording ({_FORMATS}, e.g. `kerntune store export --table`); "
                    "`kerntune space info FILE` reads a space file")


def _looks_like_space_file(path: Path, text: str, data: Any = None) -> bool:
    """A kerntune space file (YAML or JSON with ``params``) handed over where a recording is expected."""
    if isinstance(data, Mapping):
        return "params" in data and not ({"cache", "results", "trials"} & set(data))
    return path.suffix.lower() in (".yaml", ".yml") or re.search(r"^params\s*:", text, re.MULTILINE) is not None


def load_recording(path: str | Path) -> Recording:
    """Read any supported recording, deciding the format from its content."""
    path = Path(path)
    text = _read_text(path)
    try:
        data = _loads_lenient(text, path)
    except FormatError as exc:
        if _looks_like_space_file(path, text):
            raise FormatError(f"{exc}{_SPACE_FILE_HINT}") from None
        raise
    if isinstance(data, Mapping) and _looks_like_space_file(path, text, data):
        raise FormatError(f"{path}: not a recording{_SPACE_FILE_HINT}")
    if not isinstance(data, Mapping):
        raise FormatError(f"{path}: unknown recording format (top level is not an object)")
    reader = None
    if data.get("format") == TABLE_FORMAT:
        reader = _from_table
    elif "cache" in data and ("tune_params_keys" in data or "tune_params" in data):
        reader = _from_kernel_tuner
    elif "results" in data and "schema_version" in data:   # these readers import this module: here, late
        from kerntune.evaluate.recorded_t4 import read_t4 as reader
    elif isinstance(data.get("Metadata"), Mapping) and isinstance(data.get("Results"), list):
        from kerntune.evaluate.recorded_ktt import read_ktt as reader
    if reader is not None:
        try:
            rec = reader(data, path)
        except (TypeError, ValueError, AttributeError, KeyError, IndexError, RecursionError) as exc:
            # A shape no check above foresaw: still the file's fault, still one line.
            raise FormatError(f"{path}: malformed recording ({type(exc).__name__}: {exc})"[:300]) from None
        rec.digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        return rec
    raise FormatError(f"{path}: unknown recording format (expected {_FORMATS})")
