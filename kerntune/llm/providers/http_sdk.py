"""Providers over HTTP through the official SDKs: OpenAI-compatible servers
(OpenAI, vLLM, SGLang, Ollama's /v1, llama.cpp server, LM Studio, OpenRouter),
Anthropic, and Ollama's native API.

The SDKs' own retries are switched off (``max_retries=0``) so that the client's
retry policy — one policy, one place, Retry-After honoured — is the only one.
"""

from __future__ import annotations

import datetime
import email.utils
import inspect
import json
import logging
import os
import time
from typing import Any

from kerntune.llm.providers.base import Provider
from kerntune.llm.secrets import MissingAPIKey, api_key as lookup_key, redact, register_secret
from kerntune.llm.types import LLMError, Message, RawReply, TransientError, Usage

log = logging.getLogger(__name__)


def _count(value: Any) -> int:
    """A token count from a server's usage block; anything but an int counts as 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _malformed(name: str, exc: Exception) -> LLMError:
    # A proxy's error page or a half-compatible server, answered with status 200: a failed
    # call (the round search falls back), never an exception that ends the run.
    return LLMError(f"{name}: malformed response from the server ({type(exc).__name__}: {redact(str(exc))[:100]})")


def _retry_after(headers: Any) -> float | None:
    """The Retry-After header in seconds: a number of seconds, or an HTTP date (RFC 9110 allows both;
    a date was ignored, and the retry came at the backoff's pace instead).  The client caps it."""
    try:
        value = headers.get("retry-after") if headers is not None else None
        if value is None:
            return None
        try:
            return float(value)
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            if when.tzinfo is None:  # "-0000": no zone given; HTTP dates are in UTC
                when = when.replace(tzinfo=datetime.timezone.utc)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def _out_of_quota(exc: Any) -> str | None:
    """The server's message when a 429 says the account is out of credit (OpenAI's
    ``insufficient_quota``), else None.  Why: that 429 does not pass with time; it was retried five
    times and the last error said only "rate limited", hiding what to do about it."""
    if "insufficient_quota" not in (getattr(exc, "code", None), getattr(exc, "type", None)):
        return None
    body = getattr(exc, "body", None)
    message = body.get("message") if isinstance(body, dict) else None
    return redact(str(message if isinstance(message, str) and message else getattr(exc, "message", "")))[:300]


def _unsupported(exc: Any, param: str) -> bool:
    """Whether a 400 says the request parameter ``param`` is not supported by the model.  Why: OpenAI's
    reasoning models (o1, o3, o4-mini, gpt-5) refuse ``max_tokens`` and any temperature but 1, and every
    call of a run failed with that 400 ("unsupported_parameter" / "unsupported_value")."""
    if getattr(exc, "status_code", None) != 400:
        return False
    message = str(getattr(exc, "message", "") or "")
    code = str(getattr(exc, "code", "") or "").lower()
    named = getattr(exc, "param", None) == param or f"'{param}'" in message or f"`{param}`" in message
    return named and ("unsupported" in code or "unsupported" in message.lower() or "not supported" in message.lower())


class OpenAIProvider(Provider):
    name = "openai"
    structured = True

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None) -> None:
        super().__init__(model)
        import openai

        self._openai = openai
        self.base_url = base_url or os.environ.get("KERNTUNE_LLM_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
        key = api_key or lookup_key("OPENAI_API_KEY") or ("local" if self.base_url else None)
        if not key:
            raise MissingAPIKey("openai: no API key (set OPENAI_API_KEY, or `keyring set kerntune OPENAI_API_KEY`)"
                                " and no --llm-base-url")
        register_secret(key)  # a key given in code is redacted like one from the environment
        self.client = openai.OpenAI(api_key=key, base_url=self.base_url, max_retries=0)
        self.endpoint = str(self.client.base_url)
        # OpenAI's own API deprecated max_tokens for max_completion_tokens (its reasoning models refuse
        # max_tokens); other OpenAI-compatible servers (vLLM, llama.cpp) may know only max_tokens.
        self._tokens_param = ("max_completion_tokens" if self.client.base_url.host == "api.openai.com"
                              else "max_tokens")
        self._send_temperature = True

    def _limits(self, temperature: float, max_tokens: int) -> dict[str, Any]:
        """The answer-length limit, and the temperature unless the model refused one."""
        limits: dict[str, Any] = {self._tokens_param: max_tokens}
        if self._send_temperature:
            limits["temperature"] = temperature
        return limits

    def _adapt(self, exc: Any) -> bool:
        """Change, for this call and the later ones, a parameter the 400 ``exc`` names as unsupported
        (max_tokens becomes max_completion_tokens; temperature is left to the model's default), so the
        call is sent once more instead of failing every round; False when there is nothing to change."""
        if self._tokens_param == "max_tokens" and _unsupported(exc, "max_tokens"):
            self._tokens_param = "max_completion_tokens"
        elif self._send_temperature and _unsupported(exc, "temperature"):
            self._send_temperature = False
        else:
            return False
        log.info("openai: %s refuses a parameter; sending %s from now on", self.model,
                 ", ".join(sorted(self._limits(0.0, 0))))
        return True

    def send(self, messages: list[Message], schema: dict[str, Any] | None, temperature: float,
             max_tokens: int, timeout: float) -> RawReply:
        oa = self._openai
        kwargs: dict[str, Any] = {}
        if schema is not None:
            kwargs["response_format"] = {"type": "json_schema",
                                         "json_schema": {"name": "answer", "schema": schema}}
        try:
            while True:  # each change of _adapt is made once: at most two more requests
                try:
                    resp = self.client.chat.completions.create(
                        model=self.model, messages=[m.to_dict() for m in messages], timeout=timeout,
                        **self._limits(temperature, max_tokens), **kwargs)
                    break
                except oa.BadRequestError as exc:
                    if not self._adapt(exc):
                        raise
        except oa.RateLimitError as exc:
            quota = _out_of_quota(exc)
            if quota is not None:
                raise LLMError(f"openai: out of quota (429 insufficient_quota, not retried): {quota}") from None
            raise TransientError("openai: rate limited (429)", _retry_after(exc.response.headers)) from None
        except oa.APIStatusError as exc:
            if exc.status_code >= 500 or exc.status_code == 408:
                raise TransientError(f"openai: server error {exc.status_code}",
                                     _retry_after(exc.response.headers)) from None
            # Servers quote the key they were sent ("Incorrect API key provided: ..."): redacted.
            raise LLMError(f"openai: request rejected with {exc.status_code}: {redact(exc.message)}") from None
        except (oa.APITimeoutError, oa.APIConnectionError) as exc:
            raise TransientError(f"openai: {type(exc).__name__}") from None
        try:
            choice = resp.choices[0] if resp.choices else None
            text = (choice.message.content or "") if choice else ""
            if not isinstance(text, str):
                raise TypeError(f"content is {type(text).__name__}")
            usage = Usage(_count(getattr(resp.usage, "prompt_tokens", 0)),
                          _count(getattr(resp.usage, "completion_tokens", 0)))
            model = resp.model if isinstance(resp.model, str) and resp.model else self.model
        except (AttributeError, TypeError, IndexError, KeyError) as exc:
            raise _malformed("openai", exc) from None
        return RawReply(text, usage, model)


class AnthropicProvider(Provider):
    name = "anthropic"

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None) -> None:
        super().__init__(model)
        import anthropic

        self._anthropic = anthropic
        key = api_key or lookup_key("ANTHROPIC_API_KEY")
        if not key:
            raise MissingAPIKey("anthropic: no API key (set ANTHROPIC_API_KEY, or `keyring set kerntune"
                                " ANTHROPIC_API_KEY`)")
        register_secret(key)
        base = base_url or os.environ.get("KERNTUNE_LLM_BASE_URL") or os.environ.get("ANTHROPIC_BASE_URL")
        self.client = anthropic.Anthropic(api_key=key, base_url=base, max_retries=0)
        self.endpoint = str(self.client.base_url)

    def send(self, messages: list[Message], schema: dict[str, Any] | None, temperature: float,
             max_tokens: int, timeout: float) -> RawReply:
        an = self._anthropic
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        if schema is not None:
            system += ("\n\nAnswer with one JSON value only, valid against this JSON schema:\n"
                       + json.dumps(schema, separators=(",", ":")))
        chat = [m.to_dict() for m in messages if m.role != "system"]
        kwargs: dict[str, Any] = {}
        if system.strip():
            kwargs["system"] = system.strip()
        # Newer SDKs dropped the temperature argument; the field still goes in the body.
        if "temperature" in inspect.signature(self.client.messages.create).parameters:
            kwargs["temperature"] = temperature
        else:
            kwargs["extra_body"] = {"temperature": temperature}
        try:
            resp = self.client.messages.create(model=self.model, max_tokens=max_tokens, messages=chat,
                                               timeout=timeout, **kwargs)
        except an.RateLimitError as exc:
            raise TransientError("anthropic: rate limited (429)", _retry_after(exc.response.headers)) from None
        except an.APIStatusError as exc:
            if exc.status_code >= 500 or exc.status_code in (408, 529):
                raise TransientError(f"anthropic: server error {exc.status_code}",
                                     _retry_after(exc.response.headers)) from None
            raise LLMError(f"anthropic: request rejected with {exc.status_code}: {redact(exc.message)}") from None
        except (an.APITimeoutError, an.APIConnectionError) as exc:
            raise TransientError(f"anthropic: {type(exc).__name__}") from None
        try:
            text = "".join(t for t in (getattr(block, "text", None) for block in resp.content) if isinstance(t, str))
            usage = Usage(_count(getattr(resp.usage, "input_tokens", 0)), _count(getattr(resp.usage, "output_tokens", 0)))
            model = resp.model if isinstance(resp.model, str) and resp.model else self.model
        except (AttributeError, TypeError, IndexError, KeyError) as exc:
            raise _malformed("anthropic", exc) from None
        return RawReply(text, usage, model)


class OllamaProvider(Provider):
    name = "ollama"
    structured = True

    def __init__(self, model: str, base_url: str | None = None) -> None:
        super().__init__(model)
        import ollama

        self._ollama = ollama
        self.host = base_url or os.environ.get("OLLAMA_HOST") or "http://127.0.0.1:11434"
        self.endpoint = self.host
        # The ollama client takes its timeout when it is made (the default is none: a silent
        # server would be waited on forever), so there is one client per timeout asked for.
        self._clients: dict[float, Any] = {}

    def _client(self, timeout: float) -> Any:
        if timeout not in self._clients:
            self._clients[timeout] = self._ollama.Client(host=self.host, timeout=timeout)
        return self._clients[timeout]

    def send(self, messages: list[Message], schema: dict[str, Any] | None, temperature: float,
             max_tokens: int, timeout: float) -> RawReply:
        import httpx

        try:
            resp = self._client(timeout).chat(model=self.model, messages=[m.to_dict() for m in messages],
                                    format=schema if schema is not None else None,
                                    options={"temperature": temperature, "num_predict": max_tokens})
        except self._ollama.ResponseError as exc:
            if exc.status_code == 429 or exc.status_code >= 500:
                raise TransientError(f"ollama: server error {exc.status_code}") from None
            raise LLMError(redact(f"ollama: {exc.error}")) from None
        except (httpx.DecodingError, httpx.TooManyRedirects) as exc:
            # a body that is not what its headers say, a redirect loop: asking again gets the same
            # answer, so the call fails (the round falls back) without retries; they ended the run
            raise LLMError(f"ollama: {type(exc).__name__}: {redact(str(exc))[:100]}") from None
        except (httpx.HTTPError, ConnectionError) as exc:
            raise TransientError(f"ollama: {type(exc).__name__}") from None
        try:
            usage = Usage(_count(resp.get("prompt_eval_count")), _count(resp.get("eval_count")))
            text = resp["message"]["content"] or ""
            if not isinstance(text, str):
                raise TypeError(f"content is {type(text).__name__}")
        except (AttributeError, TypeError, IndexError, KeyError) as exc:
            raise _malformed("ollama", exc) from None
        return RawReply(text, usage, self.model)
