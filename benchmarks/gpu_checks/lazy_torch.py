"""GPU check of how a Triton worker gets torch (worker.main): kernel files that import torch late.

A: make_inputs imports torch and builds a 1 GiB CUDA input (the worker builds the inputs again with torch
loaded; the first build's memory must go back first). B: the same file importing torch at the top (the
reference for the memory figures). C: a file holding Triton whose launch alone imports torch and returns a
CUDA tensor (its worker imports torch at start-up: the check compares CUDA tensors). Each launch logs the
caching allocator's reserved MiB. Expected: every config ok (C's second config wrong_result), and A's
reserved memory the same as B's. Usage: python benchmarks/gpu_checks/lazy_torch.py OUT_DIR
"""
import json
import sys
from collections import Counter
from pathlib import Path

from kerntune.evaluate.triton_backend.evaluator import TritonEvaluator

BODY = '''
from kerntune.space import Choice, Space
name = "lazy_torch"
space = Space([Choice("scale", options=(1, 2))], default={"scale": 1})
def _log():
    import torch
    with open(LOG, "a") as f:
        f.write(f"reserved_MiB={torch.cuda.memory_reserved() >> 20}\\n")
'''
# A and B differ only in where torch is imported: inside make_inputs, or at the file's top.
SAME_INPUTS = '''
def make_inputs(shape):
{import_here}    return (torch.ones(shape[0], device="cuda"),)
def reference(inputs):
    return inputs[0] * 1
def launch(config, inputs):
    _log()
    return inputs[0] * 1
'''
FILES = {
    "A_make_inputs_imports_torch": BODY + SAME_INPUTS.format(import_here="    import torch\n"),
    "B_torch_at_top": "import torch\n" + BODY + SAME_INPUTS.format(import_here=""),
    "C_launch_imports_torch": "import triton\n" + BODY + '''
def make_inputs(shape):
    return (shape[0],)
def reference(inputs):
    import torch
    return torch.ones(inputs[0], device="cuda")
def launch(config, inputs):
    import torch
    _log()
    return torch.ones(inputs[0], device="cuda") * config["scale"]
''',
}


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    report = {}
    for name, body in FILES.items():
        log = out / f"{name}.log"
        path = out / f"{name}.py"
        path.write_text(f"LOG = {str(log)!r}\n" + body)
        ev = TritonEvaluator(path, (1 << 28,), compile_workers=1, rep_ms=20, memory_limit_mb=0)
        try:
            trials = ev.evaluate([{"scale": 1}, {"scale": 2}])
        finally:
            ev.close()
        report[name] = {"statuses": [t.status.value for t in trials], "errors": [t.error for t in trials],
                        "reserved": dict(Counter(log.read_text().split()))}
        print(name, json.dumps(report[name]), flush=True)
    (out / "lazy_torch.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
