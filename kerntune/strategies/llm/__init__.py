"""LLM-guided round search: prompting, feedback and the round loop."""
