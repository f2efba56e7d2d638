"""The embedded model's phased GPU runs (benchmarks/transform/transform_embedded.py) with a RECORDED model.

No GPU and no real model: ``RecordedModel`` answers from a tiny handmade transcript through a real
``LLMClient``; a prompt that differs only in a measured number still matches (masked); a miss is
written once and stops the run with ``AwaitingModelAnswer``, which leaves a real ``KernelTransformer``
run on PoCL (OpenCL on the CPU) instead of being swallowed as a failed model call; the phase-2
``answer`` step is exercised with a scripted command model (``cmd:``) in place of the embedded one.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.transform.transform_embedded import (AwaitingModelAnswer, RecordedModel, answer, mask,  # noqa: E402
                                           read_jsonl, request_key)
from kerntune.llm import LLMClient, LLMError, Message  # noqa: E402

SCHEMA = {"type": "object", "properties": {"apply": {"type": "boolean"}}, "required": ["apply"]}
DATA = ROOT / "tests" / "data" / "transform"


def msgs(time_ms: str, extra: str = "") -> list[Message]:
    return [Message("system", "You tune kernels."),
            Message("user", f"<!-- kerntune-transform: evaluate-step -->\nbest time {time_ms} ms, 1.00x{extra}")]


def record(path: Path, messages: list[Message], response: str | None = None, error: str | None = None,
           temperature: float = 0.2, max_tokens: int = 64) -> None:
    entry = {"key": request_key(messages, SCHEMA, temperature, max_tokens),
             "messages": [m.to_dict() for m in messages], "schema": SCHEMA, "temperature": temperature,
             "max_tokens": max_tokens, "model": "gemma-3-270m-q4_k_m.gguf",
             "usage": {"input_tokens": 50, "output_tokens": 7}}
    entry.update({"response": response} if error is None else {"error": error})
    with open(path, "a") as fh:
        fh.write(json.dumps(entry) + "\n")


def test_mask_hides_measured_numbers_only():
    assert mask("12.35 ms, 1e-05 ms, 1234 ms, 2.5e+03, 1.07x") == "# ms, # ms, # ms, #, #x"
    assert mask("block_size_x 16, float4 a; x[i * 32]; TILE_K 8") == "block_size_x 16, float4 a; x[i * 32]; TILE_K 8"


def test_recorded_model_hit_masked_match_and_miss_written_once(tmp_path):
    transcript, misses = tmp_path / "t.jsonl", tmp_path / "m.jsonl"
    record(transcript, msgs("1.234"), '{"apply": true}')
    model = RecordedModel(transcript, misses, run="matmul/explicit")
    client = LLMClient(model)

    # (a) a hit returns the recorded text, parsed as the live model's would be
    resp = client.complete(msgs("1.234"), schema=SCHEMA, temperature=0.2, max_tokens=64)
    assert resp.text == '{"apply": true}' and resp.parsed == {"apply": True}
    assert resp.usage.output_tokens == 7 and client.calls == 1

    # (b) differing only in a measured number: still the recorded answer, marked as a masked match
    resp = client.complete(msgs("1.301"), schema=SCHEMA, temperature=0.2, max_tokens=64)
    assert resp.parsed == {"apply": True}
    assert [c["match"] for c in model.calls] == ["exact", "masked"]

    # temperature and max_tokens are part of the key
    with pytest.raises(AwaitingModelAnswer):
        client.complete(msgs("1.234"), schema=SCHEMA, temperature=0.2, max_tokens=128)

    # (c) a miss: written once, whatever the number of asks, and it is not an LLMError
    for _ in range(2):
        with pytest.raises(AwaitingModelAnswer) as info:
            client.complete(msgs("1.234", " (shared_memory_tiling)"), schema=SCHEMA, temperature=0.2, max_tokens=64)
        assert not isinstance(info.value, LLMError)
    written = read_jsonl(misses)
    assert len(written) == 2 and all(m["run"] == "matmul/explicit" for m in written)
    assert written[1]["messages"][1]["content"].endswith("(shared_memory_tiling)")
    assert written[1]["key"] == request_key(msgs("9.9", " (shared_memory_tiling)"), SCHEMA, 0.2, 64)
    assert [c["match"] for c in model.calls][-2:] == ["miss", "miss"]


def test_recorded_model_error_replays_as_llm_error(tmp_path):
    transcript = tmp_path / "t.jsonl"
    record(transcript, msgs("2.0"), error="local: Requested tokens exceed context window")
    client = LLMClient(RecordedModel(transcript, tmp_path / "m.jsonl"), retries=0)
    with pytest.raises(LLMError, match="context window"):
        client.complete(msgs("2.5"), schema=SCHEMA, temperature=0.2, max_tokens=64)


def test_answer_fills_the_transcript_from_misses_and_resumes(tmp_path):
    transcript, misses = tmp_path / "t.jsonl", tmp_path / "m.jsonl"
    model = RecordedModel(transcript, misses, run="k/s")
    for t, step in (("1.5", "a"), ("3.25", "b")):  # two requests (numbers alone would not make them two)
        with pytest.raises(AwaitingModelAnswer):
            model.send(msgs(t, step), SCHEMA, 0.2, 64, 10)
    reply = tmp_path / "reply.py"
    reply.write_text("import sys; sys.stdin.read(); print('{\"apply\": false}')\n")
    spec = f"cmd:{sys.executable} {reply}"
    assert answer(misses, transcript, spec=spec, limit=1) == 1
    assert answer(misses, transcript, spec=spec) == 1  # resumes: only the one left
    assert answer(misses, transcript, spec=spec) == 0
    replay = RecordedModel(transcript, tmp_path / "m2.jsonl")
    assert json.loads(replay.send(msgs("1.7", "a"), SCHEMA, 0.2, 64, 10).text) == {"apply": False}
    assert [c["match"] for c in replay.calls] == ["masked"]


def test_recorded_model_miss_stops_a_real_kernel_transformer_run_on_pocl(tmp_path):
    pyopencl = pytest.importorskip("pyopencl")
    pytest.importorskip("kernel_tuner")
    try:
        if not pyopencl.get_platforms():
            pytest.skip("no OpenCL platform")
    except pyopencl.Error:
        pytest.skip("no OpenCL platform")
    from kerntune.transform import ExplicitTuningStrategy, KernelTransformer

    transcript, misses = tmp_path / "t.jsonl", tmp_path / "m.jsonl"

    def run() -> RecordedModel:
        model = RecordedModel(transcript, misses, run="matmul/explicit")
        kt = KernelTransformer((DATA / "matmul_naive.cl").read_text(), strategy=ExplicitTuningStrategy(),
                               llm=LLMClient(model), backend="opencl", problem_size=(32, 32),
                               args_generator=DATA / "matmul_args.py",
                               tune_params={"block_size_x": [16], "block_size_y": [16]}, iterations=1, budget=2)
        with pytest.raises(AwaitingModelAnswer):  # the strategy does not swallow it as a failed judgement
            kt.run()
        return model

    first = run()
    assert [c["match"] for c in first.calls] == ["miss"]
    [miss] = read_jsonl(misses)
    # the first default step (thread-block size) is executed without a judgement
    assert "kerntune-transform: execute" in miss["messages"][1]["content"] and miss["max_tokens"] == 8192

    # phase 2 by hand: the model answers with JSON that misses the schema; the next run replays that
    # answer and stops at the client's repair round, which is asked through the recorded model too
    entry = dict(miss, response=json.dumps({"explanation": "no code"}), model="m",
                 usage={"input_tokens": 1, "output_tokens": 1})
    entry.pop("run")
    transcript.write_text(json.dumps(entry) + "\n")
    second = run()
    assert [c["match"] for c in second.calls][0] in ("exact", "masked")
    assert [c["match"] for c in second.calls][1:] == ["miss"]
    later = read_jsonl(misses)
    assert len(later) == 2 and later[1]["key"] != miss["key"]
    repair = later[1]["messages"]
    assert [m["role"] for m in repair] == ["system", "user", "assistant", "user"]
    assert repair[2]["content"] == entry["response"] and "could not be used" in repair[3]["content"]


def _pocl_device() -> str:
    """The name Kernel Tuner's OpenCL backend reports for platform 0, device 0 (skip without PoCL)."""
    pyopencl = pytest.importorskip("pyopencl")
    pytest.importorskip("kernel_tuner")
    try:
        platforms = pyopencl.get_platforms()
    except pyopencl.Error:
        platforms = []
    if not platforms or not platforms[0].get_devices():
        pytest.skip("no OpenCL platform")
    return platforms[0].get_devices()[0].name


def test_speculation_with_a_scripted_live_model_then_a_real_pocl_run_replays_it_without_a_miss(tmp_path):
    """CPU speculation (transform_gpu.py --speculate) answers ahead every request up to the first rewrite
    that must be measured; the real run (PoCL here, the GPU there) then finds every answer it needs up to
    that point in the transcript, and only the requests after the measurement are misses."""
    from benchmarks.transform.transform_embedded import LiveRecorder, NeedsGPU, speculation
    from kerntune.transform import ExplicitTuningStrategy, KernelTransformer
    from kerntune.transform.scripted import ScriptedTransformProvider
    from kerntune.transform.steps import default_steps

    device = _pocl_device()
    transcript, misses = tmp_path / "t.jsonl", tmp_path / "m.jsonl"
    tiled = (DATA / "matmul_tiled.cl").read_text()
    live = ScriptedTransformProvider([  # a scripted stand-in for the embedded model
        {"kind": "execute", "contains": "Tunable thread-block size", "times": 2, "reply": {"explanation": "no code"}},
        {"kind": "evaluate-step", "reply": {"apply": True, "reason": "tiles pay"}},
        {"kind": "execute", "contains": "Tiling in shared", "reply": {
            "code": tiled, "tune_params": {"block_size_x": [16], "block_size_y": [4], "WPT": [4]},
            "grid_div_y": ["block_size_y", "WPT"], "explanation": "tiles"}},
        {"kind": "restrictions", "reply": {"restrictions": []}},
        {"kind": "replan", "reply": {"steps": []}},
    ])
    steps = {s.id: s for s in default_steps()}

    def transformer(provider: object) -> KernelTransformer:
        return KernelTransformer((DATA / "matmul_naive.cl").read_text(),
                                 strategy=ExplicitTuningStrategy([steps["thread_block_size"],
                                                                  steps["shared_memory_tiling"]]),
                                 llm=LLMClient(provider), backend="opencl", problem_size=(32, 32),  # type: ignore[arg-type]
                                 args_generator=DATA / "matmul_args.py",
                                 tune_params={"block_size_x": [16], "block_size_y": [16]}, iterations=1, budget=2)

    ahead = LiveRecorder(live, transcript, run="matmul/explicit")
    with speculation(device, 256), pytest.raises(NeedsGPU, match="shared_memory_tiling"):
        transformer(ahead).run()
    kinds = [k for k, _ in live.script.log]
    assert kinds == ["execute", "execute", "evaluate-step", "execute", "restrictions"]  # the repair is asked too
    assert len(read_jsonl(transcript)) == 5

    # the real run: the original kernel and the tiled rewrite are measured on PoCL; every request up to the
    # measurement is answered from the transcript (masked where a prompt holds the original's real time)
    replay = RecordedModel(transcript, misses, run="matmul/explicit")
    result = transformer(replay).run()
    matches = [c["match"] for c in replay.calls]
    assert len(matches) == 5 and set(matches) <= {"exact", "masked"} and "masked" in matches
    assert not misses.exists()
    assert [s.status for s in result.steps] == ["failed", "accepted"] or \
        [s.status for s in result.steps] == ["failed", "rejected"]
    assert result.steps[1].evaluations == 1  # measured for real: one config
