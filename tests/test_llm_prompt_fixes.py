"""What the LLM strategies tell the model, and what ``prompt show`` and ``options`` tell the user.

* The refinement prompt's failure patterns listed a value every failure shared even where the
  successes shared it as much (a flag set in 3 of 3 failures, in about half the successes and in the
  prompt's own top configurations), under "avoid the failed patterns": the model was steered away
  from good regions.
* ``kerntune prompt show --round 1 --run RUN`` ignored --run: it printed a fresh round-1 prompt
  ("Propose 25" for a run started with -o initial=10), where round 2 printed the stored prompt.
* Permutation parameters were described in Python syntax (``['i', 'j', 'k']``, None, True) under a
  system prompt that demands JSON: a model that copied the items had its whole answer refused.  A
  list element's error, which goes back to the model in a repair round, was Python too.
* ``llm-seeded -o fallback=random|pattern`` was accepted and listed as "who proposes when the model
  fails", but with llm-seeded's default top_up=false a failed call ends the LLM phase: no fallback
  proposes.

Real recorded spaces (examples/spaces), a real store and the real CLI (``python -m kerntune``) where
the output matters.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from cli_runs import one_line, run_cli
from kerntune.evaluate import ReplayEvaluator
from kerntune.llm.parsing import parse_configs
from kerntune.run.search import run_search
from kerntune.space import Choice, ListParam, Permutation, PowerOfTwo, Space
from kerntune.strategies import Budget
from kerntune.strategies.llm.feedback import ranked
from kerntune.strategies.llm.prompting import first_round, refine_round

ROOT = Path(__file__).resolve().parent.parent
SPACES = ROOT / "examples" / "spaces"
CONV = SPACES / "convolution_A100.json.gz"
MATMUL = SPACES / "matmul_4096_h100.json.gz"
CONV_TRANSCRIPT = ROOT / "benchmarks" / "llm" / "transcripts" / "convolution_A100.llm.jsonl"
FAILED = "## Patterns shared by the failed configurations"


def _failure_section(space: Space, history: list) -> dict[str, dict]:
    """The failure patterns of the refinement prompt built on ``history``: status -> the values listed
    as shared by every failure of that status."""
    text = refine_round(space, {}, {}, history, 15, 1, False)[1].content
    section = text.split(FAILED, 1)[1].split("\n## ", 1)[0]
    return {m.group(1): json.loads(m.group(2))
            for m in re.finditer(r"^- (\w+): every one has (\{.*\})$", section, re.M)}


def _random_history(path: Path, seed: int) -> tuple[Space, list]:
    ev = ReplayEvaluator.from_file(path)
    return ev.space, run_search(ev, "random", Budget(max_evals=60), seed=seed).history


@pytest.mark.parametrize("path, seed", [(CONV, 1), (CONV, 2), (MATMUL, 2)])
def test_failure_patterns_list_no_value_the_top_configurations_have(path: Path, seed: int) -> None:
    """A value shared by every failure but held by top configurations too (and by about half the
    successes) was listed under the failed patterns the model is told to avoid."""
    space, history = _random_history(path, seed)
    top = ranked(history)[:5]
    failed = [t for t in history if not t.ok]
    shared = {n for n in space.names if len({json.dumps(t.config[n]) for t in failed}) == 1
              and failed[0].config[n] != space.default[n]}
    assert any(t.config[n] == failed[0].config[n] for t in top for n in shared)  # the case is here
    for status, values in _failure_section(space, history).items():
        for name, value in values.items():
            assert not [t for t in top if t.config[name] == value], (status, name, value)


def test_failure_patterns_keep_a_value_every_failure_has_and_few_successes_have() -> None:
    """The contrast keeps a real pattern: a value all 8 failures share, that a quarter of the
    successes and none of the top configurations have, is still listed."""
    space, history = _random_history(MATMUL, 0)
    ok = ranked(history)
    listed = _failure_section(space, history)
    assert listed, "no failure pattern listed"
    for values in listed.values():
        for name, value in values.items():
            assert sum(t.config[name] == value for t in ok) <= len(ok) / 4


@pytest.fixture(scope="module")
def conv_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A real store holding an llm run on convolution_A100 started with -o initial=10 (its first
    answer replayed from the committed transcript); (tmp, run id)."""
    tmp = tmp_path_factory.mktemp("round1")
    proc = run_cli(tmp, "tune", "--replay", str(CONV), "--strategy", "llm", "--llm", f"replay:{CONV_TRANSCRIPT}",
                   "-o", "initial=10", "-o", "max_rounds=1", "--budget", "15", "--no-report")
    assert proc.returncode == 0, proc.stderr
    return tmp, proc.stdout.split("run id: ")[1].split()[0]


def test_prompt_show_round_1_with_run_prints_the_prompt_that_run_stored(conv_run: tuple[Path, str]) -> None:
    """--run was ignored for round 1: a fresh prompt asking for 25 configs, no note."""
    tmp, rid = conv_run
    proc = run_cli(tmp, "prompt", "show", "--space", str(CONV), "--round", "1", "--run", rid)
    assert proc.returncode == 0, proc.stderr
    assert "as stored" in proc.stderr, proc.stderr
    assert "first batch of 10 configurations" in proc.stdout and "first batch of 25" not in proc.stdout


def test_prompt_show_round_1_with_run_rebuilds_with_the_runs_batch_size(conv_run: tuple[Path, str]) -> None:
    """Rebuilt with an option (--no-source), round 1 of the run still asks for the run's 10, and says
    it is rebuilt; a run of another space is refused for round 1 as for round 2."""
    tmp, rid = conv_run
    proc = run_cli(tmp, "prompt", "show", "--space", str(CONV), "--round", "1", "--run", rid, "--no-source")
    assert proc.returncode == 0, proc.stderr
    assert "rebuilt" in proc.stderr and "```" not in proc.stdout, proc.stderr
    assert "first batch of 10 configurations" in proc.stdout
    one_line(run_cli(tmp, "prompt", "show", "--space", str(MATMUL), "--round", "1", "--run", rid),
             "measured another space")


def test_permutation_items_in_the_prompt_are_json_a_model_can_copy() -> None:
    """``permutation of ['i', 'j', 'k']``: an answer copying it is not JSON, and was refused whole."""
    space = Space([Permutation("order", items=("i", "j", "k")), Permutation("mode", items=(None, True, "x")),
                   PowerOfTwo("B", low=16, high=64)])
    prompt = first_round(space, {}, {}, 5)[1].content
    for name in ("order", "mode"):
        copied = re.search(rf"^- {name}: permutation of (\[.*?\]);", prompt, re.M).group(1)
        parsed = parse_configs('{"configs":[{"reasoning":"as listed","config":{"%s":%s}}]}' % (name, copied), space)
        assert len(parsed.accepted) == 1 and not parsed.rejected, (copied, parsed.rejected)


def test_a_list_elements_error_names_the_value_in_json() -> None:
    """The reason a list element is refused goes back to the model: ``'zz'`` and None were Python's."""
    space = Space([ListParam("bs", element=Choice("e", options=("a", "b", None)), length=2)])
    parsed = parse_configs('{"configs":[{"config":{"bs":["a","zz"]}}]}', space)
    reason = parsed.rejected[0].reason
    assert '[1]="zz" is not one of ["a", "b", null]' in reason and "'zz'" not in reason, reason


def test_llm_seeded_refuses_a_fallback_that_would_not_act(tmp_path: Path) -> None:
    """Without top_up a failed model call ends llm-seeded's LLM phase, so fallback random/pattern did
    nothing; now one line says so, before a run is stored (top_up=false given as well)."""
    from kerntune.errors import KerntuneError
    from kerntune.strategies.options import validate_options

    proc = run_cli(tmp_path, "tune", "--replay", str(CONV), "--strategy", "llm-seeded", "--llm",
                   f"replay:{CONV_TRANSCRIPT}", "-o", "fallback=random", "--budget", "10", "--no-report")
    one_line(proc, "fallback=random has no effect without -o top_up=true", "the classical search goes on")
    assert "run id" not in proc.stdout
    with pytest.raises(KerntuneError, match="fallback=pattern has no effect without -o top_up=true"):
        validate_options("llm-seeded", {"fallback": "pattern", "top_up": False})


def test_llm_seeded_accepts_the_fallbacks_that_act_and_its_listing_says_which() -> None:
    """fallback=error (stops) and any fallback with top_up=true act; the listing said "who proposes
    when the model fails" of an option that, by default, proposes nothing."""
    from kerntune.strategies.options import describe_options, validate_options

    for opts in ({"fallback": "error"}, {"fallback": "random", "top_up": True}, {"top_up": False}):
        assert validate_options("llm-seeded", opts) == opts
    what = next(row[3] for row in describe_options("llm-seeded") if row[0] == "fallback")
    assert "random and pattern need top_up=true" in what, what
    proc = run_cli(Path("/tmp"), "options", "llm-seeded", env={"COLUMNS": "400"})
    assert proc.returncode == 0 and "top_up=true" in proc.stdout, proc.stderr


def test_scripted_llm_seeded_called_directly_refuses_the_fallback_before_measuring(tmp_path: Path) -> None:
    """The strategy says it too, for a caller that skips the options' check: nothing is measured and
    the model is not asked (the fallback was silently dropped before)."""
    from kerntune.errors import KerntuneError
    from kerntune.llm import LLMClient
    from kerntune.strategies import get_strategy
    from kerntune.strategies.base import SearchContext
    from scripted import ScriptedProvider, answer

    ev = ReplayEvaluator.from_file(CONV)
    provider = ScriptedProvider(lambda n, m: answer(ev.space.default))
    ctx = SearchContext(ev.space, ev, Budget(max_evals=10), seed=0, llm=LLMClient(provider, retries=0))
    with pytest.raises(KerntuneError, match="llm-seeded: fallback=random has no effect without -o top_up=true"):
        get_strategy("llm-seeded")(ctx, fallback="random")
    assert not ctx.history and not provider.prompts


def test_a_refused_scalar_value_is_named_in_json() -> None:
    """A refused string, None or bool was named in Python ('x', None, True) in the errors a repair round
    sends back to a model told to write JSON."""
    from kerntune.space import Choice, Space

    space = Space([Choice("mode", options=("a", "b"))])
    said = [str(e) for v in ("x", None, True) for e in space.validate({"mode": v})]
    assert any('"x" is not allowed' in s for s in said), said
    assert any("null is not allowed" in s for s in said) and any("true is not allowed" in s for s in said), said


def test_llm_refuses_a_fallback_that_would_not_act_with_top_up_false() -> None:
    """``llm -o top_up=false -o fallback=random`` was accepted; without the top-up a failed call ends the
    rounds and the fallback never proposes (as llm-seeded's refusal above says for its own default)."""
    from pydantic import ValidationError

    from kerntune.strategies.options import LLMOptions

    with pytest.raises(ValidationError, match="fallback=random has no effect with top_up=false"):
        LLMOptions(top_up=False, fallback="random")
    for ok in ({"top_up": False, "fallback": "error"}, {"top_up": True, "fallback": "random"}, {"top_up": False}):
        LLMOptions(**ok)


def test_prompt_show_rebuilds_a_later_round_with_the_runs_batch_size(tmp_path: Path) -> None:
    """A later round rebuilt with an option (--no-source) asked for 15 configs whatever the run had asked
    for in that round; it now asks for the run's own (refine=6 here), unless --n is given."""
    proc = run_cli(tmp_path, "tune", "--replay", str(CONV), "--strategy", "llm", "--llm", f"replay:{CONV_TRANSCRIPT}",
                   "-o", "initial=10", "-o", "refine=6", "-o", "max_rounds=2", "-o", "patience=5", "--budget", "20",
                   "--no-report")
    assert proc.returncode == 0, proc.stderr
    rid = proc.stdout.split("run id: ")[1].split()[0]
    shown = run_cli(tmp_path, "prompt", "show", "--space", str(CONV), "--round", "2", "--run", rid, "--no-source")
    assert shown.returncode == 0, shown.stderr
    assert "Suggest up to 6 NEW UNIQUE configurations" in shown.stdout, shown.stdout[-2000:]
    given = run_cli(tmp_path, "prompt", "show", "--space", str(CONV), "--round", "2", "--run", rid, "--n", "4")
    assert "Suggest up to 4 NEW UNIQUE configurations" in given.stdout
