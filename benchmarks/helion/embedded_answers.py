"""Phase 2 of the embedded-model contender: answer the exact round-1 prompt on this machine.

    .venv/bin/python benchmarks/helion/embedded_answers.py SPACES_DIR [KERNEL ...] [--llm local:]
    .venv/bin/python benchmarks/helion/embedded_answers.py SPACES_DIR attention --llm files:DIR --name strong

The embedded model (Gemma 3 270M through llama-cpp-python) cannot travel to the GPU
machine, so ``head_to_head.py dump`` writes each kernel's kerntune Space, layout, workload
(Helion source and hints), device facts and Helion seed configs there, and this script
runs kerntune's own ``llm-seeded`` round 1 on them here: the same strategy code builds the
same prompt (same Space, workload, device, batch size, already-measured configs), the
model answers it, and ``LLMClient(transcript=...)`` records the exchange in
``benchmarks/helion/transcripts/KERNEL.embedded.jsonl``.  On the GPU, ``llm-seeded`` with
``--llm replay:`` that transcript measures the model's configs and continues with the GP;
``head_to_head.py`` checks that the prompt it built is the recorded one.  Nothing is
measured here: the evaluator below answers every config with ``unmeasured``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

from head_to_head import llm_options

from kerntune.evaluate.base import Evaluator
from kerntune.evaluate.trial import Status, Trial
from kerntune.helion import layout_from_dict
from kerntune.llm import LLMClient
from kerntune.run.search import RunOptions, run_search
from kerntune.space import Config, Space
from kerntune.strategies import Budget


class DumpedEvaluator(Evaluator):
    """The dumped kernel's workload and device; measures nothing."""

    name = "helion-dump"

    def __init__(self, space: Space, dump: dict[str, Any]) -> None:
        super().__init__(space)
        self.dump = dump

    def evaluate(self, configs: Sequence[Config]) -> list[Trial]:
        return [Trial(dict(c), Status.UNMEASURED, error="prompt-only run: measured on the GPU") for c in configs]

    def workload(self) -> dict[str, Any]:
        return dict(self.dump["workload"])

    def device(self) -> dict[str, Any]:
        return dict(self.dump["device"])


def answer(dump_path: Path, transcript: Path, llm: str, contender: str = "embedded") -> dict[str, Any]:
    dump = json.loads(dump_path.read_text())
    layout = layout_from_dict(dump["layout"], name=dump["space"].get("name", ""))
    space = layout.space
    if space.to_dict() != dump["space"]:
        raise SystemExit(f"{dump_path}: the rebuilt Space differs from the dumped one")
    seeds = [space.normalize(s) for s in dump["seeds"]]
    options = llm_options(contender)
    transcript.parent.mkdir(parents=True, exist_ok=True)
    transcript.unlink(missing_ok=True)
    client = LLMClient.from_spec(llm, transcript=transcript, timeout=1800)
    n = options["initial"]
    budget = Budget(max_evals=len(seeds) + 1 + n)
    t0 = time.perf_counter()
    result = run_search(DumpedEvaluator(space, dump), "llm-seeded", budget, 0,
                        RunOptions(strategy_options=options, llm=client, warm_start=seeds))
    seconds = time.perf_counter() - t0
    ex = result.llm_exchanges[0] if result.llm_exchanges else {}
    summary = {"kernel": dump.get("kernel"), "llm": llm, "model": ex.get("model"), "seconds": seconds,
               "tokens_in": client.tokens_in, "tokens_out": client.tokens_out, "calls": client.calls,
               "accepted": len(ex.get("accepted", [])), "rejected": [r["reason"][:200] for r in ex.get("rejected", [])],
               "error": ex.get("error"), "initial": n}
    print(json.dumps(summary), flush=True)
    return summary


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("spaces")
    ap.add_argument("kernel", nargs="*")
    ap.add_argument("--llm", default="local:")
    ap.add_argument("--out", default=str(HERE / "transcripts"))
    ap.add_argument("--name", default="embedded", choices=["embedded", "strong"],
                    help="the contender the transcript is for (strong: a strong model through files:)")
    a = ap.parse_args()
    names = a.kernel or ["matmul", "softmax", "layer_norm", "attention"]
    log = []
    for name in names:
        log.append(answer(Path(a.spaces) / f"{name}.space.json", Path(a.out) / f"{name}.{a.name}.jsonl", a.llm,
                          a.name))
    Path(a.out, f"{a.name}_answers.log.json").write_text(json.dumps(log, indent=1))


if __name__ == "__main__":
    main()
