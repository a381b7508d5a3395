"""tf.while_loop: frames and iterations in the executor, structure and shape rules,
loops in conditionals and conditionals in loops, gradients through loops (stacks),
bounded memory, loops split over two devices, and frame-keyed rendezvous."""
from __future__ import annotations

import collections
import time
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors
from flowrt.graph_def import import_graph_def
from flowrt.rendezvous import FrameRendezvous, Rendezvous, make_key, with_frame

TWO_CPUS = dict(device_count={"CPU": 2}, operation_timeout_in_ms=10000)


def run(fetches, feed=None, graph=None, config=None):
    with tf.Session(graph=graph or tf.get_default_graph(), config=config) as s:
        s.run(tf.global_variables_initializer())
        return s.run(fetches, feed)


@pytest.fixture
def g():
    graph = tf.Graph()
    with graph.as_default():
        yield graph


# -- basics and structure ----------------------------------------------------------------
@pytest.mark.parametrize("inter_op", [1, 2])
def test_a_loop_body_with_an_expensive_kernel(g, inter_op):
    """A MatMul (an "expensive" kernel, the inter-op pool's candidate) in a loop body: the
    frame plan was built before the executor knew whether it uses the pool (issue 14,
    item 1: AttributeError at compile)."""
    w = tf.constant([[1.0, 1.0], [0.0, 1.0]])
    i, x = tf.while_loop(lambda i, x: i < 3,
                         lambda i, x: (i + 1, tf.matmul(tf.matmul(x, w), w)),
                         [tf.constant(0), tf.constant([[2.0, 1.0]])])
    cfg = tf.ConfigProto(inter_op_parallelism_threads=inter_op)
    got_i, got_x = run([i, x], config=cfg)
    want = np.array([[2.0, 1.0]], np.float32)
    for _ in range(3):
        want = want @ np.array([[1, 1], [0, 1]]) @ np.array([[1, 1], [0, 1]])
    assert got_i == 3
    np.testing.assert_array_equal(got_x, want)


def test_counter_and_value_match_numpy(g):
    n = tf.placeholder(tf.int32, [])
    i, x = tf.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, x * 0.5 + 1.0),
                         [tf.constant(0), tf.constant([1.0, 4.0])])
    with tf.Session() as s:
        for steps in (0, 1, 7):
            want = np.array([1.0, 4.0], np.float32)
            for _ in range(steps):
                want = want * np.float32(0.5) + np.float32(1.0)
            got_i, got_x = s.run([i, x], {n: steps})
            assert got_i == steps
            np.testing.assert_allclose(got_x, want, rtol=1e-6)
    assert i.op.type == "Exit" and x.shape.as_list() == [2]


def test_ops_are_tfs(g):
    c = tf.constant(3)
    r = tf.while_loop(lambda i: i < c, lambda i: i + 1, [0], parallel_iterations=4)
    types = collections.Counter(op.type for op in g.get_operations())
    for t in ("Enter", "Merge", "Switch", "LoopCond", "NextIteration", "Exit", "Identity"):
        assert types[t] >= 1, t
    enters = [op for op in g.get_operations() if op.type == "Enter"]
    assert {op.get_attr("frame_name") for op in enters} == {b"while/while_context"}
    assert {op.get_attr("parallel_iterations") for op in enters} == {4}
    # the captured `c` enters once, as a loop invariant
    const = [op for op in enters if op.get_attr("is_constant")]
    assert len(const) == 1 and const[0].inputs[0] is c
    merge = r.op.inputs[0].op.inputs[0].op
    assert merge.type == "Merge" and merge.inputs[1].op.type == "NextIteration"
    assert run(r) == 3


def test_single_and_nested_structures(g):
    Pair = collections.namedtuple("Pair", "a b")
    single = tf.while_loop(lambda x: x < 10, lambda x: x * 2, [tf.constant(1)])
    bare = tf.while_loop(lambda x: x < 10, lambda x: x + 3, tf.constant(1))
    same = tf.while_loop(lambda x: x < 10, lambda x: [x * 2], [tf.constant(1)],
                         return_same_structure=True)
    nested = tf.while_loop(
        lambda i, p, d: i < 3,
        lambda i, p, d: (i + 1, Pair(p.a + 1.0, p.b * 2.0), {"k": d["k"] - 1}),
        (tf.constant(0), Pair(tf.constant(0.0), tf.constant(1.0)), {"k": tf.constant(10)}))
    assert isinstance(single, tf.Tensor) and isinstance(bare, tf.Tensor)
    assert isinstance(same, list) and len(same) == 1
    assert isinstance(nested, tuple) and isinstance(nested[1], Pair)
    r = run([single, bare, same, nested])
    assert r[0] == 16 and r[1] == 10 and r[2] == [16]
    i, p, d = r[3]
    assert i == 3 and p == Pair(3.0, 8.0) and d == {"k": 7}


def test_structure_and_argument_errors(g):
    x = tf.constant(1.0)
    with pytest.raises(TypeError, match="cond must be callable"):
        tf.while_loop(x, lambda v: v, [x])
    with pytest.raises(TypeError, match="body must be callable"):
        tf.while_loop(lambda v: v < 1.0, x, [x])
    with pytest.raises(ValueError, match="No loop variables"):
        tf.while_loop(lambda: True, lambda: (), [])
    with pytest.raises(ValueError, match="same number of elements"):
        tf.while_loop(lambda a, b: a < 1.0, lambda a, b: (a,), [x, x])
    with pytest.raises(ValueError, match="rank 0"):
        tf.while_loop(lambda v: v < [1.0, 2.0], lambda v: v, [tf.constant([0.0, 0.0])])


def test_shape_invariants(g):
    x = tf.constant([1.0])
    with pytest.raises(ValueError, match="enters the loop with shape \\(1,\\), but has shape "
                                         "\\(2,\\) after one iteration"):
        tf.while_loop(lambda v: tf.size(v) < 8, lambda v: tf.concat([v, v], 0), [x])
    with pytest.raises(ValueError, match="not compatible with the initial shape"):
        tf.while_loop(lambda v: tf.size(v) < 8, lambda v: v, [x],
                      shape_invariants=[tf.TensorShape([2])])
    grown = tf.while_loop(lambda v: tf.size(v) < 8, lambda v: tf.concat([v, v * 2.0], 0),
                          [x], shape_invariants=[tf.TensorShape([None])])
    assert grown.shape.as_list() == [None]
    np.testing.assert_allclose(run(grown), [1, 2, 2, 4, 2, 4, 4, 8])


def test_maximum_iterations(g):
    forever = tf.while_loop(lambda i: True, lambda i: i + 2, [0], maximum_iterations=7)
    pair = tf.while_loop(lambda a, b: a < 100, lambda a, b: (a + 1, b * 2.0),
                         [0, tf.constant(1.0)], maximum_iterations=tf.constant(5))
    early = tf.while_loop(lambda i: i < 3, lambda i: i + 1, [0], maximum_iterations=10)
    assert run([forever, pair, early]) == [14, (5, 32.0), 3]


# -- state, conditionals, nesting ----------------------------------------------------------
def test_stateful_body_runs_in_order_each_iteration(g):
    v = tf.Variable(0.0, name="v")
    log = tf.Variable(tf.zeros([5]), name="log")

    def body(i):
        bump = tf.assign_add(v, 1.0)
        with tf.control_dependencies([bump]):
            # reads after the update of the same iteration
            write = tf.scatter_update(log, tf.reshape(i, [1]), tf.reshape(v.read_value(),
                                                                            [1]))
        with tf.control_dependencies([write]):
            return i + 1

    r = tf.while_loop(lambda i: i < 5, body, [0], parallel_iterations=1)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        assert s.run(r) == 5
        assert s.run(v) == 5.0
        np.testing.assert_allclose(s.run(log), [1, 2, 3, 4, 5])
        s.run(r)
        assert s.run(v) == 10.0


def test_queue_ops_in_a_loop(g):
    q = tf.FIFOQueue(10, tf.int32)
    fill = tf.while_loop(lambda i: i < 4, lambda i: _after(q.enqueue(i * i), i + 1), [0],
                         parallel_iterations=1)
    with tf.Session() as s:
        s.run(fill)
        assert [s.run(q.dequeue()) for _ in range(4)] == [0, 1, 4, 9]


def _after(op, value):
    with tf.control_dependencies([op]):
        return tf.identity(value)


def test_cond_in_loop_and_loop_in_cond(g):
    p = tf.placeholder(tf.bool, [])
    v = tf.Variable(0, name="v")

    def body(i, a):
        return i + 1, tf.cond(tf.equal(i % 2, 0), lambda: a + 1.0, lambda: a * 2.0)

    _, alt = tf.while_loop(lambda i, a: i < 5, body, [0, tf.constant(0.0)])

    def looping():
        return tf.while_loop(lambda i: i < 5, lambda i: _after(tf.assign_add(v, 1), i + 2),
                             [0])

    branch = tf.cond(p, looping, lambda: tf.constant(-1))
    with tf.Session() as s:
        s.run(v.initializer)
        assert s.run(alt) == 7.0
        assert s.run(branch, {p: False}) == -1
        assert s.run(v) == 0  # the loop in the untaken branch never ran
        assert s.run(branch, {p: True}) == 6
        assert s.run(v) == 3


def test_nested_loops(g):
    n = tf.placeholder(tf.int32, [])

    def outer(i, acc):
        _, inner = tf.while_loop(lambda j, a: j < i, lambda j, a: (j + 1, a + tf.cast(j, tf.float32)),
                                 [0, acc])
        return i + 1, inner

    _, total = tf.while_loop(lambda i, a: i < n, outer, [0, tf.constant(0.0)])
    with tf.Session() as s:
        for k in (0, 1, 4, 9):
            assert s.run(total, {n: k}) == sum(j for i in range(k) for j in range(i))


def test_error_in_loop_names_the_node_and_timeout_works(g):
    x = tf.placeholder(tf.float32, [])

    def body(i, y):
        check = tf.Assert(y < 100.0, [y], name="too_big")
        with tf.control_dependencies([check]):
            return i + 1, y * 3.0

    _, y = tf.while_loop(lambda i, y: i < 10, body, [0, x])
    q = tf.FIFOQueue(2, tf.float32, shapes=[[]])
    stuck = tf.while_loop(lambda i: i < 3.0, lambda i: i + q.dequeue(), [tf.constant(0.0)])
    with tf.Session() as s:
        assert s.run(y, {x: 0.0}) == 0.0
        with pytest.raises(errors.InvalidArgumentError, match="too_big"):
            s.run(y, {x: 1.0})
        t0 = time.monotonic()
        with pytest.raises(errors.DeadlineExceededError):
            s.run(stuck, options=tf.RunOptions(timeout_in_ms=300))
        assert time.monotonic() - t0 < 5.0


def test_fetching_inside_the_loop_is_refused(g):
    inside = []

    def body(i):
        inside.append(i * 2)
        return i + 1

    tf.while_loop(lambda i: i < 3, body, [0])
    with tf.Session() as s, pytest.raises(errors.InvalidArgumentError, match="while loop"):
        s.run(inside[0])


def test_graph_def_round_trip_runs_the_same(g):
    x = tf.placeholder(tf.float32, [], name="x")
    _, y = tf.while_loop(lambda i, y: i < 6, lambda i, y: (i + 1, y * x), [0, tf.constant(1.0)])
    tf.identity(y, name="out")
    g2 = tf.Graph()
    with g2.as_default():
        import_graph_def(g.as_graph_def(), name="")
    with tf.Session(graph=g2) as s:
        assert s.run("out:0", {"x:0": 2.0}) == 64.0
    assert g2.get_operation_by_name(y.op.name).type == "Exit"


def test_parallel_iterations_one_and_many_agree(g):
    outs = []
    for p in (1, 2, 32):
        outs.append(tf.while_loop(lambda i, a: i < 50,
                                  lambda i, a: (i + 1, a * 1.01 + tf.cast(i, tf.float64)),
                                  [0, tf.constant(1.0, tf.float64)], parallel_iterations=p)[1])
    r = run(outs)
    assert r[0] == r[1] == r[2]


# -- gradients ---------------------------------------------------------------------------
@settings(max_examples=12, deadline=None)
@given(n=st.integers(0, 6), xv=st.floats(-2.0, 2.0))
def test_gradient_of_repeated_multiplication(n, xv):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float64, [])
        _, y = tf.while_loop(lambda i, y: i < n, lambda i, y: (i + 1, y * x),
                             [0, tf.constant(1.0, tf.float64)])
        dy, = tf.gradients(y, x)
        with tf.Session() as s:
            got_y, got = s.run([y, dy], {x: xv})
    assert got_y == pytest.approx(xv ** n)
    assert got == pytest.approx(n * xv ** (n - 1) if n else 0.0)


def _numeric(f, x, eps=1e-6):
    x = np.asarray(x, np.float64)
    out = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[k] = eps
        out[k] = (f(x + d) - f(x - d)) / (2 * eps)
    return out


def test_gradients_of_loop_vars_and_captured_tensors(g):
    z0 = tf.placeholder(tf.float64, [2])
    w = tf.placeholder(tf.float64, [])
    _, z = tf.while_loop(lambda i, z: i < 3, lambda i, z: (i + 1, tf.sin(z) * w + z * z),
                         [0, z0])
    loss = tf.reduce_sum(z * z)
    dz0, dw = tf.gradients(loss, [z0, w])
    zv, wv = np.array([0.3, -0.7]), 1.5

    def f(zz, ww):
        for _ in range(3):
            zz = np.sin(zz) * ww + zz * zz
        return float(np.sum(zz * zz))

    with tf.Session() as s:
        got_z0, got_w = s.run([dz0, dw], {z0: zv, w: wv})
    np.testing.assert_allclose(got_z0, _numeric(lambda v: f(v, wv), zv), rtol=1e-5)
    assert got_w == pytest.approx(float(_numeric(lambda v: f(zv, v), wv)), rel=1e-5)


def test_gradient_through_nested_structure(g):
    a = tf.placeholder(tf.float64, [])
    b = tf.placeholder(tf.float64, [])
    Pair = collections.namedtuple("Pair", "p q")
    _, out = tf.while_loop(lambda i, s: i < 4,
                           lambda i, s: (i + 1, Pair(s.p * s.q["r"], {"r": s.q["r"] + s.p})),
                           [0, Pair(a, {"r": b})])
    da, db = tf.gradients(out.p + out.q["r"], [a, b])

    def f(av, bv):
        p, r = av, bv
        for _ in range(4):
            p, r = p * r, r + p
        return p + r

    with tf.Session() as s:
        got = s.run([da, db], {a: 0.7, b: 1.1})
    assert got[0] == pytest.approx(float(_numeric(lambda v: f(v, 1.1), 0.7)), rel=1e-5)
    assert got[1] == pytest.approx(float(_numeric(lambda v: f(0.7, v), 1.1)), rel=1e-5)


def test_gradient_descent_training_step_through_a_loop(g):
    w = tf.Variable(2.0, name="w")
    _, y = tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * w), [0, tf.constant(3.0)])
    loss = tf.square(y - 10.0)
    train = tf.train.GradientDescentOptimizer(0.001).minimize(loss)
    with tf.Session() as s:
        s.run(tf.global_variables_initializer())
        assert s.run(loss) == 196.0
        s.run(train)
        # d/dw (3 w^3 - 10)^2 = 2 (3 w^3 - 10) 9 w^2 = 1008 at w = 2
        assert s.run(w) == pytest.approx(2.0 - 0.001 * 1008.0)
        losses = [s.run(loss)]
        for _ in range(20):
            s.run(train)
            losses.append(s.run(loss))
        assert losses[-1] < 1e-2 < losses[0]


# -- gradients of conditionals inside loops ------------------------------------------------
def _cond_loop_graph(n_iter, parallel):
    """A body with a conditional whose branches read the loop variable, an invariant and
    values made inside the branch, and a conditional nested in one branch."""
    x = tf.placeholder(tf.float64, [2], name="x")
    w = tf.placeholder(tf.float64, [], name="w")
    bits = tf.placeholder(tf.bool, [None], name="bits")
    flip = tf.placeholder(tf.bool, [None], name="flip")

    def body(i, y):
        def taken():
            inner = tf.cond(flip[i], lambda: tf.sin(y) * w, lambda: y * y * 0.5)
            return inner + tf.tanh(y * x)

        return i + 1, tf.cond(bits[i], taken, lambda: y * w + x)

    _, y = tf.while_loop(lambda i, y: i < n_iter, body, [0, x * 0.5],
                         parallel_iterations=parallel)
    return x, w, bits, flip, y


def _cond_loop_numpy(xv, wv, bits, flip):
    y = xv * 0.5
    for b, f in zip(bits, flip):
        if b:
            y = (np.sin(y) * wv if f else y * y * 0.5) + np.tanh(y * xv)
        else:
            y = y * wv + xv
    return float(np.sum(y))


@settings(max_examples=10, deadline=None)
@given(bits=st.lists(st.booleans(), min_size=0, max_size=6), data=st.data())
def test_gradient_of_a_cond_inside_a_loop(bits, data):
    flip = data.draw(st.lists(st.booleans(), min_size=len(bits), max_size=len(bits)))
    parallel = data.draw(st.sampled_from([1, 10]))
    g = tf.Graph()
    with g.as_default():
        x, w, bits_t, flip_t, y = _cond_loop_graph(len(bits), parallel)
        loss = tf.reduce_sum(y)
        dx, dw = tf.gradients(loss, [x, w])
        feed = {x: [0.4, -0.3], w: 0.8, bits_t: bits + [False], flip_t: flip + [False]}
        with tf.Session() as s:
            got_loss, got_dx, got_dw = s.run([loss, dx, dw], feed)
    xv, wv = np.array([0.4, -0.3]), 0.8
    assert got_loss == pytest.approx(_cond_loop_numpy(xv, wv, bits, flip), rel=1e-12)
    np.testing.assert_allclose(
        got_dx, _numeric(lambda v: _cond_loop_numpy(v, wv, bits, flip), xv), rtol=1e-5,
        atol=1e-8)
    assert got_dw == pytest.approx(
        float(_numeric(lambda v: _cond_loop_numpy(xv, v, bits, flip), wv)), rel=1e-5,
        abs=1e-8)


def test_training_through_a_cond_in_a_loop_and_a_nested_loop(g):
    w = tf.Variable(0.5, dtype=tf.float64, name="w")

    def outer(i, y):
        def inner(j, z):
            return j + 1, tf.cond(z > 1.0, lambda: z * w, lambda: z + w)

        _, y = tf.while_loop(lambda j, z: j < i, inner, [0, y])
        return i + 1, y

    _, y = tf.while_loop(lambda i, y: i < 4, outer, [0, tf.constant(0.75, tf.float64)])
    dw, = tf.gradients(y, [w])

    def f(wv):
        y = 0.75
        for i in range(4):
            for _ in range(i):
                y = y * wv if y > 1.0 else y + wv
        return y

    with tf.Session() as s:
        s.run(w.initializer)
        got_y, got_dw = s.run([y, dw])
    assert got_y == pytest.approx(f(0.5), rel=1e-12)
    assert got_dw == pytest.approx(float(_numeric(f, 0.5)), rel=1e-5)


def test_back_prop_false_gives_no_gradient(g):
    x = tf.placeholder(tf.float32, [])
    y = tf.while_loop(lambda v: v < 10.0, lambda v: v * x, [tf.constant(1.0)],
                      back_prop=False)
    assert tf.gradients(y, x) == [None]


# -- memory and time -----------------------------------------------------------------------
def _counting_loop():
    n = tf.placeholder(tf.int32, [])
    i, x = tf.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, x * 0.999),
                         [tf.constant(0), tf.constant(1.0)])
    return n, i, x


def test_iterations_free_their_state(g):
    n, i, x = _counting_loop()
    with tf.Session() as s:
        s.run([i, x], {n: 10})
        peaks = []
        for steps in (500, 5000):
            tracemalloc.start()
            assert s.run(i, {n: steps}) == steps
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
    # a frame keeps at most parallel_iterations iterations: no growth with the count
    assert peaks[1] < peaks[0] + 64 * 1024, peaks


def test_time_is_linear_in_the_iteration_count(g):
    n, i, x = _counting_loop()
    with tf.Session() as s:
        s.run(i, {n: 100})

        def timed(steps):
            t0 = time.perf_counter()
            assert s.run(i, {n: steps}) == steps
            return time.perf_counter() - t0

        # (best of several: a shared machine's pauses must not pass for super-linearity)
        small = min(timed(2000) for _ in range(3))
        large = min(timed(20000) for _ in range(2))
    assert large / small < 25.0, (small, large)


def test_one_hundred_thousand_iterations(g):
    """The issue's size: 100000 iterations of a small body, values as numpy's float32
    recurrence, in bounded time (about 2 s here; linearity and flat memory are the two
    tests above)."""
    n, i, x = _counting_loop()
    want = np.float32(1.0)
    for _ in range(100000):
        want = np.float32(want * np.float32(0.999))
    # on the CPU: the recurrence ends in subnormals, which GPUs flush to zero
    with tf.Session(config=tf.ConfigProto(device_count={"GPU": 0})) as s:
        t0 = time.perf_counter()
        got_i, got_x = s.run([i, x], {n: 100000})
        took = time.perf_counter() - t0
    assert got_i == 100000 and got_x == want
    assert took < 60.0, took


# -- across devices --------------------------------------------------------------------------
def test_loop_split_over_two_devices(g):
    n = tf.placeholder(tf.int32, [])
    with tf.device("/cpu:0"):
        def body(i, x):
            with tf.device("/cpu:1"):
                y = x * 2.0
            return i + 1, y + 1.0

        i, x = tf.while_loop(lambda i, x: i < n, body, [0, tf.constant(1.0)])
        z = x + 0.5
    with tf.Session(config=tf.ConfigProto(**TWO_CPUS)) as s:
        assert s.run([i, z], {n: 5}) == [5, 63.5]
        assert s.run([i, z], {n: 0}) == [0, 1.5]
        assert s.run(i, {n: 300}) == 300
        opts = tf.RunOptions(output_partition_graphs=True)
        meta = tf.RunMetadata()
        s.run(z, {n: 2}, options=opts, run_metadata=meta)
    on_cpu1 = [gd for gd in meta.partition_graphs
               if any(nd.device.endswith("CPU:1") for nd in gd.node)]
    ops = collections.Counter(nd.op for nd in on_cpu1[0].node)
    # cpu:1's own copy of the loop's control state, driven by the LoopCond it receives
    assert ops["Enter"] == 1 and ops["Merge"] == 1 and ops["NextIteration"] == 1
    assert ops["Switch"] == 1 and ops["_Recv"] >= 2


def test_nested_loop_and_gradient_across_devices(g):
    x = tf.placeholder(tf.float64, [])
    with tf.device("/cpu:0"):
        def outer(i, acc):
            def inner(j, a):
                with tf.device("/cpu:1"):
                    b = a * x
                return j + 1, b

            _, r = tf.while_loop(lambda j, a: j < 2, inner, [0, acc])
            return i + 1, r

        _, y = tf.while_loop(lambda i, a: i < 3, outer, [0, tf.constant(1.0, tf.float64)])
        dy, = tf.gradients(y, x)
    with tf.Session(config=tf.ConfigProto(**TWO_CPUS)) as s:
        got_y, got_dy = s.run([y, dy], {x: 1.5})
    assert got_y == pytest.approx(1.5 ** 6)
    assert got_dy == pytest.approx(6 * 1.5 ** 5)


def test_frame_rendezvous_keys():
    key = make_key("/job:a/replica:0/task:0/device:CPU:0", 7,
                   "/job:a/replica:0/task:0/device:CPU:1", "edge_x_0")
    assert key.endswith(";edge_x_0;0:0")
    assert with_frame(key, 123, 4) == key[:-3] + "123:4"
    r = Rendezvous()
    got = []
    FrameRendezvous(r, 5, 1).recv_async(key, lambda v, e: got.append(v))
    FrameRendezvous(r, 5, 0).send(key, "it0")  # another iteration: does not pair
    assert got == []
    FrameRendezvous(r, 5, 1).send(key, "it1")
    assert got == ["it1"]
    r.recv_async(with_frame(key, 5, 0), lambda v, e: got.append(v))
    assert got == ["it1", "it0"] and len(r) == 0
