"""Evaluators: measure configs and return Trials."""

from kerntune.evaluate.base import Evaluator
from kerntune.evaluate.recorded import Recording, load_recording, table_dict
from kerntune.evaluate.replay import ReplayEvaluator
from kerntune.evaluate.trial import Status, Trial

__all__ = ["Evaluator", "Recording", "ReplayEvaluator", "Status", "Trial", "load_recording", "table_dict"]
