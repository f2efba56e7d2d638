"""The side-by-side re-run of a rewrite re-checks its correctness: a rewrite wrong only sometimes (a
race) passes its screening and then differs in a round, and must be rejected, not judged on its
screening times.  Only a timeout or an infrastructure failure falls back to the screening times.

Also: a model's rewrite nested too deeply for Python's parser is an unusable reply, not a crash.

Uses the scripted fake Kernel Tuner session of tests/test_transform_units.py (no compiler)."""

from __future__ import annotations

import pytest

from kerntune.errors import KerntuneError
from kerntune.evaluate.trial import Status, Trial
from kerntune.llm import LLMClient
from kerntune.transform import KernelSpec, OnePromptTuningStrategy
from kerntune.transform.context import TransformContext
from kerntune.transform.scripted import ScriptedTransformProvider
from test_transform_units import FakeSession, execute, kernel


class FlakyRerunSession(FakeSession):
    """The rewrite (its code says 'REWRITE') is screened normally; after ``screened`` of its configs have
    run, its next turn yields ``status`` (or, with ``status`` None, the session raises as a dead worker
    does).  ``once``: only that one turn fails."""

    def __init__(self, status: Status | None, screened: int = 2, once: bool = False):
        super().__init__()
        self.status, self.screened, self.once = status, screened, once
        self.rewrite_turns = 0

    def bench(self, spec, configs, save_reference=False):
        for i, t in super().bench(spec, configs, save_reference):
            if "REWRITE" in spec.source:
                self.rewrite_turns += 1
                fails = self.rewrite_turns > self.screened and (not self.once or self.rewrite_turns == self.screened + 1)
                if fails and self.status is None:
                    raise KerntuneError("the worker died (exit code -9)")
                if fails:
                    t = Trial(dict(t.config), self.status, error=f"{self.status.value} in this turn")
            yield i, t


def judged(session, rounds: int = 6):
    """The original (2.0 ms) and a one-prompt rewrite (1.5 ms, TILE 1 and 2) through ``session``."""
    reply = execute(kernel("tiled REWRITE", 1.5, "int t = TILE * block_size_x;"), TILE=[1, 2], block_size_x=[16])
    spec = KernelSpec("matmul", kernel("original", 2.0, "int x = block_size_x;"), {"block_size_x": [16]})
    llm = LLMClient(ScriptedTransformProvider([{"kind": "one-prompt", "reply": reply}]), retries=0)
    ctx = TransformContext(spec, session, llm, budget=10, confirm_rounds=rounds)
    ctx.measure_original()
    OnePromptTuningStrategy().run(ctx)
    return ctx, ctx.records[0]


def test_a_rewrite_wrong_only_when_re_run_side_by_side_is_rejected_as_incorrect():
    """Correct at both screened configs, wrong in the first side-by-side turn: a race.  Its screening
    times say 1.33x faster; it must be rejected as incorrect and the original stays current."""
    ctx, rec = judged(FlakyRerunSession(Status.WRONG_RESULT))
    assert rec.status == "rejected", (rec.status, rec.reason, rec.notes)
    assert rec.reason.startswith("incorrect when re-run side by side"), rec.reason
    assert "rewrite" in rec.reason and "wrong_result in this turn" in rec.reason
    assert ctx.current.step == "original" and "REWRITE" not in ctx.current.spec.source
    assert ctx.accepted == []


def test_a_rewrite_wrong_in_a_later_round_only_is_rejected_too():
    """Right in round 1, wrong once in round 2: any wrong round rejects the step."""
    ctx, rec = judged(FlakyRerunSession(Status.WRONG_RESULT, screened=3, once=True))
    assert rec.status == "rejected" and rec.reason.startswith("incorrect when re-run side by side (round 2"), rec.reason
    assert ctx.current.step == "original"


def test_a_rewrite_that_crashes_when_re_run_is_rejected():
    ctx, rec = judged(FlakyRerunSession(Status.RUNTIME_ERROR))
    assert rec.status == "rejected" and rec.reason.startswith("does not run reliably: runtime_error"), rec.reason
    assert ctx.current.step == "original"


def test_a_dead_worker_in_the_re_run_falls_back_to_screening_times_and_says_why():
    """A worker that died says nothing about the rewrite's correctness: it is judged on its screening
    times (1.5 against 2.0 ms: accepted) and the note names the failure."""
    ctx, rec = judged(FlakyRerunSession(None))
    assert rec.status == "accepted", (rec.reason, rec.notes)
    assert rec.reason.startswith("1.329x faster: 1.517 ms against 2.016 ms"), rec.reason
    note = next(n for n in rec.notes if n.startswith("side-by-side re-time failed"))
    assert "(no result of the rewrite in round 1" in note and note.endswith("judged on screening times"), note
    assert "the worker died" in note


def test_a_rewrite_that_times_out_in_its_own_re_run_turn_is_rejected():
    """A rewrite that hangs when re-run side by side was accepted on its screening times; a hang of its
    own turn now rejects it, as a crash does (tests/test_transform_kt_fixes.py has the real case)."""
    ctx, rec = judged(FlakyRerunSession(Status.TIMEOUT))
    assert rec.status == "rejected" and rec.reason.startswith("hangs when re-run side by side (round 1, rewrite)"), \
        rec.reason


def test_a_correct_rewrite_is_still_judged_side_by_side():
    ctx, rec = judged(FlakyRerunSession(Status.WRONG_RESULT, screened=10**6))
    assert rec.status == "accepted" and "paired by round over 6 rounds" in rec.reason, rec.reason


# -- a rewrite nested too deeply for Python's parser ---------------------------------------------------------------
DEEP = [
    "x = " + "-" * 10000 + "1",                # the parser's stack: MemoryError
    "x = 1" + " + 1" * 40000,                   # the AST's depth: RecursionError
    "def launch(config, inputs):\n    return " + "a." * 60000 + "b",
]


@pytest.mark.parametrize("code", DEEP, ids=["unary", "sum", "attributes"])
def test_a_deeply_nested_triton_rewrite_is_an_unusable_reply_not_a_crash(code):
    """A model looping on one token wrote these; ast.parse raised RecursionError or MemoryError, which
    is no LLMError, so the transform run ended with a traceback.  Now it is a problem in the reply, and
    the model's answer is refused as unusable after its repair round."""
    from kerntune.llm.types import LLMError
    from kerntune.transform.triton_static import variant_problems

    problems = variant_problems(code)
    assert problems and problems[0].startswith("code: not usable Python: nested too deeply"), problems
    spec = KernelSpec("matmul", kernel("original", 2.0, "int x = block_size_x;"), {"block_size_x": [16]})
    reply = {"code": code, "tune_params": {"BLOCK": [16, 32]}}
    llm = LLMClient(ScriptedTransformProvider([{"kind": "execute", "reply": reply}]), retries=0)
    ctx = TransformContext(spec, FakeSession(), llm, budget=10)
    with pytest.raises(LLMError):
        ctx.ask("execute", "transform_execute.md", ctx.fields(), validate=lambda a: variant_problems(a["code"]))
