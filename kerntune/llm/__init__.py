"""The LLM layer: parsing model answers (providers and prompts follow)."""

from kerntune.llm.parsing import ParsedConfigs, ParseError, Rejected, configs_from_answer, extract_json, parse_configs

__all__ = ["ParseError", "ParsedConfigs", "Rejected", "configs_from_answer", "extract_json", "parse_configs"]
