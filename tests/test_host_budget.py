"""A process's share of the host's threads (flowrt.base.host_budget) and how the CPU
plugin applies it to numpy's BLAS and the intra-op pool (plugins/devices/cpu.py):
servers of a cluster on one host split the cores, clients that only drive remote steps
keep one BLAS thread, a process alone keeps every core, and
``intra_op_parallelism_threads`` overrides the rule."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

import flowrt as tf
from flowrt.base import host_budget as hb
from flowrt.plugins.devices import cpu

threadpoolctl = pytest.importorskip("threadpoolctl")

CORES = hb.host_cores()


def _free_ports(k: int) -> list[int]:
    socks = [socket.socket() for _ in range(k)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _blas_now() -> int | None:
    """numpy's BLAS thread count in this process, read by threadpoolctl."""
    info = [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
    return info[0]["num_threads"] if info else None


def _initial_blas() -> int:
    """The BLAS thread count a fresh process starts with (its environment's choice)."""
    cpu._controllers()
    return cpu._initial_blas[0]


needs_blas = pytest.mark.skipif(not cpu._controllers(), reason="no BLAS threadpoolctl knows")


@pytest.fixture
def isolated():
    """This process as if it had said nothing about itself; put back afterwards."""
    with hb._isolated():
        yield


# -- the rule -----------------------------------------------------------------------------
@pytest.mark.parametrize("cores, tasks, override, client, want, role", [
    (2, 0, 0, False, 2, "alone"),        # no cluster: every core
    (2, 1, 0, False, 2, "alone"),        # the only task on this host
    (2, 3, 0, False, 1, "server"),       # ps + 2 workers on 2 cores
    (8, 3, 0, False, 2, "server"),
    (16, 4, 0, False, 4, "server"),
    (1, 5, 0, False, 1, "server"),       # never below one thread
    (2, 0, 0, True, 1, "client"),        # drives remote steps only
    (8, 3, 6, False, 6, "override"),     # intra_op_parallelism_threads decides
    (2, 0, 4, True, 4, "override"),
])
def test_thread_budget_from_cores_local_tasks_and_override(cores, tasks, override, client,
                                                           want, role):
    b = hb.thread_budget(cores, tasks, override, client=client)
    assert (b.threads, b.role, b.cores) == (want, role, cores)


def test_budget_reasons_say_why():
    assert hb.thread_budget(2, 3).reason == "2 cores shared by 3 tasks of the cluster on " \
        "this host"
    assert hb.thread_budget(4, 0).reason == "4 cores, alone on this host"
    assert hb.thread_budget(4, 3, 2).reason == "intra_op_parallelism_threads=2"
    assert "client" in hb.thread_budget(4, 0, client=True).reason


@pytest.mark.parametrize("address, local", [
    ("127.0.0.1:2222", True), ("127.3.4.5:1", True), ("localhost:2222", True),
    ("LOCALHOST:1", True), ("[::1]:2222", True), ("0.0.0.0:1", True),
    ("grpc://127.0.0.1:5", True), (f"{socket.gethostname()}:2222", True),
    ("192.0.2.7:2222", False),           # a documentation address: never this host
    ("[2001:db8::1]:2222", False),
    ("ps0.example.invalid:2222", False),  # other names are not resolved
])
def test_local_addresses(address, local):
    assert hb.is_local_address(address) is local


def test_local_tasks_of_a_cluster_spec():
    spec = tf.train.ClusterSpec({"ps": ["127.0.0.1:1"],
                                 "worker": ["localhost:2", "192.0.2.7:3", "127.0.0.1:4"]})
    tasks = {(j, t): spec.task_address(j, t) for j in spec.jobs for t in spec.task_indices(j)}
    assert hb.local_tasks(tasks) == {("ps", 0), ("worker", 0), ("worker", 2)}


# -- what the process says about itself -------------------------------------------------------
def _cluster(n: int) -> dict[tuple[str, int], str]:
    return {("worker", i): f"127.0.0.1:{2000 + i}" for i in range(n)}


def test_tasks_served_by_this_process_count_once(isolated):
    three = _cluster(3)
    t0, b = hb.serve_task(three, "worker", 0)
    assert (b.processes, b.threads, b.role) == (3, max(1, CORES // 3), "server")
    t1, b = hb.serve_task(three, "worker", 1)
    assert b.processes == 2
    t2, b = hb.serve_task(three, "worker", 2)
    assert (b.processes, b.threads, b.role) == (1, CORES, "alone")
    hb.stop_serving(t2)
    assert hb.current().processes == 2
    hb.stop_serving(t1)
    hb.stop_serving(t0)
    assert hb.current() == hb.thread_budget(CORES, 0)


def test_inproc_clusters_are_one_process(isolated):
    _, b = hb.serve_task(_cluster(3), "worker", 0, all_in_process=True)
    assert (b.processes, b.threads) == (1, CORES)


def test_a_remote_client_gets_one_thread_unless_it_runs_local_sessions(isolated):
    assert hb.note_remote_client().threads == 1
    assert hb.current().role == "client"
    b = hb.note_local_session()
    assert (b.threads, b.role) == (CORES, "alone")


def test_a_server_that_is_also_a_client_keeps_its_share(isolated):
    hb.note_remote_client()
    _, b = hb.serve_task(_cluster(1), "worker", 0)
    assert (b.threads, b.role) == (CORES, "alone")


def test_listeners_hear_each_change_once(isolated):
    heard = []
    with hb._state.lock:
        hb._state.listeners.append(heard.append)
    try:
        hb.note_remote_client()
        hb.note_remote_client()  # no change, no call
        hb.set_override(3)
        hb.set_override(3)  # a config applies each time it is given
        assert [b.threads for b in heard] == [1, 3, 3]
    finally:
        with hb._state.lock:
            hb._state.listeners.remove(heard.append)


# -- applied to BLAS and the intra-op pool in this process -----------------------------------
@needs_blas
def test_servers_in_this_process_set_blas_and_intra_op_threads(isolated):
    ports = _free_ports(3)
    spec = tf.train.ClusterSpec({"ps": [f"127.0.0.1:{ports[0]}"],
                                 "worker": [f"127.0.0.1:{p}" for p in ports[1:]]})
    share = max(1, CORES // 3)
    servers = [tf.train.Server(spec, job_name="worker", task_index=0, protocol="zmq",
                               start=False)]
    try:
        assert servers[0].thread_budget.threads == share
        assert _blas_now() == min(share, _initial_blas())
        assert cpu.intra_op_threads() == share
        servers += [tf.train.Server(spec, job_name=j, task_index=t, protocol="zmq",
                                    start=False) for j, t in (("ps", 0), ("worker", 1))]
        assert _blas_now() == _initial_blas()  # every task in this process: all cores
        assert cpu.intra_op_threads() == CORES
        servers.pop().stop()
        assert _blas_now() == min(max(1, CORES // 2), _initial_blas())
    finally:
        for s in servers:
            s.stop()
    assert _blas_now() == _initial_blas()


@needs_blas
def test_intra_op_parallelism_threads_overrides_the_share(isolated):
    ports = _free_ports(3)
    spec = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    s = tf.train.Server(spec, job_name="worker", task_index=0, protocol="zmq",
                        config=tf.ConfigProto(intra_op_parallelism_threads=3), start=False)
    try:
        assert (s.thread_budget.threads, s.thread_budget.role) == (3, "override")
        assert _blas_now() == 3 and cpu.intra_op_threads() == 3
    finally:
        s.stop()
    assert _blas_now() == 3  # the override is the process's from then on, as in TF


@needs_blas
def test_single_threaded_regions_switch_blas_from_any_thread():
    """threadpoolctl lets only its controlling thread set OpenBLAS; the CPU plugin sets it
    from whichever thread runs a kernel."""
    old = cpu._blas_threads[0]
    try:
        assert cpu.set_blas_threads(2)  # the main thread sets last
        seen = []

        def kernel():
            with cpu.blas_single_threaded():
                seen.append(_blas_now())
            seen.append(_blas_now())

        t = threading.Thread(target=kernel)
        t.start()
        t.join(10)
        assert seen == [1, 2]
        wrapped = cpu.CPUDevice(0).single_threaded_blas(lambda: _blas_now())
        assert wrapped() == 1 and _blas_now() == 2
        # a count set while a region is open applies when the region closes
        with cpu.blas_single_threaded():
            assert cpu.set_blas_threads(3)
            assert _blas_now() == 1
        assert _blas_now() == 3
    finally:
        cpu.set_blas_threads(old)


def test_without_a_blas_everything_is_a_no_op(monkeypatch):
    monkeypatch.setattr(cpu, "_libs", [()])
    monkeypatch.setattr(cpu, "_blas_threads", [4])
    assert cpu.set_blas_threads(2) is False
    assert cpu._blas() is None and cpu.blas_info() == []
    fn = lambda a, b: a + b  # noqa: E731
    assert cpu.CPUDevice(0).single_threaded_blas(fn) is fn
    with cpu.blas_single_threaded():
        pass
    old = cpu.intra_op_threads()
    try:
        cpu._apply_budget(hb.thread_budget(CORES, 3))
        assert cpu.intra_op_threads() == max(1, CORES // 3)
    finally:
        cpu.set_intra_op_threads(old)
    assert cpu.parallel_map(lambda i: i * 2, 3) == [0, 2, 4]


def test_the_hot_switch_stays_cheap():
    """A small GEMM's single-threaded call costs two thread-count switches, each a
    direct call of the library's setter, not a threadpoolctl scan of the libraries."""
    if not cpu._controllers():
        pytest.skip("no BLAS threadpoolctl knows")
    old = cpu._blas_threads[0]
    wrapped = cpu.CPUDevice(0).single_threaded_blas(lambda: None)
    try:
        cpu.set_blas_threads(2)
        n = 2000
        t0 = time.perf_counter()
        for _ in range(n):
            wrapped()
        per_call = (time.perf_counter() - t0) / n
        assert per_call < 200e-6, f"{per_call * 1e6:.1f} us per call"
    finally:
        cpu.set_blas_threads(old)


# -- real processes ---------------------------------------------------------------------------
def _run(code: str, timeout: float = 60) -> str:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


_READ = ("import threadpoolctl\n"
         "def blas():\n"
         "    return [i['num_threads'] for i in threadpoolctl.threadpool_info()\n"
         "            if i['user_api'] == 'blas'][0]\n")


class _Proc:
    """A ``flowrt server`` process: its lines until the threads line, stopped by pid."""

    def __init__(self, cluster: dict, job: str, task: int, *extra: str, path: str):
        with open(path, "w", encoding="utf-8") as f:
            json.dump(cluster, f)
        self.p = subprocess.Popen(
            [sys.executable, "-m", "flowrt", "server", "--cluster", path, "--job", job,
             "--task", str(task), "--protocol", "zmq", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self.got = threading.Event()

        def read() -> None:
            for line in self.p.stdout:
                self.lines.append(line.rstrip())
                if "threads:" in line:
                    self.got.set()

        threading.Thread(target=read, daemon=True).start()

    def threads_line(self) -> str:
        """The line once printed (60 s at most)."""
        if not self.got.wait(60):
            self.stop()
            raise AssertionError("flowrt server printed no threads line:\n" +
                                 "\n".join(self.lines))
        return next(line for line in self.lines if "threads:" in line)

    def stop(self) -> None:
        if self.p.poll() is None:
            os.kill(self.p.pid, signal.SIGTERM)
            try:
                self.p.wait(15)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(5)


@needs_blas
def test_flowrt_server_prints_and_applies_its_share(tmp_path):
    ports = _free_ports(3)
    cluster = {"ps": [f"127.0.0.1:{ports[0]}"],
               "worker": [f"127.0.0.1:{ports[1]}", f"localhost:{ports[2]}"]}
    share = max(1, CORES // 3)
    s = _Proc(cluster, "worker", 0, path=str(tmp_path / "c.json"))
    o = _Proc(cluster, "worker", 1, "--intra-op-threads", "3", path=str(tmp_path / "d.json"))
    try:
        line, over = s.threads_line(), o.threads_line()
    finally:
        s.stop()
        o.stop()
    m = re.search(r"threads: (\d+) \((.*)\); BLAS: .* at (\d+) thread", line)
    assert m, line
    assert int(m.group(1)) == share
    assert m.group(2) == f"{CORES} cores shared by 3 tasks of the cluster on this host"
    assert int(m.group(3)) == min(share, _initial_blas())
    assert "threads: 3 (intra_op_parallelism_threads=3)" in over
    assert re.search(r"at 3 thread", over), over


@needs_blas
def test_a_remote_client_holds_one_blas_thread_and_a_lone_process_all(tmp_path):
    port = _free_ports(1)[0]
    s = _Proc({"worker": [f"127.0.0.1:{port}"]}, "worker", 0, path=str(tmp_path / "c.json"))
    try:
        assert f"threads: {CORES} ({CORES} cores, alone on this host)" in s.threads_line()
        out = _run(_READ + (
            "import numpy as np, flowrt as tf\n"
            "from flowrt.plugins.devices import cpu\n"
            "before = blas()\n"
            "g = tf.Graph()\n"
            "with g.as_default(), tf.device('/job:worker/task:0'):\n"
            "    y = tf.matmul(tf.ones([4, 4]), tf.ones([4, 4]))\n"
            f"with tf.Session('zmq://127.0.0.1:{port}', graph=g) as sess:\n"
            "    v = float(sess.run(y).sum())\n"
            "    remote = blas(), cpu.intra_op_threads()\n"
            "    with tf.Graph().as_default() as g2, tf.Session(graph=g2) as local:\n"
            "        local_v = float(local.run(tf.matmul(tf.ones([4, 4]), "
            "tf.ones([4, 4]))).sum())\n"
            "    after = blas(), cpu.intra_op_threads()\n"
            "print(before, v, remote[0], remote[1], local_v, after[0], after[1])\n"))
    finally:
        s.stop()
    before, v, remote_blas, remote_intra, local_v, after_blas, after_intra = out.split()
    assert float(v) == 64.0 and float(local_v) == 64.0
    assert (int(remote_blas), int(remote_intra)) == (1, 1)
    # a client that runs its own local session keeps its share: all cores when alone
    assert int(after_blas) == int(before) == _initial_blas()
    assert int(after_intra) == CORES


@needs_blas
def test_a_lone_process_keeps_every_core():
    out = _run(_READ + (
        "import flowrt as tf\n"
        "from flowrt.plugins.devices import cpu\n"
        "before = blas()\n"
        "with tf.Session() as s:\n"
        "    s.run(tf.matmul(tf.ones([300, 300]), tf.ones([300, 300])))\n"
        "print(before, blas(), cpu.intra_op_threads())\n"))
    before, after, intra = map(int, out.split())
    assert after == before == _initial_blas()
    assert intra == CORES


# -- following the other processes' load ---------------------------------------------------
def _adapt_case(monkeypatch, load: float, own_cpu: float, budget: hb.ThreadBudget,
                initial: int = 4) -> list[int]:
    """Two looks of :func:`cpu.adapt_to_load` one second apart with this process using
    ``own_cpu`` cores and the host's load ``load``; the BLAS counts it set."""
    calls: list[int] = []
    clock = {"cpu": 100.0}
    monkeypatch.setattr(cpu, "_controllers", lambda: ("fake",))
    monkeypatch.setattr(cpu, "_initial_blas", [initial])
    monkeypatch.setattr(cpu, "_blas_threads", [initial])
    monkeypatch.setattr(cpu, "set_blas_threads",
                        lambda n: calls.append(n) or cpu._blas_threads.__setitem__(0, n))
    monkeypatch.setattr(cpu, "_adapt", {"next": 0.0, "wall": 0.0, "cpu": 0.0})
    monkeypatch.setattr(hb, "current", lambda: budget)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(time, "process_time", lambda: clock["cpu"])
    cpu.adapt_to_load(now=1000.0)           # the first look only takes the readings
    clock["cpu"] += own_cpu
    cpu.adapt_to_load(now=1000.5)           # too soon: nothing
    cpu.adapt_to_load(now=1001.0)
    return calls


def test_blas_follows_the_load_of_other_processes(monkeypatch):
    alone = hb.thread_budget(4, 0)
    # other processes keep 3 of 4 cores busy (load 5, of which this process is 2)
    assert _adapt_case(monkeypatch, 5.0, 2.0, alone) == [1]
    # one core busy elsewhere: 3 threads
    assert _adapt_case(monkeypatch, 3.0, 2.0, alone) == [3]
    # an idle host: BLAS keeps its count (no call)
    assert _adapt_case(monkeypatch, 2.0, 2.0, alone) == []
    # never more than BLAS started with, never below 1
    assert _adapt_case(monkeypatch, 0.0, 0.0, alone, initial=2) == []
    assert _adapt_case(monkeypatch, 40.0, 1.0, alone) == [1]


def test_blas_load_following_leaves_shares_and_overrides_alone(monkeypatch):
    for budget in (hb.thread_budget(4, 3), hb.thread_budget(4, 0, override=4),
                   hb.thread_budget(4, 0, client=True)):
        assert _adapt_case(monkeypatch, 9.0, 1.0, budget) == []
