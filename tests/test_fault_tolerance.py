"""Replicated training survives failures: real processes on 127.0.0.1.

The ps tasks are ``python -m flowrt.cli server`` processes; each worker is a process
running ``examples/distributed_train.py`` for one task (it serves its own task and runs
its client), so killing a worker kills both. Tasks are killed by pid (SIGKILL: no
cleanup) and restarted on the same port. Every wait is bounded, and a finalizer kills
whatever a test started.
"""
from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from typing import Any

import numpy as np
import pytest

import flowrt as tf
from flowrt.testing import free_port

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLE = str(ROOT / "examples" / "distributed_train.py")
WAIT_S = 60.0  # the longest any single wait in this file may take

pytestmark = pytest.mark.timeout(150)


class Cluster:
    """A ps task and ``workers`` worker tasks of the example, as processes; every
    process's output goes to a log file that the test can wait on."""

    def __init__(self, tmp: pathlib.Path, workers: int, protocol: str = "grpc"):
        self.tmp = tmp
        tmp.mkdir(exist_ok=True)
        self.protocol = protocol
        self.spec = {"ps": [f"127.0.0.1:{free_port()}"],
                     "worker": [f"127.0.0.1:{free_port()}" for _ in range(workers)]}
        self.cluster_file = tmp / "cluster.json"
        self.cluster_file.write_text(json.dumps(self.spec))
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, pathlib.Path] = {}
        self._starts: dict[str, int] = {}

    def _popen(self, name: str, cmd: list[str]) -> subprocess.Popen:
        n = self._starts[name] = self._starts.get(name, 0) + 1
        log = self.logs[name] = self.tmp / f"{name}.{n}.log"
        with open(log, "wb") as f:
            p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
        self.procs[name] = p
        return p

    def start_ps(self) -> None:
        self._popen("ps", [sys.executable, "-m", "flowrt.cli", "server", "--cluster",
                           str(self.cluster_file), "--job", "ps", "--task", "0",
                           "--protocol", self.protocol, "--file-root", str(self.tmp)])
        self.wait_for("ps", "serving")

    def start_worker(self, task: int, *args: str) -> None:
        name = f"worker{task}"
        self._popen(name, [sys.executable, EXAMPLE, "--cluster", str(self.cluster_file),
                           "--job", "worker", "--task", str(task), "--protocol",
                           self.protocol, "--workers", str(len(self.spec["worker"])),
                           "--result", str(self.result_path(task)), *args])

    def result_path(self, task: int) -> pathlib.Path:
        return self.tmp / f"result{task}.json"

    def output(self, name: str) -> str:
        return self.logs[name].read_text(errors="replace")

    def wait_for(self, name: str, text: str, timeout: float = WAIT_S) -> None:
        """Wait (bounded) until ``name``'s current log contains ``text``."""
        deadline = time.monotonic() + timeout
        while text not in self.output(name):
            p = self.procs[name]
            if p.poll() is not None and text not in self.output(name):
                raise AssertionError(f"{name} exited ({p.returncode}) before printing "
                                     f"{text!r}:\n{self.output(name)[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{name} did not print {text!r} within {timeout} s:"
                                     f"\n{self.output(name)[-3000:]}")
            time.sleep(0.05)

    def wait_exit(self, name: str, timeout: float = WAIT_S) -> int:
        try:
            return self.procs[name].wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{name} did not finish within {timeout} s:\n"
                                 f"{self.output(name)[-3000:]}") from None

    def kill(self, name: str) -> None:
        """SIGKILL ``name`` by its pid: no cleanup, as a crash."""
        p = self.procs[name]
        os.kill(p.pid, signal.SIGKILL)
        p.wait(10)

    def result(self, task: int) -> dict[str, Any]:
        name = f"worker{task}"
        rc = self.wait_exit(name)
        assert rc == 0, f"{name} failed ({rc}):\n{self.output(name)[-3000:]}"
        return json.loads(self.result_path(task).read_text())

    def close(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
        for p in self.procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL'ed
                pass


@pytest.fixture
def cluster(tmp_path, request):
    made: list[Cluster] = []

    def make(workers: int = 2, protocol: str = "grpc") -> Cluster:
        c = Cluster(tmp_path / f"c{len(made)}", workers, protocol)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def _check_checkpoints(ckpt_dir: pathlib.Path) -> list[int]:
    """Every checkpoint in the directory is complete and readable, and its global step
    is the one in its name or past it: with asynchronous workers the step can advance
    between the chief reading it and the saver reading the variables (as in TF). How far
    it advances depends on how busy the machine is, but the chief saves one checkpoint
    after another, so a checkpoint's step is never past the name of the next one.
    Returns the steps in the names."""
    found = []
    for index in ckpt_dir.glob("model.ckpt-*.index"):
        prefix = str(index)[:-len(".index")]
        step = int(prefix.rsplit("-", 1)[1])
        names = dict(tf.train.list_variables(prefix))
        assert {"w1", "b1", "w2", "b2", "global_step"} <= set(names), names
        assert names["w1"] == [784, 64]
        reader = tf.train.NewCheckpointReader(prefix)
        assert np.isfinite(reader.get_tensor("w1")).all()
        found.append((step, int(reader.get_tensor("global_step"))))
    found.sort()
    for i, (step, saved) in enumerate(found):
        following = found[i + 1][0] if i + 1 < len(found) else None
        assert step <= saved and (following is None or saved <= following), found
    steps = [step for step, _ in found]
    assert tf.train.latest_checkpoint(str(ckpt_dir)).endswith(f"-{steps[-1]}")
    return steps


# -- a worker dies and comes back ------------------------------------------------------
@pytest.mark.parametrize("mode", ["async", "sync"])
def test_killed_worker_restarts_and_rejoins(cluster, mode):
    c = cluster(workers=2)
    c.start_ps()
    common = ["--mode", mode, "--steps", "80", "--log-every", "10", "--sleep", "0.02"]
    c.start_worker(0, *common, "--checkpoint-dir", str(c.tmp / "ckpt"))
    c.start_worker(1, *common)
    c.wait_for("worker1", "local step 20 ")
    c.kill("worker1")  # its server and its client
    c.wait_for("worker0", "global step", timeout=10)
    c.start_worker(1, *common)  # the same task on the same port
    c.wait_for("worker1", "training on")
    chief, rejoined = c.result(0), c.result(1)
    assert chief["global_step"] >= 80 and rejoined["global_step"] >= 80
    assert rejoined["local_steps"] >= 1  # it used the chief's model, and trained on it
    # the dead worker's steps are gone; the rest trained the model (10 classes: chance
    # is 0.1; 80 asynchronous steps reach 0.75 to 0.9 depending on how they interleave)
    assert chief["accuracy"] > 0.6 and abs(rejoined["accuracy"] - chief["accuracy"]) < 0.05
    _check_checkpoints(c.tmp / "ckpt")


# -- the ps dies and comes back --------------------------------------------------------
def test_killed_ps_restarts_and_training_resumes_from_checkpoint(cluster):
    steps = ["--steps", "120", "--log-every", "10", "--save-steps", "20", "--seed", "3"]
    base = cluster(workers=1)  # the uninterrupted run with the same seed, alongside
    base.start_ps()
    base.start_worker(0, *steps, "--checkpoint-dir", str(base.tmp / "ckpt"))
    c = cluster(workers=1)
    c.start_ps()
    ckpt = c.tmp / "ckpt"
    c.start_worker(0, *steps, "--checkpoint-dir", str(ckpt), "--trace", "--sleep", "0.01")
    c.wait_for("worker0", "global step 50 ")
    c.kill("ps")  # variables, optimizer slots and global step are lost
    time.sleep(0.5)
    c.start_ps()  # same port, fresh state
    chief = c.result(0)
    # the chief's monitored session created a new session, which restored the latest
    # checkpoint; the global step never went below the last checkpoint's step
    assert chief["recoveries"] >= 1
    trace = chief["trace"]
    assert all(step >= latest for latest, step in trace), trace
    rollbacks = [(prev, cur) for prev, cur in zip(trace, trace[1:]) if cur[1] < prev[1]]
    assert rollbacks, "the ps restart lost no state?"
    for prev, cur in rollbacks:
        assert cur[1] >= prev[0] >= 40  # back to (at least) the last checkpoint
    assert chief["global_step"] == 120
    saved = _check_checkpoints(ckpt)
    assert saved[-1] == 120 and len(saved) >= 2
    assert chief["accuracy"] > 0.85
    baseline = base.result(0)
    assert baseline["recoveries"] == 0 and baseline["global_step"] == 120
    assert abs(chief["accuracy"] - baseline["accuracy"]) < 0.05, (chief, baseline)


# -- sync mode: slow, early-finishing and dying workers --------------------------------
SYNC = ["--mode", "sync", "--steps", "40", "--log-every", "5", "--save-steps", "0",
        "--lost-worker-secs", "2"]


def _sync_run(cluster, chief_args=(), worker_args=(), kill_after: int = 0):
    """Chief and one more worker in sync mode (2 gradients per step); returns both
    results (None for a killed worker), the wall time and the chief's output."""
    c = cluster(workers=2)
    c.start_ps()
    t0 = time.monotonic()
    c.start_worker(0, *SYNC, *chief_args)
    c.start_worker(1, *SYNC, *worker_args)
    if kill_after:
        c.wait_for("worker1", f"local step {kill_after} ")
        c.kill("worker1")
        chief = c.result(0)
        return chief, None, time.monotonic() - t0, c.output("worker0")
    chief, other = c.result(0), c.result(1)
    return chief, other, time.monotonic() - t0, c.output("worker0")


def test_sync_slow_worker_does_not_stall_the_step(cluster):
    # tokens are not tied to workers: while the slow worker sleeps, the chief takes the
    # tokens it has not claimed and supplies the step's gradients; every step still
    # aggregates two fresh gradients, and the slow one's late gradients are dropped
    # (the lost-worker watchdog is given a long timeout so it plays no part)
    chief, slow, wall, _ = _sync_run(cluster, chief_args=["--lost-worker-secs", "30"],
                                     worker_args=["--sleep", "0.3"])
    assert wall < WAIT_S
    assert chief["global_step"] == slow["global_step"] == 40
    assert slow["local_steps"] >= 1
    assert chief["local_steps"] + slow["local_steps"] >= 2 * 40 - 1


def test_sync_slow_backup_worker_is_dropped_as_stale(cluster):
    # one gradient per step, two workers: the chief makes the steps, the slow worker's
    # gradients arrive after their step and are dropped; the global step counts steps,
    # not gradients
    chief, slow, wall, _ = _sync_run(cluster, chief_args=["--replicas-to-aggregate", "1"],
                                  worker_args=["--sleep", "0.3", "--replicas-to-aggregate",
                                               "1"])
    assert wall < WAIT_S
    assert chief["global_step"] == 40
    assert chief["local_steps"] >= 30 and slow["local_steps"] < chief["local_steps"]
    assert chief["local_steps"] + slow["local_steps"] > 40  # some gradients were dropped


def test_sync_worker_that_finishes_early(cluster):
    chief, early, wall, out = _sync_run(cluster, worker_args=["--max-local-steps", "5"])
    assert "a worker was lost" not in out  # it gave its token back when it left
    assert wall < WAIT_S
    # (its fifth run may find the chief already finished: the run ends the loop with
    # OutOfRangeError, quietly)
    assert 1 <= early["local_steps"] <= 5 and early["global_step"] <= 40
    assert chief["global_step"] == 40
    # the chief made up for the missing worker's gradients
    assert chief["local_steps"] >= 2 * 40 - early["local_steps"] - 1
    assert chief["accuracy"] > 0.5  # trained (10 classes: chance is 0.1)


def test_sync_worker_that_dies_mid_step(cluster):
    # the chief is slow, so the other worker spends its time blocked on the token
    # queue; it is killed there, with its step in flight on the ps
    chief, _, wall, out = _sync_run(cluster, chief_args=["--sleep", "0.05"],
                                    kill_after=10)
    # its token died with it; the chief's watchdog put the missing one back
    assert "a worker was lost; adding" in out
    assert wall < WAIT_S
    assert chief["global_step"] == 40 and chief["recoveries"] == 0
    assert chief["local_steps"] >= 2 * 40 - 10 - 2
