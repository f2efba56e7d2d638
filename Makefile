# Two commands for a fresh machine: `make demo` and `make test`. Both create
# .venv and install what they need; `make install` does the install alone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo

.PHONY: install demo test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# torch first, pinned: the CPU build (a wheel on this machine's disk, else PyPI's) is enough for the
# package-kernel tests (adapters build their spaces; kernels run under Triton's interpreter).
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[test,local,packages]'
	touch $(STAMP)

install: $(STAMP)

# The demo needs kerntune alone (no llama-cpp-python build, no test tools): a replayed space runs on
# any CPU.  With an NVIDIA GPU it tunes examples/triton/matmul.py for real, so torch (with Triton)
# is added there when missing.  examples/demo.py says which path it took.
$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	@if nvidia-smi -L >/dev/null 2>&1 && ! $(BIN)/python -c "import torch, triton" 2>/dev/null; then \
	  echo "make demo: NVIDIA GPU found, installing torch"; $(BIN)/python -m pip install -q torch; fi
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/python examples/demo.py

# The report test opens a report in headless Chromium; a clean CI machine gets it from Debian's
# archive (sudo when not root), and KERNTUNE_REQUIRE_BROWSER=1 makes a missing browser a failure.
# The OpenCL tests run on PoCL: the one inside PyPI's pyopencl wheel (PoCL 3.0, LLVM 14) cannot build
# kernels on CPUs its LLVM does not know (an AMD Zen 5 gets "unknown target CPU 'generic'"), so
# Debian's PoCL is installed too; its ICD file in /etc/OpenCL/vendors is the one pyopencl's loader reads.
# pytest-xdist runs the test files side by side on every core (a file's tests in one process).
# Files go out heaviest first (tests/conftest.py, from tests/file_seconds.json), so no core idles at the end.
test: $(STAMP)
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ] || [ ! -f /etc/OpenCL/vendors/pocl.icd ]; then \
	  echo "make test: installing chromium and chromium-driver (report browser test), pocl-opencl-icd (OpenCL tests)"; \
	  SUDO=; [ "$$(id -u)" -eq 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    chromium chromium-driver pocl-opencl-icd >/dev/null || { echo "make test: could not install them" >&2; exit 1; }; \
	fi
	KERNTUNE_REQUIRE_LOCAL=1 KERNTUNE_REQUIRE_BROWSER=1 KERNTUNE_REQUIRE_PACKAGES=1 $(BIN)/python -m pytest -n auto --dist loadfile --no-loadscope-reorder

clean:
	rm -rf $(VENV) .kerntune .pytest_cache .hypothesis
