"""A cluster across real network hosts: network namespaces joined by veth links to a
switch (a bridge in a namespace of its own), made and removed by the test itself; the
ps, the worker and the client each run in their own namespace, as on three machines.

Skipped, with the reason, where namespaces cannot be made (not root, no ``ip``).
Checks that steps succeed across hosts on both transports, that a cut link fails the
step with UnavailableError within the documented bound (the health-check period plus
about 2 s), and, where the kernel has the netem qdisc, that steps succeed under delay
and loss.
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.timeout(180)
#: seconds a server may take to print "serving"
START_S = 60
#: a step of a task cut off fails within the health-check period (1 s) + 2 s; slack for
#: a loaded 2-core machine
CUT_BOUND_S = 8.0


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20,
                          check=check)


def _namespaces_reason() -> str | None:
    """Why namespaces cannot be made here (None when they can)."""
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    probe = f"frprobe{os.getpid()}"
    r = _ip("netns", "add", probe, check=False)
    if r.returncode != 0:
        return f"`ip netns add` is not permitted here: {r.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


_REASON = _namespaces_reason()
if _REASON is not None:
    pytestmark = [pytestmark, pytest.mark.skip(reason=_REASON)]


class Hosts:
    """Namespaces ``h1``.. on one switch; host ``i`` has address 10.<k>.0.<i>."""

    def __init__(self, n: int):
        tag = f"{os.getpid() % 10000}"
        self.net = 100 + os.getpid() % 100
        self.sw = f"frsw{tag}"
        self.names = [f"frh{tag}x{i}" for i in range(1, n + 1)]
        self.made: list[str] = []
        try:
            self._make()
        except BaseException:
            self.close()
            raise

    def _make(self) -> None:
        _ip("netns", "add", self.sw)
        self.made.append(self.sw)
        _ip("-n", self.sw, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.sw, "link", "set", "br0", "up")
        for i, ns in enumerate(self.names, 1):
            _ip("netns", "add", ns)
            self.made.append(ns)
            # the veth pair is made inside the host's namespace, its peer moved to the
            # switch: nothing is ever added to the namespace the test runs in
            _ip("-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", f"p{i}")
            _ip("-n", ns, "link", "set", f"p{i}", "netns", self.sw)
            _ip("-n", self.sw, "link", "set", f"p{i}", "master", "br0")
            _ip("-n", self.sw, "link", "set", f"p{i}", "up")
            _ip("-n", ns, "addr", "add", f"{self.addr(i)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")

    def addr(self, i: int) -> str:
        return f"10.{self.net}.0.{i}"

    def cut(self, i: int) -> None:
        """Take host ``i``'s switch port down (packets are dropped, no reset)."""
        _ip("-n", self.sw, "link", "set", f"p{i}", "down")

    def exec(self, i: int, cmd: list[str], log: pathlib.Path) -> subprocess.Popen:
        with open(log, "wb") as f:
            return subprocess.Popen(["ip", "netns", "exec", self.names[i - 1], *cmd],
                                    stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)

    def close(self) -> None:
        for ns in reversed(self.made):
            _ip("netns", "del", ns, check=False)
        self.made.clear()


@pytest.fixture
def hosts():
    h = Hosts(3)
    yield h
    h.close()


def _wait_text(log: pathlib.Path, proc: subprocess.Popen, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"no {text!r} in {log.name} (exit {proc.poll()}):\n"
                                 f"{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.05)


CLIENT = r"""
import json, sys, time
import flowrt as tf
target, steps, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with tf.device("/job:ps/task:0"):
    v = tf.Variable(0.0)
with tf.device("/job:worker/task:0"):
    inc = tf.assign_add(v, 1.0)
rec = {"done": 0, "error": None}
with tf.Session(target) as sess:
    sess.run(v.initializer)
    for i in range(steps):
        try:
            sess.run(inc)
        except tf.errors.OpError as e:
            rec["error"] = type(e).__name__
            rec["message"] = e.message[:300]
            rec["failed_at"] = time.time()
            break
        rec["done"] = i + 1
        rec["last_ok"] = time.time()
        if i == 29:  # thirty steps across the hosts: the variable on the ps counted them
            open(out + ".started", "w").write(str(float(sess.run(v))))
    if rec["error"] is None:
        rec["value"] = float(sess.run(v))
json.dump(rec, open(out, "w"))
print("client done", flush=True)
"""


def _run_cluster(hosts: Hosts, tmp: pathlib.Path, protocol: str, steps: int,
                 during: Any = None) -> dict[str, Any]:
    """ps on host 1, worker on host 2, a client on host 3 running ``steps`` steps;
    ``during(client_proc, out_path)`` runs while the client works. Returns its record."""
    spec = {"ps": [f"{hosts.addr(1)}:2222"], "worker": [f"{hosts.addr(2)}:2222"]}
    cfile = tmp / "cluster.json"
    cfile.write_text(json.dumps(spec))
    procs = []
    try:
        for i, job in ((1, "ps"), (2, "worker")):
            log = tmp / f"{job}.log"
            p = hosts.exec(i, [sys.executable, "-m", "flowrt.cli", "server", "--cluster",
                               str(cfile), "--job", job, "--task", "0", "--protocol",
                               protocol], log)
            procs.append(p)
            _wait_text(log, p, "serving", START_S)
        script = tmp / "client.py"
        script.write_text(CLIENT)
        out = tmp / "result.json"
        log = tmp / "client.log"
        target = f"{protocol}://{hosts.addr(2)}:2222"
        client = hosts.exec(3, [sys.executable, str(script), target, str(steps), str(out)],
                            log)
        procs.append(client)
        if during is not None:
            during(client, out)
        try:
            client.wait(START_S + 60)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the client did not finish:\n"
                                 f"{log.read_text(errors='replace')[-3000:]}") from None
        assert client.returncode == 0, log.read_text(errors="replace")[-3000:]
        return json.loads(out.read_text())
    finally:
        for p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL'ed
                pass


@pytest.mark.parametrize("protocol", ["grpc", "zmq"])
def test_steps_across_hosts_then_a_cut_link(hosts, tmp_path, protocol):
    """Thirty steps succeed across the hosts (the ps counts them); then the ps's link is
    cut and the next step fails with UnavailableError naming the ps, within the bound."""
    cut_at: list[float] = []

    def cut_ps(client: subprocess.Popen, out: pathlib.Path) -> None:
        started = pathlib.Path(str(out) + ".started")
        deadline = time.monotonic() + START_S
        while not started.exists() or not started.read_text():
            assert client.poll() is None, "the client ended before its thirtieth step"
            assert time.monotonic() < deadline, "the client made no progress"
            time.sleep(0.02)
        assert float(started.read_text()) == 30.0
        cut_at.append(time.time())
        hosts.cut(1)

    rec = _run_cluster(hosts, tmp_path, protocol, 1_000_000, cut_ps)
    assert rec["done"] >= 30
    assert rec["error"] == "UnavailableError", rec
    assert "ps" in rec["message"], rec
    took = rec["failed_at"] - cut_at[0]
    assert took <= CUT_BOUND_S, f"the step failed {took:.1f} s after the cut"


def _netem_reason(hosts: Hosts) -> str | None:
    r = _ip("netns", "exec", hosts.names[0], "tc", "qdisc", "add", "dev", "eth0", "root",
            "netem", "delay", "1ms", check=False) if shutil.which("tc") else None
    if r is None:
        return "the `tc` command is not installed"
    if r.returncode != 0:
        return f"the netem qdisc is not available in this kernel: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "exec", hosts.names[0], "tc", "qdisc", "del", "dev",
                    "eth0", "root"], capture_output=True, timeout=20)
    return None


@pytest.mark.parametrize("protocol", ["grpc", "zmq"])
def test_steps_under_delay_and_loss(hosts, tmp_path, protocol):
    reason = _netem_reason(hosts)
    if reason is not None:
        pytest.skip(reason)
    for ns in hosts.names[:2]:
        subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "eth0",
                        "root", "netem", "delay", "20ms", "5ms", "loss", "2%"], check=True,
                       capture_output=True, timeout=20)
    rec = _run_cluster(hosts, tmp_path, protocol, 20)
    assert rec["error"] is None and rec["value"] == 20.0
