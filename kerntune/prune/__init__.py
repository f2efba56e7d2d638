"""Search-space pruning and expansion: edit operations, rules for additions, additive groups,
pruners and expanders (LLM and rule), the iteration loop, space files, TR/PR/WC."""

from kerntune.prune.edits import Edit, EditOutcome, SpaceState, apply_edits, edits_from_answer, edits_schema
from kerntune.prune.evaluate import PruneRun, PruneSummary, evaluate_pruner, prune_once
from kerntune.prune.iterate import IterationResult, iterate, measure
from kerntune.prune.pruners import llm_expander, llm_pruner, rule_pruner
from kerntune.prune.rules import Rule

__all__ = ["Edit", "EditOutcome", "IterationResult", "PruneRun", "PruneSummary", "Rule", "SpaceState", "apply_edits",
           "edits_from_answer", "edits_schema", "evaluate_pruner", "iterate", "llm_expander", "llm_pruner", "measure",
           "prune_once", "rule_pruner"]
