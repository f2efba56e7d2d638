"""Reader for the JSON results of KTT, the Kernel Tuning Toolkit (``{"Metadata": ..., "Results": [...]}``).

Why a third format: KTT is the other widely used tuner of CUDA/OpenCL kernels, and the autotuning
methodology's tools import its runs beside Kernel Tuner's, so recorded spaces of kernels and GPUs
this project never saw may come as KTT output.  What it records, and how it maps to a Trial:

- ``Metadata.TimeUnit`` (Nanoseconds, Microseconds, Milliseconds, Seconds) scales every duration;
  ``Metadata.Device`` is the GPU's name.
- Each entry of ``Results`` is one configuration: ``Configuration`` a list of ``{"Name", "Value"}``,
  ``Status`` (Ok, ComputationFailed, ValidationFailed, CompilationFailed, DeviceLimitsExceeded),
  ``TotalDuration`` the kernel time (the objective) and ``TotalOverhead`` what the tuner spent around
  it (compiling, copying, validating), which becomes the replay's cost of the config.
- A configuration can appear more than once: KTT reruns a config to collect profiling counters, and
  counters slow the kernel.  The first run without ``ProfilingData`` is kept (else the first run);
  the recording's ``meta`` says how many were dropped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from kerntune.errors import FormatError
from kerntune.evaluate.recorded import Recording, _finish, _positive_ms, _seconds, value_id
from kerntune.evaluate.trial import Status, Trial
from kerntune.space import canonical

#: TimeUnit -> milliseconds per unit
KTT_UNITS = {"Nanoseconds": 1e-6, "Microseconds": 1e-3, "Milliseconds": 1.0, "Seconds": 1e3}
KTT_FAILURES = {
    "ComputationFailed": Status.RUNTIME_ERROR,
    "ValidationFailed": Status.WRONG_RESULT,
    "CompilationFailed": Status.COMPILE_ERROR,
    "DeviceLimitsExceeded": Status.INVALID,
}


def _profiled(result: Mapping[str, Any]) -> bool:
    runs = result.get("ComputationResults") or []
    return any(isinstance(r, Mapping) and "ProfilingData" in r for r in runs)


def from_ktt(data: Mapping[str, Any], path: Path) -> tuple[list[str], list[Trial], dict[str, Any]]:
    """Parameter names, one Trial per configuration, and the recording's meta."""
    meta_in = data["Metadata"]
    unit = meta_in.get("TimeUnit", "Milliseconds")
    if unit not in KTT_UNITS:
        raise FormatError(f"{path}: KTT TimeUnit {unit!r} is not one of {', '.join(KTT_UNITS)}")
    to_ms = KTT_UNITS[unit]
    names: list[str] | None = None
    chosen: dict[tuple[str, ...], tuple[bool, Trial]] = {}
    for i, result in enumerate(data["Results"]):
        where = f"{path}: result {i + 1}"
        pairs = result.get("Configuration") if isinstance(result, Mapping) else None
        if not isinstance(pairs, list) or not all(isinstance(p, Mapping) and "Name" in p and "Value" in p for p in pairs):
            raise FormatError(f"{where}: Configuration must be a list of {{\"Name\", \"Value\"}} pairs")
        these = [str(p["Name"]) for p in pairs]
        if names is None:
            names = these
        elif these != names:
            raise FormatError(f"{where}: parameters {these} differ from the first result's {names}")
        config = {str(p["Name"]): canonical(p["Value"]) for p in pairs}
        status = result.get("Status")
        overhead_s = _seconds(result, "TotalOverhead", where, to_ms / 1e3)
        if status == "Ok":
            time_ms = _positive_ms(result.get("TotalDuration"), "TotalDuration", where) * to_ms
            trial = Trial(config, Status.OK, time_ms=time_ms, bench_s=overhead_s + time_ms / 1e3)
        else:
            trial = Trial(config, KTT_FAILURES.get(str(status), Status.RUNTIME_ERROR), bench_s=overhead_s,
                          error=f"KTT status {status}")
        key = tuple(value_id(config[n]) for n in names)   # not the values: 1 == 1.0 == True merged configs
        profiled = _profiled(result)
        if key not in chosen or (chosen[key][0] and not profiled):
            chosen[key] = (profiled, trial)
    if not names or not chosen:
        raise FormatError(f"{path}: KTT results file holds no results")
    trials = [t for _, t in chosen.values()]
    meta = {"format": "ktt", "device_name": meta_in.get("Device", ""), "kernel_name": _kernel_name(data, path),
            "ktt_version": meta_in.get("KttVersion"), "repeated_results_dropped": len(data["Results"]) - len(trials)}
    return names, trials, meta


def read_ktt(data: Mapping[str, Any], path: Path) -> Recording:
    names, trials, meta = from_ktt(data, path)
    return _finish(names, trials, meta, str(meta["kernel_name"]))


def _kernel_name(data: Mapping[str, Any], path: Path) -> str:
    for result in data["Results"]:
        if isinstance(result, Mapping) and result.get("KernelName"):
            return str(result["KernelName"])
    return path.stem
