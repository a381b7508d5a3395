"""A cluster across real network hosts: network namespaces joined by veth links to a
switch (a bridge in a namespace of its own), made and removed by the test itself; the
ps, the worker and the client each run in their own namespace, as on three machines.

Skipped, with the reason, where namespaces cannot be made (not root, no ``ip``).
Checks, on both transports, that steps succeed across hosts; that a cut link fails the
step with UnavailableError within the documented bound (the health-check period plus
about 2 s), with and without delay; that steps succeed under delay, taking as long as
the delay says; and that they succeed under packet loss. Delay and loss come from the
netem qdisc where the kernel has it. Where it does not (``Specified qdisc kind is
unknown``), delay comes from TCP relays in the switch's namespace that forward every
chunk a fixed time after it arrived (the tasks and the client reach each other through
them), and loss from a token bucket (``tbf``) with a low rate and a queue of two
packets on the ps's and the worker's links, which drops what does not fit: real packet
loss that TCP must repair by retransmitting (the test checks the qdisc dropped some).
With security on (a cluster token and TLS or CURVE), steps run across the hosts and a
client without the credentials is refused.
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from flowrt.distributed.security import ENV as SECURITY_ENV

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
        self.relays: list[subprocess.Popen] = []
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

    def relay_addr(self, i: int) -> str:
        """An address of the switch itself, where a relay to host ``i`` listens."""
        return f"10.{self.net}.0.{100 + i}"

    def relay(self, i: int, delay_s: float, log: pathlib.Path) -> subprocess.Popen:
        """A TCP relay on the switch from ``relay_addr(i):2222`` to host ``i``'s port
        2222 that forwards every chunk ``delay_s`` after it arrived, both ways."""
        _ip("-n", self.sw, "addr", "add", f"{self.relay_addr(i)}/24", "dev", "br0")
        with open(log, "wb") as f:
            p = subprocess.Popen(["ip", "netns", "exec", self.sw, sys.executable, "-c",
                                  RELAY, self.relay_addr(i), self.addr(i), str(delay_s)],
                                 stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
        self.relays.append(p)
        _wait_text(log, p, "relaying", 30)
        return p

    def tc(self, i: int, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """``tc ARGS`` in host ``i``'s namespace."""
        return subprocess.run(["ip", "netns", "exec", self.names[i - 1], "tc", *args],
                              capture_output=True, text=True, timeout=20, check=check)

    def cut(self, i: int) -> None:
        """Take host ``i``'s switch port down (packets are dropped, no reset)."""
        _ip("-n", self.sw, "link", "set", f"p{i}", "down")

    def exec(self, i: int, cmd: list[str], log: pathlib.Path,
             env: dict[str, str] | None = None) -> subprocess.Popen:
        with open(log, "wb") as f:
            return subprocess.Popen(["ip", "netns", "exec", self.names[i - 1], *cmd],
                                    stdout=f, stderr=subprocess.STDOUT, cwd=ROOT,
                                    env=None if env is None else {**os.environ, **env})

    def close(self) -> None:
        for p in self.relays:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
            p.wait(10)
        self.relays.clear()
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
import json, statistics, sys, time
import flowrt as tf
target, steps, out, size = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
with tf.device("/job:ps/task:0"):
    v = tf.Variable(tf.zeros([size]))
with tf.device("/job:worker/task:0"):
    inc = tf.assign_add(v, tf.ones([size]))  # ones made on the worker, sent to the ps
    first = v[0]
rec = {"done": 0, "error": None}
took = []
with tf.Session(target) as sess:
    sess.run(v.initializer)
    for i in range(steps):
        t0 = time.monotonic()
        try:
            sess.run(inc)
        except tf.errors.OpError as e:
            rec["error"] = type(e).__name__
            rec["message"] = e.message[:300]
            rec["failed_at"] = time.time()
            break
        took.append(time.monotonic() - t0)
        rec["done"] = i + 1
        rec["last_ok"] = time.time()
        if i == 14:  # fifteen steps across the hosts: the variable on the ps counted them
            rec["step_s"] = statistics.median(took[5:])
            open(out + ".started", "w").write(str(float(sess.run(first))))
    if rec["error"] is None:
        rec["value"] = float(sess.run(first))
        rec["step_s"] = statistics.median(took[5:] or took)
json.dump(rec, open(out, "w"))
print("client done", flush=True)
"""

#: a TCP relay: listen on ADDR:2222, connect each connection to TARGET:2222, forward
#: every chunk DELAY seconds after it arrived, in order, both ways
RELAY = r"""
import queue, socket, sys, threading, time
listen, target, delay = sys.argv[1], sys.argv[2], float(sys.argv[3])

def pump(src, dst):
    q = queue.SimpleQueue()

    def read():
        while True:
            try:
                data = src.recv(1 << 16)
            except OSError:
                data = b""
            q.put((time.monotonic() + delay, data))
            if not data:
                return

    threading.Thread(target=read, daemon=True).start()
    while True:
        at, data = q.get()
        time.sleep(max(0.0, at - time.monotonic()))
        try:
            if not data:
                dst.shutdown(socket.SHUT_WR)
                return
            dst.sendall(data)
        except OSError:
            src.close()
            dst.close()
            return

srv = socket.create_server((listen, 2222))
print("relaying", flush=True)
while True:
    a, _ = srv.accept()
    try:
        b = socket.create_connection((target, 2222), timeout=5)
    except OSError:
        a.close()
        continue
    b.settimeout(None)
    for s in (a, b):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=pump, args=(a, b), daemon=True).start()
    threading.Thread(target=pump, args=(b, a), daemon=True).start()
"""


def _run_cluster(hosts: Hosts, tmp: pathlib.Path, protocol: str, steps: int,
                 during: Any = None, size: int = 1, via_relays: bool = False,
                 server_env: dict[str, str] | None = None,
                 client_env: dict[str, str] | None = None) -> dict[str, Any]:
    """ps on host 1, worker on host 2, a client on host 3 running ``steps`` steps on a
    variable of ``size`` floats; ``during(client_proc, out_path)`` runs while the client
    works. With ``via_relays`` every task, and the client, reaches the others at their
    relays' addresses (each server still binds its own). ``server_env`` and
    ``client_env`` are added to the processes' environments (security). Returns the
    client's record."""
    def reach(i: int) -> str:
        return f"{hosts.relay_addr(i) if via_relays else hosts.addr(i)}:2222"

    procs = []
    try:
        for i, job in ((1, "ps"), (2, "worker")):
            # each server binds its own address and reaches the other task as told
            spec = {"ps": [f"{hosts.addr(1)}:2222" if i == 1 else reach(1)],
                    "worker": [f"{hosts.addr(2)}:2222" if i == 2 else reach(2)]}
            cfile = tmp / f"cluster-{job}.json"
            cfile.write_text(json.dumps(spec))
            p = hosts.exec(i, [sys.executable, "-m", "flowrt.cli", "server", "--cluster",
                               str(cfile), "--job", job, "--task", "0", "--protocol",
                               protocol], tmp / f"{job}.log", server_env)
            procs.append(p)
        for p, job in zip(procs, ("ps", "worker")):
            _wait_text(tmp / f"{job}.log", p, "serving", START_S)
        script = tmp / "client.py"
        script.write_text(CLIENT)
        out = tmp / "result.json"
        log = tmp / "client.log"
        target = f"{protocol}://{reach(2)}"
        client = hosts.exec(3, [sys.executable, str(script), target, str(steps), str(out),
                                str(size)], log, client_env)
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


def _netem_reason(hosts: Hosts) -> str | None:
    """Why the netem qdisc cannot be used here (None when it can)."""
    if shutil.which("tc") is None:
        return "the `tc` command is not installed"
    r = hosts.tc(1, "qdisc", "add", "dev", "eth0", "root", "netem", "delay", "1ms",
                 check=False)
    if r.returncode != 0:
        return f"the netem qdisc is not available in this kernel: {r.stderr.strip()}"
    hosts.tc(1, "qdisc", "del", "dev", "eth0", "root", check=False)
    return None


#: one-way delay between hosts, each way
DELAY_S = 0.02


def _cut_after_fifteen(hosts: Hosts, cut_at: list[float]) -> Any:
    """A ``during`` that cuts the ps's link once the client made fifteen steps."""
    def cut_ps(client: subprocess.Popen, out: pathlib.Path) -> None:
        started = pathlib.Path(str(out) + ".started")
        deadline = time.monotonic() + START_S
        while not started.exists() or not started.read_text():
            assert client.poll() is None, "the client ended before its fifteenth step"
            assert time.monotonic() < deadline, "the client made no progress"
            time.sleep(0.02)
        assert float(started.read_text()) == 15.0
        cut_at.append(time.time())
        hosts.cut(1)
    return cut_ps


@pytest.mark.parametrize("protocol", ["grpc", "zmq"])
def test_steps_under_delay_then_a_cut_link(hosts, tmp_path, protocol):
    """Every packet between hosts takes DELAY_S more one way: netem on each host's
    link, else relays on the switch. Fifteen steps succeed across the hosts (the ps
    counts them). A step needs at least a round trip client-worker and one worker-ps:
    it takes at least 4 delays, and not many more (a staged step makes three round
    trips: 6). Then the ps's link is cut: the next step fails with UnavailableError
    naming the ps, within the bound."""
    netem = _netem_reason(hosts) is None
    if netem:
        for i in (1, 2, 3):
            hosts.tc(i, "qdisc", "add", "dev", "eth0", "root", "netem", "delay",
                     f"{DELAY_S * 1000:g}ms")
    else:
        for i in (1, 2):
            hosts.relay(i, DELAY_S, tmp_path / f"relay{i}.log")
    cut_at: list[float] = []
    rec = _run_cluster(hosts, tmp_path, protocol, 1_000_000,
                       _cut_after_fifteen(hosts, cut_at), via_relays=not netem)
    print(protocol, "netem" if netem else "relays", "median step", round(rec["step_s"], 4),
          "s; failed", round(rec["failed_at"] - cut_at[0], 2), "s after the cut")
    assert rec["done"] >= 15
    assert 4 * DELAY_S * 0.95 <= rec["step_s"] <= 12 * DELAY_S + 0.1, rec
    assert rec["error"] == "UnavailableError", rec
    assert "ps" in rec["message"], rec
    took = rec["failed_at"] - cut_at[0]
    assert took <= CUT_BOUND_S, f"the step failed {took:.1f} s after the cut"


#: the loss test's variable: 64 Ki floats (256 KiB each way per step)
LOSS_SIZE = 1 << 16
#: the rate of the token bucket that drops packets where netem is missing
TBF_RATE = "32mbit"


@pytest.mark.parametrize("protocol", ["grpc", "zmq"])
def test_steps_under_packet_loss(hosts, tmp_path, protocol):
    """Packets are lost on the ps's and the worker's links (netem: 2% at random; else a
    tbf of 32 Mbit/s whose queue holds 16 KiB, which drops the rest of each burst);
    every step still succeeds, with the right value. Security is on across the hosts
    (a cluster token, and TLS or CURVE): the client has the credentials, and a client
    on its host without them is refused meanwhile."""
    if shutil.which("tc") is None:
        pytest.skip("the `tc` command is not installed")
    netem = _netem_reason(hosts) is None
    for i in (1, 2):
        if netem:
            hosts.tc(i, "qdisc", "add", "dev", "eth0", "root", "netem", "delay", "5ms",
                     "loss", "2%")
        else:
            # packets of at most one MTU (no 64 KiB GSO bursts, which a queue this short
            # would drop whole, every time), through a bucket of 32 Mbit/s whose queue
            # holds 16 KiB: what a burst brings beyond that is dropped
            _ip("-n", hosts.names[i - 1], "link", "set", "dev", "eth0", "gso_max_segs", "1")
            hosts.tc(i, "qdisc", "add", "dev", "eth0", "root", "tbf", "rate", TBF_RATE,
                     "burst", "16kb", "limit", "16kb")
    server_env, client_env = _credentials(hosts, tmp_path, protocol)
    rec = _run_cluster(hosts, tmp_path, protocol, 12, size=LOSS_SIZE,
                       during=_intruder(hosts, tmp_path, protocol),
                       server_env=server_env, client_env=client_env)
    stats = [hosts.tc(i, "-s", "qdisc", "show", "dev", "eth0").stdout for i in (1, 2)]
    dropped = sum(int(m) for st in stats for m in re.findall(r"dropped (\d+)", st))
    print(protocol, "netem" if netem else "tbf", "median step", round(rec["step_s"], 4),
          "s; packets dropped", dropped)
    assert rec["error"] is None and rec["value"] == 12.0, rec
    assert dropped > 0, stats


#: a client that tries one step without the cluster's credentials
PLAIN_CLIENT = r"""
import sys
import flowrt as tf
with tf.device("/job:ps/task:0"):
    v = tf.Variable(1.0)
try:
    with tf.Session(sys.argv[1], config=tf.ConfigProto(operation_timeout_in_ms=8000)) as s:
        s.run(v.initializer)
    print("RESULT ran")
except tf.errors.OpError as e:
    print("RESULT", type(e).__name__)
"""


def _credentials(hosts: Hosts, tmp: pathlib.Path, protocol: str
                 ) -> tuple[dict[str, str], dict[str, str]]:
    """Development keys (``flowrt keys``) for a cluster on ``hosts``: the servers' and
    the client's environments. A cluster token, and TLS (grpc: a server certificate
    naming the hosts' addresses) or CURVE (zmq)."""
    keys = tmp / "keys"
    args = [sys.executable, "-m", "flowrt.cli", "keys", str(keys)]
    args += ["--no-curve", "--host", hosts.addr(1), "--host", hosts.addr(2)] \
        if protocol == "grpc" else ["--no-tls"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    common = {"FLOWRT_TOKEN_FILE": str(keys / "token")}
    if protocol == "grpc":
        tls = {"FLOWRT_TLS_CA": str(keys / "ca.pem")}
        return ({**common, **tls, "FLOWRT_TLS_CERT": str(keys / "server.pem"),
                 "FLOWRT_TLS_KEY": str(keys / "server.key")},
                {**common, **tls, "FLOWRT_TLS_CERT": str(keys / "client.pem"),
                 "FLOWRT_TLS_KEY": str(keys / "client.key")})
    curve = keys / "curve"
    server_key = {"FLOWRT_CURVE_SERVER_KEY": str(curve / "server.key")}
    return ({**common, **server_key,
             "FLOWRT_CURVE_SECRET_KEY": str(curve / "server.key_secret"),
             "FLOWRT_CURVE_PUBLIC_KEYS": str(curve / "clients")},
            {**common, **server_key,
             "FLOWRT_CURVE_SECRET_KEY": str(curve / "client.key_secret")})


def _intruder(hosts: Hosts, tmp: pathlib.Path, protocol: str) -> Any:
    """A ``during`` that runs, while the client steps, a client on the same host without
    the cluster's credentials, and checks that it is refused."""
    def run(proc: subprocess.Popen, out: pathlib.Path) -> None:
        script = tmp / "plain.py"
        script.write_text(PLAIN_CLIENT)
        log = tmp / "plain.log"
        plain = hosts.exec(3, [sys.executable, str(script),
                               f"{protocol}://{hosts.addr(2)}:2222"], log,
                           {k: "" for k in SECURITY_ENV.values()})
        plain.wait(START_S + 30)
        text = log.read_text(errors="replace")
        assert "RESULT" in text and "RESULT ran" not in text, text
        assert any(f"RESULT {c}" in text for c in
                   ("UnauthenticatedError", "UnavailableError", "PermissionDeniedError")), text
    return run
