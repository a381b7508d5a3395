"""The ``flowrt`` console script: ``plugins`` and ``demo``."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from flowrt.cli import main


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "flowrt.cli", *args], capture_output=True,
                          text=True, timeout=120, env=e)


def test_plugins_lists_builtins_with_distribution_and_what_they_provide():
    r = _run("plugins")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for name, provides in [("cpu", "device types: CPU"), ("inproc", "transports: inproc"),
                           ("grpc", "transports: grpc"), ("zmq", "transports: zmq"),
                           ("standard", "ops: ")]:
        line = next(l for l in out.splitlines() if l.startswith(name + " "))
        assert "loaded" in line and "flowrt" in line and provides in line
    assert "CPU      from cpu" in out
    # (installed third-party plugins, like the example package's unix, are listed too)
    line = next(l for l in out.splitlines() if l.startswith("transports: "))
    assert {"grpc (grpc)", "inproc (inproc)", "zmq (zmq)"} <= \
        set(line[len("transports: "):].split(", "))
    assert out.splitlines()[-1].startswith("threads: ") and "BLAS: " in out.splitlines()[-1]


def test_plugins_reports_a_blocked_plugin():
    r = _run("plugins", env={"FLOWRT_BLOCK_PLUGINS": "inproc"})
    assert r.returncode == 0, r.stderr
    line = next(l for l in r.stdout.splitlines() if l.startswith("inproc "))
    assert "blocked" in line


def test_plugins_reports_a_failed_plugin(tmp_path):
    pkg = tmp_path / "brokenplug"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("raise ImportError('libfoo.so.1 is missing')\n")
    dist = tmp_path / "brokenplug-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenplug\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[flowrt]\nbroken = brokenplug\n")
    env = {"PYTHONPATH": str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = _run("plugins", env=env)
    assert r.returncode == 0, r.stderr
    assert "broken" in r.stdout and "failed" in r.stdout
    assert "libfoo.so.1 is missing" in r.stdout
    assert "brokenplug 1.0" in r.stdout


def test_demo_trains_and_prints_placement_and_timings(capsys, tmp_path):
    """The in-process demo: a ps and two workers, between-graph replicas in threads."""
    assert main(["demo", "--steps", "40", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    # the traced step, as a Chrome trace and as the placed step graph
    trace_path = tmp_path / "flowrt_demo_timeline.json"
    dot_path = tmp_path / "flowrt_demo_graph.dot"
    assert str(trace_path) in out and str(dot_path) in out
    events = json.loads(trace_path.read_text())["traceEvents"]
    devices = {e["args"]["name"] for e in events
               if e["ph"] == "M" and e["name"] == "process_name"}
    assert {d.split("/replica")[0] for d in devices} == {"/job:ps", "/job:worker"}
    assert sum(1 for e in events if e["ph"] == "X") > 50
    dot = dot_path.read_text()
    assert dot.startswith("digraph")
    clusters = re.findall(r'subgraph cluster_\d+ \{\n\s*label="([^"]*)";', dot)
    assert sorted(clusters) == sorted(devices)
    assert "_Send" in dot and "_Recv" in dot  # tensors cross between the tasks
    lines = out.splitlines()
    assert "over inproc" in lines[0] and "2 workers" in lines[0]
    assert any(l.startswith("[worker0] the training step has") for l in lines)
    assert "/job:ps/task:0/CPU:0" in out and "/job:worker/task:0/CPU:0" in out
    assert "[worker0] slowest nodes of one traced training step" in out
    assert "[worker0] chief: initialised the variables" in out
    assert "[worker1] the chief's variables are ready" in out
    for w in ("worker0", "worker1"):  # each replica reports its own progress
        steps = [l for l in lines if l.startswith(f"[{w}] step")]
        assert len(steps) == 5 and steps[-1].startswith(f"[{w}] step   40/40")
        losses = [float(l.split("batch loss")[1].split()[0]) for l in steps]
        assert losses[-1] < losses[0]
    final = re.search(r"\[worker0\] final test accuracy (\d\.\d+) .*global step (\d+)", out)
    assert final and float(final[1]) > 0.5  # chance is 0.1
    assert int(final[2]) == 81  # 2 x 40 steps and the traced one, all on one global step
    assert lines[-1].startswith("flowrt demo: finished")


def test_demo_refuses_an_unknown_protocol(capsys):
    with pytest.raises(SystemExit):
        main(["demo", "--protocol", "carrier-pigeon"])
    assert "invalid choice" in capsys.readouterr().err


def test_unknown_command_exits_nonzero():
    with pytest.raises(SystemExit) as e:
        main(["nope"])
    assert e.value.code != 0


def test_intra_op_threads_set_the_blas_thread_count():
    """ConfigProto.intra_op_parallelism_threads, given to the worker that discovers the
    CPU devices (a server's config, `flowrt server --intra-op-threads`), sets numpy's
    BLAS thread count for the process."""
    code = (
        "import ctypes, flowrt as tf\n"
        "from flowrt.plugins.devices.cpu import set_blas_threads\n"
        "from flowrt.worker import Worker\n"
        "if not set_blas_threads(2):\n"
        "    print('no openblas'); raise SystemExit(0)\n"
        "paths = [l.split()[-1] for l in open('/proc/self/maps') if 'openblas' in l.lower()]\n"
        "lib = ctypes.CDLL(paths[0])\n"
        "get = next(getattr(lib, n) for n in ('openblas_get_num_threads',\n"
        "           'scipy_openblas_get_num_threads64_', 'scipy_openblas_get_num_threads',\n"
        "           'openblas_get_num_threads64_') if hasattr(lib, n))\n"
        "w = Worker(tf.default_runtime(), 'localhost', 0,\n"
        "           tf.ConfigProto(intra_op_parallelism_threads=1))\n"
        "w.devices\n"
        "assert get() == 1, get()\n"
        "print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() in ("ok", "no openblas")


def test_python_dash_m_flowrt_is_the_flowrt_command():
    r = subprocess.run([sys.executable, "-m", "flowrt", "--help"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "usage: flowrt" in r.stdout and "server" in r.stdout
    bad = subprocess.run([sys.executable, "-m", "flowrt", "no-such-command"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0


def test_server_gpus_option_builds_the_device_count(tmp_path, monkeypatch, capsys):
    import flowrt.cli as cli_mod

    seen = {}

    class FakeServer:
        def __init__(self, cluster, job_name, task_index, protocol, config, **kw):
            seen["config"], seen["gc"] = config, kw.get("session_gc_seconds")
            raise ValueError("stop here")

    monkeypatch.setattr("flowrt.server.Server", FakeServer)
    spec = tmp_path / "c.json"
    spec.write_text(json.dumps({"ps": ["127.0.0.1:1"]}))
    args = ["server", "--cluster", str(spec), "--job", "ps", "--task", "0"]
    assert cli_mod.main(args + ["--gpus", "0", "--session-gc-seconds", "30"]) == 2
    assert seen["config"].device_count["GPU"] == 0 and seen["gc"] == 30.0
    assert cli_mod.main(args + ["--gpus", "-1"]) == 2
    assert "--gpus must be >= 0, got -1" in capsys.readouterr().err


def test_server_protocol_grpcs_needs_tls_material(tmp_path, monkeypatch, capsys):
    spec = tmp_path / "cluster.json"
    spec.write_text('{"worker": ["127.0.0.1:0"]}')
    for k in ("FLOWRT_TLS_CERT", "FLOWRT_TLS_KEY", "FLOWRT_TLS_CA"):
        monkeypatch.setenv(k, "")
    try:
        code = main(["server", "--cluster", str(spec), "--job", "worker", "--task", "0",
                     "--protocol", "grpcs"])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err
    assert code not in (0, None)
    assert "grpcs://127.0.0.1:0 means grpc with TLS" in err and "FLOWRT_TLS_CERT" in err
    with pytest.raises(SystemExit):
        main(["server", "--help"])
    assert "--protocol {grpc,grpcs," in capsys.readouterr().out
