# Quick start: `make run` and `make test` need only python3; each sets up .venv itself.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test lint typecheck browser serve clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# the runtime install
$(VENV)/.installed: pyproject.toml $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

# the test install: test tools plus torch (CPU) and transformers for the reference parameter counts
$(VENV)/.installed-test: pyproject.toml $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test,reference]'
	touch $@ $(VENV)/.installed

# vllm and skypilot, to check launch files with their own parsers: vllm pins a CUDA torch and
# skypilot an old click, so both come without their dependencies, plus the pure-Python modules
# their parsers import (torch stays the CPU 2.13.0: tests/launch-tools-constraints.txt)
$(VENV)/.installed-launch-tools: $(VENV)/.installed-test tests/launch-tools-requirements.txt
	PIP_CONSTRAINT=tests/launch-tools-constraints.txt $(BIN)/python -m pip install -q --no-deps vllm==0.34.0 xgrammar==0.2.8 skypilot==0.14.1
	PIP_CONSTRAINT=tests/launch-tools-constraints.txt $(BIN)/python -m pip install -q -r tests/launch-tools-requirements.txt
	touch $@

run: $(VENV)/.installed
	$(BIN)/gpuplan compare H100 A100 L4 L40 V100
	$(BIN)/gpuplan fit examples/lora-4090.yaml
	$(BIN)/gpuplan fit llama-3.1-70b --task qlora --batch-size 1 --seq-len 4096 --checkpointing full
	$(BIN)/gpuplan estimate examples/serve-70b.yaml --set weight_dtype=awq
	$(BIN)/gpuplan estimate examples/lora-4090.yaml --set tokens=5e7
	$(BIN)/gpuplan plan examples/pretrain-1b.yaml --top 8
	$(BIN)/gpuplan plan examples/chat-7b.yaml --top 8
	$(BIN)/gpuplan plan examples/pretrain-70b-cluster.yaml --top 5
	$(BIN)/gpuplan launch examples/pretrain-70b-cluster.yaml --format slurm
	$(BIN)/gpuplan chart relative
	$(BIN)/gpuplan plan examples/stream-4k.yaml
	$(BIN)/gpuplan gpus --use-cases
	$(BIN)/gpuplan validate
	$(BIN)/gpuplan lab check examples/lab.yaml
	$(BIN)/gpuplan lab allocate examples/lab.yaml --policy fair
	$(BIN)/gpuplan lab slurm-config examples/lab.yaml
	$(BIN)/gpuplan lab submit examples/lab.yaml --dry-run --out $$(mktemp -d)

lint: $(VENV)/.installed-test
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

typecheck: $(VENV)/.installed-test
	$(BIN)/mypy

# Debian's chromium for the browser test (installed as root with apt; else that test skips)
browser:
	bash tests/browser/ensure-chromium.sh

test: lint typecheck browser $(VENV)/.installed-launch-tools
	$(BIN)/pytest -q

# the web app on http://localhost:8000/
serve: $(VENV)/.installed
	$(BIN)/gpuplan serve

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache
