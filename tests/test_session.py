"""``tf.Session`` against TF 1.15's behaviour: fetch structures, feeds, errors, callables,
default sessions, state sharing by target, resets, graph growth, the compiled-step cache,
tracing, devices and placement."""
from __future__ import annotations

import collections
import threading

import numpy as np
import pytest

import flowrt as tf
from flowrt import errors

NT = collections.namedtuple("NT", "a b")
THREAD_TIMEOUT = 20


@pytest.fixture
def g():
    graph = tf.Graph()
    with graph.as_default():
        yield graph


@pytest.fixture
def sess(g):
    with tf.Session(graph=g) as s:
        yield s


# -- fetches ----------------------------------------------------------------------------------
def test_nested_fetch_structures(g, sess):
    a = tf.constant(1.0, name="a")
    b = tf.constant([1, 2], name="b")
    n = tf.no_op(name="n")
    out = sess.run([a, (b, {"k": a, "n": n}), NT(a, b),
                    collections.OrderedDict([("z", a), ("y", [b, (n,)])])])
    assert out[0] == 1.0 and out[0].dtype == np.float32
    assert isinstance(out[1], tuple) and out[1][0].tolist() == [1, 2]
    assert out[1][1] == {"k": 1.0, "n": None}
    assert isinstance(out[2], NT) and out[2].a == 1.0 and out[2].b.tolist() == [1, 2]
    assert isinstance(out[3], collections.OrderedDict) and list(out[3]) == ["z", "y"]
    assert out[3]["y"][0].tolist() == [1, 2] and out[3]["y"][1] == (None,)
    assert sess.run(()) == () and sess.run([]) == [] and sess.run({}) == {}


def test_single_fetches_and_duplicates(g, sess):
    a = tf.constant(1.0, name="a")
    b = tf.constant([[1, 2]], name="b")
    n = tf.no_op(name="n")
    assert sess.run(a) == 1.0 and isinstance(sess.run(a), np.float32)
    assert sess.run(b).shape == (1, 2) and sess.run(b).dtype == np.int32
    assert sess.run(n) is None
    assert sess.run([a, a, "a:0", "a", b]) [:4] == [1.0, 1.0, 1.0, None]
    assert sess.run("b:0").tolist() == [[1, 2]]
    assert sess.run("n") is None
    v = tf.Variable([3.0], name="v")
    sess.run(v.initializer)
    assert sess.run(v).tolist() == [3.0]  # a variable fetches its value
    assert sess.run(v.op) is None


def test_fetch_errors(g, sess):
    a = tf.constant(1.0, name="a")
    with pytest.raises(TypeError, match="Fetch argument None has invalid type"):
        sess.run(None)
    with pytest.raises(TypeError, match="Fetch argument None"):
        sess.run([a, None])
    with pytest.raises(TypeError, match="has invalid type"):
        sess.run(3)
    with pytest.raises(TypeError):
        sess.run({a, a.op})
    with pytest.raises(ValueError, match="cannot be interpreted as a Tensor"):
        sess.run("zz:0")
    other = tf.Graph()
    with other.as_default():
        foreign = tf.constant(0)
    with pytest.raises(ValueError, match="not an element of this graph"):
        sess.run(foreign)


def test_fetched_arrays_are_owned_by_the_caller(g, sess):
    a = tf.constant([1.0, 2.0])
    x = sess.run(a)
    x[0] = 100.0
    assert sess.run(a).tolist() == [1.0, 2.0]
    p = tf.placeholder(tf.float32, [2])
    feed = np.array([5.0, 6.0], np.float32)
    out = sess.run(tf.identity(p), {p: feed})
    assert not np.shares_memory(out, feed)
    out[0] = -1
    assert feed.tolist() == [5.0, 6.0] and feed.flags.writeable
    # a fetch that is fed is not computed: TF hands back np.asarray(feed), the feed itself
    assert sess.run(p, {p: feed}) is feed and feed.flags.writeable


def test_fetch_list_mutated_between_runs(g, sess):
    a = tf.constant(1.0, name="a")
    b = tf.constant(2.0, name="b")
    fetches = [a]
    assert sess.run(fetches) == [1.0]
    fetches.append(b)
    assert sess.run(fetches) == [1.0, 2.0]


def test_fetch_dict_mutated_between_runs(g, sess):
    a = tf.constant(1.0, name="a")
    b = tf.constant(2.0, name="b")
    fetches = {"a": a}
    assert sess.run(fetches) == {"a": 1.0}
    fetches["b"] = b
    assert sess.run(fetches) == {"a": 1.0, "b": 2.0}


def test_many_runs_with_alternating_fresh_fetch_structures(g, sess):
    a = tf.constant(1.0, name="a")
    b = tf.constant(2.0, name="b")
    c = tf.constant(3.0, name="c")
    for i in range(900):
        k = i % 3
        if k == 0:
            assert sess.run([a, b]) == [1.0, 2.0], i
        elif k == 1:
            assert sess.run([c]) == [3.0], i
        else:
            assert sess.run({"x": b, "y": [c, a]}) == {"x": 2.0, "y": [3.0, 1.0]}, i
    assert len(sess._sigs) < 100  # the cache must not grow with every call


# -- feeds ------------------------------------------------------------------------------------
def test_feeds_keyed_by_tensor_or_name(g, sess):
    p = tf.placeholder(tf.float32, [None, 2], name="p")
    i = tf.identity(p, name="i")
    assert sess.run(i, {p: [[1, 2]]}).tolist() == [[1.0, 2.0]]
    assert sess.run(i, {"p:0": [[3, 4]]}).tolist() == [[3.0, 4.0]]
    with pytest.raises(TypeError, match="Cannot interpret feed_dict key as Tensor"):
        sess.run(i, {"zz:0": 1})
    with pytest.raises(TypeError, match="Cannot interpret feed_dict key as Tensor"):
        sess.run(i, {"p": [[1, 2]]})  # an op name is not a tensor name


def test_feeding_an_intermediate_skips_upstream(g, sess):
    p = tf.placeholder(tf.float32, name="p")
    mid = tf.identity(p, name="mid")
    out = tf.identity(mid, name="out")
    # the placeholder is never fed: it must not run
    assert sess.run(out, {mid: 7.0}) == 7.0
    assert sess.run([out, mid], {mid: [1.0, 2.0]})[1].tolist() == [1.0, 2.0]
    c = tf.constant(1.0, name="c")
    assert sess.run(c, {c: 5.0}) == 5.0  # constants are feedable too
    assert sess.run(c) == 1.0
    with pytest.raises(errors.InvalidArgumentError, match="placeholder tensor 'p'"):
        sess.run(out)


def test_fetching_a_fed_tensor_returns_the_fed_value(g, sess):
    p = tf.placeholder(tf.int32, [3], name="p")
    assert sess.run(p, {p: [1, 2, 3]}).tolist() == [1, 2, 3]
    assert sess.run(p, {p: np.array([4, 5, 6], np.int64)}).dtype == np.int32


def test_feed_conversion_and_shape_checks(g, sess):
    p = tf.placeholder(tf.float32, [None, 2], name="p")
    out = sess.run(p, {p: [[1, 2], [3, 4]]})
    assert out.dtype == np.float32 and out.shape == (2, 2)
    assert sess.run(p, {p: np.ones((1, 2), np.float64)}).dtype == np.float32
    with pytest.raises(ValueError, match=r"Cannot feed value of shape \(2,\) for Tensor "
                                         r"'p:0', which has shape '\(\?, 2\)'"):
        sess.run(p, {p: [1, 2]})
    with pytest.raises(ValueError, match="Cannot feed value of shape"):
        sess.run(p, {p: np.zeros((1, 3))})
    s = tf.placeholder(tf.float32, [], name="s")
    with pytest.raises(ValueError, match="Cannot feed value of shape"):
        sess.run(s, {s: [1.0]})
    b = tf.placeholder(tf.bool, name="b")
    assert sess.run(b, {b: [True, False]}).tolist() == [True, False]


def test_feeding_a_tensor_is_a_type_error(g, sess):
    p = tf.placeholder(tf.float32, name="p")
    a = tf.constant(1.0)
    with pytest.raises(TypeError, match="The value of a feed cannot be a tf.Tensor object"):
        sess.run(p, {p: a})


def test_unfed_placeholder_names_it(g, sess):
    p = tf.placeholder(tf.float32, [None, 3], name="inputs")
    with pytest.raises(errors.InvalidArgumentError,
                       match="You must feed a value for placeholder tensor 'inputs' with "
                             r"dtype float32 and shape \[\?,3\]") as ei:
        sess.run(tf.identity(p))
    assert ei.value.op is p.op
    assert ei.value.error_code == errors.INVALID_ARGUMENT


def test_non_feedable_tensor(g, sess):
    a = tf.constant(1.0)
    g.prevent_feeding(a)
    assert not g.is_feedable(a)
    with pytest.raises(ValueError, match="may not be fed"):
        sess.run(a, {a: 2.0})


def test_feeding_an_int_too_large_for_the_dtype(g, sess):
    p = tf.placeholder(tf.int32, name="p")
    with pytest.raises(TypeError):
        sess.run(p, {p: 2**40})


def test_string_feeds_come_back_as_bytes_once_computed(g, sess):
    q = tf.placeholder(tf.string, name="q")
    assert sess.run(tf.identity(q), {q: "ab"}) == b"ab"
    assert sess.run(tf.identity(q), {q: ["ab", b"cd"]}).tolist() == [b"ab", b"cd"]


def test_a_fetched_feed_is_the_fed_value_converted_as_tf_does(g, sess):
    """TF 1.x does not run a fetch that is fed: it hands back ``np.asarray(value,
    dtype=<the tensor's numpy dtype>)``, so a fed string keeps the objects that were fed
    and a scalar comes back as a 0-d array (issue 14, item 5)."""
    q = tf.placeholder(tf.string, name="q")
    out = sess.run(q, {q: ["ab", b"cd"]})
    assert out.dtype == object and out.tolist() == ["ab", b"cd"]
    assert type(out[0]) is str
    out = sess.run(q, {q: "ab"})
    assert isinstance(out, np.ndarray) and out.shape == () and out[()] == "ab"
    p = tf.placeholder(tf.float32, name="p")
    out = sess.run(p, {p: 3})
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out[()] == 3.0
    fed = np.arange(3, dtype=np.float32)
    assert sess.run(p, {p: fed}) is fed  # already the tensor's dtype: no copy, as in TF
    # with other fetches, by name, in structures, and through a callable
    c = tf.constant(2.0)
    got = sess.run({"p": p, "y": p * c, "q": "q:0"}, {"p:0": [1.0], q: "z"})
    assert got["p"].tolist() == [1.0] and got["y"].tolist() == [2.0]
    assert got["q"][()] == "z"
    f = sess.make_callable([q, tf.identity(q)], feed_list=[q])
    a, b = f(["x"])
    assert a.tolist() == ["x"] and b.tolist() == [b"x"]


def test_a_feed_key_of_another_graph_is_a_type_error(g, sess):
    other = tf.Graph()
    with other.as_default():
        p = tf.placeholder(tf.float32, name="p")
    c = tf.constant(1.0)
    with pytest.raises(TypeError, match=r"Cannot interpret feed_dict key as Tensor: Tensor "
                                        r'Tensor\("p:0", dtype=float32\) is not an element '
                                        r"of this graph"):
        sess.run(c, {p: 1.0})
    with pytest.raises(TypeError, match="Cannot interpret feed_dict key as Tensor"):
        sess.run(c, {"nope:0": 1.0})


def test_string_constants_come_back_as_bytes(g, sess):
    c = tf.constant(["ab", "é"])
    out = sess.run(c)
    assert out.dtype == object and out.tolist() == [b"ab", "é".encode()]
    assert sess.run(tf.constant("x")) == b"x"


# -- callables -------------------------------------------------------------------------------
def test_make_callable(g, sess):
    p = tf.placeholder(tf.float32, [2], name="p")
    q = tf.placeholder(tf.float32, [2], name="q")
    i = tf.identity(p)
    j = tf.identity(q)
    n = tf.no_op()
    f = sess.make_callable([i, {"j": j}, n], feed_list=[p, "q:0"])
    out = f([1, 2], np.array([3, 4]))
    assert out[0].tolist() == [1.0, 2.0] and out[1]["j"].tolist() == [3.0, 4.0]
    assert out[2] is None
    with pytest.raises(TypeError):
        f([1, 2])
    g0 = sess.make_callable(tf.constant(5))
    assert g0() == 5
    with pytest.raises(ValueError, match="Cannot feed value of shape"):
        f([1, 2, 3], [1, 2])
    sess.close()
    with pytest.raises(RuntimeError, match="closed Session"):
        g0()


# -- lifecycle and default session ----------------------------------------------------------------
def test_close_then_run(g):
    a = tf.constant(1.0)
    s = tf.Session()
    assert s.run(a) == 1.0
    s.close()
    s.close()  # idempotent
    with pytest.raises(RuntimeError, match="Attempted to use a closed Session"):
        s.run(a)


def test_context_manager_sets_default_session_and_graph():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(3.0)
        n = tf.no_op()
    assert tf.get_default_session() is None
    with tf.Session(graph=g) as s:
        assert tf.get_default_session() is s
        assert tf.get_default_graph() is g
        assert a.eval() == 3.0 and n.run() is None
        with tf.Session(graph=g) as s2:
            assert tf.get_default_session() is s2
        assert tf.get_default_session() is s
    assert tf.get_default_session() is None
    s3 = tf.Session(graph=g)
    with s3.as_default():
        assert tf.get_default_session() is s3 and a.eval() == 3.0
    assert s3.run(a) == 3.0  # as_default does not close
    s3.close()


def test_default_session_is_per_thread():
    g = tf.Graph()
    seen = {}
    with tf.Session(graph=g) as s:
        t = threading.Thread(target=lambda: seen.setdefault("s", tf.get_default_session()))
        t.start()
        t.join(THREAD_TIMEOUT)
        assert tf.get_default_session() is s
    assert seen["s"] is None


def test_interactive_session():
    g = tf.Graph()
    with g.as_default():
        a = tf.constant([1, 2])
    s = tf.InteractiveSession(graph=g)
    try:
        assert tf.get_default_session() is s
        assert a.eval().tolist() == [1, 2]
    finally:
        s.close()
    assert tf.get_default_session() is None


def test_session_argument_checks():
    with pytest.raises(TypeError, match="graph must be a tf.Graph"):
        tf.Session(graph="nope")
    with pytest.raises(TypeError, match="config must be a tf.ConfigProto"):
        tf.Session(config={"device_count": 1})
    with pytest.raises(TypeError, match="target must be a string"):
        tf.Session(target=3)
    s = tf.Session(graph=tf.Graph())
    assert s.sess_str == "" and isinstance(s.graph_def, tf.GraphDef)
    s.close()


# -- state by target -----------------------------------------------------------------------------
def test_direct_sessions_are_isolated(g):
    v = tf.Variable([1.0, 2.0], name="v")
    with tf.Session() as s1:
        s1.run(v.initializer)
        assert s1.run(v).tolist() == [1.0, 2.0]
        with tf.Session() as s2:
            with pytest.raises(errors.FailedPreconditionError,
                               match="Attempting to use uninitialized value v"):
                s2.run(v)
            s2.run(v.assign([5.0, 5.0]))
            assert s1.run(v).tolist() == [1.0, 2.0]


def test_inproc_target_shares_state_and_reset(g):
    target = "inproc://test_session_shared"
    v = tf.Variable(1.0, name="v")
    with tf.container("keep_me_not"):
        w = tf.Variable(2.0, name="w")
    try:
        with tf.Session(target) as a:
            a.run(tf.global_variables_initializer())
            a.run(tf.assign_add(v, 10.0))
        with tf.Session(target) as b:
            assert b.run([v, w]) == [11.0, 2.0]
        tf.Session.reset(target, ["keep_me_not"])  # clears only that container
        with tf.Session(target) as c:
            assert c.run(v) == 11.0
            with pytest.raises(errors.FailedPreconditionError, match="value w"):
                c.run(w)
        tf.Session.reset(target)
        with tf.Session(target) as d:
            with pytest.raises(errors.FailedPreconditionError, match="value v"):
                d.run(v)
    finally:
        tf.Session.reset(target)


def test_reset_of_direct_target_is_a_no_op():
    tf.Session.reset("")


# -- graph growth and the compiled-step cache ----------------------------------------------------
def test_graph_extended_after_session_creation(g, sess):
    a = tf.constant(1.0, name="a")
    assert sess.run(a) == 1.0
    b = tf.identity(a, name="b")
    assert sess.run(b) == 1.0
    v = tf.Variable(4.0, name="v")
    sess.run(v.initializer)
    assert sess.run([a, b, v]) == [1.0, 1.0, 4.0]


def test_compiled_steps_are_reused_and_recompiled_on_growth(g, sess):
    p = tf.placeholder(tf.float32, name="p")
    a = tf.identity(p)
    b = tf.identity(a)
    for i in range(5):
        assert sess.run(a, {p: float(i)}) == i
    callables = sess._msession._callables
    assert len(callables) == 1
    for i in range(3):
        assert sess.run([a], {p: 1.0}) == [1.0]  # same feeds and fetches: same step
    assert len(callables) == 1
    for i in range(3):
        assert sess.run([a, b], {p: 1.0}) == [1.0, 1.0]
    assert len(callables) == 2  # a new signature, compiled once
    (cs,) = [c for c in callables.values() if c.fetches == (a.name,)]
    v0 = cs.version
    assert v0 == g.version
    tf.constant(0.0)  # grow the graph
    assert g.version != v0
    assert sess.run(a, {p: 2.0}) == 2.0
    assert cs.version == g.version and len(callables) == 2


# -- tracing ------------------------------------------------------------------------------------
def test_full_trace_fills_step_stats(g, sess):
    x = tf.placeholder(tf.float32, name="x")
    y = tf.identity(tf.identity(x, name="i1"), name="i2")
    k = tf.constant(2.0, name="k")
    ro = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
    md = tf.RunMetadata()
    assert sess.run([y, k], {x: 1.0}, options=ro, run_metadata=md) == [1.0, 2.0]
    stats = [n for d in md.step_stats.dev_stats for n in d.node_stats]
    names = {n.node_name for n in stats}
    assert {"i1", "i2", "k"} <= names
    for n in stats:
        assert n.all_start_micros > 0 and n.all_end_rel_micros >= 0
    assert all(d.device.startswith("/job:localhost/") for d in md.step_stats.dev_stats)
    md2 = tf.RunMetadata()
    sess.run(y, {x: 1.0}, run_metadata=md2)  # no trace requested: nothing recorded
    assert len(md2.step_stats.dev_stats) == 0


# -- devices and placement -------------------------------------------------------------------
def test_device_count_and_explicit_placement(g):
    with g.device("/cpu:2"):
        k = tf.constant(1.0, name="k")
    k2 = tf.identity(k, name="k2")
    with tf.Session(config=tf.ConfigProto(device_count={"CPU": 4})) as s:
        cpus = [d.name for d in s.list_devices() if d.device_type == "CPU"]
        assert cpus == [f"/job:localhost/replica:0/task:0/device:CPU:{i}" for i in range(4)]
        assert s.run(k2) == 1.0
        placed = s.placement(k2)
        assert placed["k"] == "/job:localhost/replica:0/task:0/device:CPU:2"
        assert placed["k2"].startswith("/job:localhost/replica:0/task:0/device:")


def test_placement_of_fed_step(g):
    p = tf.placeholder(tf.float32, name="p")
    with g.device("/cpu:1"):
        i = tf.identity(p, name="i")
    with tf.Session(config=tf.ConfigProto(device_count={"CPU": 2})) as s:
        placed = s.placement(i, [p])
        assert placed["i"].endswith("/device:CPU:1")
        assert s.run(i, {p: 3.0}) == 3.0


def test_unknown_device_hard_and_soft_placement(g):
    with g.device("/cpu:9"):
        k = tf.constant(1.0, name="k9")
    with tf.Session() as s:
        with pytest.raises(errors.InvalidArgumentError) as ei:
            s.run(k)
    assert "k9" in str(ei.value) and "CPU:9" in str(ei.value)
    cfg = tf.ConfigProto(allow_soft_placement=True)
    with tf.Session(config=cfg) as s:
        assert s.run(k) == 1.0
        # the job/task are kept; the device is the preferred one with a kernel
        assert s.placement(k)["k9"].endswith(("/device:CPU:0", "/device:GPU:0"))


def test_colocated_nodes_share_a_device(g):
    with g.device("/cpu:1"):
        v = tf.Variable(1.0, name="v")
    up = tf.assign_add(v, 1.0)
    with tf.Session(config=tf.ConfigProto(device_count={"CPU": 2})) as s:
        s.run(v.initializer)
        assert s.run(up) == 2.0
        placed = s.placement(up)
        assert placed[up.op.name] == placed["v"] and placed["v"].endswith("CPU:1")


def test_log_device_placement_prints_to_stderr(g, capsys):
    k = tf.constant(1.0, name="logged_k")
    i = tf.identity(k, name="logged_i")
    with tf.Session(config=tf.ConfigProto(log_device_placement=True)) as s:
        s.run(i)
    err = capsys.readouterr().err
    assert "logged_k" in err and "logged_i" in err
    assert "/device:CPU:0" in err or "/device:GPU:0" in err  # a GPU host prefers its GPU


# -- concurrency --------------------------------------------------------------------------------
def test_concurrent_runs_from_threads(g, sess):
    p = tf.placeholder(tf.int64, [None], name="p")
    y = p
    for _ in range(20):
        y = tf.identity(y)
    results: dict[int, bool] = {}

    def worker(i: int) -> None:
        ok = True
        for r in range(25):
            val = np.full(3, i * 1000 + r, np.int64)
            ok = ok and sess.run(y, {p: val}).tolist() == val.tolist()
        results[i] = ok

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(THREAD_TIMEOUT)
    assert not any(t.is_alive() for t in threads)
    assert results == {i: True for i in range(6)}
