"""Between-graph replicated training of an MLP on synthetic MNIST-shaped data.

Every worker task builds the same graph with ``tf.train.replica_device_setter`` (the
variables on the ps tasks, the computation on itself), and trains with a
``tf.train.MonitoredTrainingSession``: worker 0 is the chief, which initialises or
restores the model and saves checkpoints every ``--save-steps`` global steps; the other
workers wait for it. ``StopAtStepHook`` ends training at global step ``--steps``.

- ``--mode async``: each worker applies its own gradients to the ps variables;
- ``--mode sync``: ``tf.train.SyncReplicasOptimizer`` averages one gradient from each
  of ``--replicas-to-aggregate`` replicas (default: every worker) per global step.

Run the whole cluster from one command (``--launch``: one process per task; with
``--protocol inproc`` every task is a thread of this process)::

    python examples/distributed_train.py --launch --mode sync --workers 2 --steps 300

or one task per command, so that tasks can be killed and restarted one by one (the ps
tasks are ``flowrt server`` processes; a worker process also serves its own task)::

    flowrt server --cluster cluster.json --job ps --task 0 --checkpoint-dir CKPT_DIR
    python examples/distributed_train.py --cluster cluster.json --job worker --task 0 ...

The chief prints and (``--result FILE``) writes the final test accuracy. The same
program runs on TensorFlow with ``--impl tf`` (grpc only).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

import numpy as np

WAIT_S = 120.0  # every wait on another task is bounded by this


def load_impl(name: str) -> Any:
    """The TF1 API: flowrt, or ``tensorflow.compat.v1`` in graph mode."""
    if name == "tf":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow as _tf  # type: ignore

        tf = _tf.compat.v1
        tf.disable_eager_execution()
        return tf
    import flowrt as tf

    return tf


def make_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` flattened 28x28 images and their labels (``flowrt.demo.synthetic_digits``)."""
    from flowrt.demo import synthetic_digits

    return synthetic_digits(n, seed)


def read_cluster(value: str) -> dict[str, list[str]]:
    """A cluster dict from inline JSON or a JSON file (``{job: [host:port, ...]}``)."""
    text = value if value.lstrip().startswith("{") else open(value, encoding="utf-8").read()
    spec = json.loads(text)
    return spec["cluster"] if "cluster" in spec else spec


def build_model(tf: Any, a: argparse.Namespace, cluster: dict[str, list[str]],
                task: int) -> dict[str, Any]:
    """The replica's graph: placeholders, MLP, loss/accuracy, the training op and, in
    sync mode, the SyncReplicasOptimizer."""
    setter = tf.train.replica_device_setter(cluster=tf.train.ClusterSpec(cluster),
                                            worker_device=f"/job:worker/task:{task}")
    m: dict[str, Any] = {}
    with tf.device(setter):
        x = tf.placeholder(tf.float32, [None, 784], name="x")
        y = tf.placeholder(tf.int64, [None], name="y")
        init = tf.glorot_uniform_initializer
        w1 = tf.get_variable("w1", [784, a.hidden], initializer=init(seed=a.seed + 1))
        b1 = tf.get_variable("b1", [a.hidden], initializer=tf.zeros_initializer())
        w2 = tf.get_variable("w2", [a.hidden, 10], initializer=init(seed=a.seed + 2))
        b2 = tf.get_variable("b2", [10], initializer=tf.zeros_initializer())
        logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=y, logits=logits))
        acc = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32))
        global_step = tf.train.get_or_create_global_step()
        opt = tf.train.AdamOptimizer(a.lr)
        if a.mode == "sync":
            # flowrt's chief replaces the tokens of a worker that died (TF waits forever)
            extra = {"lost_worker_timeout_secs": a.lost_worker_secs} if a.impl == "flowrt" \
                else {}
            opt = tf.train.SyncReplicasOptimizer(
                opt, replicas_to_aggregate=a.replicas_to_aggregate or a.workers,
                total_num_replicas=a.workers, **extra)
            m["sync_opt"] = opt
        m["train"] = opt.minimize(loss, global_step=global_step)
    m.update(x=x, y=y, loss=loss, acc=acc, global_step=global_step)
    return m


def _threads_config(tf: Any, a: argparse.Namespace) -> Any:
    """A server config with ``--intra-op-threads`` (None: the library's default)."""
    if not a.intra_op_threads:
        return None
    return tf.ConfigProto(intra_op_parallelism_threads=a.intra_op_threads)


def run_worker(a: argparse.Namespace, cluster: dict[str, list[str]], task: int,
               log: Any = print, tf: Any = None) -> dict[str, Any]:
    """Train as worker ``task`` (task 0 is the chief) against the cluster's ps tasks;
    returns the run's summary (final accuracy, global step, recoveries, ...)."""
    tf = tf or load_impl(a.impl)
    is_chief = task == 0
    server = None
    target = a.target
    if not target:  # this process serves its own task too
        server = tf.train.Server(tf.train.ClusterSpec(cluster), job_name="worker",
                                 task_index=task, protocol=a.protocol,
                                 config=_threads_config(tf, a))
        target = server.target
    xs, ys = make_data(8000, seed=0)
    xt, yt = make_data(2000, seed=1)
    rng = np.random.default_rng(a.seed * 1000 + task)
    # this replica's sessions use the ps tasks and its own task only: they neither wait
    # for nor depend on the other workers (TF's usual setting for between-graph training)
    config = tf.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{task}"])
    if a.intra_op_threads:
        config.intra_op_parallelism_threads = a.intra_op_threads
    graph = tf.Graph()
    with graph.as_default():
        m = build_model(tf, a, cluster, task)
        hooks = [tf.train.StopAtStepHook(last_step=a.steps)]
        if "sync_opt" in m:
            hooks.append(m["sync_opt"].make_session_run_hook(is_chief))
        ckpt_dir = a.checkpoint_dir if is_chief else None
        trace: list[list[int]] = []  # the chief's [latest checkpoint step, global step]
        local_steps, t0, sess = 0, time.perf_counter(), None
        first = last = (t0, 0)
        log(f"worker {task}{' (chief)' if is_chief else ''}: training on {target}, "
            f"{a.mode} mode, until global step {a.steps}")
        with tf.train.MonitoredTrainingSession(
                master=target, is_chief=is_chief, checkpoint_dir=ckpt_dir,
                hooks=hooks, save_checkpoint_steps=a.save_steps if ckpt_dir else None,
                save_checkpoint_secs=None, log_step_count_steps=0,
                config=config, max_wait_secs=WAIT_S) as sess:
            while not sess.should_stop():
                idx = rng.integers(0, len(xs), a.batch)
                _, step, loss = sess.run([m["train"], m["global_step"], m["loss"]],
                                         {m["x"]: xs[idx], m["y"]: ys[idx]})
                local_steps += 1
                # the training rate: global steps between this worker's first and last
                # step (session creation and shutdown are not training)
                now = time.perf_counter()
                if local_steps == 1:
                    first = (now, int(step))
                last = (now, int(step))
                if a.trace and ckpt_dir:
                    latest = tf.train.latest_checkpoint(ckpt_dir)
                    trace.append([int(latest.rsplit("-", 1)[1]) if latest else -1,
                                  int(step)])
                if a.log_every and local_steps % a.log_every == 0:
                    log(f"worker {task}: local step {local_steps} global step {step} "
                        f"loss {loss:.4f}")
                if a.sleep:
                    time.sleep(a.sleep)
                if a.die_after and local_steps >= a.die_after:
                    log(f"worker {task}: dying after {local_steps} local steps")
                    os._exit(3)  # no cleanup at all, as if killed
                if a.max_local_steps and local_steps >= a.max_local_steps:
                    log(f"worker {task}: finishing early after {local_steps} local steps")
                    break
        wall = time.perf_counter() - t0
        recoveries = getattr(sess, "recoveries", 0)
        # a plain session reads the trained model (it lives on the ps tasks)
        with tf.Session(target, graph=graph, config=config) as plain:
            final_step, final_loss, accuracy = plain.run(
                [m["global_step"], m["loss"], m["acc"]], {m["x"]: xt, m["y"]: yt})
    log(f"worker {task}: done: {local_steps} local steps in {wall:.1f} s, global step "
        f"{final_step}, test loss {final_loss:.4f}, final accuracy {accuracy:.4f}")
    if server is not None and hasattr(server, "stop"):  # TF's servers cannot stop
        server.stop()
    return {"task": task, "local_steps": local_steps, "global_step": int(final_step),
            "loss": float(final_loss), "accuracy": float(accuracy), "wall_s": wall,
            "steps_per_s": local_steps / wall if wall > 0 else 0.0,
            "train_rate": ((last[1] - first[1]) / (last[0] - first[0])
                           if local_steps > 1 and last[0] > first[0] else 0.0),
            "recoveries": int(recoveries), "trace": trace}


# -- launching a whole cluster ----------------------------------------------------------
def _free_addresses(k: int) -> list[str]:
    import socket

    socks = [socket.socket() for _ in range(k)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    out = [f"127.0.0.1:{s.getsockname()[1]}" for s in socks]
    for s in socks:
        s.close()
    return out


def _relay(proc: subprocess.Popen, prefix: str) -> threading.Thread:
    def pump() -> None:
        for line in proc.stdout:  # type: ignore[union-attr]
            print(f"[{prefix}] {line.rstrip()}", flush=True)

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    return t


def launch_processes(a: argparse.Namespace, argv: list[str]) -> int:
    """Start the ps tasks (``flowrt server``) and one process per worker; wait (bounded)
    for the workers, then stop the ps tasks. Returns the exit status."""
    addrs = _free_addresses(a.ps + a.workers)
    cluster = {"ps": addrs[:a.ps], "worker": addrs[a.ps:]}
    procs: list[subprocess.Popen] = []
    with tempfile.TemporaryDirectory() as tmp:
        cfile = os.path.join(tmp, "cluster.json")
        with open(cfile, "w", encoding="utf-8") as f:
            json.dump(cluster, f)
        try:
            for i in range(a.ps):
                cmd = [sys.executable, "-m", "flowrt.cli", "server", "--cluster", cfile,
                       "--job", "ps", "--task", str(i), "--protocol", a.protocol]
                if a.impl == "tf":
                    cmd = [sys.executable, os.path.abspath(__file__), "--impl", "tf",
                           "--cluster", cfile, "--job", "ps", "--task", str(i)]
                if a.intra_op_threads:
                    cmd += ["--intra-op-threads", str(a.intra_op_threads)]
                if a.impl != "tf" and a.checkpoint_dir:  # the ps writes the checkpoints
                    cmd += ["--checkpoint-dir", os.path.abspath(a.checkpoint_dir)]
                procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                              stderr=subprocess.STDOUT, text=True))
                _relay(procs[-1], f"ps{i}")
            rest = [s for s in argv if s != "--launch"]
            workers = []
            for i in range(a.workers):
                cmd = [sys.executable, os.path.abspath(__file__), *rest, "--cluster", cfile,
                       "--job", "worker", "--task", str(i)]
                if a.result:
                    cmd += ["--result", f"{a.result}.worker{i}"]
                workers.append(subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                                stderr=subprocess.STDOUT, text=True))
                _relay(workers[-1], f"worker{i}")
            procs += workers
            deadline = time.monotonic() + WAIT_S + 10 * a.steps
            codes = []
            for p in workers:
                try:
                    codes.append(p.wait(max(1.0, deadline - time.monotonic())))
                except subprocess.TimeoutExpired:
                    codes.append(124)
            if a.result and os.path.exists(f"{a.result}.worker0"):
                os.replace(f"{a.result}.worker0", a.result)
            return max(codes)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in procs:
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(5)


def launch_inproc(a: argparse.Namespace) -> int:
    """Every task a ``Server`` of this process, every worker's client a thread."""
    import uuid

    tf = load_impl("flowrt")
    tag = uuid.uuid4().hex[:8]
    cluster = {"ps": [f"ps{i}-{tag}" for i in range(a.ps)],
               "worker": [f"worker{i}-{tag}" for i in range(a.workers)]}
    servers = [tf.train.Server(cluster, job_name="ps", task_index=i, protocol="inproc")
               for i in range(a.ps)]
    results: dict[int, Any] = {}
    lock = threading.Lock()

    def log(msg: str) -> None:
        with lock:
            print(msg, flush=True)

    def client(task: int) -> None:
        try:
            results[task] = run_worker(a, cluster, task, log, tf)
        except Exception as e:  # reported; the run fails
            log(f"worker {task}: failed: {type(e).__name__}: {e}")
            results[task] = None

    threads = [threading.Thread(target=client, args=(i,), daemon=True)
               for i in range(a.workers)]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + WAIT_S + 10 * a.steps
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
    finally:
        for s in servers:
            s.stop()
    if a.result and results.get(0):
        with open(a.result, "w", encoding="utf-8") as f:
            json.dump(results[0], f)
    ok = not any(t.is_alive() for t in threads) and len(results) == a.workers and \
        all(results.values())
    return 0 if ok else 1


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=("sync", "async"), default="async")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--ps", type=int, default=1, help="parameter server tasks (--launch)")
    p.add_argument("--protocol", choices=("grpc", "zmq", "inproc"), default="grpc")
    p.add_argument("--impl", choices=("flowrt", "tf"), default="flowrt")
    p.add_argument("--steps", type=int, default=300, help="train until this global step")
    p.add_argument("--checkpoint-dir", default=None)
    p.add_argument("--save-steps", type=int, default=50,
                   help="the chief saves a checkpoint every this many global steps")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.003)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--intra-op-threads", type=int, default=0,
                   help="ConfigProto.intra_op_parallelism_threads of every task "
                        "(0: the library's default)")
    p.add_argument("--replicas-to-aggregate", type=int, default=0,
                   help="sync mode: gradients per step (default: --workers)")
    p.add_argument("--lost-worker-secs", type=float, default=10.0,
                   help="sync mode: the chief replaces a dead worker's tokens after the "
                   "global step stood still this long (flowrt only)")
    p.add_argument("--launch", action="store_true",
                   help="start the whole cluster: one process per task")
    p.add_argument("--cluster", help="cluster JSON (inline or a file) for one task")
    p.add_argument("--job", choices=("ps", "worker"), help="run this one task")
    p.add_argument("--task", type=int, default=0)
    p.add_argument("--target", default=None,
                   help="a worker's session target when its server runs elsewhere")
    p.add_argument("--result", help="write the chief's summary as JSON to this file")
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--trace", action="store_true",
                   help="the chief records (latest checkpoint step, global step) per run")
    # fault injection, for the fault tolerance tests
    p.add_argument("--sleep", type=float, default=0.0, help="seconds to sleep per step")
    p.add_argument("--max-local-steps", type=int, default=0, help="finish after this many")
    p.add_argument("--die-after", type=int, default=0,
                   help="exit abruptly (no cleanup) after this many local steps")
    a = p.parse_args(argv)
    if a.impl == "tf" and a.protocol != "grpc":
        p.error("TensorFlow speaks grpc only")
    if not a.launch and not a.job:
        p.error("say --launch (the whole cluster) or --job/--task (one task)")
    if not a.launch and a.protocol == "inproc":
        p.error("--protocol inproc runs the whole cluster in one process: use --launch")
    if a.job and not a.cluster:
        p.error("--job needs --cluster")
    return a


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    a = parse_args(argv)
    if a.launch:
        return launch_inproc(a) if a.protocol == "inproc" else launch_processes(a, argv)
    cluster = read_cluster(a.cluster)
    if a.job == "ps":  # a ps task in this process (TensorFlow's way)
        tf = load_impl(a.impl)
        server = tf.train.Server(tf.train.ClusterSpec(cluster), job_name="ps",
                                 task_index=a.task, protocol=a.protocol,
                                 config=_threads_config(tf, a))
        print(f"ps {a.task}: serving {server.target}", flush=True)
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
        server.join()
        return 0
    res = run_worker(a, cluster, a.task)
    if a.result:
        tmp = a.result + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(res, f)
        os.replace(tmp, a.result)
    if a.impl == "tf":  # TF's server threads keep a process from exiting
        sys.stdout.flush()
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
