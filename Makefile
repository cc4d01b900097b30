# The README's two commands: `make demo` (the main job) and `make test` (the test suite).
# Both create .venv with pip on a fresh machine; nothing needs to be installed beforehand.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
OUT ?= results
# hanabi-learning-environment (ers-deep) builds with CMake; its CMakeLists needs this policy floor here.
export CMAKE_POLICY_VERSION_MINIMUM := 3.5

.PHONY: venv demo test test-slow bench clean

$(STAMP): constraints.txt requirements-dev.txt packages/ers-exact/pyproject.toml packages/ers-deep/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -c constraints.txt -e packages/ers-exact[plot] -e "packages/ers-deep[reference]" -r requirements-dev.txt
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/ers-exact demo --out $(OUT)

test: $(STAMP)
	$(PY) -m pytest -q

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

bench: $(STAMP)
	mkdir -p $(OUT)
	$(PY) -m pytest -q benchmarks -p no:randomly --benchmark-only --benchmark-json=$(OUT)/benchmarks.json -o addopts="--strict-markers"

clean:
	rm -rf $(VENV) $(OUT)
