"""A decodable ``{"configs": ...}`` answer wins over prose around it, also when the prose (or a string
inside the answer) looks like Python syntax: the Python hints are for replies that hold no answer."""

from __future__ import annotations

import pytest

from kerntune.llm import LLMClient, Message, configs_from_answer, parse_configs
from kerntune.llm.parsing import ParseError, extract_json
from kerntune.space import Choice, PowerOfTwo, Space
from scripted import ScriptedProvider

GOOD = '{"configs": [{"reasoning": "r", "config": {"BLOCK_M": 64}}]}'
WANT = {"configs": [{"reasoning": "r", "config": {"BLOCK_M": 64}}]}


@pytest.mark.parametrize("text", [
    "I keep BLOCK_M in [32, 64].\n" + GOOD + "\nNote: None of these exceed shared memory.",
    "Sizes [32, 64].\n```json\n" + GOOD + "\n```\nCaveat: None.",
    "Options: [16, 32] * 2 were too small.\n" + GOOD,
    "{'draft': 1} was my first idea; the answer:\n" + GOOD,
], ids=["prose-None", "fenced-None", "prose-list-multiplication", "prose-single-quotes"])
def test_the_answer_object_wins_over_python_looking_prose(text: str) -> None:
    assert extract_json(text) == WANT


def test_true_inside_a_json_string_does_not_hide_the_answer() -> None:
    text = 'Sizes [32, 64] look best.\n{"configs": [{"reasoning": "split_k: True helps", "config": {"BLOCK_M": 64}}]}'
    assert extract_json(text) == {"configs": [{"reasoning": "split_k: True helps", "config": {"BLOCK_M": 64}}]}


@pytest.mark.parametrize("text, why", [
    ("{'configs': [{'config': {'BM': 64}}]}", "single-quoted"),
    ('{"configs": [{"config": {"BM": 64, "split": True}}]}', "True/False/None"),
    ('{"configs": [{"config": {"BM": 64}}] * 4}', "list multiplication"),
])
def test_python_syntax_with_no_answer_object_is_still_named(text: str, why: str) -> None:
    with pytest.raises(ParseError, match=why):
        extract_json(text)


def test_such_a_reply_costs_no_repair_call() -> None:
    space = Space([PowerOfTwo("BM", low=16, high=256), Choice("W", options=(2, 4, 8))], [],
                  default={"BM": 64, "W": 4})
    text = ("I keep BM in [32, 128] and W in [4, 8].\n"
            '{"configs": [{"reasoning": "r1", "config": {"BM": 128, "W": 8}},'
            ' {"reasoning": "r2", "config": {"BM": 32, "W": 4}}]}\n'
            "Note: None of these exceed shared memory.")
    assert [dict(c) for c in parse_configs(text, space).accepted] == [{"BM": 128, "W": 8}, {"BM": 32, "W": 4}]

    def problems(value):  # type: ignore[no-untyped-def]
        parsed = configs_from_answer(value, space)
        return [] if parsed.accepted else [r.reason for r in parsed.rejected] or ["no configs"]

    provider = ScriptedProvider(lambda n, m: text)
    resp = LLMClient(provider, retries=0).complete([Message("user", "x")], schema={"type": "object"},
                                                   validate=problems)
    assert len(provider.prompts) == 1 and not resp.repaired
    assert len(resp.parsed["configs"]) == 2
