"""A scripted model for the code-level strategies: canned replies chosen by what the prompt says.

Every transform prompt starts with a marker line, ``<!-- kerntune-transform: KIND -->`` (plan,
validate, breakdown, execute, restrictions, replan, evaluate-step, one-prompt, inputs).  A script
is a list of rules; the first rule whose ``kind`` matches the prompt's marker, whose ``contains``
strings all appear in the prompt and whose ``absent`` strings do not, answers.  A reply is a JSON
value (sent as text) or a string sent as it is; ``code_file`` in a reply is replaced by ``code``
holding that file's text (relative to the script file).  ``times: N`` lets a rule answer N times
(in one process).

In process: ``ScriptedTransformProvider(rules)``.  From the command line, through the ``cmd:``
provider (the prompt on stdin, the reply on stdout; stateless, so ``times`` does not apply)::

    kerntune transform k.cl --llm "cmd:python -m kerntune.transform.scripted script.yaml" ...

This is how CI and the GPU benchmark run the strategies with a known, expert "model".
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from kerntune.errors import KerntuneError
from kerntune.llm.providers.base import Provider
from kerntune.llm.types import LLMError, Message, RawReply, Usage

MARKER = re.compile(r"<!--\s*kerntune-transform:\s*([a-z\-]+)\s*-->")


def load_script(path: str | Path) -> list[dict[str, Any]]:
    """Rules from YAML or JSON (a list, or ``rules:`` holding one)."""
    from ruamel.yaml import YAML

    path = Path(path)
    if not path.is_file():
        raise KerntuneError(f"script not found: {path}")
    data = json.loads(path.read_text()) if path.suffix == ".json" else YAML(typ="safe").load(path.read_text())
    if isinstance(data, Mapping):
        data = data.get("rules")
    if not isinstance(data, list):
        raise KerntuneError(f"{path}: expected a list of rules")
    return [_resolve(dict(r), path.parent) for r in data]


def _resolve(rule: dict[str, Any], base: Path) -> dict[str, Any]:
    reply = rule.get("reply")
    if isinstance(reply, Mapping) and "code_file" in reply:
        reply = dict(reply)
        reply["code"] = (base / str(reply.pop("code_file"))).read_text()
        rule["reply"] = reply
    return rule


def kind_of(text: str) -> str:
    m = MARKER.search(text)
    return m.group(1) if m else ""


class Script:
    def __init__(self, rules: Sequence[Mapping[str, Any]]) -> None:
        self.rules = [dict(r) for r in rules]
        self.used = [0] * len(self.rules)
        self.log: list[tuple[str, int | None]] = []  # (kind, rule index) for every prompt answered

    def answer(self, prompt: str) -> str:
        kind = kind_of(prompt)
        for i, rule in enumerate(self.rules):
            if rule.get("kind") not in (None, kind):
                continue
            if not all(s in prompt for s in _list(rule.get("contains"))):
                continue
            if any(s in prompt for s in _list(rule.get("absent"))):
                continue
            if rule.get("times") is not None and self.used[i] >= int(rule["times"]):
                continue
            self.used[i] += 1
            self.log.append((kind, i))
            reply = rule.get("reply")
            return reply if isinstance(reply, str) else json.dumps(reply)
        self.log.append((kind, None))
        raise LLMError(f"scripted model: no rule answers this {kind or 'unmarked'} prompt")


def _list(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else [str(v) for v in value]


class ScriptedTransformProvider(Provider):
    """An in-process scripted model (deterministic; every prompt is kept in ``prompts``)."""

    name = "scripted"

    def __init__(self, rules: Sequence[Mapping[str, Any]] | str | Path) -> None:
        super().__init__("scripted-transform")
        self.script = Script(load_script(rules) if isinstance(rules, (str, Path)) else rules)
        self.prompts: list[str] = []

    def send(self, messages: list[Message], schema: dict[str, Any] | None, temperature: float, max_tokens: int,
             timeout: float) -> RawReply:
        text = "\n\n".join(m.content for m in messages)
        self.prompts.append(text)
        return RawReply(self.script.answer(text), Usage(len(text) // 4, 100), self.model)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m kerntune.transform.scripted SCRIPT.yaml < prompt", file=sys.stderr)
        return 2
    try:
        print(Script(load_script(argv[0])).answer(sys.stdin.read()))
    except (KerntuneError, LLMError) as exc:
        print(str(exc), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
