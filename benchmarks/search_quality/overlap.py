"""Acceptance 4 of issue 24: how much model time ``auto`` hides behind measurements.

The model: a recorded transcript (``replay:``, a strong model's answers on this space) made to
wait a fixed ``--delay`` seconds per call, really (``time.sleep`` in the provider).  The
evaluator: the recording replayed in real time (``ReplayEvaluator(realtime=True)``: each config
takes its recorded compile + benchmark seconds in wall time, and the clock is the wall).  So
both the model's waiting and the measuring are real; nothing is simulated.

    python benchmarks/search_quality/overlap.py --space convolution_A100 --delay 30 --budget 100 \
        --out benchmarks/results/search_quality/overlap_convolution_A100.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kerntune.evaluate import ReplayEvaluator  # noqa: E402
from kerntune.llm import LLMClient  # noqa: E402
from kerntune.llm.providers import make_provider  # noqa: E402
from kerntune.llm.providers.base import Provider  # noqa: E402
from kerntune.llm.types import Message, RawReply  # noqa: E402
from kerntune.run.search import RunOptions, run_search  # noqa: E402
from kerntune.strategies import Budget  # noqa: E402


class Delayed(Provider):
    """Another provider's answers, each after ``delay`` seconds of real waiting."""

    def __init__(self, inner: Provider, delay: float) -> None:
        super().__init__(inner.model)
        self.inner, self.delay, self.name = inner, delay, f"delayed-{inner.name}"
        self.structured = getattr(inner, "structured", False)

    def send(self, messages: list[Message], schema: dict[str, Any] | None, temperature: float, max_tokens: int,
             timeout: float) -> RawReply:
        time.sleep(self.delay)
        return self.inner.send(messages, schema, temperature, max_tokens, timeout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--space", default="convolution_A100")
    ap.add_argument("--transcript", default=None, help="default benchmarks/llm/transcripts/SPACE.llm.jsonl")
    ap.add_argument("--delay", type=float, default=30.0)
    ap.add_argument("--budget", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    transcript = a.transcript or str(ROOT / "benchmarks" / "llm" / "transcripts" / f"{a.space}.llm.jsonl")
    ev = ReplayEvaluator.from_file(ROOT / "examples" / "spaces" / f"{a.space}.json.gz", realtime=True)
    client = LLMClient(Delayed(make_provider(f"replay:{transcript}"), a.delay))
    t0 = time.perf_counter()
    res = run_search(ev, "auto", Budget(max_evals=a.budget), seed=a.seed, run=RunOptions(llm=client))
    wall = time.perf_counter() - t0
    measuring = sum(t.cost_s for t in res.history)
    out = {"command": " ".join(["python"] + sys.argv), "space": a.space, "delay_s": a.delay, "budget": a.budget,
           "evaluations": len(res.history), "wall_s": wall, "measuring_s": measuring,
           "best_ms": res.best.time_ms if res.best else None, "stop_reason": res.stop_reason,
           **res.extra, "notes": res.notes,
           "serial_wall_estimate_s": measuring + res.extra.get("model_seconds", 0.0)}
    print(json.dumps(out, indent=1))
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
