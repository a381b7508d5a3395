# flowrt developer commands. Everything runs from a local .venv that this file creates.
PY ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# A separate environment with tensorflow-cpu for side-by-side runs (never a dependency).
TF_VENV ?= ../tf-venv

.PHONY: demo test test-gpu bench-gpu compat coverage bench bench-models bench-dist bench-rtt plugins clean

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

# On a machine with a GPU and CuPy (GPU_PY: a python with flowrt and cupy installed): the
# GPU tests, then the kernel, gradient, optimizer and executor suites, whose ops land on
# the GPU there. Fails rather than skips when no GPU is found.
GPU_PY ?= $(VPY)
GPU_SUITES := tests/test_cuda.py tests/test_math_unary.py tests/test_math_binary.py \
	tests/test_math_reduce.py tests/test_math_matmul.py tests/test_array_ops.py \
	tests/test_array_props.py tests/test_array_dtypes.py tests/test_nn_ops.py \
	tests/test_nn_grad.py tests/test_math_grad.py tests/test_array_grad.py \
	tests/test_gradients.py tests/test_optimizers.py tests/test_variables.py \
	tests/test_initializers.py tests/test_executor.py tests/test_control_flow.py \
	tests/test_while_loop.py tests/test_session.py tests/test_nn_conv_ops.py \
	tests/test_linalg_gpu.py tests/test_tf_layers.py tests/test_rnn.py tests/test_losses.py \
	tests/test_tensor_array.py tests/test_cudnn.py tests/test_cuda_pool.py
test-gpu:
	FLOWRT_REQUIRE_GPU=1 $(GPU_PY) -m pytest -q -n 8 -p no:cacheprovider $(GPU_SUITES)

bench-gpu:
	$(GPU_PY) bench/gpu_bench.py --markdown

plugins: $(STAMP)
	$(VENV)/bin/flowrt plugins

# Differential suite: the same TF1 programs under tensorflow.compat.v1 and flowrt.
compat:
	@test -x $(TF_VENV)/bin/python || { echo "make compat needs a TensorFlow environment at $(TF_VENV) (python3 -m venv $(TF_VENV) && $(TF_VENV)/bin/pip install tensorflow-cpu pytest hypothesis && $(TF_VENV)/bin/pip install -e .)"; exit 2; }
	TF_USE_LEGACY_KERAS=1 $(TF_VENV)/bin/python -m pytest -q compat

# docs/api_coverage.md: which tensorflow.compat.v1 names flowrt has, lacks, leaves out.
coverage:
	@test -x $(TF_VENV)/bin/python || { echo "make coverage needs a TensorFlow environment at $(TF_VENV)"; exit 2; }
	TF_USE_LEGACY_KERAS=1 $(TF_VENV)/bin/python compat/coverage.py --out docs/api_coverage.md

# Model training steps side by side: 2-layer LSTM dynamic_rnn, tf.layers CNN.
bench-models:
	@test -x $(TF_VENV)/bin/python || { echo "make bench-models needs a TensorFlow environment at $(TF_VENV)"; exit 2; }
	TF_USE_LEGACY_KERAS=1 $(TF_VENV)/bin/python bench/model_bench.py --case lstm --impl tf
	TF_USE_LEGACY_KERAS=1 $(TF_VENV)/bin/python bench/model_bench.py --case lstm --impl flowrt

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
