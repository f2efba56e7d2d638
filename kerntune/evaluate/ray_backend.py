"""Distributed evaluation on Ray: one actor per GPU across a cluster, each holding an
ordinary evaluator, behind the same ``evaluate``/``stream`` interface.

Why actors that hold whole evaluators: a Triton config is compiled into the Triton
cache of the node that benchmarks it, so each GPU actor compiles on its own node's
CPUs (its share of them, ``cpus_per_actor``) and benchmarks on its one GPU (Ray sets
``CUDA_VISIBLE_DEVICES`` for it); shipping compiled kernels between hosts would cost
more than compiling again.  On CI the actors hold replay evaluators.

The driver keeps every config of a batch in exactly one place: the queue, one actor's
in-flight set, or the results.  The queue is handed out round-robin, one config to each
actor in turn up to its window, so a small batch still uses every GPU.  Results stream back
as they finish (so the store commits them at once); an actor that is lost is replaced and its
in-flight configs go back to the front of the queue, so none is lost: one that dies
(``RayActorError``: killed, OOM, node lost), one whose evaluator raises (``RayTaskError``),
and one that holds work and returns no result for ``stall_s`` (a hung evaluator).  A result
is only accepted from the actor that holds the config, so none gets two results.  A config
whose actor was lost under it more than ``max_requeues`` times gets a ``runtime_error`` trial
(with the last loss's reason) instead of looping forever.  An evaluator that fails the same way
on actors that held different configs fails the run at once with its error.

A batch left unfinished (the consumer stops reading or closes the stream when a budget ends,
or the batch fails) is abandoned: its actors drop its configs (``EvalActor.abandon``), and the
next batch (or re-timing) first waits up to ``abandon_s`` for each of them to leave the config
it is measuring, then replaces those that have not: new configs never queue behind work nobody
reads, nor are blamed for its stall or its failure.  Ray is imported lazily: kerntune works
without it.
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from kerntune.errors import KerntuneError
from kerntune.evaluate.base import Evaluator
# The actor side lives in ray_actor; its names are importable from here as before.
from kerntune.evaluate.ray_actor import (EvalActor, EvaluatorFactory, EvaluatorFailed, ReplayFactory,  # noqa: F401
                                         ShippedFile, TritonFactory)
from kerntune.evaluate.trial import Status, Trial
from kerntune.space import Config

RAY_MISSING = "distributed evaluation needs Ray: pip install kerntune[distributed]"


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise KerntuneError(RAY_MISSING) from None
    return ray


@dataclass
class _Slot:
    index: int
    actor: Any
    in_flight: set[int] = field(default_factory=set)
    calling: bool = False
    restarts: int = 0
    alive: bool = True
    since: float = 0.0        # when its in-flight work last made progress, or its start was asked after
    answered: bool = False    # it has answered a step (started) and dropped any abandoned batch; no work before
    stale: int | None = None  # an abandoned batch its actor may still be measuring (to drop before new work)


@dataclass
class RayStats:
    """What the dispatch did, for tests and reports."""

    dispatched: int = 0           # configs sent to actors, re-sends included
    requeued: int = 0             # configs sent back to the queue because their actor was lost
    restarts: int = 0             # actors replaced
    given_up: int = 0             # configs that lost their actor more than max_requeues times
    stalls: int = 0               # actors lost because they held work and returned nothing for stall_s
    errors: int = 0               # actors lost because their evaluator raised
    abandoned: int = 0            # actors told to drop an abandoned batch
    recycled: int = 0             # actors replaced as they still measured an abandoned batch after abandon_s
    results: Counter = field(default_factory=Counter)  # results per actor slot


class RayEvaluator(Evaluator):
    """``evaluate(batch) -> list[Trial]`` over ``num_actors`` Ray actors, each holding the
    evaluator ``factory`` builds on its node.

    ``address``: ``auto`` (the cluster this machine belongs to), ``ray://HOST:PORT`` (Ray
    Client), or ``local`` (start a private one-machine cluster).  A Ray session that is
    already initialised is used as it is (and left running on ``close``).  ``abandon_s``: how
    long an actor may go on with the config of an abandoned batch that it is measuring before
    it is replaced (a replacement costs an actor's start: about as long, on a GPU node).
    """

    name = "ray"

    def __init__(self, factory: EvaluatorFactory, address: str | None = "auto", num_actors: int | None = None,
                 gpus_per_actor: float | None = None, cpus_per_actor: float | None = None,
                 window: int | None = None, max_requeues: int = 3, max_restarts: int = 3,
                 wait_s: float = 1.0, stall_s: float = 900.0, abandon_s: float = 10.0) -> None:
        ray = self.ray = import_ray()
        self.address = address or "local"
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            _connect(ray, self.address)
        self.factory = factory
        self.gpus_per_actor = float(getattr(factory, "gpus", 0.0) if gpus_per_actor is None else gpus_per_actor)
        self.max_requeues, self.max_restarts = max_requeues, max_restarts
        self.wait_s, self.stall_s, self.abandon_s = wait_s, stall_s, abandon_s
        self.stats = RayStats()
        self.last_loss = ""
        self._batches = itertools.count()
        self._streaming = -1  # the batch of the latest stream: an older one's cleanup must not touch the slots
        self._actor_cls = ray.remote(EvalActor)
        self.slots: list[_Slot] = []
        try:
            self.cpus_per_actor, n = _size(ray, self.gpus_per_actor, cpus_per_actor, num_actors)
            self.slots = [_Slot(k, self._new_actor()) for k in range(n)]
            infos = ray.get([s.actor.info.remote() for s in self.slots], timeout=stall_s)
        except KerntuneError:
            self.close()
            raise
        except Exception as exc:
            self.close()
            raise KerntuneError(f"Ray actors did not start: {(str(exc).strip() or type(exc).__name__).splitlines()[0]}"
                                ) from None
        for s in self.slots:
            s.answered = True
        info = infos[0]
        super().__init__(info["space"])
        self.info, self.pids = info, [i["pid"] for i in infos]
        self.simulated_clock = info["simulated_clock"]
        self.parallelism = sum(i["parallelism"] for i in infos)
        self.window = window or max(2, 2 * info["parallelism"])
        self.can_retime = info["can_retime"]

    def _new_actor(self) -> Any:
        opts: dict[str, Any] = {"num_cpus": self.cpus_per_actor, "max_restarts": 0}
        if self.gpus_per_actor:
            opts["num_gpus"] = self.gpus_per_actor
        return self._actor_cls.options(**opts).remote(self.factory, max(1, int(self.cpus_per_actor)))

    # -- evaluating --------------------------------------------------------------------------
    def evaluate(self, configs: Sequence[Config]) -> list[Trial]:
        return [t for _, t in sorted(self.stream(configs), key=lambda it: it[0])]

    def stream(self, configs: Sequence[Config]) -> Iterator[tuple[int, Trial]]:
        ray = self.ray
        batch = next(self._batches)  # results of an abandoned earlier batch are told apart by this
        queue: deque[int] = deque(range(len(configs)))
        attempts: Counter = Counter()
        done: set[int] = set()
        calls: dict[Any, _Slot] = {}
        failures: dict[str, list[frozenset[int]]] = {}  # per evaluator error: the configs each actor it failed held
        last_error: dict[int, str] = {}  # per config: the evaluator error it last lost its actor to
        held: list[tuple[int, Trial]] = []  # given up after an evaluator error: out once the run is known to go on
        settling: set[Any] = set()  # abandon calls: each answers whether its actor is free of an abandoned batch

        def feed() -> None:
            """Hand the queue out round-robin, one config to each live actor that is not in a call
            per pass, until each holds its window or the queue is empty; then one ``step`` call
            to each of them that holds work (an empty one asks for results).  A config whose
            actor was lost under it goes alone to an actor with nothing in flight, so that the
            configs that shared an actor with a config that hangs or crashes it are not charged
            for it again.  A fresh actor is first asked to answer an empty step: its start (a
            node to find, torch to import) is not a stall of the configs it would hold."""
            now = time.monotonic()
            free = [s for s in self.slots if s.alive and not s.calling]
            for s in free:
                if not s.answered:
                    s.since, s.calling = now, True
                    calls[s.actor.step.remote([], 0.0)] = s
            free = [s for s in free if s.answered]
            take: dict[int, list[int]] = {s.index: [] for s in free}
            open_ = [s for s in free if len(s.in_flight) < self.window and not any(attempts[i] for i in s.in_flight)]
            while queue and open_:
                for s in list(open_):
                    if not queue:
                        break
                    mine = take[s.index]
                    if attempts[queue[0]]:  # it lost an actor before: measured alone, so a next loss is its own
                        if not s.in_flight and not mine:
                            mine.append(queue.popleft())
                        open_.remove(s)
                        continue
                    mine.append(queue.popleft())
                    if len(s.in_flight) + len(mine) >= self.window:
                        open_.remove(s)
            for s in free:
                items = take[s.index]
                if not items and not s.in_flight:
                    continue
                if not s.in_flight:
                    s.since = now  # the stall clock runs while an actor holds work
                s.in_flight.update(items)
                self.stats.dispatched += len(items)
                s.calling = True
                calls[s.actor.step.remote([(batch, i, configs[i]) for i in items], self.wait_s)] = s

        def lose(slot: _Slot, reason: str, detail: str = "", give_up: frozenset[int] = frozenset(),
                 hold: bool = False) -> Iterator[tuple[int, Trial]]:
            """The actor is lost: replace it, its configs back to the front of the queue (those
            lost more than max_requeues times, or in ``give_up``, get a runtime_error; ``hold``:
            kept in ``held`` until another result shows the run goes on)."""
            self.last_loss = reason
            for ref in [r for r, s in calls.items() if s is slot]:
                del calls[ref]  # a hung call's late answer is never read
            slot.calling = False
            lost = sorted(slot.in_flight)
            slot.in_flight.clear()
            for i in reversed(lost):
                attempts[i] += 1
                if attempts[i] <= self.max_requeues and i not in give_up:
                    queue.appendleft(i)  # to the front: these were due first
                    self.stats.requeued += 1
            self._replace(slot)
            for i in lost:
                if attempts[i] > self.max_requeues or i in give_up:
                    self.stats.given_up += 1
                    done.add(i)
                    trial = Trial(dict(configs[i]), Status.RUNTIME_ERROR,
                                  error=f"its Ray actor was lost {attempts[i]} times while measuring it;"
                                        f" the last time: {detail or reason}")
                    if hold:
                        held.append((i, trial))
                    else:
                        yield i, trial

        def fail(slot: _Slot, summary: str, detail: str) -> Iterator[tuple[int, Trial]]:
            """The actor's evaluator raised.  The same error (type and message, addresses and pids
            aside) from an actor that held none of the configs another one it failed held is the
            evaluator's, not a config's (no GPU worker starts, the kernel file is broken): the run
            fails with it at once, as replacing actors and re-sending configs would only repeat it.
            A config lost to the same error twice, the second time alone, is not sent again."""
            key = _alike(summary)
            holding = frozenset(slot.in_flight)
            seen = failures.setdefault(key, [])
            if any(not holding & earlier for earlier in seen):
                self.last_loss = f"actor {slot.index}'s evaluator failed: {summary}"
                raise KerntuneError(f"the evaluator failed the same way on {len(seen) + 1} Ray actors that held"
                                    f" different configs: {summary}")
            seen.append(holding)
            again = frozenset(i for i in holding if len(holding) == 1 and last_error.get(i) == key)
            last_error.update(dict.fromkeys(holding, key))
            yield from lose(slot, f"actor {slot.index}'s evaluator failed: {summary}", detail, again, hold=True)

        prev, self._streaming = self._streaming, batch
        for slot in self.slots:
            if slot.alive and slot.in_flight:  # held for an older stream that was left open: abandoned
                slot.stale = prev
                self.stats.abandoned += 1
            slot.in_flight.clear()
            slot.calling = False  # that stream's calls are never read here
            if slot.alive and slot.stale is not None:  # free of the abandoned batch first, then new work
                # Its stall clock starts once abandon_s is over: until then it may finish the stale config.
                slot.calling, slot.answered, slot.since = True, False, time.monotonic() + self.abandon_s
                ref = slot.actor.abandon.remote(slot.stale, self.abandon_s)
                calls[ref] = slot
                settling.add(ref)
        try:
            feed()
            while len(done) < len(configs):
                if not calls:
                    raise KerntuneError(f"every Ray actor was lost ({self.last_loss}); {len(configs) - len(done)}"
                                        " configs of the batch are unmeasured (continue with --resume)")
                ready, _ = ray.wait(list(calls), num_returns=1, timeout=self.wait_s + 5)
                if ready and ready[0] in settling:
                    slot = calls.pop(ready[0])
                    slot.calling = False
                    self._settled(slot, ready[0])
                elif ready:
                    slot = calls.pop(ready[0])
                    slot.calling = False
                    try:
                        got = ray.get(ready[0])
                    except ray.exceptions.RayError as exc:
                        failed = _evaluator_failure(ray, exc)
                        if failed:  # the actor's evaluator raised, or its factory did
                            self.stats.errors += 1
                            yield from fail(slot, *failed)
                        else:  # RayActorError (killed, OOM, node lost) and kin
                            text = str(exc).strip()
                            yield from lose(slot, text.splitlines()[0] if text else type(exc).__name__)
                        got = None
                    if got is not None:
                        slot.answered = True
                    # A late answer of an abandoned batch is neither progress nor a result; none gets two.
                    mine = [(i, trial) for b, i, trial in got or () if b == batch and i in slot.in_flight]
                    if mine:
                        slot.since = time.monotonic()  # real results, not empty answers: progress
                        while held:
                            yield held.pop(0)
                    for i, trial in mine:
                        slot.in_flight.discard(i)
                        done.add(i)
                        self.stats.results[slot.index] += 1
                        yield i, trial
                now = time.monotonic()
                for s in self.slots:  # an actor that holds work and returns nothing is hung
                    if s.alive and s.in_flight and now - s.since > self.stall_s:
                        self.stats.stalls += 1
                        yield from lose(s, f"actor {s.index} returned no result for {self.stall_s:g} s")
                    elif s.alive and s.calling and not s.answered and now - s.since > self.stall_s:
                        yield from lose(s, f"actor {s.index} did not start in {self.stall_s:g} s")
                feed()
            yield from held
        finally:
            if self._streaming == batch:  # else a newer stream owns the slots
                self._abandon(batch)

    def _abandon(self, batch: int) -> None:
        """The stream of ``batch`` ends.  An actor that still holds configs of it (the consumer
        stopped early or closed it, the batch failed) would go on measuring them, and the next
        batch's configs would queue behind them: it is told to drop them now, without waiting (the
        consumer may be leaving), and is freed of them (``abandon_s``) before it gets new work."""
        for slot in self.slots:
            if slot.alive and slot.in_flight:
                slot.stale = batch
                self.stats.abandoned += 1
                try:
                    slot.actor.abandon.remote(batch, 0.0)
                except Exception:  # noqa: BLE001 - a dead actor is replaced when next used
                    pass
            slot.in_flight.clear()
            slot.calling = False

    def _settle(self, slot: _Slot) -> None:
        """Free one actor of an abandoned batch before a call outside ``stream`` (re-timing)."""
        if slot.stale is not None:
            ref = slot.actor.abandon.remote(slot.stale, self.abandon_s)
            ready, _ = self.ray.wait([ref], timeout=self.abandon_s + self.wait_s + 10)
            self._settled(slot, ref if ready else None)

    def _settled(self, slot: _Slot, ref: Any | None) -> None:
        """Read an ``abandon`` answer (None: none came in time).  An actor still measuring a config of
        the abandoned batch is replaced: ``ray.cancel`` cannot stop that config (the actor's thread
        measures it, not a Ray task), and new configs would wait behind it, be blamed for its stall,
        or be charged with its failure.  Not a loss: no restart is charged."""
        free = False
        if ref is not None:
            try:
                free = self.ray.get(ref) is True
            except self.ray.exceptions.RayError:  # it died meanwhile: replaced like a busy one
                pass
        slot.stale = None
        if free:
            slot.answered = True
            return
        self.stats.recycled += 1
        self._kill(slot)
        self._fresh(slot)

    def _replace(self, slot: _Slot) -> None:
        """Start a fresh actor in a dead one's place (Ray frees the dead one's GPU)."""
        self._kill(slot)
        if slot.restarts >= self.max_restarts:
            slot.alive = False
            return
        slot.restarts += 1
        self.stats.restarts += 1
        self._fresh(slot)

    def _kill(self, slot: _Slot) -> None:
        try:
            self.ray.kill(slot.actor, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass

    def _fresh(self, slot: _Slot) -> None:
        slot.actor = self._new_actor()
        slot.answered = False
        slot.stale = None  # a fresh actor holds nothing of an abandoned batch

    def retime(self, configs: Sequence[Config], rep_ms: int | None = None, rounds: int | None = None) -> list[Trial]:
        """Re-time the leaders on one actor (one GPU), so that their times compare (the inner
        evaluator's protocol when ``rep_ms``/``rounds`` are None)."""
        if not self.can_retime:
            return self.evaluate(configs)
        slot = next(s for s in self.slots if s.alive)
        self._settle(slot)
        try:
            return self.ray.get(slot.actor.retime.remote(list(configs), rep_ms, rounds))
        except self.ray.exceptions.RayActorError:
            self._replace(slot)
            return self.ray.get(slot.actor.retime.remote(list(configs), rep_ms, rounds))

    def runoff(self, configs: Sequence[Config], first_ms: Sequence[float]) -> dict[str, Any] | None:
        """The inner evaluator's runoff (``kerntune.evaluate.runoff``) on one actor, one GPU; None where it
        has none (the leaders are then re-timed in windows)."""
        slot = next(s for s in self.slots if s.alive)
        self._settle(slot)
        try:
            return self.ray.get(slot.actor.runoff.remote(list(configs), list(first_ms)))
        except self.ray.exceptions.RayActorError:
            self._replace(slot)
            return None

    # -- facts -------------------------------------------------------------------------------
    def actor_pids(self) -> list[int]:
        """The process ids of the live actors (tests kill them)."""
        return self.ray.get([s.actor.pid.remote() for s in self.slots if s.alive])

    def in_flight(self) -> list[int]:
        """Configs each actor holds unfinished right now."""
        return [len(s.in_flight) for s in self.slots]

    def device(self) -> dict[str, Any]:
        out = dict(self.info["device"])
        if self.gpus_per_actor:
            out["gpus"] = int(len(self.slots) * self.gpus_per_actor)
        return out

    def workload(self) -> dict[str, Any]:
        return dict(self.info["workload"])

    @functools.cached_property
    def recording(self) -> Any:
        """The recording the actors replay, loaded on the driver (``tune`` ends with how far the winner is
        from its optimum, as without Ray); None where they do not replay one."""
        return getattr(self.factory, "local_recording", lambda: None)()

    def describe(self) -> dict[str, Any]:
        local = getattr(self.factory, "local_describe", dict)()
        return {**self.info["describe"], **local, "ray": {"address": self.address, "actors": len(self.slots)}}

    def close(self) -> None:
        ray = self.ray
        slots, self.slots = getattr(self, "slots", []), []
        if slots:
            try:
                ray.get([s.actor.close.remote() for s in slots if s.alive], timeout=60)
            except Exception:  # noqa: BLE001 - a dead actor has nothing to close
                pass
            for s in slots:
                try:
                    ray.kill(s.actor, no_restart=True)
                except Exception:  # noqa: BLE001
                    pass
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
            self._owns_ray = False


def _evaluator_failure(ray: Any, exc: Exception) -> tuple[str, str] | None:
    """``(summary, detail)`` where the actor's evaluator raised (in ``step``, or building it in a
    replacement actor); None where the actor was lost otherwise."""
    if isinstance(exc, ray.exceptions.RayTaskError):
        cause = getattr(exc, "cause", None)
    elif isinstance(exc, ray.exceptions.RayActorError) and exc.actor_init_failed:
        cause = None
    else:
        return None
    text = str(cause or exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return getattr(cause, "summary", "") or (lines[-1] if lines else type(exc).__name__), text[-2000:]


_VOLATILE = re.compile(r"0x[0-9a-f]+|\b(?:pid|ip|port|actor_id|node_id|worker_id)\b\W{0,3}[\w.:-]+", re.I)


def _alike(summary: str) -> str:
    """An error's text as compared between actors: no addresses, pids or ids."""
    return _VOLATILE.sub("?", summary).strip()


def _connect(ray: Any, address: str) -> None:
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no reports home unless the user asks
    try:
        if address == "local":
            # address="local", not None: None joins the cluster that the last `ray start` on this
            # machine recorded (/tmp/ray/ray_current_cluster), where "local" promises a private one.
            ray.init(address="local", include_dashboard=False, log_to_driver=False)
        else:
            # Ship this kerntune to the cluster, so its nodes run the same code as the driver.
            ray.init(address=address, log_to_driver=False,
                     runtime_env={"py_modules": [str(Path(__file__).resolve().parents[1])]})
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise KerntuneError(f"cannot connect to Ray at {address!r}: {exc}") from None


def _size(ray: Any, gpus: float, cpus: float | None, num_actors: int | None) -> tuple[float, int]:
    """CPUs per actor and the number of actors: by default one actor per GPU with its
    node's CPUs shared out among its GPUs (replays: one CPU each, at most 16 actors)."""
    total = ray.cluster_resources()
    if cpus is None:
        if gpus:
            shares = [n["Resources"].get("CPU", 1) // (n["Resources"]["GPU"] / gpus)
                      for n in ray.nodes() if n.get("Alive") and n["Resources"].get("GPU")]
            cpus = max(1.0, min(shares, default=1.0))
        else:
            cpus = 1.0
    if num_actors is None:
        num_actors = int(total.get("GPU", 0) // gpus) if gpus else min(16, int(total.get("CPU", 1) // cpus))
    if num_actors < 1:
        raise KerntuneError("the Ray cluster has no GPU for an actor" if gpus else "no Ray actor to start")
    if gpus and num_actors * gpus > total.get("GPU", 0):
        raise KerntuneError(f"{num_actors} GPU actors asked for, the Ray cluster has {total.get('GPU', 0):g} GPUs")
    if num_actors * cpus > total.get("CPU", 0):
        raise KerntuneError(f"{num_actors} actors of {cpus:g} CPUs asked for, the Ray cluster has"
                            f" {total.get('CPU', 0):g} CPUs")
    return float(cpus), int(num_actors)
