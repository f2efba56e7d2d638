"""Whether a recorded first LLM round changes kerntune's search at all (CPU, no GPU, no Helion).

    .venv/bin/python benchmarks/helion/same_search.py softmax [--budget 60]

Runs the ``classical`` contender (``bayes``) and the ``embedded`` one (``llm-seeded`` replaying
transcripts/KERNEL.embedded.jsonl) on the Space dumped on the H100, both answered by the same
made-up measurements (a hash of each config), and prints whether the two searches propose the
same configs in the same order.  On softmax the embedded model's round 1 is ten empty configs
(Helion's default, measured first by every contender), so the two searches are one: the
measured ``classical`` run stands for the ``embedded`` one (benchmarks/results/helion_h100/).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

from embedded_answers import DumpedEvaluator  # noqa: E402
from head_to_head import GP_OPTIONS, llm_options  # noqa: E402

from kerntune.evaluate.trial import Status, Trial  # noqa: E402
from kerntune.helion import layout_from_dict  # noqa: E402
from kerntune.llm import LLMClient  # noqa: E402
from kerntune.run.search import RunOptions, run_search  # noqa: E402
from kerntune.space import Config  # noqa: E402
from kerntune.strategies import Budget  # noqa: E402


class HashedTimes(DumpedEvaluator):
    """A made-up but fixed time per config, so that both searches see the same measurements."""

    def evaluate(self, configs: Sequence[Config]) -> list[Trial]:
        out = []
        for c in configs:
            h = int(hashlib.sha256(self.space.key(c).encode()).hexdigest()[:8], 16)
            ms = 1.0 + (h % 100_000) / 1e5
            out.append(Trial(dict(c), Status.OK, ms, [ms]))
        return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("kernel")
    ap.add_argument("--budget", type=int, default=60)
    ap.add_argument("--spaces", default=str(HERE.parents[1] / "benchmarks" / "results" / "helion_h100" / "spaces"))
    a = ap.parse_args()
    dump = json.loads((Path(a.spaces) / f"{a.kernel}.space.json").read_text())
    space = layout_from_dict(dump["layout"], name=dump["space"].get("name", "")).space
    seeds = [space.normalize(s) for s in dump["seeds"]]
    ev = HashedTimes(space, dump)
    classical = run_search(ev, "bayes", Budget(max_evals=a.budget), 0,
                           RunOptions(strategy_options=dict(GP_OPTIONS), warm_start=seeds))
    llm = LLMClient.from_spec(f"replay:{HERE / 'transcripts' / f'{a.kernel}.embedded.jsonl'}")
    embedded = run_search(ev, "llm-seeded", Budget(max_evals=a.budget), 0,
                          RunOptions(strategy_options=llm_options("embedded"), llm=llm, warm_start=seeds))
    ka = [space.key(t.config) for t in classical.history]
    kb = [space.key(t.config) for t in embedded.history]
    first = next((i for i, (x, y) in enumerate(zip(ka, kb)) if x != y), None)
    ex = embedded.llm_exchanges[0] if embedded.llm_exchanges else {}
    print(json.dumps({"kernel": a.kernel, "budget": a.budget, "same_configs_same_order": ka == kb,
                      "first_difference_at": first, "llm_round1_accepted": len(ex.get("accepted", [])),
                      "llm_round1_rejected": len(ex.get("rejected", []))}))


if __name__ == "__main__":
    main()
