"""Model text to configs: tolerant of wrapping, strict about content, never evaluated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kerntune.llm import ParseError, extract_json, parse_configs
from kerntune.space import Choice, ListParam, PowerOfTwo, Space


@pytest.fixture(scope="module")
def space() -> Space:
    return Space([PowerOfTwo("BM", low=16, high=128), Choice("W", options=(2, 4, 8)),
                  ListParam("bs", element=PowerOfTwo("x", low=16, high=64), length=2)], ["BM * W <= 512"],
                 default={"BM": 64, "W": 4})


@pytest.mark.parametrize("wrap", [
    "{}",
    "```json\n{}\n```",
    "Here are my picks:\n```\n{}\n```\nThese should be fast.",
    "Sure! {} Hope this helps.",
])
def test_json_is_found_however_it_is_wrapped(wrap: str, space: Space) -> None:
    answer = json.dumps({"configs": [{"reasoning": "bigger tile", "config": {"BM": 128}}]}, indent=2)
    parsed = parse_configs(wrap.format(answer) if "{}" not in answer else wrap.replace("{}", answer), space)
    assert parsed.accepted == [{"BM": 128, "W": 4, "bs": (16, 16)}]
    assert parsed.reasons == ["bigger tile"]


@pytest.mark.parametrize("text, why", [
    ("{'configs': [{'config': {'BM': 32}}]}", "single-quoted"),
    ('{"configs": [{"config": {"BM": 32, "p": True}}]}', "True/False/None"),
    ('{"configs": [{"config": {"bs": [16] * 2}}]}', "list multiplication"),
    ("no json here", "no JSON"),
])
def test_python_syntax_is_rejected_with_a_reason_and_never_evaluated(text: str, why: str, space: Space,
                                                                    tmp_path: Path) -> None:
    with pytest.raises(ParseError, match=why):
        parse_configs(text, space)


def test_injection_text_is_only_data(space: Space, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    text = json.dumps({"configs": [{"reasoning": f"__import__('os').system('touch {marker}')",
                                    "config": {"BM": 32}}]})
    parsed = parse_configs(text, space)
    assert len(parsed.accepted) == 1 and not marker.exists()


def test_bad_configs_are_rejected_with_reasons(space: Space) -> None:
    text = json.dumps({"configs": [
        {"config": {"BM": 32}},
        {"config": {"BM": 32}},                 # duplicate
        {"config": {"BLOCK": 32}},              # unknown field
        {"config": {"BM": 48}},                 # not a power of two
        {"config": {"bs": [16, 32, 64]}},       # wrong list length
        {"config": {"BM": 128, "W": 8}},        # violates BM * W <= 512
        {"config": "BM=32"},                    # not an object
        {"config": {"W": 2}},                   # already measured
    ]})
    measured = {space.key(space.normalize({"W": 2}))}
    parsed = parse_configs(text, space, exclude=measured)
    assert parsed.accepted == [{"BM": 32, "W": 4, "bs": (16, 16)}]
    reasons = [r.reason for r in parsed.rejected]
    assert "duplicate" in reasons[0]
    assert "BLOCK: unknown parameter" in reasons[1]
    assert "BM: 48 is not allowed" in reasons[2] and "[16, 32, 64, 128]" in reasons[2]
    assert "expected 2 values, got 3" in reasons[3]
    assert "BM * W <= 512" in reasons[4]
    assert "object" in reasons[5]
    assert "already" in reasons[6]
    assert parsed.valid_share == pytest.approx(1 / 8)


def test_deeply_nested_and_huge_answers_fail_cleanly(space: Space) -> None:
    with pytest.raises(ParseError):
        extract_json("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ParseError, match="too long"):
        extract_json("x" * 2_000_000)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=300), st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=30).map(json.dumps)))
def test_no_reply_makes_an_exception_escape_except_parse_error(space: Space, text: str) -> None:
    try:
        parsed = parse_configs(text, space)
    except ParseError:
        return
    for cfg in parsed.accepted:
        assert space.is_valid(cfg)


def test_a_float_spelling_of_a_recorded_value_is_accepted_as_the_value(tmp_path: Path) -> None:
    """A recording's space admits its recorded configs by key: a model's 64.0 for 64 was refused as
    "not among the recorded combinations" although 64 passed (the value was normalised after the check)."""
    from kerntune.evaluate import ReplayEvaluator, Status, Trial, table_dict
    from kerntune.llm.parsing import configs_from_answer

    space = Space([PowerOfTwo("BS", low=16, high=128), Choice("W", options=(2, 4))])
    trials = [Trial(c, Status.OK, 1.0 + c["BS"] / 100, compile_s=0.1, bench_s=0.1) for c in space.enumerate()
              if c["BS"] != 32]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(table_dict(space, trials, {"kernel_name": "t"})))
    recorded = ReplayEvaluator.from_file(path).space
    out = configs_from_answer({"configs": [{"config": {"BS": 64.0, "W": 4}}, {"config": {"BS": 32, "W": 4}}]},
                              recorded)
    assert out.accepted == [{"BS": 64, "W": 4}] and type(out.accepted[0]["BS"]) is int
    assert len(out.rejected) == 1   # 32 was never recorded


@pytest.mark.parametrize("text, n", [
    ('{"configs": [{"config": {"BM": 32}}, {"config": {"BM": 64}}, {"config": {"BM"', 2),   # cut at the token cap
    ('{"configs": [{"config": {"BM": 32}},], }', 1),                                      # trailing commas
    ('{"configs": [ // the default\n {"config": {"BM": 32}} /* and */ ]}', 1),            # comments
    ('Trying BM in [32, 64] first.\n{"configs": [{"config": {"BM": 128}}]}', 1),          # a list in prose first
])
def test_an_almost_json_answer_keeps_its_whole_configs(text: str, n: int) -> None:
    """Such answers lost every config (the first inner object or the prose list was taken, and the
    repair was told 'expected {"configs": [...]}'); now their whole items are kept, nothing evaluated."""
    value = extract_json(text)
    assert isinstance(value, dict) and len(value["configs"]) == n
