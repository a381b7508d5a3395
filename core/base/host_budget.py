"""How many threads this process may keep busy: its share of the host's cores.

Several flowrt processes often share one host: a parameter server and workers, and
the clients that drive them. Each would otherwise size its BLAS and intra-op threads
for the whole machine, and BLAS threads busy-wait between calls: five processes on two
cores then spend their time spinning against each other. The rule:

- ``ConfigProto.intra_op_parallelism_threads`` > 0 (given to a server or to a session
  that runs local devices) is taken as it is;
- a process serving tasks of a cluster gets ``cores // n`` threads (at least 1), ``n``
  being how many processes of the cluster run on this host: one for each task at a
  local address (:func:`is_local_address`), the tasks this process serves counting as
  one;
- a process that only drives steps run by servers (a session with a ``grpc://`` or
  ``zmq://`` target, and no local session) gets 1;
- a process alone (no cluster) keeps every core.

This module holds the rule (:func:`thread_budget`, a pure function), what the process
has said about itself (:func:`serve_task`, :func:`note_remote_client`,
:func:`note_local_session`, :func:`set_override`) and the budget that follows
(:func:`current`). The device plugin that owns the threads (the CPU plugin: numpy's
BLAS and its intra-op pool) applies it: it :func:`subscribe` s and is called with each
new budget.
"""
from __future__ import annotations

import contextlib
import ipaddress
import itertools
import os
import socket
import threading
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping

__all__ = ["ThreadBudget", "thread_budget", "host_cores", "is_local_address",
           "local_tasks", "serve_task", "stop_serving", "note_remote_client",
           "note_local_session", "set_override", "current", "subscribe"]


@dataclass(frozen=True)
class ThreadBudget:
    """The threads one process may keep busy, and why.

    :ivar threads: threads for BLAS and for the intra-op pool (at least 1)
    :ivar cores: the cores this process may run on
    :ivar processes: processes of the cluster on this host, this one included (1 when
        alone or a client)
    :ivar override: ``intra_op_parallelism_threads`` when it decided (0: it did not)
    :ivar role: ``"alone"``, ``"server"``, ``"client"`` or ``"override"``
    """

    threads: int
    cores: int
    processes: int = 1
    override: int = 0
    role: str = "alone"

    @property
    def reason(self) -> str:
        """Why this many threads, in words (``flowrt server`` prints it)."""
        if self.role == "override":
            return f"intra_op_parallelism_threads={self.override}"
        if self.role == "client":
            return "a client: its steps run on servers"
        if self.role == "server" and self.processes > 1:
            return (f"{self.cores} cores shared by {self.processes} tasks of the cluster "
                    f"on this host")
        return f"{self.cores} cores, alone on this host"


def thread_budget(cores: int, local_tasks: int = 1, override: int = 0,
                  client: bool = False) -> ThreadBudget:
    """The thread budget of a process (the rule in the module docstring).

    :param cores: the cores the process may run on
    :param local_tasks: processes of the cluster on this host, this one included (0 or
        1: no cluster, or alone on this host)
    :param override: ``ConfigProto.intra_op_parallelism_threads``; > 0 decides
    :param client: the process only drives steps that run elsewhere
    """
    cores = max(1, int(cores))
    if override > 0:
        return ThreadBudget(int(override), cores, max(1, local_tasks), int(override),
                            "override")
    if local_tasks >= 1 and not client:
        n = max(1, int(local_tasks))
        return ThreadBudget(max(1, cores // n), cores, n, 0, "server" if n > 1 else "alone")
    if client:
        return ThreadBudget(1, cores, 1, 0, "client")
    return ThreadBudget(cores, cores, 1, 0, "alone")


def host_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS says)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


# -- which addresses are this host ------------------------------------------------------
def _host_of(address: str) -> str:
    """The host part of ``host:port``, ``[v6]:port``, ``scheme://host:port`` or ``host``."""
    addr = address.strip()
    if "://" in addr:
        addr = addr.split("://", 1)[1]
    addr = addr.split("/", 1)[0]
    if addr.startswith("["):
        return addr[1:addr.find("]")] if "]" in addr else addr[1:]
    if addr.count(":") == 1:
        return addr.rsplit(":", 1)[0]
    return addr  # a bare host, or a bare IPv6 address


_this_host: list[tuple[frozenset[str], frozenset[str]]] = []


def _names_and_addresses() -> tuple[frozenset[str], frozenset[str]]:
    """This host's names and the addresses its name resolves to (looked up once; the
    lookup is waited for 2 s, as a host without a resolver can stall on it: until it
    answers, only the host name itself counts)."""
    if _this_host:
        return _this_host[0]
    name = socket.gethostname().lower()

    def lookup() -> None:
        try:
            full, aliases, ips = socket.gethostbyname_ex(name)
        except OSError:
            full, aliases, ips = name, [], []
        _this_host[:] = [(frozenset({name, *(n.lower() for n in (full, *aliases))}),
                          frozenset(ips))]

    t = threading.Thread(target=lookup, name="flowrt-hostname", daemon=True)
    t.start()
    t.join(2.0)
    return _this_host[0] if _this_host else (frozenset({name}), frozenset())


def is_local_address(address: str) -> bool:
    """Whether a task address (``host:port``) is on this host: ``localhost``, a
    loopback address (127.0.0.0/8, ``::1``), the unspecified address, or one of this
    host's names or addresses. Other names are not resolved."""
    host = _host_of(address).lower()
    if host in ("", "localhost") or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host in _names_and_addresses()[0]
    if ip.is_loopback or ip.is_unspecified:
        return True
    _, addrs = _names_and_addresses()
    return str(ip) in addrs


def local_tasks(tasks: Mapping[tuple[str, int], str]) -> set[tuple[str, int]]:
    """The ``(job, task)`` keys of ``tasks`` (``{(job, task): address}``, a cluster's
    tasks) whose address is on this host."""
    return {key for key, address in tasks.items()
            if address is not None and is_local_address(str(address))}


# -- what this process is ---------------------------------------------------------------
class _State:
    """What the process has said about itself (guarded by ``lock``)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        #: token -> (the cluster's identity, the task served, the cluster's local tasks)
        self.served: dict[int, tuple[frozenset, tuple[str, int], frozenset]] = {}
        self.remote_client = False
        self.local_session = False
        self.override = 0
        self.listeners: list[Callable[[ThreadBudget], None]] = []
        #: the budget the listeners were last told (at first: a process alone, which
        #: needs no telling: nothing is changed until the process says otherwise)
        self.last = thread_budget(host_cores(), 0)


_state = _State()
_tokens = itertools.count(1)


def _processes_on_host() -> int:
    """1 + the local tasks of the served clusters that this process does not serve."""
    others: set[tuple[frozenset, tuple[str, int]]] = set()
    mine: set[tuple[frozenset, tuple[str, int]]] = set()
    for ident, task, local in _state.served.values():
        mine.add((ident, task))
        others.update((ident, t) for t in local)
    return 1 + len(others - mine)


def current() -> ThreadBudget:
    """The budget of this process now."""
    with _state.lock:
        return thread_budget(host_cores(),
                             _processes_on_host() if _state.served else 0,
                             _state.override,
                             client=_state.remote_client and not _state.local_session
                             and not _state.served)


def _changed(force: bool = False) -> ThreadBudget:
    """Recompute the budget and tell the listeners when it changed, or anyway with
    ``force`` (lock held)."""
    b = current()
    if force or b != _state.last:
        _state.last = b
        for fn in list(_state.listeners):
            fn(b)
    return b


def serve_task(tasks: Mapping[tuple[str, int], str], job: str, task: int,
               all_in_process: bool = False, override: int = 0) -> tuple[int, ThreadBudget]:
    """Say that this process serves task ``job``/``task`` of a cluster whose tasks are
    ``tasks`` (``{(job, task): address}``).

    :param all_in_process: every task of the cluster runs in this process (the
        ``inproc`` transport): none of them is another process
    :param override: the server's ``intra_op_parallelism_threads`` (0: none)
    :returns: a token for :func:`stop_serving`, and the budget now
    """
    ident = frozenset((k, str(v)) for k, v in tasks.items())
    local = frozenset() if all_in_process else frozenset(local_tasks(tasks))
    with _state.lock:
        token = next(_tokens)
        _state.served[token] = (ident, (job, int(task)), local)
        if override > 0:
            _state.override = int(override)
        return token, _changed()


def stop_serving(token: int) -> ThreadBudget:
    """Forget a task :func:`serve_task` registered (its server stopped)."""
    with _state.lock:
        _state.served.pop(token, None)
        return _changed()


def note_remote_client() -> ThreadBudget:
    """Say that this process drives steps run by servers (a remote session target)."""
    with _state.lock:
        _state.remote_client = True
        return _changed()


def note_local_session() -> ThreadBudget:
    """Say that this process runs steps on its own devices (a session with target
    ``""``): it keeps its share even if it also drives remote steps."""
    with _state.lock:
        _state.local_session = True
        return _changed()


def set_override(threads: int) -> ThreadBudget:
    """``intra_op_parallelism_threads`` (> 0) from a config: the process's budget from
    now on, whatever its role (applied again even when it is the same, as a config's
    setting is each time a worker discovers its devices with it)."""
    with _state.lock:
        if threads > 0:
            _state.override = int(threads)
        return _changed(force=threads > 0)


def subscribe(fn: Callable[[ThreadBudget], None]) -> None:
    """Call ``fn(budget)`` on every change of the budget (the thread's owner applies
    it); called at once when the budget is already other than a lone process's."""
    with _state.lock:
        _state.listeners.append(fn)
        if _state.last != thread_budget(host_cores(), 0):
            fn(_state.last)


@contextlib.contextmanager
def _isolated() -> Iterator[None]:
    """For tests: start from a process that has said nothing, and put back what it had
    said afterwards (the listeners are told both times)."""
    with _state.lock:
        saved = (dict(_state.served), _state.remote_client, _state.local_session,
                 _state.override)
        _state.served.clear()
        _state.remote_client = _state.local_session = False
        _state.override = 0
        _changed()
    try:
        yield
    finally:
        with _state.lock:
            _state.served.clear()
            _state.served.update(saved[0])
            _state.remote_client, _state.local_session, _state.override = saved[1:]
            _changed()
