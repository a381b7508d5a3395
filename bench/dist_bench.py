"""Side-by-side distributed benchmarks: flowrt against tensorflow.compat.v1 on loopback.

A cluster of one ps task and two worker tasks, every task a ``tf.train.Server`` in a
process of its own on a free 127.0.0.1 port, runs three cases:

- ``ping``: latency of a tiny step that reads a scalar ps variable on a worker
  (microseconds per ``session.run``; lower is better);
- ``transfer``: a worker sums a 64 MiB ps variable, so the variable crosses the wire
  every step (GB/s; higher is better);
- ``train``: two between-graph replicas, each its own client process with its own
  session, train a 784-256-10 MLP asynchronously with SGD on the ps variables (steps/s
  of both together; higher is better).

``--impl tf|flowrt --protocol grpc|zmq`` measures one implementation once (TF speaks
grpc only) and prints one JSON line per case. Without ``--impl`` the script drives
those runs itself, each in fresh processes, alternating TF and flowrt ``--repeats``
times, and reports medians with flowrt/TF ratios; flowrt's zmq numbers are compared
with TF's grpc ones. Run it from an environment that has both TensorFlow
(tensorflow-cpu) and flowrt installed (``make bench-dist``)::

    python bench/dist_bench.py --markdown --repeats 3
    python bench/dist_bench.py --impl flowrt --protocol zmq ping
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Any

import numpy as np

CASES = ("ping", "transfer", "train")
#: (case, metric, unit, better, {protocol: target ratio flowrt/TF})
METRICS = (
    ("ping", "us_per_step", "us/step", "lower", {"grpc": 0.5, "zmq": 0.25}),
    ("transfer", "GB_per_s", "GB/s", "higher", {"grpc": 1.0, "zmq": 1.0}),
    ("train", "steps_per_s", "steps/s", "higher", {"grpc": 1.5, "zmq": 1.5}),
)
_WAIT_S = 120.0  # every wait on another process is bounded by this


def load(impl: str) -> Any:
    """The TF1 API of ``impl``: ``tensorflow.compat.v1`` (graph mode) or flowrt."""
    if impl == "tf":
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow as tf2  # type: ignore

        tf = tf2.compat.v1
        tf.disable_eager_execution()
        tf.logging.set_verbosity(tf.logging.ERROR)
        return tf
    import flowrt

    return flowrt


def _serve(impl: str, cluster: dict[str, list[str]], job: str, task: int, protocol: str,
           ready: Any, intra_op: int = 0) -> None:
    """A task's process: serve until killed (TF's servers never return from join).
    ``intra_op`` > 0 sets ``ConfigProto.intra_op_parallelism_threads``, the same for
    both implementations."""
    tf = load(impl)
    config = tf.ConfigProto(intra_op_parallelism_threads=intra_op) if intra_op else None
    server = tf.train.Server(tf.train.ClusterSpec(cluster), job_name=job, task_index=task,
                             protocol=protocol, config=config)
    ready.put((job, task))
    server.join()


# -- cases ----------------------------------------------------------------------------------
def case_ping(tf: Any, target: str, rounds: int = 7, n: int = 200) -> dict[str, float]:
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:ps/task:0"):
            v = tf.Variable(np.float32(1.0), name="v")
        with tf.device("/job:worker/task:0"):
            y = v + 1.0
        init = tf.global_variables_initializer()
    with tf.Session(target, graph=g) as sess:
        sess.run(init)
        assert sess.run(y) == 2.0
        for _ in range(50):
            sess.run(y)
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            for _ in range(n):
                sess.run(y)
            times.append((time.perf_counter() - t0) / n)
    return {"us_per_step": statistics.median(times) * 1e6}


def case_transfer(tf: Any, target: str, mib: int = 64, reps: int = 7) -> dict[str, float]:
    n = mib * 1024 * 1024 // 4
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:ps/task:0"):
            v = tf.Variable(tf.ones([n], tf.float32), name="big")
        with tf.device("/job:worker/task:0"):
            s = tf.reduce_sum(v)
        init = tf.global_variables_initializer()
    with tf.Session(target, graph=g) as sess:
        sess.run(init)
        assert abs(sess.run(s) - n) < 1e-3 * n
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            sess.run(s)
            times.append(time.perf_counter() - t0)
    dt = statistics.median(times)
    return {"MiB": mib, "ms": dt * 1e3, "GB_per_s": n * 4 / dt / 1e9}


def _train_client(impl: str, cluster: dict[str, list[str]], task: int, protocol: str,
                  steps: int, ready: Any, go: Any, results: Any) -> None:
    """One between-graph replica: worker 0 initialises, worker 1 waits for it; both
    start timing together (``go``) and report steps/s and their final loss."""
    try:
        tf = load(impl)
        rng = np.random.default_rng(task)
        xs = rng.standard_normal((64, 784)).astype(np.float32)
        ys = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 64)]
        g = tf.Graph()
        with g.as_default(), tf.device(tf.train.replica_device_setter(
                cluster=tf.train.ClusterSpec(cluster),
                worker_device=f"/job:worker/task:{task}")):
            x = tf.placeholder(tf.float32, [None, 784])
            y_ = tf.placeholder(tf.float32, [None, 10])
            init_rng = np.random.default_rng(0)
            w1 = tf.Variable(init_rng.standard_normal((784, 256)).astype(np.float32) * 0.05)
            b1 = tf.Variable(np.zeros(256, np.float32))
            w2 = tf.Variable(init_rng.standard_normal((256, 10)).astype(np.float32) * 0.05)
            b2 = tf.Variable(np.zeros(10, np.float32))
            logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2
            loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(
                labels=y_, logits=logits))
            train = tf.train.GradientDescentOptimizer(0.05).minimize(loss)
            init = tf.global_variables_initializer()
            uninit = tf.report_uninitialized_variables()
        with tf.Session(f"{protocol}://{cluster['worker'][task]}", graph=g) as sess:
            if task == 0:
                sess.run(init)
            deadline = time.monotonic() + _WAIT_S
            while len(sess.run(uninit)) and time.monotonic() < deadline:
                time.sleep(0.05)
            for _ in range(5):
                sess.run(train, {x: xs, y_: ys})
            ready.put(task)
            go.wait(_WAIT_S)
            t0 = time.perf_counter()
            for _ in range(steps):
                sess.run(train, {x: xs, y_: ys})
            rate = steps / (time.perf_counter() - t0)
            results.put((task, rate, float(sess.run(loss, {x: xs, y_: ys}))))
    except Exception as e:  # reported to the parent
        results.put((task, None, f"{type(e).__name__}: {e}"[:300]))


def case_train(ctx: Any, impl: str, cluster: dict[str, list[str]], protocol: str,
               steps: int = 200) -> dict[str, Any]:
    ready, go, results = ctx.Queue(), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_train_client,
                         args=(impl, cluster, i, protocol, steps, ready, go, results))
             for i in range(2)]
    try:
        for p in procs:
            p.start()
        for _ in procs:
            ready.get(timeout=_WAIT_S)
        go.set()
        outs = [results.get(timeout=_WAIT_S) for _ in procs]
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join(5)
    errs = [o[2] for o in outs if o[1] is None]
    if errs:
        raise RuntimeError("; ".join(errs))
    return {"steps_per_s": sum(o[1] for o in outs), "final_loss": [o[2] for o in outs]}


def run_one(impl: str, protocol: str, cases: list[str], steps: int,
            intra_op: int = 1) -> int:
    """Start a ps and two workers of ``impl`` and run ``cases``; one JSON line each."""
    ctx = mp.get_context("spawn")
    from flowrt.testing import free_ports

    ports = free_ports(3)
    cluster = {"ps": [f"127.0.0.1:{ports[0]}"],
               "worker": [f"127.0.0.1:{ports[1]}", f"127.0.0.1:{ports[2]}"]}
    ready = ctx.Queue()
    servers = [ctx.Process(target=_serve, args=(impl, cluster, j, i, protocol, ready,
                                                intra_op),
                           daemon=True) for j, i in (("ps", 0), ("worker", 0), ("worker", 1))]
    try:
        for p in servers:
            p.start()
        for _ in servers:
            ready.get(timeout=_WAIT_S)
        tf = load(impl)
        target = f"{protocol}://{cluster['worker'][0]}"
        for name in cases:
            try:
                if name == "ping":
                    res: dict[str, Any] = case_ping(tf, target)
                elif name == "transfer":
                    res = case_transfer(tf, target)
                else:
                    res = case_train(ctx, impl, cluster, protocol, steps)
            except Exception as e:  # a failure is a finding, not a crash
                res = {"error": f"{type(e).__name__}: {e}"[:300]}
            print(json.dumps({"case": name, **res}), flush=True)
    finally:
        for p in servers:
            if p.is_alive():
                p.kill()
            p.join(5)
    return 0


# -- the driver --------------------------------------------------------------------------------
def _measure(impl: str, protocol: str, cases: list[str], steps: int,
             intra_op: int = 1) -> dict[str, Any]:
    """Run ``--impl impl --protocol protocol`` in fresh processes; case -> result."""
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--impl", impl,
                        "--protocol", protocol, "--steps", str(steps),
                        "--intra-op-threads", str(intra_op), *cases],
                       capture_output=True, text=True, timeout=600)
    out: dict[str, Any] = {}
    for line in r.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            out[row.pop("case")] = row
    if r.returncode != 0 or not out:
        tail = (r.stderr.strip().splitlines() or ["no output"])[-1]
        out = {c: {"error": f"exit {r.returncode}: {tail}"[:200]} for c in cases}
    return out


def _tf_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("tensorflow-cpu", "tensorflow"):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return "absent"


def drive(cases: list[str], protocols: list[str], repeats: int, steps: int,
          markdown: bool, intra_op: int = 1) -> int:
    """Alternate TF (grpc) and flowrt runs ``repeats`` times; print medians and ratios."""
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    combos = [("tf", "grpc")] + [("flowrt", p) for p in protocols]
    for rep in range(repeats):
        for impl, proto in combos:
            res = _measure(impl, proto, cases, steps, intra_op)
            runs.setdefault((impl, proto), []).append(res)
            if not markdown:
                print(f"repeat {rep + 1} {impl} {proto}: {json.dumps(res)}", flush=True)

    def median(impl: str, proto: str, case: str, key: str) -> float | None:
        vals = [r[case][key] for r in runs[(impl, proto)] if key in r.get(case, {})]
        return statistics.median(vals) if vals else None

    rows = []
    for case, key, unit, better, targets in METRICS:
        if case not in cases:
            continue
        tf_v = median("tf", "grpc", case, key)
        for proto in protocols:
            fr_v = median("flowrt", proto, case, key)
            ratio = fr_v / tf_v if fr_v is not None and tf_v else None
            ok = None if ratio is None else (ratio <= targets[proto] if better == "lower"
                                             else ratio >= targets[proto])
            rows.append((case, proto, unit, better, tf_v, fr_v, ratio, targets[proto], ok))
    if markdown:
        print(f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python "
              f"{platform.python_version()}, numpy {np.__version__}, TensorFlow "
              f"{_tf_version()}; 1 ps + 2 workers on 127.0.0.1, every task and client "
              f"in its own process; medians of {repeats} runs (TF over grpc in each).\n")
        print("| case | flowrt protocol | TF grpc median | flowrt median | flowrt/TF | "
              "target | met |")
        print("|---|---|---:|---:|---:|---:|---|")
    for case, proto, unit, better, tf_v, fr_v, ratio, target, ok in rows:
        f = (lambda v: "-" if v is None else f"{v:.3f}" if v < 10 else f"{v:.1f}")
        sign = "<=" if better == "lower" else ">="
        if markdown:
            print(f"| {case} ({unit}, {better} is better) | {proto} | {f(tf_v)} | "
                  f"{f(fr_v)} | {'-' if ratio is None else f'{ratio:.2f}'} | "
                  f"{sign} {target} | {'-' if ok is None else 'yes' if ok else 'no'} |")
        else:
            print(f"{case:<9} {proto:<5} TF {f(tf_v):>9} flowrt {f(fr_v):>9} {unit:<8} "
                  f"ratio {'-' if ratio is None else f'{ratio:.2f}'} (target {sign} "
                  f"{target})")
    errors = {f"{impl}/{proto}/{c}": r[c]["error"] for (impl, proto), rs in runs.items()
              for r in rs for c in r if "error" in r[c]}
    for k, v in errors.items():
        print(f"error {k}: {v}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("cases", nargs="*", default=list(CASES), help="ping, transfer, train")
    p.add_argument("--impl", choices=("tf", "flowrt"),
                   help="measure this implementation once (JSON lines)")
    p.add_argument("--protocol", default="grpc", help="with --impl: grpc or zmq")
    p.add_argument("--protocols", default="grpc,zmq",
                   help="flowrt protocols the driver compares with TF's grpc")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=200, help="train steps per worker")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    p.add_argument("--intra-op-threads", type=int, default=1,
                   help="ConfigProto.intra_op_parallelism_threads of every task, for both "
                   "implementations (default 1: five busy processes share the machine; "
                   "0 leaves each library's default)")
    a = p.parse_args(argv)
    bad = [c for c in a.cases if c not in CASES]
    if bad:
        p.error(f"unknown case(s) {', '.join(bad)}; choose from {', '.join(CASES)}")
    if a.impl:
        return run_one(a.impl, a.protocol, a.cases, a.steps, a.intra_op_threads)
    return drive(a.cases, a.protocols.split(","), a.repeats, a.steps, a.markdown,
                 a.intra_op_threads)


if __name__ == "__main__":
    sys.exit(main())
