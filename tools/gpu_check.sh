#!/usr/bin/env bash
# The GPU check of a device machine: what it has, then `make test-gpu` and
# `make bench-gpu` with its own python (GPU_PY). Run from the repository root.
# Installs nothing from the network: flowrt is made importable from this checkout
# (an editable install without dependencies, or else a path to it).
# Wheels in .whl/ (packages the machine lacks, e.g. nvidia-cudnn-frontend) are installed
# into a scratch directory first. With OUT set, the logs and the benchmark's JSON go there.
set -u
PY=${GPU_PY:-python3}
OUT_DIR=${OUT:-$(mktemp -d)}
echo "== machine"; nvidia-smi -L 2>&1 | head -4
if ls .whl/*.whl >/dev/null 2>&1; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/flowrt-site .whl/*.whl && export PYTHONPATH=/tmp/flowrt-site${PYTHONPATH:+:$PYTHONPATH}
fi
$PY - <<'PYEOF'
import importlib, sys
print("python", sys.version.split()[0])
for m in ("numpy", "cupy", "pluggy", "grpc", "zmq", "google.protobuf", "pytest",
          "hypothesis", "xdist", "pytest_timeout", "ml_dtypes", "PIL", "cudnn"):
    try:
        mod = importlib.import_module(m)
        print(f"  {m:16} {getattr(mod, '__version__', 'ok')}")
    except Exception as e:  # report and go on
        print(f"  {m:16} MISSING ({type(e).__name__})")
PYEOF
if ! $PY -c "import flowrt" 2>/dev/null; then
  scratch=$(mktemp -d)
  if ! $PY -m pip install -q --no-deps --no-build-isolation -e . 2>"$scratch/pip.err"; then
    echo "editable install failed ($(tail -1 "$scratch/pip.err")); using a path instead"
    ln -sfn "$PWD/core" "$scratch/flowrt"
    ln -sfn "$PWD/plugins" core/plugins
    export PYTHONPATH=$scratch${PYTHONPATH:+:$PYTHONPATH}
  fi
fi
$PY -c "import flowrt as tf; rt = tf.default_runtime(); print('flowrt', tf.__version__, sorted(rt.device_types)); print([d.name for d in rt.device_type('GPU').discover(None, 'localhost', 0)][:2])" 2>&1 | tail -3
$PY -c "from flowrt.plugins.kernels import cudnn_conv as c; print('cudnn:', c.unavailable_reason() or 'usable')"
echo "== cuDNN convolutions"
FLOWRT_REQUIRE_GPU=1 FLOWRT_REQUIRE_CUDNN=1 timeout ${CUDNN_TIMEOUT:-300} $PY -m pytest -q -p no:cacheprovider tests/test_cudnn.py 2>&1 \
  | tee "$OUT_DIR/cudnn.log" | tail -30
echo "== bench/gpu_bench.py"
time timeout ${BENCH_TIMEOUT:-600} $PY bench/gpu_bench.py --markdown --json "$OUT_DIR/gpu_bench.json" \
  ${GPU_BENCH_ARGS:-} 2>"$OUT_DIR/bench.err" | tee "$OUT_DIR/bench.md" | tail -30
tail -5 "$OUT_DIR/bench.err"
echo "== make test-gpu"
time timeout ${TEST_GPU_TIMEOUT:-600} make --no-print-directory test-gpu GPU_PY="$PY" STAMP= \
  2>&1 | tee "$OUT_DIR/test_gpu.log" | tail -25
