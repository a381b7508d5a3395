"""Servers started from cluster resolvers (issue 21): ``tf.train.Server(resolver)`` and
``flowrt server --resolver tf_config|slurm|kubernetes``.

The subprocess tests run real ``flowrt server`` processes on free 127.0.0.1 ports, with
their environment as TF_CONFIG or a Slurm step would set it, in a working directory of
their own (a ``flowrt server``'s default file root). Every wait is bounded and every
process is ended by its pid.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import flowrt as tf
from flowrt.tools import cli
from flowrt.testing import free_ports

pytestmark = pytest.mark.timeout(120)
R = tf.distribute.cluster_resolver


class _Proc:
    """``flowrt server ARGS`` in ``cwd`` with ``env`` added; its output collected by a
    thread, the constructor waiting (bounded) for its "serving" line."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: str,
                 timeout: float = 30.0):
        full = {k: v for k, v in os.environ.items()
                if k not in ("TF_CONFIG", "FLOWRT_CONFIG") and not k.startswith("SLURM_")}
        self.proc = subprocess.Popen([sys.executable, "-m", "flowrt", "server", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, text=True, cwd=cwd,
                                     env={**full, **env})
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        self.wait_for(" serving ", timeout)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, text: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.output:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                time.sleep(0.2)  # let the reader catch the last lines
                if text in self.output:
                    return
                self.stop()
                raise AssertionError(f"flowrt server did not print {text!r}: {self.output}")
            time.sleep(0.05)

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(10)


def _step_on_ps(target: str) -> float:
    """A step whose variable lives on the ps and whose product runs on the worker."""
    with tf.Graph().as_default():
        with tf.device("/job:ps/task:0"):
            v = tf.Variable(np.float32(3.0))
        with tf.device("/job:worker/task:0"):
            y = v * 2.0
        with tf.Session(target) as sess:
            sess.run(v.initializer)
            return float(sess.run(y))


def test_a_server_from_a_simple_resolver_takes_its_task_and_protocol():
    ps, worker = free_ports(2)
    spec = tf.train.ClusterSpec({"ps": [f"127.0.0.1:{ps}"],
                                 "worker": [f"127.0.0.1:{worker}"]})
    servers = [tf.train.Server(R.SimpleClusterResolver(spec, task_type=job, task_id=0,
                                                        rpc_layer="zmq"))
               for job in ("ps", "worker")]
    try:
        assert [(s.job_name, s.task_index, s.protocol) for s in servers] == \
            [("ps", 0, "zmq"), ("worker", 0, "zmq")]
        assert servers[1].target == f"zmq://127.0.0.1:{worker}"
        assert _step_on_ps(servers[1].target) == 6.0
    finally:
        for s in servers:
            s.stop()
    # arguments win over the resolver; a resolver without a task needs them
    r = R.SimpleClusterResolver(spec, rpc_layer="zmq")
    s = tf.train.Server(r, job_name="worker", task_index=0, protocol="grpc", start=False)
    assert (s.job_name, s.task_index, s.protocol) == ("worker", 0, "grpc")
    with pytest.raises(ValueError, match="job_name"):
        tf.train.Server(r, start=False)


def test_flowrt_server_from_tf_config(tmp_path, monkeypatch):
    """A ps from ``flowrt server --resolver tf_config`` (its rpc layer from TF_CONFIG,
    its file root its working directory) and an in-process worker from the same
    TF_CONFIG with the worker's task."""
    ps, worker = free_ports(2)
    cluster = {"ps": [f"127.0.0.1:{ps}"], "worker": [f"127.0.0.1:{worker}"]}

    def tf_config(job: str) -> str:
        return json.dumps({"cluster": cluster, "task": {"type": job, "index": 0},
                           "rpc_layer": "zmq"})

    proc = _Proc(["--resolver", "tf_config"], {"TF_CONFIG": tf_config("ps")},
                 str(tmp_path))
    server = None
    try:
        assert f"/job:ps/task:0 serving zmq://127.0.0.1:{ps}" in proc.output
        proc.wait_for(f"file ops may touch {os.path.realpath(tmp_path)}")
        monkeypatch.setenv("TF_CONFIG", tf_config("worker"))
        server = tf.train.Server(R.TFConfigClusterResolver())
        assert server.target == f"zmq://127.0.0.1:{worker}"
        assert _step_on_ps(server.target) == 6.0
        # the ps writes relative paths into its working directory, and nowhere else
        with tf.Graph().as_default():
            with tf.device("/job:ps/task:0"):
                ok = tf.write_file("from_client.txt", "hi")
                bad = tf.write_file(str(tmp_path.parent / "escaped.txt"), "no")
            with tf.Session(server.target) as sess:
                sess.run(ok)
                with pytest.raises(tf.errors.PermissionDeniedError, match="escaped.txt"):
                    sess.run(bad)
        assert (tmp_path / "from_client.txt").read_bytes() == b"hi"
        assert not (tmp_path.parent / "escaped.txt").exists()
    finally:
        if server is not None:
            server.stop()
        assert proc.stop() is not None


def test_flowrt_server_from_a_slurm_step(tmp_path):
    """One Slurm task on this host: ``--resolver slurm`` with the port base and jobs as
    resolver options; a client runs a step on it, then shuts it down."""
    (port,) = free_ports(1)
    env = {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "1",
           "SLURM_STEP_NODELIST": "127.0.0.1", "SLURM_STEP_TASKS_PER_NODE": "1",
           "CUDA_VISIBLE_DEVICES": ""}
    proc = _Proc(["--resolver", "slurm", "--resolver-option", f"port_base={port}",
                  "--resolver-option", 'jobs={"ps": 1}', "--file-root", str(tmp_path)],
                 env, str(tmp_path))
    try:
        assert f"/job:ps/task:0 serving grpc://127.0.0.1:{port}" in proc.output
        with tf.Graph().as_default():
            y = tf.constant(np.float32(2.0)) * 5.0
            with tf.Session(f"grpc://127.0.0.1:{port}") as sess:
                assert float(sess.run(y)) == 10.0
        tf.train.shutdown_cluster(f"grpc://127.0.0.1:{port}", reason="done")
        assert proc.proc.wait(15) == 0
    finally:
        proc.stop()


def test_resolver_errors_exit_with_status_2(monkeypatch, capsys, tmp_path):
    for k in [k for k in os.environ if k.startswith("SLURM_")] + ["FLOWRT_K8S_SERVICES"]:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HOSTNAME", "not-a-task")
    cases = [
        (["--resolver", "slurm"], "SLURM_PROCID is not set"),
        (["--resolver", "kubernetes"], "FLOWRT_K8S_SERVICES"),
        (["--resolver", "tf_config", "--cluster", str(tmp_path / "c.json")],
         "--cluster or --resolver"),
        (["--resolver", "tf_config", "--resolver-option", "nokey"], "KEY=VALUE"),
    ]
    monkeypatch.setenv("FLOWRT_K8S_SERVICES", "")
    for args, why in cases:
        assert cli.main(["server", *args]) == 2
        assert why in capsys.readouterr().err
    # a pod whose host name is no task of the services
    monkeypatch.setenv("FLOWRT_K8S_SERVICES", '{"worker": ["trainer-worker", 2]}')
    assert cli.main(["server", "--resolver", "kubernetes"]) == 2
    assert "say which task this is" in capsys.readouterr().err
