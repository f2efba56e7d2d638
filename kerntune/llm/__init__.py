"""The LLM layer: providers behind one client, and parsing of model answers.

Transport (``providers/``), the call policy (``client.py``: retries, cache,
repair, transcripts), secrets (``secrets.py``) and parsing (``parsing.py``)
live apart, so prompts and strategies never touch a wire protocol.
"""

from kerntune.llm.client import LLMClient
from kerntune.llm.parsing import ParsedConfigs, ParseError, Rejected, configs_from_answer, extract_json, parse_configs
from kerntune.llm.providers import make_provider, resolve_auto
from kerntune.llm.types import LLMError, Message, Response, TransientError, Usage

__all__ = ["LLMClient", "LLMError", "Message", "ParseError", "ParsedConfigs", "Rejected", "Response",
           "TransientError", "Usage", "configs_from_answer", "extract_json", "make_provider", "parse_configs",
           "resolve_auto"]
