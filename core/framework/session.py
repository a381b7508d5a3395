"""Client sessions (``tf.Session``): feeds, fetches and the per-signature fast path.

``Session(target)`` talks to a master: ``""`` creates a private in-process master and
worker for this session (as TF's direct session: state is not shared with other
sessions); ``"inproc://name"`` uses a named in-process master whose variables are
shared by every session on that target; other schemes (``grpc://``, ``zmq://``) are
resolved through transport plugins.
"""
from __future__ import annotations

import collections
import threading
import time
from typing import Any, Callable, Sequence

import numpy as np

from ..base import dtypes as _dt
from ..base import errors, host_budget
from ..base.device_spec import DeviceSpec
from .graph import Graph, Operation, Tensor, get_default_graph
from ..plugin.resources import VarRef
from ..plugin.runtime import default_runtime
from ..plugin.transport import parse_target
from ..distributed import security as _security

__all__ = ["Session", "InteractiveSession", "get_default_session", "BaseSession"]


# -- default session ------------------------------------------------------------------
class _Local(threading.local):
    def __init__(self) -> None:
        self.stack: list["BaseSession"] = []


_local = _Local()


def get_default_session() -> "BaseSession | None":
    """The innermost session entered with ``with sess.as_default()`` (or ``with sess``)."""
    return _local.stack[-1] if _local.stack else None


def _default_session_for(graph: Graph, session: Any) -> "BaseSession":
    s = session if session is not None else get_default_session()
    if s is None:
        raise ValueError("Cannot evaluate tensor using `eval()`: No default session is "
                         "registered. Use `with sess.as_default()` or pass an explicit "
                         "session to `eval(session=sess)`")
    if s.graph is not graph:
        raise ValueError("Cannot use the given session to evaluate tensor: the tensor's "
                         "graph is different from the session's graph.")
    return s


class _DefaultSession:
    def __init__(self, sess: "BaseSession"):
        self.sess = sess

    def __enter__(self) -> "BaseSession":
        _local.stack.append(self.sess)
        self._g = self.sess.graph.as_default()
        self._g.__enter__()
        return self.sess

    def __exit__(self, *exc: Any) -> None:
        self._g.__exit__(*exc)
        if _local.stack and _local.stack[-1] is self.sess:
            _local.stack.pop()


# -- fetch structures --------------------------------------------------------------------
class _Fetch:
    """Flattens a fetch structure into unique graph elements and rebuilds results."""

    __slots__ = ("elements", "build")

    def __init__(self, elements: list[Any], build: Callable[[list[Any]], Any]):
        self.elements = elements
        self.build = build


def _as_element(graph: Graph, f: Any) -> Any:
    if f is None:
        raise TypeError(f"Fetch argument None has invalid type {type(None)}")
    try:
        el = graph.as_graph_element(f, allow_tensor=True, allow_operation=True)
    except TypeError:
        raise TypeError(f"Fetch argument {f!r} has invalid type {type(f)}, must be a string "
                        "or Tensor. (Can not convert a " f"{type(f).__name__} into a Tensor or "
                        "Operation.)") from None
    except ValueError as e:
        raise ValueError(f"Fetch argument {f!r} cannot be interpreted as a Tensor. ({e})") \
            from None
    except KeyError as e:
        raise ValueError(f"Fetch argument {f!r} cannot be interpreted as a Tensor. "
                         f"({str(e).strip(chr(34))})") from None
    return el


def _make_fetch(graph: Graph, fetches: Any) -> _Fetch:
    """Flatten the fetch structure ``fetches`` (TF's ``_FetchMapper``) into a :class:`_Fetch`.

    Lists, tuples, namedtuples and mappings are walked recursively; each leaf becomes a
    graph element, listed once however often it is fetched.

    :returns: the elements to run, and a function rebuilding the structure from their
        values (an Operation's place holds None)
    :raises TypeError: for a leaf that is None or not a tensor, operation or name
    :raises ValueError: for a leaf that names no element of ``graph``
    """
    elements: list[Any] = []
    index: dict[Any, int] = {}

    def add(el: Any) -> int:
        i = index.get(el)
        if i is None:
            i = index[el] = len(elements)
            elements.append(el)
        return i

    def walk(f: Any) -> Callable[[list[Any]], Any]:
        """Register the leaves of ``f`` and return the function rebuilding ``f`` from values.

        The rebuilt structure keeps the type of ``f`` (a mapping that cannot be made
        from items comes back as a dict).
        """
        if isinstance(f, (list, tuple)) and not hasattr(f, "_as_graph_element"):
            subs = [walk(x) for x in f]
            if isinstance(f, tuple) and hasattr(f, "_fields"):
                t = type(f)
                return lambda v: t(*[s(v) for s in subs])
            if isinstance(f, tuple):
                return lambda v: tuple(s(v) for s in subs)
            return lambda v: [s(v) for s in subs]
        if isinstance(f, collections.abc.Mapping):
            keys = list(f.keys())
            subs = [walk(f[k]) for k in keys]
            t = type(f)

            def build_map(v: list[Any]) -> Any:
                items = [(k, s(v)) for k, s in zip(keys, subs)]
                if t is dict or t is collections.OrderedDict:
                    return t(items)
                try:
                    return t(items)
                except TypeError:
                    return dict(items)

            return build_map
        if hasattr(f, "_fetch_components") and not isinstance(f, (Tensor, Operation)):
            # a composite (SparseTensor, IndexedSlices): fetched as its component
            # tensors, rebuilt from their values by the object itself
            parts = [walk(c) for c in f._fetch_components()]
            rebuild = f._from_fetched
            return lambda v: rebuild([p(v) for p in parts])
        el = _as_element(graph, f)
        i = add(el)
        if isinstance(el, Operation):
            return lambda v: None
        return lambda v: v[i]

    build = walk(fetches)
    return _Fetch(elements, build)


def _expand_feeds(keys: tuple[Any, ...], values: list[Any] | None
                  ) -> tuple[tuple[Any, ...], list[Any]]:
    """Feed keys and values with each composite key (one with ``_feed_components``,
    such as a SparseTensor) replaced by its component tensors, and its value by
    ``key._split_feed(value)`` (as TF's feed expansions of SparseTensor). With
    ``values`` None only the keys are expanded."""
    if values is None:
        values = [None] * len(keys)
    if all(type(k) is Tensor or isinstance(k, str) or not hasattr(k, "_feed_components")
           for k in keys):
        return keys, values
    out_k: list[Any] = []
    out_v: list[Any] = []
    for k, v in zip(keys, values):
        if type(k) is not Tensor and hasattr(k, "_feed_components"):
            comps = k._feed_components()
            parts = k._split_feed(v) if v is not None else [None] * len(comps)
            if len(parts) != len(comps):
                raise ValueError(f"The value fed to {k!r} has {len(parts)} components, "
                                 f"{len(comps)} expected")
            out_k.extend(comps)
            out_v.extend(parts)
        else:
            out_k.append(k)
            out_v.append(v)
    return tuple(out_k), out_v


def _to_user(v: Any, runtime: Any = None) -> Any:
    """What ``run`` hands back: numpy values the caller owns. A device array (a GPU
    result) comes back through the ``to_host`` of the ``runtime``'s device type that
    :meth:`~flowrt.device.DeviceType.holds` it."""
    t = type(v)
    if t is np.ndarray:
        if v.ndim == 0:
            return v[()]
        if not v.flags.writeable:
            return v.copy()
        return v
    if t is VarRef:
        return _to_user(v.read(), runtime)
    if isinstance(v, (np.generic, bytes)) or v is None:
        return v
    dt = _holder(runtime, v)
    if dt is not None:
        return to_user_host(v, dt)
    return v


def _check_feed_shape(t: Any, shape: Any, s: tuple[int, ...]) -> None:
    dims = shape.as_tuple()
    if dims is not None:
        if len(s) != len(dims) or any(d is not None and d != x for d, x in zip(dims, s)):
            raise ValueError(f"Cannot feed value of shape {s} for Tensor "
                             f"'{t.name}', which has shape '{shape}'")


#: values never held by a device type: converted with numpy, no device type asked
_HOST_TYPES = (np.ndarray, np.generic, list, tuple, dict, int, float, complex, bool, str,
               bytes, type(None))


def _holder(runtime: Any, v: Any) -> Any:
    """The device type of ``runtime`` whose memory holds ``v`` (a GPU array fed or
    fetched: :meth:`~flowrt.device.DeviceType.holds`), or None for a host value. The
    device plugins decide; the session imports no device library."""
    if runtime is None or isinstance(v, _HOST_TYPES):
        return None
    for dt in runtime.device_types.values():
        if dt.holds(v):
            return dt
    return None


def to_user_host(v: Any, device_type: Any) -> Any:
    """A device array ``v`` as a host value the caller owns (0-d: a numpy scalar)."""
    h = device_type.to_host(v)
    return h[()] if getattr(h, "ndim", 1) == 0 else h


class _Signature:
    """A compiled (feeds, fetches, targets) signature on the client side."""

    __slots__ = ("cid", "feed_tensors", "feed_np", "feed_shapes", "fetch_index",
                 "feed_pick", "fetch_fed")

    def __init__(self) -> None:
        self.cid = 0
        self.feed_pick: list[int] | None = None
        #: (position in the fetches, index among the feeds) of fetches that are fed:
        #: as in TF, the step does not compute them; the caller gets the fed value
        self.fetch_fed: list[tuple[int, int]] = []


def _results(sig: _Signature, fetch: _Fetch, values: Sequence[Any],
             feed_values: Sequence[Any], args: Sequence[Any],
             runtime: Any = None) -> list[Any]:
    """The fetched values in fetch order: computed ones as :func:`_to_user` gives them,
    fed ones as TF 1.x returns them, ``np.asarray(fed value, dtype=<the tensor's numpy
    dtype>)`` (a fed ``tf.string`` comes back as the objects that were fed)."""
    out: list[Any] = [None] * len(fetch.elements)
    for pos, vi in sig.fetch_index:
        out[pos] = _to_user(values[vi], runtime)
    if sig.fetch_fed:
        if sig.feed_pick is not None:
            feed_values = [feed_values[i] for i in sig.feed_pick]
        for pos, fi in sig.fetch_fed:
            v, npd = feed_values[fi], sig.feed_np[fi]
            try:
                out[pos] = (_to_user(args[fi], runtime) if _holder(runtime, v) is not None
                            else np.asarray(v, dtype=npd))
            except (OverflowError, ValueError, TypeError):
                # numpy 2 refuses what TF's numpy wrapped (``[300]`` as int8): the value
                # as it was fed, converted the way the feed was
                out[pos] = args[fi].copy()
    return out


# -- sessions ---------------------------------------------------------------------------
class BaseSession:
    """The TF1 session interface; :class:`Session` is what users create."""

    def __init__(self, target: str = "", graph: Graph | None = None, config: Any = None,
                 runtime: Any = None):
        """Create a session on ``target``'s master for ``graph`` (default: the default graph).

        :param target: the master to connect to (``""``: in process)
        :param config: a ``tf.ConfigProto``
        :param runtime: the runtime to use (default: ``graph``'s)
        :raises TypeError: if ``graph``, ``config`` or ``target`` has the wrong type
        """
        if graph is None:
            graph = get_default_graph()
        if not isinstance(graph, Graph):
            raise TypeError(f"graph must be a tf.Graph, but got {type(graph)}")
        if config is not None and not hasattr(config, "device_count"):
            raise TypeError(f"config must be a tf.ConfigProto, but got {type(config)}")
        if not isinstance(target, str):
            if isinstance(target, bytes):
                target = target.decode()
            else:
                raise TypeError(f"target must be a string, but got {type(target)}")
        self._graph = graph
        self._target = target
        self._config = config
        self._runtime = runtime if runtime is not None else graph._runtime
        self._closed = False
        self._master = _master_for(self._runtime, target, config)
        self._handle = self._master.create_session(graph, config)
        self._msession = self._master.session(self._handle)
        self._sigs: dict[Any, _Signature] = {}
        self._fetch_cache: dict[Any, _Fetch] = {}
        self._default_ctx: list[_DefaultSession] = []
        self._lock = threading.Lock()

    # -- properties -------------------------------------------------------------------
    @property
    def graph(self) -> Graph:
        return self._graph

    @property
    def graph_def(self) -> Any:
        return self._graph.as_graph_def()

    @property
    def sess_str(self) -> str:
        return self._target

    @property
    def _closed_check(self) -> None:
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")

    def list_devices(self) -> list[Any]:
        """The devices this session can use (``_DeviceAttributes``-like records): those
        of the tasks its ``ConfigProto.device_filters`` admit."""
        devices = self._master.list_devices()
        filters = list(self._config.device_filters) if self._config is not None else []
        if filters:
            # the service layer is loaded by the first session, not by `import flowrt`
            from ..service.master import _matches

            def task_of(name: str) -> tuple[str, int]:
                sp = DeviceSpec.from_string(name)
                return sp.job or "", sp.task if sp.task is not None else 0

            devices = [d for d in devices if _matches(filters, *task_of(d[0]))]
        return [_DeviceAttributes(*d) for d in devices]

    def as_default(self) -> _DefaultSession:
        """``with sess.as_default():`` makes this the default session (and its graph the
        default graph) inside the block."""
        return _DefaultSession(self)

    def __enter__(self) -> "BaseSession":
        ctx = _DefaultSession(self)
        self._default_ctx.append(ctx)
        ctx.__enter__()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._default_ctx:
            self._default_ctx.pop().__exit__(exc_type, exc, tb)
        self.close()

    def close(self) -> None:
        """Release the session's resources on the master (idempotent)."""
        if not self._closed:
            self._closed = True
            try:
                self._master.close_session(self._handle)
            finally:
                self._sigs.clear()
                self._fetch_cache.clear()
                if self._target == "":
                    self._master.reset(None)

    def __del__(self) -> None:
        try:
            if not self._closed and self._target == "":
                self.close()
        except Exception:
            pass

    # -- run ----------------------------------------------------------------------------
    def run(self, fetches: Any, feed_dict: Any = None, options: Any = None,
            run_metadata: Any = None) -> Any:
        """Run the step that computes ``fetches`` given ``feed_dict``.

        :param fetches: a graph element (Tensor, Operation, Variable, or their names) or a
            nested list/tuple/namedtuple/dict of them; Operations give None
        :param feed_dict: ``{tensor or name: value}``; any feedable tensor may be fed
        :param options: a ``RunOptions``; ``trace_level`` >= SOFTWARE_TRACE records
            per-node timings into ``run_metadata.step_stats``
        :param run_metadata: a ``RunMetadata`` to fill
        :returns: numpy values in the structure of ``fetches``
        """
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        if self._graph.version == 0:
            raise RuntimeError("The Session graph is empty. Add operations to the graph "
                               "before calling run().")
        # A single Tensor/Operation fetch keeps its flattened form (the cache holds the
        # object, so its identity cannot be reused); structures are flattened each call,
        # since a caller may mutate a list or dict between runs.
        if type(fetches) is Tensor or type(fetches) is Operation:
            fetch = self._fetch_cache.get(fetches)
            if fetch is None:
                fetch = _make_fetch(self._graph, fetches)
                if len(self._fetch_cache) > 4096:
                    self._fetch_cache.clear()
                self._fetch_cache[fetches] = fetch
        else:
            fetch = _make_fetch(self._graph, fetches)
        if feed_dict:
            fkeys, fvals = _expand_feeds(tuple(feed_dict), list(feed_dict.values()))
        else:
            fkeys, fvals = (), []
        # keyed by content: graph elements hash by identity and the key holds them
        sig_key = (tuple(fetch.elements), fkeys)
        sig = self._sigs.get(sig_key)
        if sig is None:
            if len(self._sigs) > 4096:
                self._sigs.clear()
            sig = self._make_signature(fetch, fkeys)
            self._sigs[sig_key] = sig
        args = self._convert_feeds(sig, fvals)
        trace = options is not None and getattr(options, "trace_level", 0) > 0
        t_start = time.time()
        p0 = time.perf_counter()
        timeout_ms = getattr(options, "timeout_in_ms", 0) if options is not None else 0
        values, stats = self._msession.run_callable(sig.cid, args, trace, timeout_ms)
        if run_metadata is not None:
            if stats is not None:
                _fill_step_stats(run_metadata, stats, t_start, p0)
            if options is not None and getattr(options, "output_partition_graphs", False):
                run_metadata.partition_graphs.extend(self._msession.partition_graphs(sig.cid))
        return fetch.build(_results(sig, fetch, values, fvals, args, self._runtime))

    def _make_signature(self, fetch: _Fetch, feed_keys: tuple[Any, ...]) -> _Signature:
        """Compile the step that computes ``fetch`` given the feeds ``feed_keys``.

        A tensor fed under two keys takes the last value, and a fetched tensor that is also
        fed comes back as its fed value, as in TF.

        :returns: the signature, with the callable registered on the master session
        :raises TypeError: if a feed key is not a tensor of this graph
        :raises ValueError: if a fed tensor may not be fed
        """
        g = self._graph
        sig = _Signature()
        feeds: list[Tensor] = []
        for k in feed_keys:
            try:
                el = g.as_graph_element(k, allow_tensor=True, allow_operation=False)
            except (TypeError, KeyError, ValueError) as e:
                # TF turns every failure here into a TypeError (a tensor of another
                # graph included), keeping the lookup's message
                msg = e.args[0] if e.args else str(e)
                raise TypeError(f"Cannot interpret feed_dict key as Tensor: {msg}") from None
            if not g.is_feedable(el):
                raise ValueError(f"Tensor {el.name} may not be fed.")
            feeds.append(el)
        # the same tensor fed twice (by name and by object): the last value wins, as in TF
        last = {el: i for i, el in enumerate(feeds)}
        sig.feed_pick = None if len(last) == len(feeds) else sorted(last.values())
        if sig.feed_pick is not None:
            feeds = [feeds[i] for i in sig.feed_pick]
        fed = {el: i for i, el in enumerate(feeds)}
        sig.fetch_fed = [(pos, fed[e]) for pos, e in enumerate(fetch.elements)
                         if isinstance(e, Tensor) and e in fed]
        tensors = [e for e in fetch.elements if isinstance(e, Tensor) and e not in fed]
        ops = [e for e in fetch.elements if isinstance(e, Operation)]
        sig.cid = self._msession.make_callable([t.name for t in feeds],
                                               [t.name for t in tensors],
                                               [o.name for o in ops])
        sig.feed_tensors = feeds
        sig.feed_np = [t.dtype.base_dtype.np if t.dtype.is_numpy_compatible else None
                       for t in feeds]
        sig.feed_shapes = [t.shape for t in feeds]
        pos = {e: i for i, e in enumerate(fetch.elements)}
        sig.fetch_index = [(pos[t], i) for i, t in enumerate(tensors)]
        return sig

    def _convert_feeds(self, sig: _Signature, values: list[Any]) -> list[Any]:
        """Convert the feed values ``values`` to the arrays the signature ``sig`` feeds.

        Arrays are made read-only (a numpy array of the right dtype is viewed, not copied); a
        device array stays on its device; strings are encoded as bytes.

        :returns: one array per fed tensor
        :raises TypeError: if a value is a graph element, or does not fit the tensor's dtype
        :raises ValueError: if a value cannot be converted, or its shape is incompatible
        """
        if sig.feed_pick is not None:
            values = [values[i] for i in sig.feed_pick]
        args = []
        for t, npd, shape, v in zip(sig.feed_tensors, sig.feed_np, sig.feed_shapes, values):
            if type(v) is np.ndarray and v.dtype == npd:
                a = v.view()
            elif npd is not None and npd.kind != "O" and \
                    (holder := _holder(self._runtime, v)) is not None:
                a = holder.feed(v, npd)  # stays in GPU memory (DLPack: no copy)
                _check_feed_shape(t, shape, a.shape)
                args.append(a)
                continue
            else:
                if isinstance(v, (Tensor, Operation)) or hasattr(v, "_as_graph_element"):
                    raise TypeError(f"The value of a feed cannot be a tf.Tensor object. "
                                    f"Acceptable feed values include Python scalars, strings, "
                                    f"lists, numpy ndarrays, or TensorHandles. For reference, "
                                    f"the tensor object was {v} which was passed to the feed "
                                    f"with key {t}.")
                if npd is None or npd.kind == "O":
                    a = np.asarray(v, dtype=object)
                    # (str items become bytes; a feed already all bytes -- a batch of
                    # serialized records -- skips the per-item call)
                    if a.size and not set(map(type, a.reshape(-1).tolist())) <= {bytes}:
                        a = np.vectorize(lambda s: s.encode() if isinstance(s, str) else s,
                                         otypes=[object])(a)
                else:
                    try:
                        a = np.asarray(v, dtype=npd)
                    except OverflowError as e:
                        # TF refuses a lone Python int that does not fit, and wraps the
                        # elements of a list, as a C cast does
                        try:
                            if isinstance(v, int):
                                raise TypeError(v)
                            a = np.asarray(v).astype(npd)
                        except (OverflowError, ValueError, TypeError):
                            raise TypeError(f"Type of feed value {v!r} is not compatible "
                                            f"with Tensor type {t.dtype.base_dtype.name} "
                                            f"of tensor {t.name}: {e}") from None
                    except (ValueError, TypeError) as e:
                        raise ValueError(f"Cannot feed value {v!r} to tensor {t.name} of "
                                         f"dtype {t.dtype.base_dtype.name}: {e}") from None
                    if a is v:
                        a = a.view()
            _check_feed_shape(t, shape, a.shape)
            a.flags.writeable = False
            args.append(a)
        return args

    def make_callable(self, fetches: Any, feed_list: Sequence[Any] | None = None,
                      accept_options: bool = False) -> Callable[..., Any]:
        """A Python callable running this step: ``f(*feed_values)`` (TF1 semantics)."""
        fetch = _make_fetch(self._graph, fetches)
        keys = tuple(feed_list or ())
        flat_keys, _ = _expand_feeds(keys, None)
        sig = self._make_signature(fetch, flat_keys)
        msess = self._msession

        def call(*feed_values: Any, **kw: Any) -> Any:
            if len(feed_values) != len(keys):
                raise TypeError(f"the callable takes {len(keys)} feed values, got "
                                f"{len(feed_values)}")
            if self._closed:
                raise RuntimeError("Attempted to use a closed Session.")
            if len(flat_keys) != len(keys):
                feed_values = tuple(_expand_feeds(keys, list(feed_values))[1])
            opts = kw.get("options")
            trace = opts is not None and getattr(opts, "trace_level", 0) > 0
            t_start, p0 = time.time(), time.perf_counter()
            args = self._convert_feeds(sig, list(feed_values))
            timeout_ms = getattr(opts, "timeout_in_ms", 0) if opts is not None else 0
            values, stats = msess.run_callable(sig.cid, args, trace, timeout_ms)
            md = kw.get("run_metadata")
            if md is not None and stats is not None:
                _fill_step_stats(md, stats, t_start, p0)
            return fetch.build(_results(sig, fetch, values, feed_values, args,
                                        self._runtime))

        return call

    def placement(self, fetches: Any, feed_list: Sequence[Any] | None = None) -> dict[str, str]:
        """The device each node of the step ``(fetches, feeds)`` was placed on."""
        fetch = _make_fetch(self._graph, fetches)
        keys = tuple(feed_list or ())
        sig = self._make_signature(fetch, _expand_feeds(keys, None)[0])
        return self._msession.placement_of(sig.cid)

    @staticmethod
    def reset(target: str, containers: Sequence[str] | None = None, config: Any = None
              ) -> None:
        """Clear resource containers (all if None) on ``target``'s workers, closing its
        sessions. For ``""`` there is nothing to reset: each such session is private."""
        if not target:
            return
        _master_for(default_runtime(), target, config).reset(containers)


class Session(BaseSession):
    """``tf.Session(target='', graph=None, config=None)``."""


class InteractiveSession(BaseSession):
    """A session that installs itself as the default session on creation."""

    def __init__(self, target: str = "", graph: Graph | None = None, config: Any = None):
        super().__init__(target, graph, config)
        self._ctx = _DefaultSession(self)
        self._ctx.__enter__()

    def close(self) -> None:
        if not self._closed and getattr(self, "_ctx", None) is not None:
            self._ctx.__exit__(None, None, None)
            self._ctx = None
        super().close()


class _DeviceAttributes:
    __slots__ = ("name", "device_type", "memory_limit_bytes", "incarnation")

    def __init__(self, name: str, device_type: str, memory_limit: int, incarnation: int):
        self.name, self.device_type = name, device_type
        self.memory_limit_bytes, self.incarnation = memory_limit, incarnation

    def __repr__(self) -> str:
        return f"_DeviceAttributes({self.name}, {self.device_type}, {self.memory_limit_bytes})"


# -- masters by target ------------------------------------------------------------------
_named_lock = threading.Lock()


def _master_for(runtime: Any, target: str, config: Any) -> Any:
    """The master service (:class:`~flowrt.plugin.services.MasterService`) of a
    session target, from the transport of its scheme. ``""`` is the ``inproc``
    transport's private master: a master and worker of this session alone, called
    directly (arrays by reference), its worker's devices found with ``config``."""
    scheme, address = parse_target(target)
    if scheme == "":
        host_budget.note_local_session()  # runs kernels here: keeps its share of the host
        return runtime.transport("inproc").master_client("", config=config)
    if scheme != "inproc":
        host_budget.note_remote_client()  # steps run on servers: one BLAS thread here
    if scheme in _security.TLS_SCHEMES:  # grpcs://: grpc, with TLS required
        scheme, security = _security.transport_scheme(scheme, "default", target)
        return runtime.transport(scheme).master_client(address, security=security)
    return runtime.transport(scheme).master_client(address)


def _fill_step_stats(md: Any, stats: list[Any], t_start: float, p0: float) -> None:
    """Write the node timings ``stats`` into the ``RunMetadata`` ``md`` as ``step_stats``.

    Nodes are grouped by device. ``t_start`` (wall clock) and ``p0`` (``perf_counter``)
    were taken at the same moment, to turn the ``perf_counter`` times of ``stats``
    into wall-clock microseconds.
    """
    by_dev: dict[str, Any] = {}
    ss = md.step_stats
    for st in stats:
        ds = by_dev.get(st.device)
        if ds is None:
            ds = by_dev[st.device] = ss.dev_stats.add()
            ds.device = st.device
        ns = ds.node_stats.add()
        ns.node_name = st.node_name
        start_us = int((t_start + (st.start - p0)) * 1e6)
        dur = max(0, int(round((st.end - st.start) * 1e6)))
        ns.all_start_micros = start_us
        ns.op_start_rel_micros = 0
        ns.op_end_rel_micros = dur
        ns.all_end_rel_micros = dur
        ns.all_start_nanos = start_us * 1000
        ns.all_end_rel_nanos = int((st.end - st.start) * 1e9)
        ns.timeline_label = st.label or f"{st.node_name} = {st.op}()"
        ns.thread_id = st.thread_id & 0xffffffff
