#!/usr/bin/env bash
# The GPU check of a device machine: what it has, then `make test-gpu` and
# `make bench-gpu` with its own python (GPU_PY). Run from the repository root.
# Installs nothing from the network: flowrt is made importable from this checkout
# (an editable install without dependencies, or else a path to it).
set -u
PY=${GPU_PY:-python3}
echo "== machine"; nvidia-smi -L 2>&1 | head -4
$PY - <<'PYEOF'
import importlib, sys
print("python", sys.version.split()[0])
for m in ("numpy", "cupy", "pluggy", "grpc", "zmq", "google.protobuf", "pytest",
          "hypothesis", "xdist", "pytest_timeout", "ml_dtypes", "PIL"):
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
echo "== make test-gpu"
time make --no-print-directory test-gpu GPU_PY="$PY" STAMP= 2>&1 | tail -25
echo "== make bench-gpu"
time make --no-print-directory bench-gpu GPU_PY="$PY" STAMP= 2>&1 | tail -30
