"""Helpers of the executor-path x kernel-kind x placement-context matrix
(tests/test_matrix.py): the kernel kinds and contexts as graph builders with numpy
models of the same computation, a program that puts them together, and a probe that
records which scheduler each compiled partition (``Executor``) and each step actually
took, so that a cell can assert its intended path was taken."""
from __future__ import annotations

import collections
import contextlib
import uuid
from typing import Any, Callable

import numpy as np

import flowrt as tf

STEPS = 3  # steps per cell: each feeds a different input; state carries across them

#: the scope of the kernel under test: executors holding a node with it in its name are
#: the ones whose path a cell asserts
KUT = "kut"


# -- kernel kinds: a graph builder and its numpy model -----------------------------------
class Kind:
    """A kernel kind: ``apply(a)`` in the graph and ``model(a)`` in numpy compute the same
    value of the same dtype and shape, so either can be a loop body."""

    name = ""
    dtype: Any = None
    shape: tuple[int, ...] = ()
    exact = True
    #: needs ``inter_op_parallelism_threads=2`` (the inter-op pool)
    pool = False

    def feed(self, step: int) -> np.ndarray:
        raise NotImplementedError

    def make_state(self) -> None:
        """Build the kind's state (on the current device): variables, queues."""

    def apply(self, a: Any) -> Any:
        raise NotImplementedError

    # numpy side
    def reset_model(self) -> None:
        """Start the model's state over (a fresh session)."""

    def model(self, a: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    # the state read back after the steps, and the model's value of it
    def state_tensors(self) -> list[Any]:
        return []

    def state_expected(self) -> list[Any]:
        return []


class Cheap(Kind):
    """Cheap elementwise arithmetic (Mul, AddV2)."""

    name, dtype, shape, exact = "cheap", np.float32, (2, 3), False

    def feed(self, step):
        return (np.arange(6, dtype=np.float32).reshape(2, 3) / 4 + step).astype(np.float32)

    def apply(self, a):
        return tf.add(tf.multiply(a, 0.5), 1.0)

    def model(self, a):
        return a * np.float32(0.5) + np.float32(1.0)


_M1 = np.array([[0.5, -0.25], [0.25, 0.5]], np.float32)
_M2 = np.array([[0.25, 0.0], [0.125, -0.25]], np.float32)


class Blas(Kind):
    """One MatMul (an "expensive" kernel), default inter-op threads: no pool."""

    name, dtype, shape, exact = "blas", np.float32, (2, 2), False

    def feed(self, step):
        return np.array([[1.0, 2.0], [3.0, -1.0]], np.float32) + step

    def apply(self, a):
        return tf.matmul(a, tf.constant(_M1))

    def model(self, a):
        return a @ _M1


class BlasPool(Blas):
    """Two independent MatMuls (ready together) with ``inter_op_parallelism_threads=2``:
    the executor's ``use_pool`` is on and one of them runs on the inter-op pool."""

    name, pool = "blas_pool", True

    def apply(self, a):
        return tf.add(tf.matmul(a, tf.constant(_M1)), tf.matmul(a, tf.constant(_M2)))

    def model(self, a):
        return a @ _M1 + a @ _M2


class Async(Kind):
    """FIFOQueue enqueue then dequeue (asynchronous kernels: they complete through a
    callback)."""

    name, dtype, shape, exact = "async", np.float32, (2, 3), False

    def feed(self, step):
        return (np.arange(6, dtype=np.float32).reshape(2, 3) - step).astype(np.float32)

    def make_state(self):
        self.q = tf.FIFOQueue(2, tf.float32, shapes=[self.shape], name="q")

    def apply(self, a):
        a2 = tf.multiply(a, 2.0)
        # (TF 1.15's placer puts an op that takes the queue's handle on the queue's
        # device whatever device scope it was made in; flowrt's raises on the conflict,
        # so the queue ops are colocated with the queue explicitly)
        with tf.colocate_with(self.q.queue_ref):
            enq = self.q.enqueue(a2)
            with tf.control_dependencies([enq]):
                d = self.q.dequeue()
        return tf.add(d, 1.0)

    def model(self, a):
        return a * np.float32(2.0) + np.float32(1.0)

    def state_tensors(self):
        return [self.q.size()]

    def state_expected(self):
        return [np.int32(0)]  # every element put was taken


class Stateful(Kind):
    """AssignAdd on a tf.Variable (int32, so exact): its value carries across steps."""

    name, dtype, shape, exact = "stateful", np.int32, (2, 3), True

    def feed(self, step):
        return np.arange(6, dtype=np.int32).reshape(2, 3) + step

    def make_state(self):
        self.v = tf.Variable(np.zeros(self.shape, np.int32), name="v")

    def apply(self, a):
        return tf.multiply(tf.assign_add(self.v, a), 1)  # (reads the updated value)

    def reset_model(self):
        self.mv = np.zeros(self.shape, np.int32)

    def model(self, a):
        self.mv = self.mv + a
        return self.mv.copy()

    def state_tensors(self):
        return [self.v]

    def state_expected(self):
        return [self.mv.copy()]


class String(Kind):
    """String tensors: ReverseV2 and string AddV2 (concatenation). flowrt has no
    tf.strings ops (StringJoin, AsString, Substr); these are the kernels that take
    strings."""

    name, dtype, shape, exact = "string", object, (3,), True

    def feed(self, step):
        return np.array([b"a%d" % step, b"b", b"c"], object)

    suffixes = (b".", b"-", b"+")  # (so that reversing twice does not cancel out)

    def apply(self, a):
        return tf.add(tf.reverse(a, [0]), tf.constant(np.array(self.suffixes, object)))

    def model(self, a):
        return np.array([s + t for s, t in zip(a[::-1], self.suffixes)], object)


KINDS: dict[str, type[Kind]] = {k.name: k for k in (Cheap, Blas, BlasPool, Async, Stateful,
                                                    String)}


# -- placement contexts ------------------------------------------------------------------
def _pred(step: int) -> bool:
    return step % 2 == 0  # cond cells: the true branch, then the false one, then true


def _ctx_top(k, x, p):
    return k(x)


def _model_top(k, x, p):
    return k(x)


def _ctx_cond(k, x, p):
    return tf.cond(p, lambda: k(x), lambda: tf.identity(x))


def _model_cond(k, x, p):
    return k(x) if p else x


def _ctx_while(k, x, p):
    return tf.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, k(a)),
                         [tf.constant(0), x])[1]


def _model_while(k, x, p):
    for _ in range(3):
        x = k(x)
    return x


def _ctx_cond_in_while(k, x, p):
    def body(i, a):
        return i + 1, tf.cond(tf.equal(tf.mod(i, 2), 0), lambda: k(a), lambda: tf.identity(a))

    return tf.while_loop(lambda i, a: i < 3, body, [tf.constant(0), x])[1]


def _model_cond_in_while(k, x, p):
    for i in range(3):
        x = k(x) if i % 2 == 0 else x
    return x


def _ctx_while_in_while(k, x, p):
    def inner(a):
        return tf.while_loop(lambda j, b: j < 2, lambda j, b: (j + 1, k(b)),
                             [tf.constant(0), a])[1]

    return tf.while_loop(lambda i, a: i < 2, lambda i, a: (i + 1, inner(a)),
                         [tf.constant(0), x])[1]


def _model_while_in_while(k, x, p):
    for _ in range(4):
        x = k(x)
    return x


def _ctx_while_in_cond(k, x, p):
    def loop():
        return tf.while_loop(lambda i, a: i < 2, lambda i, a: (i + 1, k(a)),
                             [tf.constant(0), x])[1]

    return tf.cond(p, loop, lambda: tf.identity(x))


def _model_while_in_cond(k, x, p):
    return k(k(x)) if p else x


#: context -> (graph builder, numpy model, whether it is fed a predicate)
CONTEXTS: dict[str, tuple[Callable, Callable, bool]] = {
    "top": (_ctx_top, _model_top, False),
    "cond": (_ctx_cond, _model_cond, True),
    "while": (_ctx_while, _model_while, False),
    "cond_in_while": (_ctx_cond_in_while, _model_cond_in_while, False),
    "while_in_while": (_ctx_while_in_while, _model_while_in_while, False),
    "while_in_cond": (_ctx_while_in_cond, _model_while_in_cond, True),
    # across two devices (see Program): at top level, the kernel on another device than
    # its source and sink; in a cond or a loop, on another device than the control flow
    "two_devices": (_ctx_top, _model_top, False),
    "cond_two_devices": (_ctx_cond, _model_cond, True),
    "while_two_devices": (_ctx_while, _model_while, False),
}
LOOPS = frozenset({"while", "cond_in_while", "while_in_while", "while_in_cond",
                   "while_two_devices"})
CONDS = frozenset({"cond", "cond_in_while", "while_in_cond", "cond_two_devices"})
TWO_DEVICES = frozenset({"two_devices", "cond_two_devices", "while_two_devices"})


# -- a program ---------------------------------------------------------------------------
class Program:
    """The cell's TF1 program, its pieces on three devices (None: unspecified):

    - ``src``: ``x = identity(feed)``, the kind's state (variable, queue; the ops that
      use it go with it) and ``out = identity(y)``, which is fetched;
    - ``ctl``: the context's control flow (predicate, Switch/Merge, loop counters);
    - ``ker``: the kernel under test, ``y = kind(x)`` inside the context.

    ``force`` adds, on every device of the program, a side ``tf.cond`` ("cond": dead
    tensors) or a side ``tf.while_loop`` ("loop": frames) whose value is fetched too."""

    def __init__(self, kind: str, ctx: str, src: str | None = None, ctl: str | None = None,
                 ker: str | None = None, force: str | None = None):
        self.kind = KINDS[kind]()
        self.ctx = ctx
        build, self._model, fed_pred = CONTEXTS[ctx]
        self.graph = g = tf.Graph()
        self.side: list[tuple[Any, Any]] = []
        with g.as_default(), tf.name_scope(f"m{uuid.uuid4().hex[:10]}"):
            with _device(src):
                self.x_in = tf.placeholder(self.kind.dtype if self.kind.dtype is not object
                                           else tf.string, self.kind.shape, name="x_in")
                x = tf.identity(self.x_in, name="src")
                self.kind.make_state()
                self.state = self.kind.state_tensors()
            with _device(ctl):
                self.p = tf.placeholder(tf.bool, [], name="p") if fed_pred else None

                def k(a):
                    with _device(ker), tf.name_scope(KUT):
                        return self.kind.apply(a)

                y = build(k, x, self.p)
            with _device(src):
                self.out = tf.identity(y, name="sink")
            self.side_p = None
            if force is not None:
                self.side_p = tf.placeholder(tf.bool, [], name="side_p")
                for d in dict.fromkeys([src, ctl, ker]):
                    with _device(d):
                        if force == "cond":
                            s = tf.cond(self.side_p, lambda: tf.constant(1),
                                        lambda: tf.constant(2))
                            self.side.append((s, 1))
                        else:
                            s = tf.while_loop(lambda i: i < 2, lambda i: i + 1,
                                              [tf.constant(0)])
                            self.side.append((s, 2))
            self.init = tf.global_variables_initializer()

    def feeds(self, step: int) -> dict[Any, Any]:
        f = {self.x_in: self.kind.feed(step)}
        if self.p is not None:
            f[self.p] = _pred(step)
        if self.side_p is not None:
            f[self.side_p] = True
        return f

    def fetches(self) -> list[Any]:
        return [self.out] + [s for s, _ in self.side]

    def expected(self) -> list[np.ndarray]:
        """The numpy model's ``out`` for each of the :data:`STEPS` steps."""
        self.kind.reset_model()
        return [self._model(self.kind.model, self.kind.feed(s), _pred(s))
                for s in range(STEPS)]

    def expected_state(self) -> list[Any]:
        """The model's state after :meth:`expected`."""
        return self.kind.state_expected()

    def run(self, target: str = "", config: Any = None, probe: "Probe | None" = None
            ) -> tuple[list[Any], list[Any]]:
        """Run the program's steps in a fresh session; returns the ``out`` values per
        step and the state read back after them. The probe (if any) records only the
        program's steps."""
        with tf.Session(target, graph=self.graph, config=config) as sess:
            sess.run(self.init)
            outs = []
            with probe.recording() if probe is not None else contextlib.nullcontext():
                for s in range(STEPS):
                    got = sess.run(self.fetches(), self.feeds(s))
                    outs.append(got[0])
                    for (t, want), v in zip(self.side, got[1:]):
                        assert v == want, f"side value of {t.name}: {v} != {want}"
            state = sess.run(self.state) if self.state else []
        return outs, state


def _device(d: str | None) -> Any:
    return tf.device(d) if d is not None else contextlib.nullcontext()


def assert_same(kind: Kind, got: Any, want: Any, what: str) -> None:
    """Same shape and dtype; equal values (ints, strings) or close ones (floats)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if kind.exact:
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=what)


# -- the probe -----------------------------------------------------------------------------
class Probe:
    """Records, while :meth:`recording`, every partition run (the executor and the
    scheduler it took: ``straight``, ``ready`` (the straight-line variant whose receives
    are already there), ``dataflow`` or ``frames``), every expensive kernel run on the
    inter-op pool, every step the master ran over several tasks (``workers``) or
    staged (``staged``), and every call made through a network transport's client
    (``rpcs``, by method)."""

    def __init__(self, monkeypatch: Any):
        from flowrt import executor as ex_mod
        from flowrt import master as master_mod
        from flowrt import rpc

        self.on = False
        self.runs: list[tuple[Any, str]] = []
        self.pooled: list[Any] = []
        self.steps: collections.Counter = collections.Counter()
        self.rpcs: collections.Counter = collections.Counter()
        E = ex_mod.Executor
        straight, dataflow, frames = E._run_straight, E._run_dataflow, ex_mod._run_frames
        pool, pool_f = ex_mod._run_on_pool, ex_mod._run_on_pool_framed
        MS = master_mod.MasterSession
        on_workers, staged = MS._run_on_workers, MS._run_staged
        call = rpc._Client.call
        probe = self

        def rec_straight(self, args, step, ready=False):
            probe._run(self, "ready" if ready else "straight")
            return straight(self, args, step, ready)

        def rec_dataflow(self, *a, **k):
            probe._run(self, "dataflow")
            return dataflow(self, *a, **k)

        def rec_frames(ex, *a, **k):
            probe._run(ex, "frames")
            return frames(ex, *a, **k)

        def rec_pool(c, *a, **k):
            if probe.on:
                probe.pooled.append(c.node.name)
            return pool(c, *a, **k)

        def rec_pool_f(c, *a, **k):
            if probe.on:
                probe.pooled.append(c.node.name)
            return pool_f(c, *a, **k)

        def rec_workers(self, *a, **k):
            if probe.on:
                probe.steps["workers"] += 1
            return on_workers(self, *a, **k)

        def rec_staged(self, *a, **k):
            if probe.on:
                probe.steps["staged"] += 1
            return staged(self, *a, **k)

        def rec_call(self, method, *a, **k):
            if probe.on:
                probe.rpcs[method] += 1
            return call(self, method, *a, **k)

        monkeypatch.setattr(E, "_run_straight", rec_straight)
        monkeypatch.setattr(rpc._Client, "call", rec_call)
        monkeypatch.setattr(E, "_run_dataflow", rec_dataflow)
        monkeypatch.setattr(ex_mod, "_run_frames", rec_frames)
        monkeypatch.setattr(ex_mod, "_run_on_pool", rec_pool)
        monkeypatch.setattr(ex_mod, "_run_on_pool_framed", rec_pool_f)
        monkeypatch.setattr(MS, "_run_on_workers", rec_workers)
        monkeypatch.setattr(MS, "_run_staged", rec_staged)

    def _run(self, ex: Any, path: str) -> None:
        if self.on:
            self.runs.append((ex, path))

    @contextlib.contextmanager
    def recording(self):
        self.on = True
        try:
            yield self
        finally:
            self.on = False

    # what was recorded
    def kernel_runs(self) -> list[tuple[Any, str]]:
        """The runs of partitions that hold (a node of) the kernel under test; a
        transfer named after one of its tensors does not count."""
        return [(ex, path) for ex, path in self.runs if kernel_nodes(ex)]


def kernel_nodes(ex: Any) -> list[Any]:
    """The compiled nodes of the kernel under test in executor ``ex``."""
    return [c for c in ex.nodes if f"/{KUT}/" in c.node.name and
            c.node.type not in ("_Send", "_Recv")]


def device_of(ex: Any) -> str:
    """The device of a partition's executor (every node of it is on that device)."""
    return ex.nodes[0].device_name
