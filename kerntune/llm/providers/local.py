"""Providers without a network: a command, files, a recorded transcript (and, re-exported from
``embedded``, the embedded GGUF model)."""

from __future__ import annotations

import atexit
import codecs
import copy
import hashlib
import json
import logging
import os
import shlex
import shutil
import stat
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kerntune.llm.parsing import MAX_RESPONSE_CHARS
from kerntune.llm.providers.base import Provider
from kerntune.llm.providers.embedded import _LEAKED, LocalModelProvider, default_model_path  # noqa: F401 - re-exported
from kerntune.llm.secrets import redact
from kerntune.llm.types import LLMError, Message, RawReply, TransientError, Usage
from kerntune.procs import end_group, end_watch, exited, watch_group

log = logging.getLogger("kerntune.llm")


def render_prompt(messages: list[Message], schema: dict[str, Any] | None) -> str:
    """Messages as one Markdown document, for a command, a person or a file."""
    parts = []
    for m in messages:
        parts.append(f"## {m.role}\n\n{m.content.strip()}\n")
    if schema is not None:
        parts.append("## answer format\n\nAnswer with one JSON value only, valid against this JSON schema:\n\n"
                     "```json\n" + json.dumps(schema, indent=1) + "\n```\n")
    return "\n".join(parts)


class CommandProvider(Provider):
    """``cmd:COMMAND`` — the prompt on stdin, the answer on stdout.

    The command is any program, so it is treated as hostile: its output is decoded with
    replacement characters (bytes that are not UTF-8 must not end the run, or every resume
    would end the same way), read only up to the answer cap (a program printing forever
    must not fill memory), and it runs in a process group of its own that is ended as a
    whole (a wrapper script's grandchildren would otherwise outlive a timeout).
    """

    name = "cmd"

    def __init__(self, command: str) -> None:
        super().__init__(command)
        if not command.strip():
            raise LLMError("cmd: empty command")
        self.argv = shlex.split(command)
        # A program that is not there would only fail at the first model call, mid-run, where the
        # search carries on without the model: refuse it now, before anything is measured.
        if not self.argv or shutil.which(self.argv[0]) is None:
            program = self.argv[0] if self.argv else command
            where = "not an executable file" if os.sep in program else "not found on PATH"
            raise LLMError(f"cmd: cannot run {program!r}: {where}")

    def send(self, messages: list[Message], schema: dict[str, Any] | None, temperature: float,
             max_tokens: int, timeout: float) -> RawReply:
        try:
            proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            raise LLMError(f"cmd: cannot run {self.argv[0]!r}: {exc.strerror}") from None
        watch = watch_group(proc)  # a SIGKILLed tuner takes the command's group along
        with _RUNNING_LOCK:
            _RUNNING[proc] = watch
        out = _CappedReader(proc.stdout, MAX_OUTPUT_CHARS)  # type: ignore[arg-type]
        err = _CappedReader(proc.stderr, 4096, keep_tail=True)  # type: ignore[arg-type]
        feeder = threading.Thread(target=_feed, args=(proc.stdin, render_prompt(messages, schema)), daemon=True)
        try:
            for t in (feeder, out.thread, err.thread):
                t.start()
            deadline = time.monotonic() + timeout
            left_at: float | None = None  # when the command itself exited
            while out.thread.is_alive() and not out.over and time.monotonic() < deadline:
                out.thread.join(min(0.05, max(deadline - time.monotonic(), 0)))
                # A background child of the command (``(sleep 30 &); echo answer``) holds stdout open:
                # once the command has exited, what it wrote is read within a grace, and the answer is
                # taken (waiting for EOF threw the whole answer away after the timeout, and retried).
                if left_at is None and exited(proc, 0):
                    left_at = time.monotonic()
                elif left_at is not None and time.monotonic() - left_at >= EXIT_GRACE_S:
                    break
            if out.over:
                raise LLMError(f"cmd: output over {MAX_OUTPUT_CHARS:,} characters; the command was stopped")
            if out.thread.is_alive() and left_at is None:
                raise TransientError(f"cmd: no answer within {timeout:g} s")
            # not reaped yet (WNOWAIT): its pid, the group's id, stays reserved until the group is killed
            if not exited(proc, max(deadline - time.monotonic(), 0.5)):
                raise TransientError(f"cmd: no answer within {timeout:g} s")
        finally:
            _end_group(proc, watch)
            with _RUNNING_LOCK:
                _RUNNING.pop(proc, None)
        code = proc.returncode
        if code is None:  # killed but not reaped within end_group's wait (a process stuck in the kernel)
            raise TransientError("cmd: did not exit (its process could not be reaped after it was ended)")
        if code != 0:
            err.thread.join(1.0)
            # redacted before it is cut: a key cut in half is no longer recognised as the key
            tail = redact(err.text()).strip().splitlines()[-1:] or [""]
            raise LLMError(f"cmd: exited with {code}: {tail[0][:200]}")
        out.thread.join(1.0)  # the group is ended: the pipe is at its end (or closed)
        return RawReply(out.text(), Usage(), self.model)


#: The parser's answer cap, applied while reading: one character more is enough to know the
#: answer will be refused.
MAX_OUTPUT_CHARS = MAX_RESPONSE_CHARS
#: How long the output is still read after the command exited while something it started keeps
#: stdout open: what the command itself wrote is in the pipe already, so a moment is enough.
EXIT_GRACE_S = 0.5


def _feed(pipe: Any, text: str) -> None:
    """Write the prompt; a command that exits without reading it is not an error."""
    try:
        pipe.write(text.encode("utf-8", "replace"))
    except OSError:
        pass
    finally:
        try:
            pipe.close()
        except OSError:
            pass


class _CappedReader:
    """Reads a pipe in a thread, decoding as it goes, and stops past ``cap`` characters."""

    def __init__(self, pipe: Any, cap: int, keep_tail: bool = False) -> None:
        self.pipe, self.cap, self.keep_tail = pipe, cap, keep_tail
        self.parts: list[str] = []
        self.chars = 0
        self.over = False
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        try:
            while True:
                chunk = self.pipe.read1(65536)
                if not chunk:
                    break
                text = decoder.decode(chunk)
                self.parts.append(text)
                self.chars += len(text)
                if self.chars > self.cap:
                    if not self.keep_tail:
                        self.over = True
                        return
                    joined = "".join(self.parts)[-self.cap:]
                    self.parts, self.chars = [joined], len(joined)
            self.parts.append(decoder.decode(b"", final=True))
        except (OSError, ValueError):
            pass

    def text(self) -> str:
        return "".join(self.parts)


#: The cmd: models running now; ended at exit (a model call on a daemon thread is abandoned at exit,
#: and its command runs in a process group of its own, which Ctrl-C does not reach), each with the
#: watchdog that ends its group if the tuner is killed.
_RUNNING: dict[subprocess.Popen, subprocess.Popen | None] = {}
_RUNNING_LOCK = threading.Lock()


@atexit.register
def _end_running() -> None:
    with _RUNNING_LOCK:
        running = list(_RUNNING.items())
    for proc, watch in running:
        _end_group(proc, watch)


def _end_group(proc: subprocess.Popen, watch: subprocess.Popen | None = None) -> None:
    """End the command's whole process group (its children too), reap it, close its pipes; its
    watchdog first, so that it never acts on the group's id once that id is free."""
    end_watch(watch)
    end_group(proc, timeout=0)
    for pipe in (proc.stdout, proc.stderr):
        try:
            if pipe is not None:
                pipe.close()
        except OSError:
            pass


_EXTS = ("json", "md", "txt")


@dataclass
class _Pending:
    """The request kerntune waits on: its number, what was asked, and the response files
    that were there before it was asked (never taken as its answer)."""

    number: int
    key: str
    stale: set[tuple[str, int, int, int]] = field(default_factory=set)
    seen: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    first_seen: dict[str, float] = field(default_factory=dict)


class FilesProvider(Provider):
    """``files:DIR`` — write ``NNNN.prompt.md`` and ``NNNN.schema.json``, wait for
    ``NNNN.response.{json,md,txt}``.  For air-gapped sites, audits and experts.

    Only names this provider makes itself are touched, all inside DIR.  Prompts and
    schemas are written to a fresh file that is then renamed over the name, so a link
    planted under that name (the directory is shared with people and agents) is replaced,
    never followed: kerntune writes nothing outside DIR.  A response is opened once, without
    following a symbolic link, and checked on the open descriptor (a regular file, one link,
    on DIR's file system) before it is read from that same descriptor: a file swapped for a
    link between a check and a read cannot be read.

    A response is taken only when it is complete: not empty, unchanged over two polls, and
    either a ``.json`` file that holds valid JSON or unchanged for ``settle_s`` (a ``.json``
    file that stays invalid that long is taken as it is, so the repair round can quote the
    problem; a ``.md`` or ``.txt`` answer, which cannot be checked, always waits that long: a
    streaming writer that paused for a second had half an answer taken).  Writing it elsewhere
    and renaming it into place is the safe way to answer.  When a request times out and the
    client asks the same thing again, no new number is used: the late answer to the pending
    request is still taken.  A response file that existed before its request was written (an
    answer under the wrong number) is ignored until it changes.  An answer that was taken has
    its prompt file's time set after it, so that a later run asking the same never takes it
    again (only a request left unanswered, or answered after its run was killed, is taken up).
    """

    name = "files"

    def __init__(self, directory: str, poll_s: float = 0.2, settle_s: float = 2.0) -> None:
        super().__init__(directory)
        self.dir = Path(directory).resolve()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.poll_s = poll_s
        self.settle_s = settle_s
        existing = [int(p.name[:4]) for p in self.dir.glob("[0-9][0-9][0-9][0-9].prompt.md")]
        self.counter = max(existing, default=0)
        self.pending: _Pending | None = None
        #: The last request a killed run left (its number): asked the same again, it is taken up under
        #: that number with any answer already written to it, instead of a copy under the next number
        #: that the person answering must answer again
        self.left = self.counter or None

    def send(self, messages: list[Message], schema: dict[str, Any] | None, temperature: float,
             max_tokens: int, timeout: float) -> RawReply:
        prompt = render_prompt(messages, schema)
        key = hashlib.sha256(prompt.encode("utf-8", "replace")).hexdigest()
        left, self.left = self.left, None
        if self.pending is None and left is not None and self._same_prompt(left, prompt) and self._taken_up(left):
            self.pending = _Pending(left, key, stale=set())   # answers written to it are answers to it
        if self.pending is None or self.pending.key != key:
            self.counter += 1
            n = f"{self.counter:04d}"
            self.pending = _Pending(self.counter, key, stale=self._identities(n))
            self._write(f"{n}.prompt.md", prompt)
            if schema is not None:
                self._write(f"{n}.schema.json", json.dumps(schema, indent=1))
        pending = self.pending
        n = f"{pending.number:04d}"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for ext in _EXTS:
                text = self._take(pending, f"{n}.response.{ext}", ext)
                if text is not None:
                    self.pending = None
                    return RawReply(text, Usage(), self.model)
            time.sleep(self.poll_s)
        raise TransientError(f"files: no {n}.response.* (complete) in {self.dir} within {timeout:g} s")

    def _same_prompt(self, number: int, prompt: str) -> bool:
        try:
            fd = os.open(self.dir / f"{number:04d}.prompt.md", os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return False
        with os.fdopen(fd, "rb") as fh:
            return fh.read(len(prompt.encode("utf-8", "replace")) + 1) == prompt.encode("utf-8", "replace")

    def _identities(self, n: str) -> set[tuple[str, int, int, int]]:
        out = set()
        for ext in _EXTS:
            try:
                st = os.lstat(self.dir / f"{n}.response.{ext}")
            except OSError:
                continue
            out.add((ext, st.st_ino, st.st_size, st.st_mtime_ns))
        return out

    def _take(self, pending: _Pending, name: str, ext: str) -> str | None:
        """The response's text once it is complete, else None; LLMError for a file never to read."""
        path = self.dir / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:
            return None
        except OSError as exc:
            if os.path.islink(path):
                raise LLMError(f"files: {name} is a symbolic link, which could lead outside {self.dir};"
                               " answer with a regular file") from None
            raise LLMError(f"files: cannot open {name}: {exc.strerror}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):  # a FIFO or device would block or never end
                raise LLMError(f"files: {name} is not a regular file")
            if st.st_nlink != 1:
                raise LLMError(f"files: {name} has {st.st_nlink} hard links; answer with a file of its own")
            if st.st_dev != os.stat(self.dir).st_dev:
                raise LLMError(f"files: {name} is not on the file system of {self.dir}")
            ident = (st.st_ino, st.st_size, st.st_mtime_ns)
            if (ext, *ident) in pending.stale or st.st_size == 0:
                return None
            now = time.monotonic()
            if pending.seen.get(ext) != ident:  # new or still changing: look again next poll
                pending.seen[ext] = ident
                pending.first_seen[ext] = now
                return None
            if st.st_size > 4 * MAX_RESPONSE_CHARS + 4:
                raise LLMError(f"files: {name} is over {MAX_RESPONSE_CHARS:,} characters")
            data = b""
            while len(data) < st.st_size:
                chunk = os.read(fd, st.st_size - len(data))
                if not chunk:
                    break
                data += chunk
        finally:
            os.close(fd)
        text = data.decode("utf-8", "replace")
        if now - pending.first_seen[ext] < self.settle_s:
            if ext != "json":
                return None  # no way to tell a whole answer from a paused writer's half: it must settle
            try:
                json.loads(text)
            except ValueError:
                return None  # probably still being written; taken as it is once it settles
        self._mark_taken(pending.number, st.st_mtime_ns)
        return text

    def _mark_taken(self, number: int, answered_ns: int) -> None:
        """Set the prompt file's time after its answer's: an answer older than its prompt is never taken
        up by a later run (``_taken_up``).  Why: a new run asking what a finished run asked last
        was handed that run's answer, already used, instead of a question and a new answer."""
        stamp = max(time.time_ns(), answered_ns + 1)
        try:
            os.utime(self.dir / f"{number:04d}.prompt.md", ns=(stamp, stamp), follow_symlinks=False)
        except (OSError, NotImplementedError):
            pass  # the prompt is gone: nothing left to take it up by

    def _taken_up(self, number: int) -> bool:
        """Whether the request ``number`` that an earlier run left is still open: no answer yet, or
        one written after the prompt (a run killed while it waited).  An answer no newer than its prompt
        was taken (``_mark_taken``) or written before the question; either way not for this run."""
        try:
            asked = os.lstat(self.dir / f"{number:04d}.prompt.md").st_mtime_ns
        except OSError:
            return False
        for ext in _EXTS:
            try:
                answered = os.lstat(self.dir / f"{number:04d}.response.{ext}").st_mtime_ns
            except OSError:
                continue
            if answered <= asked:
                return False
        return True

    def _write(self, name: str, text: str) -> None:
        tmp = self.dir / f".{name}.{os.getpid()}.tmp"
        tmp.unlink(missing_ok=True)  # removes a link planted under the temporary name, not its target
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, self.dir / name)


def _checked_entry(entry: dict[str, Any], where: str) -> dict[str, Any]:
    """A transcript line's fields, of the types kerntune writes (a hand-written line with an object
    as its response, or a number as its model, once ended the run with a traceback)."""
    usage = entry.get("usage") or {}
    if "response" not in entry:  # a failed call's line
        if not isinstance(entry["error"], str):
            raise LLMError(f"{where}: error must be the failure's text (a string)")
    elif not isinstance(entry["response"], str):
        kind = type(entry["response"]).__name__
        raise LLMError(f"{where}: response must be the answer's text (a string), not {kind}")
    if not isinstance(entry.get("model", ""), str):
        raise LLMError(f"{where}: model must be a string")
    if not isinstance(usage, dict) or not all(isinstance(usage.get(k, 0), int) and not isinstance(usage.get(k, 0), bool)
                                              for k in ("input_tokens", "output_tokens")):
        raise LLMError(f"{where}: usage must hold whole token counts")
    return entry


class ReplayProvider(Provider):
    """``replay:FILE`` — answers from a recorded JSONL transcript, in order.

    A failed call's line (``error`` in place of ``response``) fails the same call again, so every
    later answer goes to the question it was recorded for.  The recorded question is compared with
    the one asked; where they differ the answer is still given (benchmark proxies replay answers on
    changed histories on purpose), and the first difference is logged once, so a transcript that has
    slipped out of step with the run replaying it does not go unnoticed.

    ``replay:FILE|SPEC`` goes on where the transcript ends: once its answers are used up, every
    later request goes to the provider SPEC names (``files:DIR``, ``openai:MODEL``, ...).  That
    resumes a model-driven run that was cut off, or one spread over several sessions on a machine
    the model cannot reach (each call records its exchanges with ``--llm-transcript``, the next
    one replays them and asks only the new questions), without paying for the answers twice."""

    name = "replay"

    def __init__(self, path: str, then: Provider | None = None) -> None:
        super().__init__(path)
        self.then = then
        p = Path(path)
        if not p.is_file():
            raise LLMError(f"replay: transcript not found: {path}")
        self.entries = []
        for i, line in enumerate(p.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                raise LLMError(f"replay: {path} line {i} is not JSON") from None
            if isinstance(entry, dict) and ("response" in entry or "error" in entry):
                self.entries.append(_checked_entry(entry, f"replay: {path} line {i}"))
        self.position = 0
        self.warned = False  # about a question that differs from the one recorded
        #: Whether the last answer came from the transcript: the client then logs no line when its own
        #: transcript is this file (chained as ``replay:T|SPEC`` with ``--llm-transcript T``, the replayed
        #: answers were appended again, and the next session replayed round 1's answer in round 5); into
        #: another file it copies them, so that file alone replays the whole run
        self.last_replayed = False
        self.transcript_path = p

    def send(self, messages: list[Message], schema: dict[str, Any] | None, temperature: float,
             max_tokens: int, timeout: float) -> RawReply:
        # Running out with nothing to go on to is the transcript's own failure: into the transcript
        # replayed, the client writes no line for it (each session would add one)
        self.last_replayed = self.position < len(self.entries) or self.then is None
        if self.position >= len(self.entries):
            if self.then is not None:
                return self.then.send(messages, schema, temperature, max_tokens, timeout)
            raise LLMError(f"replay: transcript {self.model} has no answer #{self.position + 1}")
        entry = self.entries[self.position]
        self.position += 1
        self._compare(entry, messages)
        if "response" not in entry:
            raise LLMError(entry["error"])
        usage = entry.get("usage") or {}
        return RawReply(entry["response"], Usage(usage.get("input_tokens", 0), usage.get("output_tokens", 0)),
                        entry.get("model", self.model))

    def _compare(self, entry: dict[str, Any], messages: list[Message]) -> None:
        """Log, once, that the question asked is not the one this answer was recorded for.  The
        transcript holds questions redacted, so the new one is compared redacted; a line with no
        messages (a hand-made answer to no question) is not compared."""
        recorded = entry.get("messages")
        if self.warned or not recorded:
            return
        asked = [{"role": m.role, "content": redact(m.content)} for m in messages]
        if recorded != asked:
            self.warned = True
            log.warning("replay: call #%d asks another question than the one %s recorded for it; its recorded"
                        " answer is given all the same (later differences are not logged)", self.position,
                        self.model)

    def fresh(self) -> "ReplayProvider":
        """From the transcript's first answer: each repeat of a comparison is a run of its own (the
        repeats once shared one position, so only the first got the answers)."""
        other = copy.copy(self)
        other.position = 0
        other.warned = False
        return other

    def after(self, calls: int) -> "ReplayProvider":
        """A copy that goes on past ``calls`` more answers (at most to the transcript's end, and from there
        to SPEC in ``replay:T|SPEC``).  Why: a resumed run answers its stored calls from the store; a replay
        that then began again at answer #1 gave round 3 the answers of rounds 1 and 2."""
        other = copy.copy(self)
        other.position = min(self.position + max(calls, 0), len(self.entries))
        return other

    def close(self) -> None:
        if self.then is not None:
            self.then.close()
