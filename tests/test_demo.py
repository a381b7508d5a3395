"""``flowrt demo`` with every task in a process of its own (grpc and zmq), and the
demo's pieces (the synthetic data, argument checks)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from flowrt.demo import run_demo, synthetic_digits


@pytest.mark.parametrize("protocol", ["grpc", "zmq"])
def test_demo_over_processes_trains_and_shuts_every_server_down(protocol, tmp_path):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    r = subprocess.run([sys.executable, "-m", "flowrt.cli", "demo", "--protocol", protocol,
                        "--steps", "30", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=170, env=env)
    out = r.stdout
    assert r.returncode == 0, out + r.stderr
    lines = out.splitlines()
    assert f"over {protocol}" in lines[0]
    # three servers on loopback ports, each one a process, each announced and stopped
    for task, job in (("ps0", "ps"), ("worker0", "worker"), ("worker1", "worker")):
        assert re.search(rf"^\[server {task}\] flowrt server: /job:{job}/task:\d serving "
                         rf"{protocol}://127\.0\.0\.1:\d+$", out, re.M), out
        assert f"[server {task}] flowrt server: stopped (the demo finished)" in out
    # each worker's client ran against its own worker's target
    targets = re.findall(rf"^\[(worker\d)\] session on ({protocol}://\S+)$", out, re.M)
    assert len(targets) == 2 and targets[0][1] != targets[1][1]
    assert "[worker1] the chief's variables are ready" in out
    assert "[worker1] step   30/30" in out and "[worker0] step   30/30" in out
    final = re.search(r"^\[worker0\] final test accuracy (\d\.\d+) .*global step (\d+)",
                      out, re.M)
    assert final and float(final[1]) > 0.5, out  # chance is 0.1
    assert int(final[2]) == 61
    assert "[worker0] shut the cluster down" in out
    events = json.loads((tmp_path / "flowrt_demo_timeline.json").read_text())["traceEvents"]
    devices = {e["args"]["name"] for e in events
               if e["ph"] == "M" and e["name"] == "process_name"}
    assert {d.split("/replica")[0] for d in devices} == {"/job:ps", "/job:worker"}
    assert (tmp_path / "flowrt_demo_graph.dot").read_text().startswith("digraph")


def test_synthetic_digits_are_deterministic_and_learnable():
    x, y = synthetic_digits(200, seed=5)
    x2, y2 = synthetic_digits(200, seed=5)
    np.testing.assert_array_equal(x, x2)
    np.testing.assert_array_equal(y, y2)
    assert x.shape == (200, 784) and x.dtype == np.float32 and y.dtype == np.int64
    assert 0.0 <= x.min() and x.max() <= 1.0 and set(np.unique(y)) <= set(range(10))
    # nearest prototype (class mean of another draw) already beats chance by far
    xs, ys = synthetic_digits(2000, seed=0)
    means = np.stack([xs[ys == k].mean(0) for k in range(10)])
    pred = np.argmin(((x[:, None, :] - means[None]) ** 2).sum(-1), axis=1)
    assert (pred == y).mean() > 0.5


@pytest.mark.parametrize("kwargs, message", [
    ({"protocol": "smoke"}, "unknown demo protocol 'smoke'"),
    ({"workers": 0}, "at least one worker"),
    ({"steps": 0}, "at least one worker and one step"),
])
def test_run_demo_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        run_demo(**kwargs)
