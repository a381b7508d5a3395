"""Side-by-side step benchmarks: flowrt against tensorflow.compat.v1, in one run.

Each case builds the same TF1 graph under both implementations, checks that they agree,
then times ``session.run`` in alternating rounds (TF, flowrt, TF, flowrt ...) so that
machine noise hits both alike. It reports, per case, the median microseconds per step of
each and the flowrt/TF ratio of medians (below 1.0: flowrt is faster).

Each implementation runs in a worker process of its own, driven round by round by this
one: in a shared process, TF's thread pools keep spinning after its steps and starve
numpy's BLAS threads, which would make flowrt's matrix work look several times slower.
``--same-process`` measures the old way.

    python bench/step_bench.py                 # every case
    python bench/step_bench.py fixed wide200   # some cases
    python bench/step_bench.py --markdown      # a table for BENCHMARKS.md

Run it from an environment that has both tensorflow (tensorflow-cpu) and flowrt
installed; without TensorFlow it times flowrt alone.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

Step = Callable[[], Any]


def load_tf() -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        import tensorflow as _tf  # type: ignore
    except ImportError:
        return None
    tf = _tf.compat.v1
    tf.disable_eager_execution()
    tf.logging.set_verbosity(tf.logging.ERROR)
    return tf


def _tf_importable() -> bool:
    import importlib.util

    return importlib.util.find_spec("tensorflow") is not None


def _tf_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("tensorflow-cpu", "tensorflow"):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return "unknown"


def load_flowrt() -> Any:
    import flowrt

    return flowrt


# -- cases: build(tf) -> (step callable, check value, steps per timing round) ------------
def case_fixed(tf: Any) -> tuple[Step, Any, int]:
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [4], name="x")
        y = tf.identity(x)
    s = tf.Session(graph=g)
    d = np.ones(4, np.float32)
    return (lambda: s.run(y, {x: d})), s.run(y, {x: d}), 2000


def _chain(n: int, mixed: bool = False) -> Callable[[Any], tuple[Step, Any, int]]:
    """``n`` chained unary ops on 4 floats: all ``sin``, or ``sin`` and ``cos`` taking
    turns (``mixed``), so that no two neighbours are the same op."""
    def build(tf: Any) -> tuple[Step, Any, int]:
        g = tf.Graph()
        with g.as_default():
            x = tf.placeholder(tf.float32, [4], name="x")
            y = x
            for i in range(n):
                y = tf.cos(y) if mixed and i % 2 else tf.sin(y)
        s = tf.Session(graph=g)
        d = np.full(4, 0.5, np.float32)
        return (lambda: s.run(y, {x: d})), s.run(y, {x: d}), max(20, 20000 // n)

    return build


def _wide(width: int) -> Callable[[Any], tuple[Step, Any, int]]:
    def build(tf: Any) -> tuple[Step, Any, int]:
        g = tf.Graph()
        with g.as_default():
            x = tf.placeholder(tf.float32, [16], name="x")
            y = tf.add_n([tf.sin(x * float(i)) for i in range(width)])
        s = tf.Session(graph=g)
        d = np.linspace(0, 1, 16).astype(np.float32)
        return (lambda: s.run(y, {x: d})), s.run(y, {x: d}), max(20, 20000 // (2 * width))

    return build


def _matmul(n: int, k: int) -> Callable[[Any], tuple[Step, Any, int]]:
    def build(tf: Any) -> tuple[Step, Any, int]:
        rng = np.random.default_rng(0)
        a = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
        g = tf.Graph()
        with g.as_default():
            x = tf.placeholder(tf.float32, [n, n], name="x")
            w = tf.constant(a)
            y = x
            for _ in range(k):
                y = tf.matmul(y, w)
        s = tf.Session(graph=g)
        return (lambda: s.run(y, {x: a})), s.run(y, {x: a}), 5

    return build


def case_mlp_train(tf: Any, batch: int = 64) -> tuple[Step, Any, int]:
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((batch, 784)).astype(np.float32)
    ys = np.eye(10, dtype=np.float32)[rng.integers(0, 10, batch)]
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 784], name="x")
        y_ = tf.placeholder(tf.float32, [None, 10], name="y")
        w1 = tf.Variable(rng.standard_normal((784, 256)).astype(np.float32) * 0.05)
        b1 = tf.Variable(np.zeros(256, np.float32))
        w2 = tf.Variable(rng.standard_normal((256, 10)).astype(np.float32) * 0.05)
        b2 = tf.Variable(np.zeros(10, np.float32))
        h = tf.nn.relu(tf.matmul(x, w1) + b1)
        logits = tf.matmul(h, w2) + b2
        loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=y_,
                                                                          logits=logits))
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        init = tf.global_variables_initializer()
    s = tf.Session(graph=g)
    s.run(init)
    return (lambda: s.run(train, {x: xs, y_: ys})), s.run(loss, {x: xs, y_: ys}), 50


CASES: dict[str, Callable[[Any], tuple[Step, Any, int]]] = {
    "fixed": case_fixed,
    "chain100": _chain(100),
    "chain1000": _chain(1000),
    "chainmix1000": _chain(1000, mixed=True),
    "wide200": _wide(200),
    "matmul512x4": _matmul(512, 4),
    "mlp_train": case_mlp_train,
}


def _time(step: Step, n: int) -> float:
    t = time.perf_counter()
    for _ in range(n):
        step()
    return (time.perf_counter() - t) / n


def run_case(name: str, impls: dict[str, Any], rounds: int) -> dict[str, Any]:
    built: dict[str, tuple[Step, Any, int]] = {}
    row: dict[str, Any] = {"case": name}
    for label, mod in impls.items():
        try:
            built[label] = CASES[name](mod)
        except Exception as e:  # a missing feature is a finding, not a crash
            row[f"{label}_error"] = f"{type(e).__name__}: {e}"[:160]
    if "tf" in built and "flowrt" in built:
        a, b = np.asarray(built["tf"][1]), np.asarray(built["flowrt"][1])
        row["agree"] = bool(a.shape == b.shape and np.allclose(a, b, rtol=1e-3, atol=1e-3))
    times: dict[str, list[float]] = {k: [] for k in built}
    for label, (step, _, n) in built.items():  # warm up
        _time(step, max(3, n // 10))
    for _ in range(rounds):
        for label, (step, _, n) in built.items():
            times[label].append(_time(step, n))
    for label, ts in times.items():
        row[f"{label}_us"] = statistics.median(ts) * 1e6
    if "tf_us" in row and "flowrt_us" in row:
        row["ratio"] = row["flowrt_us"] / row["tf_us"]
    return row


def _worker(impl: str) -> int:
    """Serve ``build NAME`` / ``time NAME`` / ``quit`` requests on stdin (one JSON reply
    per line on stdout)."""
    import json

    mod = load_tf() if impl == "tf" else load_flowrt()
    built: dict[str, tuple[Step, Any, int]] = {}
    out = sys.stdout
    sys.stdout = sys.stderr  # library chatter must not corrupt the protocol
    for line in sys.stdin:
        cmd, _, name = line.strip().partition(" ")
        if cmd == "quit":
            break
        try:
            if cmd == "build":
                built[name] = CASES[name](mod)
                step, value, n = built[name]
                _time(step, max(3, n // 10))
                reply = {"value": np.asarray(value).tolist()}
            else:
                step, _, n = built[name]
                reply = {"t": _time(step, n)}
        except Exception as e:  # reported back, not fatal
            reply = {"error": f"{type(e).__name__}: {e}"[:160]}
        out.write(json.dumps(reply) + "\n")
        out.flush()
    return 0


class _Proc:
    def __init__(self, impl: str):
        import subprocess

        self.impl = impl
        self.p = subprocess.Popen([sys.executable, __file__, "--worker", impl],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True)

    def ask(self, line: str) -> dict[str, Any]:
        import json

        assert self.p.stdin is not None and self.p.stdout is not None
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        reply = self.p.stdout.readline()
        if not reply:
            return {"error": f"{self.impl} worker exited"}
        return json.loads(reply)

    def close(self) -> None:
        try:
            self.ask("quit")
        except Exception:
            pass
        self.p.wait(timeout=30)


def run_case_procs(name: str, procs: dict[str, _Proc], rounds: int) -> dict[str, Any]:
    row: dict[str, Any] = {"case": name}
    values: dict[str, Any] = {}
    for label, pr in procs.items():
        r = pr.ask(f"build {name}")
        if "error" in r:
            row[f"{label}_error"] = r["error"]
        else:
            values[label] = np.asarray(r["value"])
    if len(values) == 2:
        a, b = values["tf"], values["flowrt"]
        row["agree"] = bool(a.shape == b.shape and np.allclose(a, b, rtol=1e-3, atol=1e-3))
    times: dict[str, list[float]] = {k: [] for k in values}
    for _ in range(rounds):
        for label in values:
            r = procs[label].ask(f"time {name}")
            if "t" in r:
                times[label].append(r["t"])
    for label, ts in times.items():
        if ts:
            row[f"{label}_us"] = statistics.median(ts) * 1e6
    if "tf_us" in row and "flowrt_us" in row:
        row["ratio"] = row["flowrt_us"] / row["tf_us"]
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("cases", nargs="*", default=list(CASES))
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    p.add_argument("--no-tf", action="store_true", help="time flowrt alone")
    p.add_argument("--same-process", action="store_true",
                   help="run both implementations in this process")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        return _worker(a.worker)
    impls: dict[str, Any] = {}
    procs: dict[str, _Proc] = {}
    have_tf = not a.no_tf and _tf_importable()
    if a.same_process:
        if have_tf:
            impls["tf"] = load_tf()
        impls["flowrt"] = load_flowrt()
    else:
        if have_tf:
            procs["tf"] = _Proc("tf")
        procs["flowrt"] = _Proc("flowrt")
    rows = []
    for name in a.cases:
        row = run_case(name, impls, a.rounds) if a.same_process else \
            run_case_procs(name, procs, a.rounds)
        rows.append(row)
        if not a.markdown:
            print({k: (round(v, 2) if isinstance(v, float) else v) for k, v in row.items()},
                  flush=True)
    for pr in procs.values():
        pr.close()
    if a.markdown:
        tfv = _tf_version() if have_tf else "absent"
        print(f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python "
              f"{platform.python_version()}, numpy {np.__version__}, TensorFlow {tfv}; "
              f"medians of {a.rounds} alternating rounds"
              f"{' in one process' if a.same_process else ', one worker process each'}.\n")
        print("| case | TF median (us/step) | flowrt median (us/step) | flowrt/TF | agree |")
        print("|---|---:|---:|---:|---|")
        for r in rows:
            def f(k: str) -> str:
                return f"{r[k]:.1f}" if k in r else r.get(k.replace("_us", "_error"), "-")
            ratio = f"{r['ratio']:.2f}" if "ratio" in r else "-"
            print(f"| {r['case']} | {f('tf_us')} | {f('flowrt_us')} | {ratio} | "
                  f"{r.get('agree', '-')} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
