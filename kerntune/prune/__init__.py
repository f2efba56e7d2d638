"""Search-space pruning and expansion: edit operations, pruners (LLM and rule), TR/PR/WC."""

from kerntune.prune.edits import Edit, EditOutcome, apply_edits, edits_from_answer, edits_schema
from kerntune.prune.evaluate import PruneRun, PruneSummary, evaluate_pruner, prune_once
from kerntune.prune.pruners import llm_pruner, rule_pruner

__all__ = ["Edit", "EditOutcome", "PruneRun", "PruneSummary", "apply_edits", "edits_from_answer", "edits_schema",
           "evaluate_pruner", "llm_pruner", "prune_once", "rule_pruner"]
