# flowrt developer commands. Everything runs from a local .venv that this file creates.
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# A separate environment with tensorflow-cpu for side-by-side runs (never a dependency).
TF_VENV ?= ../tf-venv

.PHONY: demo test compat bench bench-dist bench-rtt plugins clean

EXAMPLE_PLUGIN := $(wildcard examples/flowrt-example-plugin/pyproject.toml examples/flowrt-example-plugin/src/*/*.py examples/flowrt-example-plugin/*/*.py)

$(STAMP): pyproject.toml $(EXAMPLE_PLUGIN)
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -e '.[test]'
	$(VPY) -m pip install -q ./examples/flowrt-example-plugin
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/flowrt demo

test: $(STAMP)
	$(VPY) -m pytest -q -n 2 -p no:cacheprovider

plugins: $(STAMP)
	$(VENV)/bin/flowrt plugins

# Differential suite: the same TF1 programs under tensorflow.compat.v1 and flowrt.
compat:
	@test -x $(TF_VENV)/bin/python || { echo "make compat needs a TensorFlow environment at $(TF_VENV) (python3 -m venv $(TF_VENV) && $(TF_VENV)/bin/pip install tensorflow-cpu pytest hypothesis && $(TF_VENV)/bin/pip install -e .)"; exit 2; }
	$(TF_VENV)/bin/python -m pytest -q compat

bench:
	@test -x $(TF_VENV)/bin/python || { echo "make bench needs a TensorFlow environment at $(TF_VENV)"; exit 2; }
	$(TF_VENV)/bin/python bench/step_bench.py

# Distributed side by side (ps + 2 workers on loopback, every task its own process).
bench-dist:
	@test -x $(TF_VENV)/bin/python || { echo "make bench-dist needs a TensorFlow environment at $(TF_VENV)"; exit 2; }
	$(TF_VENV)/bin/python bench/dist_bench.py --markdown --repeats 3

# Round-trip floors of the bare libraries and of flowrt's transports (no TensorFlow).
bench-rtt: $(STAMP)
	$(VPY) bench/rtt_bench.py --markdown

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
