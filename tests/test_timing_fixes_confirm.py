"""kerntune.evaluate.retime.confirm when the runoff's pick fails its re-timing: not silently no winner
(the caller would keep the pick's screening figure), but a note and the fastest re-timed config."""

from __future__ import annotations

from kerntune.evaluate.retime import confirm
from kerntune.evaluate.trial import Status, Trial
from kerntune.space import Choice, Space

SPACE = Space([Choice("n", options=(0, 1, 2))], default={"n": 0})
HISTORY = [Trial({"n": 1}, Status.OK, 1.0, [1.0]), Trial({"n": 2}, Status.OK, 1.1, [1.1]),
           Trial({"n": 0}, Status.OK, 2.0, [2.0])]


class PickFails:
    space = SPACE

    def __init__(self, baseline_ok: bool = True) -> None:
        self.baseline_ok = baseline_ok

    def runoff(self, configs, first_ms):  # noqa: ANN001, ANN201
        return {"winner": 0}

    def retime(self, configs, rounds=None):  # noqa: ANN001, ANN201
        base = (Trial(dict(configs[1]), Status.OK, 2.0, [2.0] * 6, extra={"rounds_ms": [2.0] * 6})
                if self.baseline_ok else Trial(dict(configs[1]), Status.RUNTIME_ERROR, error="boom too"))
        return [Trial(dict(configs[0]), Status.RUNTIME_ERROR, error="boom"), base]


def test_a_pick_that_fails_re_timing_is_noted_and_the_re_timed_baseline_stands() -> None:
    found = confirm(PickFails(), HISTORY, baseline={"n": 0})
    assert found.retimed[0].config == {"n": 1}
    assert found.winner is found.baseline and found.winner.config == {"n": 0}
    assert any("failed when re-timed" in n and "boom" in n for n in found.notes)


def test_when_every_re_timed_config_fails_a_note_says_so() -> None:
    found = confirm(PickFails(baseline_ok=False), HISTORY, baseline={"n": 0})
    assert found.winner is None
    assert any("runoff's pick failed" in n for n in found.notes)
    assert any("every re-timed config failed" in n for n in found.notes)


def test_a_zero_round_does_not_crash_the_speedup() -> None:
    class ZeroRound(PickFails):
        def retime(self, configs, rounds=None):  # noqa: ANN001, ANN201
            return [Trial(dict(configs[0]), Status.OK, 1.0, [1.0] * 6, extra={"rounds_ms": [1.0] * 5 + [0.0]}),
                    Trial(dict(configs[1]), Status.OK, 2.0, [2.0] * 6, extra={"rounds_ms": [2.0] * 6})]

    found = confirm(ZeroRound(), HISTORY, baseline={"n": 0})
    assert found.speedup is not None and found.speedup.n == 5 and found.speedup.median == 2.0
