"""Cluster descriptions: ``tf.train.ClusterSpec`` and a TF_CONFIG-style reader.

A cluster is a set of named *jobs* (``"ps"``, ``"worker"``, ...), each a set of *tasks*
numbered from 0 and reached at a ``host:port`` address. :class:`ClusterSpec` holds that
mapping with TF 1.15's behaviour: jobs may be dense (a list of addresses) or sparse (a
``{task_index: address}`` dict), and the spec converts to and from the ``ClusterDef``
protocol buffer. Nothing here opens a connection.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from ..proto import cluster_pb2

__all__ = ["ClusterSpec", "cluster_from_environment", "CONFIG_ENV_VAR"]

#: The environment variable :func:`cluster_from_environment` reads by default.
CONFIG_ENV_VAR = "FLOWRT_CONFIG"

ClusterDef = cluster_pb2.ClusterDef
JobDef = cluster_pb2.JobDef


def _as_text(value: Any, what: str) -> str:
    """``value`` as str (bytes are decoded); TypeError naming ``what`` otherwise."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8")
    if isinstance(value, str):
        return value
    raise TypeError(f"{what} {value!r} must be bytes or unicode")


def _foreign_cluster_def(cluster: Any) -> ClusterDef | None:
    """A flowrt ClusterDef parsed from another package's ClusterDef message (e.g.
    TensorFlow's ``tensorflow.ClusterDef``, whose wire format is the same), else None."""
    desc = getattr(cluster, "DESCRIPTOR", None)
    if getattr(desc, "name", None) != "ClusterDef" or \
            not callable(getattr(cluster, "SerializeToString", None)):
        return None
    out = ClusterDef()
    out.ParseFromString(cluster.SerializeToString())
    return out


class ClusterSpec:
    """A cluster as jobs of tasks (``tf.train.ClusterSpec``).

    ``cluster`` is a dict mapping job names to a list of addresses (task ``i`` at
    position ``i``) or to a ``{task_index: address}`` dict for a sparse job, another
    ClusterSpec, or a ``ClusterDef`` proto::

        ClusterSpec({"ps": ["ps0:2222", "ps1:2222"], "worker": {1: "w1:2222"}})

    :raises TypeError: for anything else, for a job whose tasks are neither a list nor
        a dict, and for job names or addresses that are not strings.
    :raises ValueError: for task indices that are not integers.
    """

    __hash__ = None  # type: ignore[assignment]  # mutable-looking and compared by value

    def __init__(self, cluster: Any):
        """Index ``cluster`` (any form the class accepts) by job and task, as
        ``{job: {task_index: address}}``, and keep its ``ClusterDef``."""
        self._cluster_spec: dict[Any, dict[int, Any]] = {}
        if isinstance(cluster, dict):
            for job_name, tasks in cluster.items():
                if isinstance(tasks, (list, tuple)):
                    job_tasks = dict(enumerate(tasks))
                elif isinstance(tasks, dict):
                    job_tasks = {int(i): t for i, t in tasks.items()}
                else:
                    raise TypeError(f"The tasks for job {job_name!r} must be a list or a "
                                    f"dictionary from integers to strings.")
                self._cluster_spec[job_name] = job_tasks
            self._cluster_def = self._make_cluster_def()
            return
        if isinstance(cluster, ClusterSpec):
            cluster_def = ClusterDef()
            cluster_def.MergeFrom(cluster.as_cluster_def())
        elif isinstance(cluster, ClusterDef):
            cluster_def = cluster
        else:
            cluster_def = _foreign_cluster_def(cluster)
            if cluster_def is None:
                raise TypeError("`cluster` must be a dictionary mapping one or more job "
                                "names to lists of network addresses, or a `ClusterDef` "
                                "protocol buffer")
        self._cluster_def = cluster_def
        for job_def in cluster_def.job:
            self._cluster_spec[job_def.name] = dict(job_def.tasks.items())

    def _make_cluster_def(self) -> ClusterDef:
        """The ClusterDef of a dict-built spec: jobs and tasks sorted, for stable bytes."""
        jobs = [(_as_text(name, "Job name"),
                 sorted((i, _as_text(a, "Task address")) for i, a in tasks.items()))
                for name, tasks in self._cluster_spec.items()]
        out = ClusterDef()
        for name, tasks in sorted(jobs):
            job_def = out.job.add()
            job_def.name = name
            for i, address in tasks:
                job_def.tasks[i] = address
        return out

    # -- queries ----------------------------------------------------------------------
    def _job(self, job_name: Any) -> dict[int, Any]:
        try:
            return self._cluster_spec[job_name]
        except (KeyError, TypeError):
            raise ValueError(f"No such job in cluster: {job_name!r}") from None

    @property
    def jobs(self) -> list[Any]:
        """The job names, in the order they were given."""
        return list(self._cluster_spec)

    def num_tasks(self, job_name: str) -> int:
        """How many tasks ``job_name`` defines.

        :raises ValueError: if the cluster has no such job.
        """
        return len(self._job(job_name))

    def task_indices(self, job_name: str) -> list[int]:
        """The sorted task indices defined in ``job_name``.

        :raises ValueError: if the cluster has no such job.
        """
        return sorted(self._job(job_name))

    def task_address(self, job_name: str, task_index: int) -> str:
        """The address of task ``task_index`` of ``job_name``.

        :raises ValueError: if there is no such job, or no such task in it.
        """
        job = self._job(job_name)
        try:
            return job[task_index]
        except (KeyError, TypeError):
            raise ValueError(f"No task with index {task_index!r} in job "
                             f"{job_name!r}") from None

    def job_tasks(self, job_name: str) -> list[Any]:
        """The job's addresses as a list indexed by task; a sparse job leaves None in
        the holes (so the length may exceed :meth:`num_tasks`).

        :raises ValueError: if the cluster has no such job.
        """
        job = self._job(job_name)
        out: list[Any] = [None] * (max(job) + 1 if job else 0)
        for i, address in job.items():
            out[i] = address
        return out

    def as_dict(self) -> dict[Any, list[Any] | dict[int, Any]]:
        """Job name -> a list of addresses when the job's indices are ``0..n-1``, else a
        ``{task_index: address}`` dict (``{}`` for a job without tasks)."""
        out: dict[Any, list[Any] | dict[int, Any]] = {}
        for job in self.jobs:
            indices = self.task_indices(job)
            if not indices:
                out[job] = {}
            elif indices[-1] + 1 == len(indices) and indices[0] == 0:
                out[job] = self.job_tasks(job)
            else:
                out[job] = {i: self._cluster_spec[job][i] for i in indices}
        return out

    def as_cluster_def(self) -> ClusterDef:
        """The ``ClusterDef`` protocol buffer of this cluster."""
        return self._cluster_def

    # -- comparisons and display ------------------------------------------------------
    def __bool__(self) -> bool:
        return bool(self._cluster_spec)

    def __eq__(self, other: Any) -> bool:
        # As TF: another spec compares by content; anything else is compared with the
        # internal {job: {task_index: address}} mapping.
        if isinstance(other, ClusterSpec):
            return self._cluster_spec == other._cluster_spec
        return self._cluster_spec == other

    def __ne__(self, other: Any) -> bool:
        return not self == other

    def __repr__(self) -> str:
        d = self.as_dict()
        items = ", ".join(f"{k!r}: {d[k]!r}" for k in sorted(d))
        return "ClusterSpec({" + items + "})"


def cluster_from_environment(value: str | None = None, env_var: str = CONFIG_ENV_VAR
                             ) -> tuple[ClusterSpec, str, int]:
    """Read a TF_CONFIG-shaped JSON cluster description.

    ``value`` (or, when it is None, the environment variable ``env_var``) holds e.g.
    ``{"cluster": {"ps": ["h:1"], "worker": ["h:2", "h:3"]},
    "task": {"type": "worker", "index": 1}}``. Returns ``(cluster, job_name,
    task_index)``.

    :raises ValueError: when the variable is unset, the text is not JSON, a field is
        missing or has the wrong type, or the task is not part of the cluster.
    """
    source = "the given config"
    if value is None:
        source = env_var
        value = os.environ.get(env_var)
        if value is None:
            raise ValueError(f"{env_var} is not set: expected a JSON object like "
                             f'{{"cluster": {{...}}, "task": {{"type": "worker", '
                             f'"index": 0}}}}')
    try:
        config = json.loads(value)
    except json.JSONDecodeError as e:
        raise ValueError(f"{source} is not valid JSON: {e}") from None
    if not isinstance(config, Mapping):
        raise ValueError(f"{source} must be a JSON object, got {type(config).__name__}")
    cluster = config.get("cluster")
    if not isinstance(cluster, Mapping) or not cluster:
        raise ValueError(f"{source} needs a non-empty \"cluster\" object mapping job names "
                         f"to lists of addresses")
    try:
        spec = ClusterSpec(dict(cluster))
    except (TypeError, ValueError) as e:
        raise ValueError(f"{source} has a bad \"cluster\": {e}") from None
    task = config.get("task")
    if not isinstance(task, Mapping):
        raise ValueError(f"{source} needs a \"task\" object with \"type\" and \"index\"")
    job = task.get("type")
    if not isinstance(job, str) or not job:
        raise ValueError(f"{source}: \"task\" needs a \"type\" string (a job name)")
    index = task.get("index", 0)
    if isinstance(index, bool) or not isinstance(index, int):
        raise ValueError(f"{source}: \"task\" \"index\" must be an integer, got {index!r}")
    if job not in spec.jobs:
        raise ValueError(f"{source}: task type {job!r} is not a job of the cluster "
                         f"(jobs: {', '.join(sorted(map(str, spec.jobs)))})")
    if index not in spec.task_indices(job):
        raise ValueError(f"{source}: job {job!r} has no task with index {index}")
    return spec, job, index
