"""Tuning steps of the explicit strategy: the step, the default library and YAML step files.

A step's ``prompt_template`` says what to change; ``{kernel_string}`` in it is replaced by
the current kernel (LLM Kernel Tuner's convention; a LangChain ``PromptTemplate`` works too).
Without the placeholder the kernel is shown after the step's text.  The default library's
texts are the ``kerntune/prompts/transform_step_*.md`` files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Mapping, Sequence

from kerntune.errors import KerntuneError
from kerntune.transform.kernel import tune_params_problem

PLACEHOLDER = "{kernel_string}"
_ID = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")


@dataclass
class TuningStep:
    """One optimisation the explicit strategy asks for.

    ``tune_params`` fixes the values of parameters the step introduces (the model must use those
    names; it may add others); ``depends_on`` names steps that must have been accepted (brought a
    gain) for this one to run; ``skip_evaluation`` skips asking the model whether the step makes
    sense for this kernel.
    """

    id: str
    prompt_template: Any
    tune_params: dict[str, list[Any]] | None = None
    depends_on: list[str] = field(default_factory=list)
    skip_evaluation: bool = False
    title: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not _ID.match(self.id):
            raise KerntuneError(f"step id {self.id!r}: letters, digits, '_', '-' and '.' only")
        if isinstance(self.depends_on, str):
            self.depends_on = [self.depends_on]
        self.depends_on = [str(d) for d in self.depends_on]
        if self.tune_params is not None:
            if not isinstance(self.tune_params, Mapping) or not all(
                    isinstance(v, (list, tuple)) and v for v in self.tune_params.values()):
                raise KerntuneError(f"step {self.id}: tune_params must map names to non-empty lists of values")
            # no backend takes a container as one value (the Kernel Tuner transformer checks its own rules too)
            problem = tune_params_problem(self.tune_params, kernel_tuner=False)
            if problem is not None:  # refused here, not found out after the model's rewrite was measured
                raise KerntuneError(f"step {self.id}: tune_params: {problem}")
            self.tune_params = {str(k): list(v) for k, v in self.tune_params.items()}

    def text(self) -> str:
        """The step's instruction without the kernel (for plans, logs and judgements)."""
        t = self.prompt_template
        raw = t if isinstance(t, str) else getattr(t, "template", str(t))
        return raw.replace(PLACEHOLDER, "(the kernel)").strip()

    def render(self, kernel: str) -> tuple[str, bool]:
        """The step's prompt with the kernel filled in, and whether the template placed the kernel."""
        t = self.prompt_template
        if isinstance(t, str):
            return t.replace(PLACEHOLDER, kernel), PLACEHOLDER in t
        fmt = getattr(t, "format", None)
        if callable(fmt):  # a LangChain PromptTemplate
            return str(fmt(kernel_string=kernel)), True
        raise KerntuneError(f"step {self.id}: prompt_template must be a string or a PromptTemplate")


def _prompt(name: str) -> str:
    return resources.files("kerntune.prompts").joinpath(name).read_text()


#: (id, prompt file, depends_on, skip_evaluation, fixed tune_params)
_LIBRARY: list[tuple[str, str, list[str], bool, dict[str, list[Any]] | None]] = [
    ("thread_block_size", "transform_step_block_size.md", [], True, None),
    ("work_per_thread", "transform_step_work_per_thread.md", [], False, None),
    ("register_tiling_2d", "transform_step_register_tiling.md", ["work_per_thread"], False, None),
    ("shared_memory_tiling", "transform_step_shared_memory.md", [], False, None),
    ("loop_unrolling", "transform_step_unroll.md", [], False, None),
    ("vectorized_loads", "transform_step_vectorize.md", [], False, None),
]


def default_steps() -> list[TuningStep]:
    """Thread-block size, work per thread (and 2D register tiling after it), shared/local-memory
    tiling, loop unrolling and vectorised loads."""
    return _library(_LIBRARY)


#: The Triton library (``kerntune transform`` on a ``.py`` kernel file): each step introduces its own
#: tunable constexprs; the model judges first whether a step applies to the kernel (only tiles skip that).
_TRITON_LIBRARY: list[tuple[str, str, list[str], bool, dict[str, list[Any]] | None]] = [
    ("tiles", "transform_triton_step_tiles.md", [], True, None),
    ("persistent", "transform_triton_step_persistent.md", [], False, None),
    ("tma", "transform_triton_step_tma.md", [], False, None),
    ("split_k", "transform_triton_step_split_k.md", [], False, None),
    ("pipelining", "transform_triton_step_pipelining.md", [], False, None),
    ("epilogue", "transform_triton_step_epilogue.md", [], False, None),
    ("attention_tiling", "transform_triton_step_attention_tiling.md", [], False, None),
]


def _library(entries: Sequence[tuple[str, str, list[str], bool, dict[str, list[Any]] | None]]) -> list[TuningStep]:
    out = []
    for sid, fname, deps, skip, params in entries:
        text = _prompt(fname)
        title = text.strip().splitlines()[0].lstrip("# ").strip()
        out.append(TuningStep(sid, text, params, list(deps), skip, title))
    return out


def triton_steps() -> list[TuningStep]:
    """Tile shapes and launch options, persistent scheduling, tensor descriptors (TMA), split-K/stream-K,
    pipelining and warp specialization, epilogue fusion, and the tiling of an attention loop."""
    return _library(_TRITON_LIBRARY)


def load_steps(path: str | Path) -> list[TuningStep]:
    """Steps from YAML: a list (or ``steps:`` list) of {id, prompt | prompt_file, tune_params,
    depends_on, skip_evaluation}; ``prompt_file`` is relative to the YAML file."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    path = Path(path)
    if not path.is_file():
        raise KerntuneError(f"steps file not found: {path}")
    try:
        data = YAML(typ="safe").load(path.read_text())
    except YAMLError as exc:
        raise KerntuneError(f"{path}: not valid YAML: {str(exc).splitlines()[0]}") from None
    if isinstance(data, Mapping):
        data = data.get("steps")
    if not isinstance(data, list) or not data:
        raise KerntuneError(f"{path}: expected a non-empty list of steps (or 'steps:' holding one)")
    return steps_from_dicts(data, base=path.parent, origin=str(path))


def steps_from_dicts(items: Sequence[Any], base: Path | None = None, origin: str = "steps") -> list[TuningStep]:
    steps: list[TuningStep] = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping) or "id" not in item:
            raise KerntuneError(f"{origin}: step {i + 1} needs an 'id'")
        unknown = set(item) - {"id", "prompt", "prompt_file", "prompt_template", "tune_params", "depends_on",
                               "skip_evaluation", "title"}
        if unknown:
            raise KerntuneError(f"{origin}: step {item['id']}: unknown field {sorted(unknown)[0]!r}")
        prompt = item.get("prompt", item.get("prompt_template"))
        if "prompt_file" in item:
            file = (base or Path(".")) / str(item["prompt_file"])
            if not file.is_file():
                raise KerntuneError(f"{origin}: step {item['id']}: prompt file not found: {file}")
            prompt = file.read_text()
        if not isinstance(prompt, str) or not prompt.strip():
            raise KerntuneError(f"{origin}: step {item['id']} needs a 'prompt' or a 'prompt_file'")
        steps.append(TuningStep(str(item["id"]), prompt, item.get("tune_params"), item.get("depends_on") or [],
                                bool(item.get("skip_evaluation", False)), str(item.get("title", ""))))
    ids = [s.id for s in steps]
    for s in steps:
        if ids.count(s.id) > 1:
            raise KerntuneError(f"{origin}: step id {s.id!r} appears twice")
        missing = [d for d in s.depends_on if d not in ids[:ids.index(s.id)]]
        if missing:
            raise KerntuneError(f"{origin}: step {s.id} depends on {missing[0]!r}, which is not an earlier step")
    return steps
