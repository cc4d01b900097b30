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

.PHONY: venv demo test test-slow lint format readme bench device-carry clean

$(STAMP): Makefile constraints.txt requirements-dev.txt packages/ers-exact/pyproject.toml packages/ers-deep/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -c constraints.txt -e packages/ers-exact[plot] -e "packages/ers-deep[reference,ray,tensorboard]" -r requirements-dev.txt
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/ers-exact demo --out $(OUT)/demo --force

# ruff (lint + format check) over packages, tests, benchmarks and scripts, and mypy over both packages' sources
# (pyproject.toml's [tool.mypy] files); `make test` runs it first.
lint: $(STAMP)
	$(VENV)/bin/ruff check packages tests benchmarks scripts
	$(VENV)/bin/ruff format --check packages tests benchmarks scripts
	$(VENV)/bin/mypy

format: $(STAMP)
	$(VENV)/bin/ruff check --fix packages tests benchmarks scripts
	$(VENV)/bin/ruff format packages tests benchmarks scripts

# regenerate the README's option tables from the CLIs' options classes (a test checks they are current)
readme: $(STAMP)
	$(PY) scripts/sync_readme.py

test: lint
	$(PY) -m pytest -q

test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow

bench: $(STAMP)
	mkdir -p $(OUT)
	$(PY) -m pytest -q benchmarks -p no:randomly -p no:cacheprovider --timeout 0 --benchmark-only --benchmark-json=$(OUT)/benchmarks.json -o addopts="--strict-markers"

# What the device commands carry (scripts/train-gpu.sh, scripts/env-gpu.sh; the device machine reaches no
# network): JaxMARL's four wheels in .whl/ and the JAX anchors in .anchors/, both git-ignored. Then
# run(command="...", carry=[".whl", ".anchors"]) as in scripts/train-gpu.sh's header.
ANCHORS ?= ../shared/anchors
device-carry:
	$(PYTHON) -m pip download -q --no-deps -d .whl jaxmarl==0.2.0 gymnax==1.0.1 "gymnasium<1.4" farama-notifications
	mkdir -p .anchors && cp $(ANCHORS)/*.py .anchors/
	ls .whl .anchors

clean:
	rm -rf $(VENV) $(OUT)
