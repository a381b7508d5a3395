"""Cluster resolvers (``tf.distribute.cluster_resolver``): where the tasks of a cluster
are, read from the scheduler that started them.

A resolver answers four questions: the cluster (:meth:`ClusterResolver.cluster_spec`),
this process's task (``task_type``, ``task_id``), the session target of a task
(:meth:`ClusterResolver.master`) and the accelerators a task has. TF 1.15's classes and
semantics, with what each scheduler provides:

- :class:`TFConfigClusterResolver`: the ``TF_CONFIG`` JSON variable (Kubeflow's
  TFJob, SageMaker, hand-written launch scripts);
- :class:`SlurmClusterResolver`: ``SLURM_PROCID``, the step's node list (the compressed
  ``node[01-04,07]`` form, expanded here without calling ``scontrol``) and tasks per node;
- :class:`KubernetesClusterResolver`: pods found through the Kubernetes API (the
  ``kubernetes`` package, or any client object passed in), or, without an API client,
  the DNS names a headless service gives the pods of a StatefulSet
  (``<set>-<i>.<service>.<namespace>.svc.<domain>``), this pod's task read from its
  host name;
- :class:`SimpleClusterResolver` and :class:`UnionClusterResolver` (``UnionResolver``).

``tf.train.Server(resolver)`` and ``flowrt server --resolver tf_config|slurm|kubernetes``
start the task a resolver names.
"""
from __future__ import annotations

import abc
import json
import os
import re
import socket
from collections.abc import Mapping
from typing import Any, Callable

from ..distributed.cluster import ClusterSpec
from ..framework.session import Session

__all__ = ["ClusterResolver", "SimpleClusterResolver", "UnionClusterResolver",
           "TFConfigClusterResolver", "SlurmClusterResolver", "KubernetesClusterResolver",
           "expand_hostlist", "expand_tasks_per_node", "format_master_url", "RESOLVERS",
           "resolver_by_name"]


def format_master_url(master: str, rpc_layer: str | None = None) -> str:
    """``rpc_layer://master`` (``master`` itself without an rpc layer or address, or when
    it already names its protocol: TF would write ``grpc://grpc://...``)."""
    return f"{rpc_layer}://{master}" if rpc_layer and master and "://" not in master \
        else master


class ClusterResolver(abc.ABC):
    """The base of every resolver (``tf.distribute.cluster_resolver.ClusterResolver``).

    Subclasses implement :meth:`cluster_spec` and :meth:`master`, read again from the
    scheduler at each call (a cluster may change); ``task_type``, ``task_id`` and
    ``rpc_layer`` are settable properties."""

    @abc.abstractmethod
    def cluster_spec(self) -> ClusterSpec:
        """The cluster as it is now."""

    @abc.abstractmethod
    def master(self, task_type: str | None = None, task_id: int | None = None,
               rpc_layer: str | None = None) -> str:
        """The session target of a task (``grpc://host:port``), or ``''``."""

    def num_accelerators(self, task_type: str | None = None, task_id: int | None = None,
                         config_proto: Any = None) -> dict[str, int]:
        """Accelerator devices per type on a task (``{"GPU": 2}``), listed by a session on
        the task's master (``{}`` when the target is local and has none)."""
        target = self.master(task_type, task_id)
        counts: dict[str, int] = {}
        with Session(target, config=config_proto) as sess:
            for dev in sess.list_devices():
                if dev.device_type == "CPU":
                    continue
                if task_type is not None and task_id is not None and (
                        f"/job:{task_type}/" not in dev.name or
                        f"/task:{task_id}/" not in dev.name):
                    continue
                counts[dev.device_type] = counts.get(dev.device_type, 0) + 1
        return counts

    @property
    def environment(self) -> str:
        """``"google"`` inside Google, ``""`` everywhere else."""
        return ""

    @property
    def task_type(self) -> str | None:
        """This process's job name, when the scheduler says."""
        return getattr(self, "_task_type", None)

    @task_type.setter
    def task_type(self, value: str | None) -> None:
        self._task_type = value

    @property
    def task_id(self) -> int | None:
        """This process's task index in its job, when the scheduler says."""
        return getattr(self, "_task_id", None)

    @task_id.setter
    def task_id(self, value: int | None) -> None:
        self._task_id = value

    @property
    def rpc_layer(self) -> str | None:
        """The protocol tasks speak (``grpc``, ``zmq``), when known."""
        return getattr(self, "_rpc_layer", None)

    @rpc_layer.setter
    def rpc_layer(self, value: str | None) -> None:
        self._rpc_layer = value


class SimpleClusterResolver(ClusterResolver):
    """A resolver that returns what it was given.

    :raises TypeError: when ``cluster_spec`` is not a ClusterSpec or ``master`` not a
        string"""

    def __init__(self, cluster_spec: ClusterSpec, master: str = "",
                 task_type: str | None = None, task_id: int | None = None,
                 environment: str = "", num_accelerators: dict[str, int] | None = None,
                 rpc_layer: str | None = None):
        if not isinstance(cluster_spec, ClusterSpec):
            raise TypeError("cluster_spec must be a `tf.train.ClusterSpec`.")
        if not isinstance(master, str):
            raise TypeError("master must be a string.")
        self._cluster_spec, self._master = cluster_spec, master
        self._task_type, self._task_id = task_type, task_id
        self._environment, self._rpc_layer = environment, rpc_layer
        self._num_accelerators = num_accelerators

    def cluster_spec(self) -> ClusterSpec:
        return self._cluster_spec

    def master(self, task_type: str | None = None, task_id: int | None = None,
               rpc_layer: str | None = None) -> str:
        """The given master, or the address of ``task_type``/``task_id`` when both are
        given, with the rpc layer in front."""
        if task_type is not None and task_id is not None:
            address = self._cluster_spec.task_address(task_type, task_id)
        else:
            address = self._master
        return format_master_url(address, rpc_layer or self._rpc_layer)

    @property
    def environment(self) -> str:
        return self._environment

    def num_accelerators(self, task_type: str | None = None, task_id: int | None = None,
                         config_proto: Any = None) -> dict[str, int]:
        """The counts given to the constructor (``{}`` when none were)."""
        return dict(self._num_accelerators or {})


class UnionClusterResolver(ClusterResolver):
    """Several resolvers as one: their clusters merged, everything else from the first
    (``tf.distribute.cluster_resolver.UnionResolver``).

    A job several resolvers name is merged: lists concatenated when every part is a
    list, otherwise task indices joined (a list counts as indices 0..n-1), KeyError on
    an index given twice.

    :raises ValueError: with no resolver, or with unknown keyword arguments
    :raises TypeError: when an argument is not a ClusterResolver"""

    def __init__(self, *resolvers: ClusterResolver, **kwargs: Any):
        self._rpc_layer = kwargs.pop("rpc_layer", None)
        self._task_type = kwargs.pop("task_type", None)
        self._task_id = kwargs.pop("task_id", None)
        if kwargs:
            raise ValueError(f"Unexpected kwargs provided {kwargs!r}")
        if not resolvers:
            raise ValueError("At least one ClusterResolver is required.")
        if not all(isinstance(r, ClusterResolver) for r in resolvers):
            raise TypeError("All arguments must be a sub-class of `ClusterResolver.`")
        self._resolvers = resolvers

    def cluster_spec(self) -> ClusterSpec:
        """The merged cluster (see the class docstring)."""
        parts = [r.cluster_spec().as_dict() for r in self._resolvers]
        as_list = {}
        for part in parts:
            for job, tasks in part.items():
                as_list[job] = as_list.get(job, True) and isinstance(tasks, list)
        merged: dict[Any, Any] = {job: [] if flag else {} for job, flag in as_list.items()}
        for part in parts:
            for job, tasks in part.items():
                if as_list[job]:
                    merged[job].extend(tasks)
                    continue
                add = dict(enumerate(tasks)) if isinstance(tasks, list) else dict(tasks)
                twice = set(add) & set(merged[job])
                if twice:
                    raise KeyError(f"Duplicate keys detected when merging two "
                                   f"ClusterSpecs: {twice!r}")
                merged[job].update(add)
        return ClusterSpec(merged)

    def master(self, task_type: str | None = None, task_id: int | None = None,
               rpc_layer: str | None = None) -> str:
        """The first resolver's master, or the merged cluster's address of
        ``task_type``/``task_id`` when both are given."""
        if task_type is not None and task_id is not None:  # (the union's own layer only)
            return format_master_url(self.cluster_spec().task_address(task_type, task_id),
                                     rpc_layer or self._rpc_layer)
        return self._resolvers[0].master(rpc_layer=rpc_layer)

    @property
    def task_type(self) -> str | None:
        return self._task_type or self._resolvers[0].task_type

    @task_type.setter
    def task_type(self, value: str | None) -> None:
        self._task_type = value

    @property
    def task_id(self) -> int | None:
        return self._task_id if self._task_id is not None else self._resolvers[0].task_id

    @task_id.setter
    def task_id(self, value: int | None) -> None:
        self._task_id = value

    @property
    def rpc_layer(self) -> str | None:
        return self._rpc_layer or self._resolvers[0].rpc_layer

    @rpc_layer.setter
    def rpc_layer(self, value: str | None) -> None:
        self._rpc_layer = value

    @property
    def environment(self) -> str:
        return self._resolvers[0].environment

    def num_accelerators(self, task_type: str | None = None, task_id: int | None = None,
                         config_proto: Any = None) -> dict[str, int]:
        return self._resolvers[0].num_accelerators(task_type, task_id, config_proto)


# ---------------------------------------------------------------------------------------
# TF_CONFIG
# ---------------------------------------------------------------------------------------
def _tf_config() -> dict[str, Any]:
    text = os.environ.get("TF_CONFIG", "{}")
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError as e:
        raise ValueError(f"TF_CONFIG is not valid JSON: {e}") from None
    if not isinstance(value, Mapping):
        raise ValueError(f"TF_CONFIG must be a JSON object, got {type(value).__name__}")
    return dict(value)


class TFConfigClusterResolver(ClusterResolver):
    """The cluster and task of the ``TF_CONFIG`` environment variable, read at each
    call: ``{"cluster": {...}, "task": {"type": "worker", "index": 0},
    "rpc_layer": "grpc", "session_master": "..."}``; arguments override its task and
    rpc layer."""

    def __init__(self, task_type: str | None = None, task_id: int | None = None,
                 rpc_layer: str | None = None, environment: str | None = None):
        self._task_type, self._task_id = task_type, task_id
        self._rpc_layer, self._environment = rpc_layer, environment

    @property
    def task_type(self) -> str | None:
        if self._task_type is not None:
            return str(self._task_type)
        task = _tf_config().get("task", {})
        return str(task["type"]) if "type" in task else None

    @task_type.setter
    def task_type(self, value: str | None) -> None:
        self._task_type = value

    @property
    def task_id(self) -> int | None:
        if self._task_id is not None:
            return int(self._task_id)
        task = _tf_config().get("task", {})
        return int(task["index"]) if "index" in task else None

    @task_id.setter
    def task_id(self, value: int | None) -> None:
        self._task_id = value

    @property
    def rpc_layer(self) -> str | None:
        return self._rpc_layer if self._rpc_layer is not None else \
            _tf_config().get("rpc_layer")

    @rpc_layer.setter
    def rpc_layer(self, value: str | None) -> None:
        self._rpc_layer = value

    @property
    def environment(self) -> str | None:  # (None unless given, as TF's)
        return self._environment

    def cluster_spec(self) -> ClusterSpec:
        """The ``cluster`` of TF_CONFIG (an empty cluster when it has none)."""
        return ClusterSpec(_tf_config().get("cluster", {}))

    def master(self, task_type: str | None = None, task_id: int | None = None,
               rpc_layer: str | None = None) -> str:
        """TF_CONFIG's ``session_master`` if set; ``''`` for a cluster of one task;
        else the address of the given (or this) task with the rpc layer in front."""
        config = _tf_config()
        if config.get("session_master") is not None:
            return str(config["session_master"])
        spec = self.cluster_spec()
        if not spec.jobs or (len(spec.jobs) == 1 and
                             len(spec.job_tasks(spec.jobs[0])) == 1):
            return ""
        task_type = self.task_type if task_type is None else task_type
        task_id = self.task_id if task_id is None else task_id
        return format_master_url(spec.task_address(task_type, task_id),
                                 rpc_layer if rpc_layer is not None else self.rpc_layer)


# ---------------------------------------------------------------------------------------
# Slurm
# ---------------------------------------------------------------------------------------
def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return [p for p in out if p]


def expand_hostlist(hostlist: str) -> list[str]:
    """Slurm's compressed host list expanded, in order: ``"n[01-03,07],gpu-a[1-2]x"``
    gives ``n01 n02 n03 n07 gpu-a1x gpu-a2x`` (ranges keep their zero padding; several
    bracket groups in one name multiply out).

    :raises ValueError: for unbalanced brackets or a malformed range"""
    hosts: list[str] = []
    for part in _split_top(hostlist.strip()):
        m = re.search(r"\[([^\[\]]*)\]", part)
        if m is None:
            if "[" in part or "]" in part:
                raise ValueError(f"Malformed Slurm host list {hostlist!r} at {part!r}")
            hosts.append(part)
            continue
        head, tail = part[:m.start()], part[m.end():]
        for item in m.group(1).split(","):
            lo, sep, hi = item.partition("-")
            if not lo.isdigit() or (sep and not hi.isdigit()):
                raise ValueError(f"Malformed range {item!r} in Slurm host list {hostlist!r}")
            width = len(lo)
            for n in range(int(lo), int(hi if sep else lo) + 1):
                hosts.extend(expand_hostlist(f"{head}{n:0{width}d}{tail}"))
    return hosts


def expand_tasks_per_node(text: str) -> list[int]:
    """Slurm's tasks-per-node list expanded: ``"2(x3),1"`` gives ``[2, 2, 2, 1]``.

    :raises ValueError: for a malformed list"""
    out: list[int] = []
    for part in text.strip().split(","):
        m = re.fullmatch(r"(\d+)(?:\(x(\d+)\))?", part.strip())
        if m is None:
            raise ValueError(f"Malformed Slurm tasks-per-node list {text!r} at {part!r}")
        out.extend([int(m.group(1))] * int(m.group(2) or 1))
    return out


def _slurm_var(name: str) -> str:
    for key in (f"SLURM_STEP_{name}", f"SLURM_{name}", f"SLURM_JOB_{name}"):
        if key in os.environ:
            return os.environ[key]
    raise RuntimeError(f"SLURM_{name} is not set: not running inside a Slurm job step "
                       f"(start the tasks with srun)")


class SlurmClusterResolver(ClusterResolver):
    """The cluster of a Slurm job step: one task per Slurm task, on the step's nodes in
    order, ``port_base``, ``port_base + 1``, ... on each node; jobs take the tasks in
    the order of their names (``{"ps": 1, "worker": 3}``: rank 0 is ps 0, ranks 1-3 are
    workers 0-2). This process's task comes from ``SLURM_PROCID``.

    With ``auto_set_gpu``, :meth:`cluster_spec` sets ``CUDA_VISIBLE_DEVICES`` to this
    task's share of its node's GPUs (``gpus_per_task`` each, in task order).

    :raises RuntimeError: outside a Slurm step, when the jobs ask for another number of
        tasks than the step has, or the tasks of a node want more GPUs than it has"""

    def __init__(self, jobs: dict[str, int] | None = None, port_base: int = 8888,
                 gpus_per_node: int | None = None, gpus_per_task: int | None = None,
                 tasks_per_node: int | dict[str, int] | None = None,
                 auto_set_gpu: bool = True, rpc_layer: str = "grpc"):
        """Read the step from the environment (the class docstring tells what):
        ``jobs`` maps job names to task counts (default: every task a worker),
        ``tasks_per_node`` overrides Slurm's count (a number or a per-host dict),
        ``gpus_per_node`` defaults to the GPUs this node shows and ``gpus_per_task``
        to an even share of them."""
        if "OMPI_COMM_WORLD_RANK" in os.environ:
            self._rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
            num_tasks = int(os.environ["OMPI_COMM_WORLD_SIZE"])
        else:
            self._rank = int(_slurm_var("PROCID"))
            num_tasks = int(os.environ.get("SLURM_STEP_NUM_TASKS") or _slurm_var("NTASKS"))
        self._jobs = dict(sorted((jobs or {"worker": num_tasks}).items()))
        if sum(self._jobs.values()) != num_tasks:
            raise RuntimeError(f"Requested {sum(self._jobs.values())} tasks "
                               f"({self._jobs}) but the Slurm step has {num_tasks}")
        self._hosts = expand_hostlist(_slurm_var("NODELIST"))
        if isinstance(tasks_per_node, Mapping):
            self._per_node = {h: int(tasks_per_node[h]) for h in self._hosts}
        elif tasks_per_node is not None:
            self._per_node = {h: int(tasks_per_node) for h in self._hosts}
        else:
            counts = expand_tasks_per_node(_slurm_var("TASKS_PER_NODE"))
            if len(counts) != len(self._hosts):
                raise RuntimeError(f"Slurm gives {len(counts)} task counts for "
                                   f"{len(self._hosts)} nodes")
            self._per_node = dict(zip(self._hosts, counts))
        most = max(self._per_node.values(), default=1) or 1
        self._gpus_per_node = _visible_gpus() if gpus_per_node is None else gpus_per_node
        self._gpus_per_task = self._gpus_per_node // most if gpus_per_task is None \
            else gpus_per_task
        if most * self._gpus_per_task > self._gpus_per_node:
            raise RuntimeError(f"Requested {most * self._gpus_per_task} GPUs on a node "
                               f"({most} tasks x {self._gpus_per_task}) but a node has "
                               f"{self._gpus_per_node}")
        self._port_base, self._auto_set_gpu = int(port_base), bool(auto_set_gpu)
        self._rpc_layer = rpc_layer
        self._task_type, self._task_id = self._task_of(self._rank)

    def _task_of(self, rank: int) -> tuple[str | None, int | None]:
        start = 0
        for job, n in self._jobs.items():
            if start <= rank < start + n:
                return job, rank - start
            start += n
        return None, None

    def _tasks(self) -> list[tuple[str, str]]:
        """(address, visible GPU ids) of every Slurm task, in rank order."""
        out = []
        for host in self._hosts:
            for k in range(self._per_node[host]):
                first = k * self._gpus_per_task
                gpus = ",".join(str(g) for g in range(first, first + self._gpus_per_task))
                out.append((f"{host}:{self._port_base + k}", gpus))
        return out

    def cluster_spec(self) -> ClusterSpec:
        """The step's tasks grouped by job (and ``CUDA_VISIBLE_DEVICES`` set, see the
        class docstring)."""
        tasks = self._tasks()
        spec, start = {}, 0
        for job, n in self._jobs.items():
            spec[job] = [addr for addr, _ in tasks[start:start + n]]
            start += n
        if self._auto_set_gpu and self._rank < len(tasks) and self._gpus_per_task:
            os.environ["CUDA_VISIBLE_DEVICES"] = tasks[self._rank][1]
        return ClusterSpec(spec)

    def get_task_info(self) -> tuple[str | None, int | None]:
        """``(task_type, task_id)`` of this process."""
        return self.task_type, self.task_id

    def master(self, task_type: str | None = None, task_id: int | None = None,
               rpc_layer: str | None = None) -> str:
        task_type = self.task_type if task_type is None else task_type
        task_id = self.task_id if task_id is None else task_id
        if task_type is None or task_id is None:
            return ""
        return format_master_url(self.cluster_spec().task_address(task_type, task_id),
                                 rpc_layer or self.rpc_layer)

    def num_accelerators(self, task_type: str | None = None, task_id: int | None = None,
                         config_proto: Any = None) -> dict[str, int]:
        """``{"GPU": gpus_per_task}`` (nothing is asked of the task)."""
        return {"GPU": self._gpus_per_task} if self._gpus_per_task else {}


def _visible_gpus() -> int:
    """GPUs this node shows: CUDA_VISIBLE_DEVICES, else the NVIDIA device files."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([v for v in visible.split(",") if v.strip() and v.strip() != "-1"])
    try:
        return len([n for n in os.listdir("/dev") if re.fullmatch(r"nvidia\d+", n)])
    except OSError:
        return 0


# ---------------------------------------------------------------------------------------
# Kubernetes
# ---------------------------------------------------------------------------------------
_SA_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def _pod_namespace() -> str:
    """This pod's namespace: POD_NAMESPACE, the service account's file, ``default``."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        with open(_SA_NAMESPACE, encoding="utf-8") as f:
            return f.read().strip() or "default"
    except OSError:
        return "default"


class KubernetesClusterResolver(ClusterResolver):
    """The cluster of pods on Kubernetes, found one of two ways.

    **API** (TF's way): ``job_to_label_mapping={"worker": ["job-name=worker"]}``; the
    running pods matching each label selector, sorted by name, at their pod IPs and
    ``tf_server_port``. The client is ``override_client`` (anything with
    ``list_pod_for_all_namespaces(label_selector=...)``) or the ``kubernetes`` package's
    in-cluster client.

    **Headless services** (no API access needed): ``job_to_service={"worker":
    ("trainer-worker", 3), "ps": ("trainer-ps", 1)}`` names, per job, a StatefulSet
    (and its headless service of the same name) and its replica count; task ``i`` is
    ``<set>-<i>.<set>.<namespace>.svc.<cluster_domain>:<tf_server_port>``. The
    namespace comes from ``POD_NAMESPACE`` or the pod's service account, and this pod's
    task from its host name (``trainer-worker-2`` is worker 2).

    :raises ValueError: with neither mapping, or both
    :raises RuntimeError: (API) a pod not running, or no client to be had"""

    def __init__(self, job_to_label_mapping: dict[str, list[str]] | None = None,
                 tf_server_port: int = 8470, rpc_layer: str = "grpc",
                 override_client: Any = None, *,
                 job_to_service: dict[str, tuple[str, int]] | None = None,
                 namespace: str | None = None, cluster_domain: str = "cluster.local",
                 hostname: str | None = None):
        """Choose the way (the class docstring tells both); ``namespace`` and
        ``hostname`` default to this pod's, ``cluster_domain`` to Kubernetes' default.
        With only ``override_client``, TF's default selector ``job-name=tensorflow``
        names the worker pods."""
        if (job_to_label_mapping is None) == (job_to_service is None):
            if job_to_label_mapping is None and job_to_service is None and \
                    override_client is not None:
                job_to_label_mapping = {"worker": ["job-name=tensorflow"]}
            else:
                raise ValueError("Give job_to_label_mapping (pods through the Kubernetes "
                                 "API) or job_to_service (headless services), not both "
                                 "and not neither")
        self._labels, self._services = job_to_label_mapping, job_to_service
        self._port, self._rpc_layer = int(tf_server_port), rpc_layer
        self._client = override_client
        self._namespace = namespace
        self._domain = cluster_domain
        self._hostname = hostname
        self._task_type: str | None = None
        self._task_id: int | None = None
        if job_to_service is not None:
            self._task_type, self._task_id = self._own_task()

    def _own_task(self) -> tuple[str | None, int | None]:
        host = (self._hostname or os.environ.get("HOSTNAME") or socket.gethostname())
        host = host.split(".")[0]
        for job, (name, count) in sorted((self._services or {}).items()):
            m = re.fullmatch(re.escape(name) + r"-(\d+)", host)
            if m and int(m.group(1)) < int(count):
                return job, int(m.group(1))
        return None, None

    def _api(self) -> Any:
        if self._client is None:
            try:
                # (optional package: only the API way of this resolver needs it)
                from kubernetes import client, config  # type: ignore[import-not-found]
            except ImportError:
                raise RuntimeError("KubernetesClusterResolver with job_to_label_mapping "
                                   "needs the `kubernetes` package or an override_client; "
                                   "or use job_to_service (headless services)") from None
            config.load_incluster_config()
            self._client = client.CoreV1Api()
        return self._client

    def cluster_spec(self) -> ClusterSpec:
        """Each job's tasks: its running pods by name (API) or its StatefulSet's
        ordinals (headless services)."""
        if self._services is not None:
            ns = self._namespace or _pod_namespace()
            return ClusterSpec({
                job: [f"{name}-{i}.{name}.{ns}.svc.{self._domain}:{self._port}"
                      for i in range(int(count))]
                for job, (name, count) in self._services.items()})
        api, spec = self._api(), {}
        for job, selectors in (self._labels or {}).items():
            addresses = []
            for selector in selectors:
                pods = api.list_pod_for_all_namespaces(label_selector=selector)
                for pod in sorted(pods.items, key=lambda p: p.metadata.name):
                    if pod.status.phase != "Running":
                        raise RuntimeError(f"Pod \"{pod.metadata.name}\" is not running; "
                                           f"phase: \"{pod.status.phase}\"")
                    addresses.append(f"{pod.status.pod_ip}:{self._port}")
            spec[job] = addresses
        return ClusterSpec(spec)

    def master(self, task_type: str | None = None, task_id: int | None = None,
               rpc_layer: str | None = None) -> str:
        """The address of the given task, else of this pod's task, else ``''``."""
        task_type = self.task_type if task_type is None else task_type
        task_id = self.task_id if task_id is None else task_id
        if task_type is None or task_id is None:
            return ""
        return format_master_url(self.cluster_spec().task_address(task_type, task_id),
                                 rpc_layer or self.rpc_layer)


#: resolvers ``flowrt server --resolver NAME`` builds from the environment alone
RESOLVERS: dict[str, Callable[[], ClusterResolver]] = {
    "tf_config": TFConfigClusterResolver,
    "slurm": SlurmClusterResolver,
}


def resolver_by_name(name: str, **kwargs: Any) -> ClusterResolver:
    """The resolver ``name`` (``tf_config``, ``slurm``, ``kubernetes``) made from the
    environment; ``kubernetes`` reads ``FLOWRT_K8S_SERVICES`` (JSON
    ``{"worker": ["trainer-worker", 3], ...}``) and ``FLOWRT_K8S_PORT``.

    :raises ValueError: for an unknown name, or kubernetes without its variable"""
    if name == "kubernetes":
        text = os.environ.get("FLOWRT_K8S_SERVICES")
        if not text:
            raise ValueError("--resolver kubernetes needs FLOWRT_K8S_SERVICES, e.g. "
                             "'{\"ps\": [\"trainer-ps\", 1], \"worker\": "
                             "[\"trainer-worker\", 3]}'")
        services = {job: (str(v[0]), int(v[1])) for job, v in json.loads(text).items()}
        return KubernetesClusterResolver(
            job_to_service=services,
            tf_server_port=int(os.environ.get("FLOWRT_K8S_PORT", "8470")), **kwargs)
    if name not in RESOLVERS:
        raise ValueError(f"unknown cluster resolver {name!r} (choose from "
                         f"{', '.join(sorted([*RESOLVERS, 'kubernetes']))})")
    return RESOLVERS[name](**kwargs)


_NS = "distribute.cluster_resolver."
#: TF 1.15's names (``tf.distribute.cluster_resolver.*``)
API = {_NS + name: value for name, value in (
    ("ClusterResolver", ClusterResolver),
    ("SimpleClusterResolver", SimpleClusterResolver),
    ("UnionResolver", UnionClusterResolver),
    ("TFConfigClusterResolver", TFConfigClusterResolver),
    ("SlurmClusterResolver", SlurmClusterResolver),
    ("KubernetesClusterResolver", KubernetesClusterResolver),
)}
