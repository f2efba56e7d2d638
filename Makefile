# Two commands for a fresh machine: `make demo` and `make test`. Both create
# .venv and install what they need; `make install` does the install alone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_SPACE := examples/spaces/convolution_A100.json.gz

.PHONY: install demo test clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test,local]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/kerntune space info $(DEMO_SPACE)
	$(BIN)/kerntune compare --space $(DEMO_SPACE) --strategies random,pattern,bayes,genetic \
		--budget 100 --repeats 5 --seed 0 --store .kerntune/demo.db \
		--json .kerntune/demo-compare.json --plot .kerntune/demo-compare.png

test: $(STAMP)
	KERNTUNE_REQUIRE_LOCAL=1 $(BIN)/python -m pytest

clean:
	rm -rf $(VENV) .kerntune .pytest_cache .hypothesis
