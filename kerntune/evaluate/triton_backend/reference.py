"""The reference a benchmark worker checks every config's output against (``Reference``), apart from
``worker.py`` (the worker's loop) so that each stays readable: taking it (``reference()`` or the default
config's launch, each said to the parent so that a crash or hang there is the default's), and the
default's launches that decide which bool or integer buffers the second checked launch may zero."""

from __future__ import annotations

from typing import Any, Callable

from kerntune.evaluate.triton_backend.output_check import (ZeroedRelaunch, _holds_values, clone, compare_outputs,
                                                           unwritten_poisoned)
from kerntune.evaluate.triton_backend.worker import classify, cuda_broken, is_fatal


class _DefaultBroke(Exception):
    """Raised out of ``ZeroedRelaunch.trust`` where a launch of the default broke the CUDA context."""


class _NoOutput(TypeError):
    """The kernel file's ``reference()`` returned no tensor or number (None, a string, a dict)."""


class Reference:
    """The output a benchmark worker checks each config's against, taken once, apart from any config.

    ``reference(inputs)`` where the kernel file has one, else the default config's output.  Where the
    default config fails (or the parent says it failed in another worker: ``use_default=False``), the
    first config that runs gives the reference (``kerntune.run.decorator_search``'s rule): a config is
    judged on its own launch only, never failed for the default's error.  A failure is kept, not paid
    again by every config.  Before the default's launch (``default``) or the call of ``reference()``
    (``own``) the worker says so on its pipe, and again once it is over (``taken``, or ``failed`` where
    the worker goes on), so that a reference that hangs or kills the worker is told apart from the
    config behind it, and a config that hangs or kills the worker after the reference was taken is
    blamed on the config alone.  Where the default did, the parent sends that config again, to a fresh
    worker that skips the default; ``reference()`` cannot be skipped, so where it did (or left the CUDA
    context unusable), the parent fails every config with its error from then on instead of meeting it
    again in each fresh worker, each time charging the config behind it.  The default's launches that
    find what ``ZeroedRelaunch`` may zero are said so too (``_trust_default``): made in a config's task,
    a default that crashed or hung there failed every right config with a bool or integer output."""

    def __init__(self, module: Any, space: Any, inputs: Any, originals: list[Any], torch: Any,
                 sync: Callable[[], None], restore: Callable[[], None], say: Callable[[dict[str, Any]], None]) -> None:
        self.module, self.space, self.inputs, self.torch = module, space, inputs, torch
        self.sync, self.restore, self.say = sync, restore, say
        self.own = callable(getattr(module, "reference", None))
        self.have, self.value = False, None
        self.error: str | None = None  # reference() failed: every config fails with it
        self.default_failed: str | None = None  # then the first config that runs is the reference
        self.told = False  # the parent knows the default failed
        self.zeroed = ZeroedRelaunch(module, inputs, originals, torch, restore, sync, self)

    def prepare(self, use_default: bool) -> dict[str, Any] | None:
        """Take the reference unless taken or failed already, then (the default not failed) find what
        may be zeroed; the result to report where that left the CUDA context unusable, else None."""
        if self.error:
            return None
        if not use_default and self.default_failed is None:
            self.default_failed, self.told = "the default config failed in another benchmark worker", True
        if not self.have and (self.own or self.default_failed is None):
            failed = self._take()
            if failed is not None or self.error:
                return failed
        if self.have and self.default_failed is None and self.zeroed.trusted is None:
            return self._trust_default()
        return None

    def _take(self) -> dict[str, Any] | None:
        """``prepare``'s reference: ``reference()``, or the default config's launch."""
        try:
            if self.own:
                self.say({"reference": "own"})
                value = self.module.reference(self.inputs)
                if not _holds_values(value, self.torch):  # was "launch returned no output", the config blamed
                    raise _NoOutput(f"reference() returned {type(value).__name__}, not the output tensor(s)")
            else:
                self.say({"reference": "default"})
                with unwritten_poisoned(self.torch):  # as every config's checked launch (main)
                    value = self.module.launch(self.space.default, self.inputs)
            self.sync()
            self.say({"reference": "taken"})  # over: a hang or crash from now on is the config's
            self.value, self.have = clone(value), True
            self.restore()
            return None
        except Exception as exc:  # noqa: BLE001 - the reference's failure, not a config's
            said = isinstance(exc, _NoOutput)
            text = str(exc) if said else classify(exc)[1]
            broken = cuda_broken(self.torch) if not is_fatal(text) else text
        if self.own:
            self.error = (text if said else f"reference() failed: {text}")[-2000:]
        else:
            self.default_failed = f"the default config {dict(self.space.default)} failed: {text}"[-2000:]
        if broken is None:
            # over too, failed: the config behind it runs next (and gives the reference, or fails with
            # reference()'s error)
            self.say({"reference": "failed"})
            self.restore()
            return None
        out: dict[str, Any] = {"status": "runtime_error", "error": self.error or self.default_failed, "fatal": True}
        if self.own:  # every fresh worker would call it again and die the same way: the parent stops here
            out["reference_failed"] = self.error
        else:  # the config itself never ran: the parent sends it to a fresh worker
            out.update(default_failed=self.default_failed, retry=True)
            self.told = True
        return out

    def _trust_default(self) -> dict[str, Any] | None:
        """The default's launches with each bool or integer buffer (or its own allocations) zeroed, each
        said as the default's: a hang or crash there sends the config behind it again, to a fresh worker
        that skips the default.  An error trusts nothing; one that breaks the CUDA context fails the default."""
        def each(launch: Callable[[], bool]) -> bool:
            self.say({"reference": "default"})
            try:
                ok = launch()
            except Exception as exc:  # noqa: BLE001 - the default's failure, not a config's
                text = classify(exc)[1]
                broken = cuda_broken(self.torch) if not is_fatal(text) else text
                if broken is not None:
                    raise _DefaultBroke(text) from None
                ok = False
            self.say({"reference": "taken"})
            return ok

        try:
            self.zeroed.trust(self.space.default, each)
        except _DefaultBroke as exc:
            self.default_failed = f"the default config {dict(self.space.default)} failed: {exc}"[-2000:]
            self.told = True
            return {"status": "runtime_error", "error": self.default_failed, "fatal": True,
                    "default_failed": self.default_failed, "retry": True}
        return None

    def check(self, out: Any) -> tuple[str | None, dict[str, Any]]:
        """Why ``out`` is wrong (None: right), and what to tell the parent along with the result."""
        news: dict[str, Any] = {}
        if not self.have:  # the default failed: this config's own output is the reference
            self.value, self.have = clone(out), True
            if not self.told:
                news["default_failed"], self.told = self.default_failed, True
        return compare_outputs(out, self.value, self.torch), news
