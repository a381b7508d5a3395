"""Between-graph replicated training, flowrt against TensorFlow: global steps per second.

Each run is ``examples/distributed_train.py --launch``: one ps task and 1, 2 or 4 worker
tasks, every task a process of its own on 127.0.0.1, training the example's MLP with
``MonitoredTrainingSession`` -- asynchronously, or synchronously with
``SyncReplicasOptimizer`` (one gradient from every worker per global step). The rate is
the chief's: global steps it saw advance per second of its training loop (session
creation included; no checkpoints are written).

``--impl tf|flowrt --protocol grpc|zmq`` measures one implementation (JSON lines);
without ``--impl`` the script alternates TF (run with ``--tf-python``, an interpreter
with TensorFlow and flowrt installed) and flowrt ``--repeats`` times and, with
``--markdown``, prints medians and flowrt/TF ratios::

    python bench/train_bench.py --markdown --repeats 3
    python bench/train_bench.py --impl flowrt --protocol zmq --workers 2 --mode sync
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "distributed_train.py")


def measure(python: str, impl: str, protocol: str, mode: str, workers: int,
            steps: int, intra_op: int = 1) -> dict[str, Any]:
    """One run of the example's cluster; the chief's summary (or an error)."""
    with tempfile.TemporaryDirectory() as tmp:
        result = os.path.join(tmp, "result.json")
        cmd = [python, EXAMPLE, "--launch", "--impl", impl, "--protocol", protocol,
               "--mode", mode, "--workers", str(workers), "--steps", str(steps),
               "--log-every", "0", "--result", result,
               "--intra-op-threads", str(intra_op)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            return {"error": "timed out after 600 s"}
        if not os.path.exists(result):
            tail = (r.stdout + r.stderr).strip().splitlines() or ["no output"]
            return {"error": f"exit {r.returncode}: {tail[-1]}"[:300]}
        with open(result, encoding="utf-8") as f:
            res = json.load(f)
    # global steps per second while the chief trained (not session start or shutdown)
    return {"steps_per_s": res.get("train_rate") or res["global_step"] / res["wall_s"],
            "accuracy": res["accuracy"],
            "global_step": res["global_step"]}


def run_one(a: argparse.Namespace) -> int:
    for mode in a.modes.split(","):
        for n in [int(w) for w in a.workers.split(",")]:
            res = measure(sys.executable, a.impl, a.protocol, mode, n, a.steps,
                          a.intra_op_threads)
            print(json.dumps({"impl": a.impl, "protocol": a.protocol, "mode": mode,
                              "workers": n, **res}), flush=True)
    return 0


def drive(a: argparse.Namespace) -> int:
    """Alternate TF (grpc) and flowrt (each protocol) runs; medians and ratios."""
    combos = [("tf", "grpc", a.tf_python)] + [("flowrt", p, sys.executable)
                                              for p in a.protocols.split(",")]
    runs: dict[tuple[str, str, str, int], list[float]] = {}
    errors: list[str] = []
    for rep in range(a.repeats):
        for mode in a.modes.split(","):
            for n in [int(w) for w in a.workers.split(",")]:
                for impl, proto, python in combos:
                    res = measure(python, impl, proto, mode, n, a.steps,
                                  a.intra_op_threads)
                    if "error" in res:
                        errors.append(f"{impl}/{proto}/{mode}/{n}: {res['error']}")
                    else:
                        runs.setdefault((impl, proto, mode, n), []).append(
                            res["steps_per_s"])
                    if not a.markdown:
                        print(f"repeat {rep + 1} {impl} {proto} {mode} x{n}: "
                              f"{json.dumps(res)}", flush=True)

    def med(*key: Any) -> float | None:
        return statistics.median(runs[key]) if runs.get(key) else None

    fmt = (lambda v: "-" if v is None else f"{v:.1f}")
    if a.markdown:
        print(f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python "
              f"{platform.python_version()}; 1 ps + N workers on 127.0.0.1, every task "
              f"in its own process; {a.steps} global steps; medians of {a.repeats} runs; "
              "global steps/s seen by the chief between its first and last step (higher is better).\n")
        print("| mode | workers | flowrt protocol | TF grpc | flowrt | flowrt/TF |")
        print("|---|---:|---|---:|---:|---:|")
    for mode in a.modes.split(","):
        for n in [int(w) for w in a.workers.split(",")]:
            tf_v = med("tf", "grpc", mode, n)
            for proto in a.protocols.split(","):
                fr = med("flowrt", proto, mode, n)
                ratio = f"{fr / tf_v:.2f}" if fr and tf_v else "-"
                if a.markdown:
                    print(f"| {mode} | {n} | {proto} | {fmt(tf_v)} | {fmt(fr)} | {ratio} |")
                else:
                    print(f"{mode:<5} x{n} {proto:<4} TF {fmt(tf_v):>7} flowrt {fmt(fr):>7} "
                          f"ratio {ratio}")
    for e in errors:
        print(f"error {e}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--impl", choices=("tf", "flowrt"), help="measure one implementation")
    p.add_argument("--protocol", default="grpc", help="with --impl: grpc or zmq")
    p.add_argument("--protocols", default="grpc,zmq", help="flowrt protocols to compare")
    p.add_argument("--modes", default="sync,async")
    p.add_argument("--workers", default="1,2,4")
    p.add_argument("--steps", type=int, default=200, help="global steps per run")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--tf-python", default=sys.executable,
                   help="the interpreter with TensorFlow (and flowrt) for the TF runs")
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--intra-op-threads", type=int, default=1,
                   help="intra_op_parallelism_threads of every task of both libraries "
                        "(0: each library's default)")
    a = p.parse_args(argv)
    if a.impl:
        return run_one(a)
    return drive(a)


if __name__ == "__main__":
    sys.exit(main())
