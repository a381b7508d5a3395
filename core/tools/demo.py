"""``flowrt demo``: train a small MLP by between-graph asynchronous replication.

A cluster of one parameter server (``/job:ps/task:0``) and ``--workers`` workers is
started, and every worker runs its own client: its own graph, built under
``tf.train.replica_device_setter(cluster=...)`` (variables on the ps task, everything
else on the worker's task), and its own session against its own worker's target. The
chief (worker 0) initialises the variables; the others poll
``tf.report_uninitialized_variables()`` (with a bounded wait) until it has. Every
worker then applies Adam updates to the shared variables as fast as it can, without
waiting for the others, and prints its progress. The chief waits until the global step
shows that every worker has finished, prints the final test accuracy and calls
``tf.train.shutdown_cluster`` so that every server exits.

``--protocol inproc`` (the default, and ``make demo``) keeps the servers and the
clients (as threads) in this process. With ``grpc`` or ``zmq`` each server is a
``flowrt server`` subprocess on a free 127.0.0.1 port and each worker's client runs in
a process of its own; their output is relayed here, each line prefixed with the task's
name. Processes are always cleaned up, by pid, on errors and on Ctrl-C.

Before training, the chief shows where the nodes of the training step were placed,
prints a per-node timing table of one traced step (nodes on ``/job:ps`` and
``/job:worker``) and writes that step as a Chrome trace and the placed step graph as
Graphviz DOT. The data is synthetic and made here (no downloads):
:func:`synthetic_digits` draws MNIST-shaped images of ten random "digit" prototypes.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import flowrt as tf
from .testing import free_ports
from . import timeline
from . import visualize

__all__ = ["run_demo", "synthetic_digits"]

#: Accuracy the chief must reach for the demo to exit 0 (chance is 0.1).
PASS_ACCURACY = 0.5
_INIT_WAIT_S = 60.0      # a non-chief's bounded wait for the chief's initialisation
_FINISH_WAIT_S = 120.0   # the chief's bounded wait for the other workers' last steps
_SERVER_START_S = 60.0   # bounded wait for a server subprocess to serve


def synthetic_digits(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` flattened 28x28 float32 images in [0, 1] and their int64 labels 0..9.

    Every call uses the same ten prototypes; ``seed`` only draws the samples.
    """
    protos = (np.random.default_rng(42).random((10, 28, 28)) < 0.25).astype(np.float32)
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, n)
    imgs = protos[labels]
    shifts = rng.integers(-1, 2, (n, 2))
    for i, (dy, dx) in enumerate(shifts):
        imgs[i] = np.roll(imgs[i], (dy, dx), axis=(0, 1))
    noise = (rng.random((n, 28, 28)) < 0.25).astype(np.float32)
    imgs = np.abs(imgs - noise) * rng.uniform(0.6, 1.0, (n, 1, 1)).astype(np.float32)
    return imgs.reshape(n, 784).astype(np.float32), labels.astype(np.int64)


# -- one worker's client (a between-graph replica) ----------------------------------------
class _Replica:
    """The graph one worker builds: the MLP, its loss, accuracy and Adam step."""

    def __init__(self, tf: Any, cluster: dict[str, list[str]], task: int):
        """Build the replica's graph with ``tf`` (the ``flowrt`` module): the variables
        on the ps tasks of ``cluster`` (``replica_device_setter``), the rest on worker
        ``task``."""
        self.graph = g = tf.Graph()
        with g.as_default(), tf.device(tf.train.replica_device_setter(
                cluster=cluster, worker_device=f"/job:worker/task:{task}")):
            self.x = x = tf.placeholder(tf.float32, [None, 784], name="x")
            self.y = y = tf.placeholder(tf.int64, [None], name="y")
            with tf.variable_scope("hidden"):
                w1 = tf.get_variable("w", [784, 128],
                                     initializer=tf.glorot_uniform_initializer(seed=1))
                b1 = tf.get_variable("b", [128], initializer=tf.zeros_initializer())
                h = tf.nn.relu(tf.matmul(x, w1) + b1)
            with tf.variable_scope("logits"):
                w2 = tf.get_variable("w", [128, 10],
                                     initializer=tf.glorot_uniform_initializer(seed=2))
                b2 = tf.get_variable("b", [10], initializer=tf.zeros_initializer())
                logits = tf.matmul(h, w2) + b2
            self.loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=y, logits=logits))
            self.acc = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y),
                                              tf.float32))
            self.global_step = tf.train.get_or_create_global_step()
            self.train = tf.train.AdamOptimizer(1e-3).minimize(
                self.loss, global_step=self.global_step)
            self.init = tf.global_variables_initializer()
            self.uninitialized = tf.report_uninitialized_variables()


def _short_device(device: str) -> str:
    """``/job:ps/replica:0/task:0/device:CPU:0`` -> ``/job:ps/task:0/CPU:0``."""
    parts = [p for p in device.split("/") if p and not p.startswith("replica:")]
    return "/" + "/".join(p.replace("device:", "") for p in parts)


def _show_step(tf: Any, sess: Any, m: _Replica, feed: dict[Any, Any], out_dir: str | None,
               log: Callable[[str], None]) -> None:
    """Print the training step's placement and a traced step's per-node timings (the
    trace also trains: it is one step); write the trace files into ``out_dir``."""
    placed = sess.placement(m.train, [m.x, m.y])
    by_dev: dict[str, list[str]] = {}
    for name, dev in placed.items():
        by_dev.setdefault(dev, []).append(name)
    log(f"the training step has {len(placed)} nodes, placed on "
        f"{', '.join(sorted(by_dev))}:")
    for dev in sorted(by_dev):
        names = sorted(by_dev[dev])
        shown = [n for n in names if "/" not in n or n.startswith(("hidden/", "logits/"))]
        shown = (shown or names)[:6]
        log(f"  {_short_device(dev):<24} {len(names):>3} nodes, e.g. {', '.join(shown)}")
    opts = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
    md = tf.RunMetadata()
    sess.run(m.train, feed, options=opts, run_metadata=md)
    rows = sorted(((_short_device(d.device), ns.node_name, ns.all_end_rel_micros)
                   for d in md.step_stats.dev_stats for ns in d.node_stats),
                  key=lambda r: -r[2])
    log("slowest nodes of one traced training step (microseconds):")
    for dev, name, us in rows[:10]:
        log(f"  {dev:<16} {name:<40} {us:>8}")
    per_dev: dict[str, int] = {}
    for dev, _, _ in rows:
        per_dev[dev] = per_dev.get(dev, 0) + 1
    log(f"  ({len(rows)} nodes ran: "
        f"{', '.join(f'{n} on {d}' for d, n in sorted(per_dev.items()))}; "
        f"{sum(r[2] for r in rows)} us in kernels)")
    if out_dir is not None:
        _write_trace_files(out_dir, md, m.graph, sess, m.train, [m.x, m.y], log)


def _worker_client(cfg: dict[str, Any], log: Callable[[str], None]) -> int:
    """Run worker ``cfg["task"]``'s replica; returns its exit status.

    ``cfg`` holds ``cluster`` (job -> addresses), ``protocol``, ``task``, ``workers``,
    ``steps``, ``batch`` and ``out_dir``. Worker 0 is the chief: it initialises the
    variables, traces a step, evaluates the final accuracy and shuts the cluster down.
    """

    task, workers, steps, batch = cfg["task"], cfg["workers"], cfg["steps"], cfg["batch"]
    cluster, chief = cfg["cluster"], task == 0
    target = f"{cfg['protocol']}://{cluster['worker'][task]}"
    m = _Replica(tf, cluster, task)
    xs, ys = synthetic_digits(6000, seed=0)
    xs, ys = xs[task::workers], ys[task::workers]  # this worker's shard
    rng = np.random.default_rng(100 + task)
    test = None
    if chief:
        xt, yt = synthetic_digits(1000, seed=1)
        test = {m.x: xt, m.y: yt}
    with tf.Session(target, graph=m.graph) as sess:
        log(f"session on {target}")
        if chief:
            sess.run(m.init)
            log("chief: initialised the variables")
            idx = rng.integers(0, len(xs), batch)
            _show_step(tf, sess, m, {m.x: xs[idx], m.y: ys[idx]}, cfg.get("out_dir"), log)
        else:
            t0 = time.monotonic()
            while len(sess.run(m.uninitialized)):
                if time.monotonic() - t0 > _INIT_WAIT_S:
                    log(f"gave up: the variables were not initialised within "
                        f"{_INIT_WAIT_S:.0f} s")
                    return 1
                time.sleep(0.05)
            log(f"the chief's variables are ready (waited {time.monotonic() - t0:.2f} s)")
        every = max(1, steps // 5)
        t0 = time.perf_counter()
        for step in range(1, steps + 1):
            idx = rng.integers(0, len(xs), batch)
            _, loss, gstep = sess.run([m.train, m.loss, m.global_step],
                                      {m.x: xs[idx], m.y: ys[idx]})
            if step % every == 0 or step == steps:
                line = f"step {step:4d}/{steps}  global step {gstep:5d}  batch loss {loss:.4f}"
                if test is not None:
                    line += f"  test accuracy {sess.run(m.acc, test):.3f}"
                log(line)
        dt = time.perf_counter() - t0
        log(f"done: {steps} steps in {dt:.2f} s ({steps / dt:.1f} steps/s)")
        if not chief:
            return 0
        total = workers * steps + 1  # every worker's steps, and the traced one
        t0 = time.monotonic()
        while (gstep := sess.run(m.global_step)) < total:
            if time.monotonic() - t0 > _FINISH_WAIT_S:
                log(f"the other workers did not finish within {_FINISH_WAIT_S:.0f} s")
                break
            time.sleep(0.05)
        loss, acc = sess.run([m.loss, m.acc], test)
        log(f"final test accuracy {acc:.3f}  (test loss {loss:.4f}, global step {gstep}, "
            f"{workers} workers)")
    tf.train.shutdown_cluster(target, "the demo finished")
    log("shut the cluster down")
    return 0 if acc > PASS_ACCURACY and gstep >= total else 1


# -- the orchestration -------------------------------------------------------------------
class _Printer:
    """Prints whole lines from several threads, each prefixed with a task's name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __call__(self, name: str) -> Callable[[str], None]:
        def log(line: str) -> None:
            with self._lock:
                print(f"[{name}] {line}", flush=True)
        return log


def run_demo(steps: int = 200, batch: int = 64, out_dir: str | None = None,
             protocol: str = "inproc", workers: int = 2) -> int:
    """Run the distributed demo; returns its exit status (0: the model learned).

    :param steps: training steps per worker
    :param batch: minibatch size
    :param out_dir: where the chief writes ``flowrt_demo_timeline.json`` (Chrome
        trace, for Perfetto) and ``flowrt_demo_graph.dot`` (the placed, partitioned
        step, for Graphviz); made if missing; None: write nothing
    :param protocol: ``inproc`` (everything in this process), ``grpc`` or ``zmq``
        (every server and every worker's client in a process of its own)
    :param workers: number of worker tasks (and replicas)
    """
    if workers < 1 or steps < 1:
        raise ValueError("the demo needs at least one worker and one step")
    known = sorted(tf.default_runtime().transports)
    if protocol not in known:
        raise ValueError(f"unknown demo protocol {protocol!r} ({', '.join(known)})")
    if out_dir is not None:
        out_dir = os.path.abspath(out_dir)
    print(f"flowrt demo: 1 parameter server and {workers} workers over {protocol}; "
          f"between-graph asynchronous replication, {steps} steps per worker", flush=True)
    t0 = time.perf_counter()
    if protocol == "inproc":
        rc = _run_inproc(steps, batch, out_dir, workers)
    else:
        rc = _run_processes(steps, batch, out_dir, protocol, workers)
    print(f"flowrt demo: {'finished' if rc == 0 else 'FAILED'} in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    return rc


def _run_inproc(steps: int, batch: int, out_dir: str | None, workers: int) -> int:
    """Servers in this process, each worker's client in a thread of its own."""

    tag = f"demo-{os.getpid()}-{time.monotonic_ns()}"
    cluster = {"ps": [f"{tag}-ps0"], "worker": [f"{tag}-worker{i}" for i in range(workers)]}
    servers = [tf.train.Server(cluster, job_name="ps", task_index=0, protocol="inproc")]
    servers += [tf.train.Server(cluster, job_name="worker", task_index=i, protocol="inproc")
                for i in range(workers)]
    printer = _Printer()
    results: dict[int, int] = {}

    def client(task: int) -> None:
        log = printer(f"worker{task}")
        cfg = {"cluster": cluster, "protocol": "inproc", "task": task, "workers": workers,
               "steps": steps, "batch": batch, "out_dir": out_dir if task == 0 else None}
        try:
            results[task] = _worker_client(cfg, log)
        except Exception as e:  # reported, and the demo fails
            log(f"failed: {type(e).__name__}: {e}")
            results[task] = 1

    threads = [threading.Thread(target=client, args=(i,), name=f"worker{i}", daemon=True)
               for i in range(workers)]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + _INIT_WAIT_S + _FINISH_WAIT_S + 60 + steps
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
    finally:
        for s in servers:  # the chief shut the cluster down; this makes sure of it
            s.stop()
    if any(t.is_alive() for t in threads):
        print("flowrt demo: a worker did not finish in time", flush=True)
        return 1
    return 0 if len(results) == workers and not any(results.values()) else 1


def _relay(proc: subprocess.Popen, log: Callable[[str], None],
           seen: threading.Event | None = None, marker: str = "") -> threading.Thread:
    """Copy ``proc``'s output lines to ``log``; set ``seen`` at a line with ``marker``."""
    def run() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            log(line.rstrip("\n"))
            if seen is not None and marker in line:
                seen.set()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _run_processes(steps: int, batch: int, out_dir: str | None, protocol: str,
                   workers: int) -> int:
    """Each server a ``flowrt server`` subprocess, each worker's client a process."""

    ports = free_ports(workers + 1)
    cluster = {"ps": [f"127.0.0.1:{ports[0]}"],
               "worker": [f"127.0.0.1:{p}" for p in ports[1:]]}
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    printer = _Printer()
    procs: list[subprocess.Popen] = []
    relays: list[threading.Thread] = []

    def start(argv: list[str], name: str, marker: str = "") -> threading.Event:
        p = subprocess.Popen([sys.executable, "-m", *argv], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             text=True, env=env)
        procs.append(p)
        seen = threading.Event()
        relays.append(_relay(p, printer(name), seen, marker))
        return seen

    with tempfile.TemporaryDirectory(prefix="flowrt-demo-") as tmp:
        spec = os.path.join(tmp, "cluster.json")
        with open(spec, "w", encoding="utf-8") as f:
            json.dump(cluster, f)
        try:
            tasks = [("ps", 0)] + [("worker", i) for i in range(workers)]
            ready = [start(["flowrt.tools.cli", "server", "--cluster", spec, "--job", job,
                            "--task", str(i), "--protocol", protocol], f"server {job}{i}",
                           " serving ") for job, i in tasks]
            deadline = time.monotonic() + _SERVER_START_S
            for (job, i), ev, p in zip(tasks, ready, procs):
                while not ev.wait(0.1):
                    if p.poll() is not None or time.monotonic() > deadline:
                        print(f"flowrt demo: the server of /job:{job}/task:{i} did not "
                              f"start on {cluster[job][i]}", flush=True)
                        return 1
            clients = []
            for i in range(workers):
                cfg = {"cluster": cluster, "protocol": protocol, "task": i,
                       "workers": workers, "steps": steps, "batch": batch,
                       "out_dir": out_dir if i == 0 else None}
                start(["flowrt.tools.demo", json.dumps(cfg)], f"worker{i}")
                clients.append(procs[-1])
            deadline = time.monotonic() + _INIT_WAIT_S + _FINISH_WAIT_S + 60 + steps
            codes = []
            for p in clients:
                try:
                    codes.append(p.wait(max(0.1, deadline - time.monotonic())))
                except subprocess.TimeoutExpired:
                    print(f"flowrt demo: worker client pid {p.pid} did not finish in "
                          f"time", flush=True)
                    return 1
            for p in procs[:len(tasks)]:  # the chief's shutdown_cluster stops them all
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    print(f"flowrt demo: server pid {p.pid} still ran after the "
                          f"shutdown; stopping it", flush=True)
                    codes.append(1)
            return 0 if not any(codes) else 1
        except KeyboardInterrupt:
            print("flowrt demo: interrupted", flush=True)
            return 130
        finally:
            for p in procs:
                if p.poll() is None:
                    p.terminate()
            for p in procs:
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(5)
            for t in relays:
                t.join(2)


def _write_trace_files(out_dir: str, md: Any, graph: Any, sess: Any, fetches: Any,
                       feeds: list[Any], log: Callable[[str], None]) -> None:
    """Write the traced step's Chrome trace and the step graph's DOT into ``out_dir``."""

    os.makedirs(out_dir, exist_ok=True)
    trace_path = os.path.abspath(os.path.join(out_dir, "flowrt_demo_timeline.json"))
    with open(trace_path, "w", encoding="utf-8") as f:
        f.write(timeline.Timeline(md.step_stats, graph=graph).generate_chrome_trace_format())
    dot_path = os.path.abspath(os.path.join(out_dir, "flowrt_demo_graph.dot"))
    visualize.write_dot(dot_path, sess, fetches, feeds, title="flowrt_demo_step")
    log(f"timeline of the traced step: {trace_path}")
    log("  (open it in https://ui.perfetto.dev or chrome://tracing)")
    log(f"placed step graph:           {dot_path}")
    log(f"  (render it with: dot -Tsvg {dot_path} -o flowrt_demo_graph.svg)")


def _client_main(argv: list[str]) -> int:
    """``python -m flowrt.demo CONFIG_JSON``: one worker's client (for the process
    modes of :func:`run_demo`); prints plain lines, the parent prefixes them."""
    if len(argv) != 1:
        print("usage: python -m flowrt.demo CONFIG_JSON", file=sys.stderr)
        return 2
    cfg = json.loads(argv[0])
    try:
        return _worker_client(cfg, lambda line: print(line, flush=True))
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # reported on the relayed output
        print(f"failed: {type(e).__name__}: {e}", flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(_client_main(sys.argv[1:]))
