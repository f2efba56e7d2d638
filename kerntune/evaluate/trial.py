"""The result of measuring one config: what crosses from evaluators to
strategies, the store and reports."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from kerntune.space.params import jsonable


class Status(str, enum.Enum):
    OK = "ok"
    INVALID = "invalid"                  # rejected before compiling (space or launch limits)
    COMPILE_ERROR = "compile_error"
    COMPILE_TIMEOUT = "compile_timeout"
    RUNTIME_ERROR = "runtime_error"      # crash, illegal access, out of resources at launch
    WRONG_RESULT = "wrong_result"        # output differs from the reference (NaN included)
    TIMEOUT = "timeout"                  # benchmark exceeded its limit
    UNMEASURED = "unmeasured"            # replay: the recording does not hold this config


@dataclass
class Trial:
    """One measured config.

    ``time_ms`` is the objective (median kernel time) and only set when the
    status is ``ok``.  ``cost_s`` is what measuring cost — compile plus
    benchmark — on the evaluator's clock (simulated for replays), and is what
    time budgets are charged with.
    """

    config: dict[str, Any]
    status: Status
    time_ms: float | None = None
    times_ms: list[float] = field(default_factory=list)
    compile_s: float = 0.0
    bench_s: float = 0.0
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK and self.time_ms is not None

    @property
    def cost_s(self) -> float:
        return self.compile_s + self.bench_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": {k: jsonable(v) for k, v in self.config.items()},
            "status": self.status.value,
            "time_ms": self.time_ms,
            "times_ms": list(self.times_ms),
            "compile_s": self.compile_s,
            "bench_s": self.bench_s,
            "error": self.error,
            "extra": dict(self.extra),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Trial":
        return cls(
            config=dict(data["config"]),
            status=Status(data["status"]),
            time_ms=data.get("time_ms"),
            times_ms=list(data.get("times_ms") or []),
            compile_s=float(data.get("compile_s") or 0.0),
            bench_s=float(data.get("bench_s") or 0.0),
            error=data.get("error"),
            extra=dict(data.get("extra") or {}),
        )
