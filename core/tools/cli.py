"""The ``flowrt`` command: ``flowrt plugins``, ``flowrt demo``, ``flowrt server``,
``flowrt keys`` and ``flowrt inspect``."""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from typing import Any, Sequence

from flowrt.base import errors, host_budget
from flowrt.distributed import rpc as _rpc
from flowrt.distributed import security as _security
from flowrt.distributed import server as _server
from flowrt.distributed.cluster import ClusterSpec, cluster_from_environment
from flowrt.distributed.security import TLS_SCHEMES
from flowrt.modeling.cluster_resolver import resolver_by_name
from flowrt.plugin.runtime import Runtime, default_runtime
from flowrt.proto.config_pb2 import ConfigProto
from flowrt.service import worker as _worker
from flowrt.tools.demo import run_demo
from flowrt.tools.inspect import inspect_path

__all__ = ["main"]


class _Schemes:
    """The transport schemes of the process's runtime (built-in and third-party), as
    the ``--protocol`` choices: read when argparse first needs them (a ``--protocol``
    to check, ``--help``), so that ``flowrt inspect`` loads no plugin."""

    def _names(self) -> list[str]:
        names = set(default_runtime().transports)
        # "grpcs": grpc with TLS required (security.TLS_SCHEMES)
        names.update(alias for alias, base in TLS_SCHEMES.items() if base in names)
        return sorted(names)

    def __contains__(self, scheme: object) -> bool:
        return scheme in self._names()

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())


def _cmd_plugins(args: argparse.Namespace) -> int:
    """``flowrt plugins``: print each plugin's status, distribution and what it
    provides, then the device types (with the devices each finds here), the transports,
    the graph passes, how many ops, kernels and gradients there are, and the API the
    core needs that no plugin provides. Returns the exit status, 0."""

    rt = Runtime()
    infos = rt.describe()
    print(f"{'plugin':<12} {'status':<9} {'distribution':<28} provides")
    for p in sorted(infos, key=lambda p: (not p.builtin, p.name)):
        dist = f"{p.distribution or '-'} {p.version or ''}".strip()
        prov = "; ".join(f"{k}: {', '.join(v[:6])}{' ...' if len(v) > 6 else ''} "
                         f"({len(v)})" if k == "ops" else f"{k}: {', '.join(v)}"
                         for k, v in p.provides.items())
        print(f"{p.name:<12} {p.status:<9} {dist:<28} {prov}")
        if p.error:
            print(f"{'':<12} error: {p.error}")
        for note in p.notes:
            print(f"{'':<12} note: {note}")
    print()
    print("device types:")
    for name, dt in sorted(rt.device_types.items()):
        try:
            devs = dt.discover(None, "localhost", 0)
        except Exception as e:  # discovery is reported, never fatal
            devs, dt.unavailable_reason = [], f"{type(e).__name__}: {e}"
        state = f"{len(devs)} device(s)" if devs else f"no devices ({dt.unavailable_reason})"
        print(f"  {name:<8} from {dt.plugin:<10} priority {dt.priority:<4} {state}")
    print("transports:", ", ".join(f"{s} ({t.plugin})" for s, t in sorted(rt.transports.items())))
    print("graph passes:", ", ".join(p.name for p in rt.graph_passes) or "none")
    print(f"ops: {len(rt.op_defs)}  kernels: {len(rt.kernels)}  gradients: "
          f"{sum(1 for g in rt.gradients.values() if g is not None)}")
    missing = rt.missing_required_api()
    if missing:
        print(f"missing API the core needs ({len(missing)}): {', '.join(missing[:8])}"
              f"{' ...' if len(missing) > 8 else ''}")
    print(_threads_line(host_budget.current()))
    return 0


def _threads_line(budget: host_budget.ThreadBudget) -> str:
    """``threads: N (why); BLAS: library version at K threads`` for ``flowrt plugins``
    and ``flowrt server``: the process's thread budget and what BLAS runs with now."""
    try:
        import threadpoolctl  # optional: the BLAS part is left out without it
        libs = threadpoolctl.threadpool_info()
    except ImportError:
        libs = []
    blas = ", ".join(f"{i.get('internal_api')} {i.get('version') or ''} at "
                     f"{i.get('num_threads')} thread(s)".replace("  ", " ")
                     for i in libs if i.get("user_api") == "blas")
    return f"threads: {budget.threads} ({budget.reason}); BLAS: {blas or 'not found'}"


def _cmd_demo(args: argparse.Namespace) -> int:

    return run_demo(steps=args.steps, out_dir=args.out, protocol=args.protocol,
                    workers=args.workers)


def _cmd_server(args: argparse.Namespace) -> int:
    """Run one task of a cluster until the cluster is shut down (or SIGTERM/SIGINT)."""


    try:
        resolver = None
        if args.resolver:
            if args.cluster:
                raise ValueError("give --cluster or --resolver, not both")
            resolver = resolver_by_name(args.resolver, **_resolver_options(args))
            cluster, job, task = resolver, None, None
        elif args.cluster:
            with open(args.cluster, encoding="utf-8") as f:
                text = f.read()
            try:
                spec_json = json.loads(text)
            except json.JSONDecodeError as e:
                raise ValueError(f"{args.cluster} is not valid JSON: {e}") from None
            if isinstance(spec_json, dict) and "cluster" in spec_json:
                cluster, job, task = cluster_from_environment(text)
            else:
                cluster, job, task = ClusterSpec(spec_json), None, None
        else:
            cluster, job, task = cluster_from_environment()
        job = args.job or job
        task = args.task if args.task is not None else task
        if resolver is not None:
            job = job or resolver.task_type
            task = task if task is not None else resolver.task_id
        if job is None:
            raise ValueError("say which task this is: --job and --task (or a \"task\" in "
                             "the FLOWRT_CONFIG JSON, or one the resolver finds)")
        config = None
        if args.intra_op_threads is not None or args.gpus is not None:

            config = ConfigProto()
            if args.intra_op_threads is not None:
                config.intra_op_parallelism_threads = args.intra_op_threads
            if args.gpus is not None:
                if args.gpus < 0:
                    raise ValueError(f"--gpus must be >= 0, got {args.gpus}")
                config.device_count["GPU"] = args.gpus
        roots = (args.file_root or [os.getcwd()]) + \
            ([args.checkpoint_dir] if args.checkpoint_dir else [])
        server = _server.Server(cluster, job_name=job, task_index=task or 0,
                        protocol=args.protocol, config=config,
                        health_check_period=args.health_check_period,
                        session_gc_seconds=args.session_gc_seconds, start=False,
                        file_roots=roots, security=_server_security(args))
        server.worker.devices  # discover now: the config applies before any step
        if args.max_message_bytes is not None:
            if not hasattr(server.transport, "max_message_bytes"):
                raise ValueError(f"--max-message-bytes: the {server.protocol} transport has "
                                 "no message size limit")
            server.transport.max_message_bytes = int(args.max_message_bytes)
        _apply_bounds(args, server)
        server.start()
    except (OSError, ValueError, TypeError, RuntimeError, errors.OpError) as e:
        print(f"flowrt server: {getattr(e, 'message', None) or e}", file=sys.stderr)
        return 2
    # the handler only records the signal: stopping happens on the main loop below
    signalled: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _frame: signalled.append(signum))
    print(f"flowrt server: /job:{server.job_name}/task:{server.task_index} serving "
          f"{server.target}", flush=True)
    print(f"flowrt server: {_threads_line(host_budget.current())}", flush=True)
    print(f"flowrt server: file ops may touch {', '.join(server.file_policy.roots)}",
          flush=True)
    print(f"flowrt server: security: {_security_line(server)}", flush=True)
    try:
        while not server.join(0.2):
            if signalled:
                server.shutdown_reason = "SIGTERM"
                server.stop()
    except KeyboardInterrupt:
        server.shutdown_reason = "interrupted"
        server.stop()
    print(f"flowrt server: stopped ({server.shutdown_reason or 'stop'})", flush=True)
    return 0


def _apply_bounds(args: argparse.Namespace, server: Any) -> None:
    """The server's bounds on pending work from its flags (docs/distributed.md, "Bounds
    on servers and deadlines on clients"); the process serves one task, so they are set
    for the process.

    :raises ValueError: for a negative or zero bound"""
    for flag, value in (("--max-pending", args.max_pending),
                        ("--max-pending-per-peer", args.max_pending_per_peer),
                        ("--unknown-step-s", args.unknown_step_s)):
        if value is not None and value <= 0:
            raise ValueError(f"{flag} must be > 0, got {value}")
    if args.max_pending is not None:
        _rpc.ServiceHandler.max_pending = int(args.max_pending)
    if args.max_pending_per_peer is not None:
        _rpc.ServiceHandler.max_pending_per_peer = int(args.max_pending_per_peer)
    if args.unknown_step_s is not None:
        _worker.UNKNOWN_STEP_S = float(args.unknown_step_s)
    if args.grpc_max_streams is not None:
        if not hasattr(server.transport, "max_streams"):
            raise ValueError(f"--grpc-max-streams: the {server.protocol} transport is not "
                             "grpc")
        if args.grpc_max_streams < 0:
            raise ValueError(f"--grpc-max-streams must be >= 0, got {args.grpc_max_streams}")
        server.transport.max_streams = int(args.grpc_max_streams)


#: the server's security flags and the SecurityConfig argument each fills
_SECURITY_FLAGS = {"token_file": "token_file", "admin_token_file": "admin_token_file",
                   "tls_cert": "tls_cert", "tls_key": "tls_key", "tls_ca": "tls_ca",
                   "curve_secret_key": "curve_secret_key",
                   "curve_public_keys": "curve_public_keys"}


def _server_security(args: argparse.Namespace) -> "_security.SecurityConfig | None":
    """The server's security config: its flags, over the ``FLOWRT_*`` variables."""
    kw = {a: os.environ[v] for a, v in _security.ENV.items() if os.environ.get(v)}
    kw.update({a: getattr(args, f) for f, a in _SECURITY_FLAGS.items()
               if getattr(args, f) is not None})
    return _security.SecurityConfig(**kw) if kw else None


def _security_line(server: "_server.Server") -> str:
    """What protects the server's port, or a warning that nothing does."""
    sec = server.security
    on = [n for n, v in (("cluster token", sec and sec.token), ("admin token", sec and
          sec.admin_token), ("TLS", sec and sec.tls), ("CURVE", sec and sec.curve)) if v]
    if on:
        return ", ".join(on)
    return ("NONE: anyone who can reach this port controls the task (see "
            "docs/distributed.md, Security)")


def _cmd_keys(args: argparse.Namespace) -> int:
    """``flowrt keys DIR``: write a development cluster's tokens, TLS certificates and
    CURVE keys (:func:`flowrt.distributed.security.make_dev_keys`)."""
    try:
        paths = _security.make_dev_keys(args.dir, args.host or (), tls=not args.no_tls,
                                        curve=not args.no_curve, days=args.days)
    except (OSError, RuntimeError, ValueError) as e:
        print(f"flowrt keys: {e}", file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    return 0


def _resolver_options(args: argparse.Namespace) -> dict[str, object]:
    """``--resolver-option KEY=VALUE`` as keyword arguments: VALUE as JSON when it
    parses (numbers, objects), else as a string."""
    out: dict[str, object] = {}
    for item in args.resolver_option or ():
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ValueError(f"--resolver-option wants KEY=VALUE, got {item!r}")
        try:
            out[key.replace("-", "_")] = json.loads(value)
        except json.JSONDecodeError:
            out[key.replace("-", "_")] = value
    return out


def _cmd_inspect(args: argparse.Namespace) -> int:
    """``flowrt inspect PATH``: print a checkpoint's variables, a SavedModel's signatures
    or a graph file's ops; 1 with the error on stderr when PATH is none of them."""
    try:
        inspect_path(args.path, sys.stdout, tensor=args.tensor)
    except (OSError, ValueError, errors.OpError) as e:
        print(f"flowrt inspect: {getattr(e, 'message', None) or e}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``flowrt`` console script."""
    p = argparse.ArgumentParser(prog="flowrt", description="flowrt dataflow runtime")
    sub = p.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("plugins", help="list plugins: what was found, from where, what failed")
    sp.set_defaults(fn=_cmd_plugins)
    sd = sub.add_parser("demo", help="train the demo model on a ps and workers cluster",
                        description="Start a parameter server and --workers workers and "
                        "train a small MLP by between-graph asynchronous replication. "
                        "inproc keeps everything in this process; grpc and zmq start every "
                        "server and every worker's client as a process of its own.")
    sd.add_argument("--protocol", choices=_Schemes(), default="inproc",
                    help="transport between the tasks, one of the runtime's: "
                    "%(choices)s (default: inproc)")
    sd.add_argument("--workers", type=int, default=2, help="worker tasks (default: 2)")
    sd.add_argument("--steps", type=int, default=200,
                    help="training steps per worker (default: 200)")
    sd.add_argument("--out", metavar="DIR", default=".",
                    help="directory for the traced step's timeline (Chrome trace JSON) "
                         "and graph (Graphviz DOT); default: the current directory")
    sd.set_defaults(fn=_cmd_demo)
    sv = sub.add_parser("server", help="run one task of a cluster (ps or worker)",
                        description="Serve one task of a cluster. The cluster comes from "
                        "--cluster (a JSON file: {job: [host:port, ...]}, or a "
                        "TF_CONFIG-shaped object) or from the FLOWRT_CONFIG environment "
                        "variable ({\"cluster\": {...}, \"task\": {\"type\": \"worker\", "
                        "\"index\": 0}}), or from a scheduler (--resolver). Runs until the "
                        "cluster is shut down (flowrt.train.shutdown_cluster) or the "
                        "process gets SIGTERM.")
    sv.add_argument("--cluster", metavar="FILE", help="cluster JSON file")
    sv.add_argument("--job", help="this task's job name")
    sv.add_argument("--task", type=int, help="this task's index")
    sv.add_argument("--resolver", choices=("tf_config", "slurm", "kubernetes"),
                    help="take the cluster and this task from a cluster resolver: the "
                    "TF_CONFIG variable, the Slurm step, or Kubernetes headless services "
                    "(FLOWRT_K8S_SERVICES); see docs/distributed.md")
    sv.add_argument("--resolver-option", action="append", metavar="KEY=VALUE",
                    help="a keyword argument of the resolver, VALUE as JSON if it parses: "
                    "jobs='{\"ps\": 1, \"worker\": 3}', port_base=8888 (repeatable)")
    sv.add_argument("--protocol", choices=_Schemes(), default=None,
                    help="the transport serving this task, one of the runtime's: "
                    "%(choices)s (default: the resolver's rpc layer, else grpc)")
    sv.add_argument("--file-root", action="append", metavar="DIR",
                    help="a directory the file ops of clients' graphs (checkpoints, "
                    "read_file, readers ...) may touch (repeatable); default: the "
                    "working directory; --file-root / allows every path")
    sv.add_argument("--checkpoint-dir", metavar="DIR",
                    help="where checkpoints of this task go: added to the file roots")
    sv.add_argument("--health-check-period", type=float, default=None,
                    help="seconds between health checks of the other tasks (default 1)")
    sv.add_argument("--max-pending", type=int, default=None, metavar="N",
                    help="requests this task runs at once on threads that may block; "
                    "beyond: ResourceExhaustedError (default 1024, FLOWRT_MAX_PENDING)")
    sv.add_argument("--max-pending-per-peer", type=int, default=None, metavar="N",
                    help="the same per peer address (default 256, "
                    "FLOWRT_MAX_PENDING_PER_PEER)")
    sv.add_argument("--unknown-step-s", type=float, default=None, metavar="S",
                    help="how long a receive waits for a step this task does not know "
                    "before AbortedError (default 10, FLOWRT_UNKNOWN_STEP_S)")
    sv.add_argument("--grpc-max-streams", type=int, default=None, metavar="N",
                    help="grpc streams open at once, each holding a thread; beyond: "
                    "refused (default 4096, FLOWRT_GRPC_MAX_STREAMS; 0: no limit)")
    sv.add_argument("--max-message-bytes", type=int, default=None,
                    help="refuse messages larger than this (default: the transport's, "
                    "4 GiB)")
    sv.add_argument("--intra-op-threads", type=int, default=None, metavar="N",
                    help="threads numpy's BLAS and the intra-op pool use in this "
                    "process (ConfigProto.intra_op_parallelism_threads); default: the "
                    "cores shared among the cluster's tasks on this host")
    sv.add_argument("--session-gc-seconds", type=float, default=None, metavar="S",
                    help="close sessions unused for S seconds with no step running "
                    "(left by clients that died); default: never")
    sv.add_argument("--gpus", type=int, default=None, metavar="N",
                    help="use at most N GPUs (ConfigProto.device_count['GPU']); 0 for a "
                    "parameter server that must not touch the GPUs")
    for flag, what in (("--token-file", "the cluster token every request must carry"),
                       ("--admin-token-file", "the admin token shutdown and reset need"),
                       ("--tls-cert", "grpc: this server's PEM certificate (mutual TLS)"),
                       ("--tls-key", "grpc: the certificate's PEM private key"),
                       ("--tls-ca", "grpc: the cluster CA's PEM certificate"),
                       ("--curve-secret-key", "zmq: the servers' CURVE keypair file")):
        sv.add_argument(flag, metavar="FILE", help=f"{what} (default: "
                        f"${_security.ENV[flag[2:].replace('-', '_')]})")
    sv.add_argument("--curve-public-keys", metavar="DIR", help="zmq: the client public "
                    "keys (*.key) to accept (default: $FLOWRT_CURVE_PUBLIC_KEYS)")
    sv.set_defaults(fn=_cmd_server)
    sk = sub.add_parser("keys", help="make a development cluster's tokens and keys",
                        description="Write into DIR: token and admin-token (random, mode "
                        "0600); a CA, server and client TLS certificates (needs the "
                        "'security' extra); CURVE keypairs for zmq in DIR/curve. For "
                        "development and tests: use your own CA in production.")
    sk.add_argument("dir", metavar="DIR")
    sk.add_argument("--host", action="append", metavar="NAME",
                    help="a host name or address the server certificate also covers "
                    "(repeatable; 127.0.0.1 and localhost always)")
    sk.add_argument("--no-tls", action="store_true", help="no TLS certificates")
    sk.add_argument("--no-curve", action="store_true", help="no CURVE keys")
    sk.add_argument("--days", type=int, default=365, help="certificate lifetime")
    sk.set_defaults(fn=_cmd_keys)
    si = sub.add_parser("inspect", help="show a checkpoint, SavedModel or graph file",
                        description="Print what PATH holds: a checkpoint (prefix, .index, "
                        "or a directory with a checkpoint state file): its variables with "
                        "dtype and shape; a SavedModel directory: its tag sets and each "
                        "signature's inputs and outputs; a GraphDef (.pb, .pbtxt) or "
                        "MetaGraphDef (.meta): its op types with counts, placeholders and "
                        "outputs.")
    si.add_argument("path", metavar="PATH", help="checkpoint, SavedModel or graph file")
    si.add_argument("--tensor", metavar="NAME", default=None,
                    help="print this tensor's value (checkpoints and SavedModels)")
    si.set_defaults(fn=_cmd_inspect)
    args = p.parse_args(argv)
    return int(args.fn(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
