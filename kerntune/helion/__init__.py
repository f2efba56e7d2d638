"""Helion integration: kerntune strategies as Helion's autotuner.

    import helion, kerntune.helion

    @helion.kernel(autotuner_fn=kerntune.helion.autotuner(strategy="llm-seeded", llm="local:", seconds=60))
    def matmul(x, y): ...

``autotuner`` (``kerntune/helion/tuner.py``) returns Helion's ``autotuner_fn``; the
mapping of Helion's ConfigSpec onto a kerntune Space is ``kerntune/helion/space.py`` and
needs no Helion.  Supported Helion: 1.4.0 (``pip install 'kerntune[helion]'``).
"""

from kerntune.helion.space import DESCRIPTIONS, Frag, HelionLayout, build_space, layout_from_dict
from kerntune.helion.tuner import (HELION_VERSION, HelionEvaluator, autotuner, describe_fragments, device_facts,
                                   dump_space, helion_hints, helion_version)

__all__ = ["DESCRIPTIONS", "HELION_VERSION", "Frag", "HelionEvaluator", "HelionLayout", "autotuner", "build_space",
           "describe_fragments", "device_facts", "dump_space", "helion_hints", "helion_version", "layout_from_dict"]
