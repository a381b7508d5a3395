"""FIFOQueue and PaddingFIFOQueue against TF 1.15's behaviour: graph structure and static
shapes, FIFO order, capacity, blocking and waking, close semantics, padding, named
components, queues shared between sessions, and cancellation of blocked operations
(session closed from another thread, run timeouts, another node of the step failing).

Every blocking run happens on a helper thread that is joined with a timeout, so a
regression fails a test instead of hanging the suite."""
from __future__ import annotations

import gc
import re
import time
import uuid
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors
from flowrt.graph import apply_op

from _threads import WAIT, Bg, wait_for  # noqa: F401


# -- helpers ------------------------------------------------------------------------------
def queue_obj(sess: Any, q: Any) -> Any:
    """The runtime queue behind ``q`` in ``sess`` (a fetched handle is the object)."""
    return sess.run(q.queue_ref)


def pending(qobj: Any, kind: str = "deq") -> int:
    return sum(not a.finished for a in getattr(qobj, "_" + kind))


def target() -> str:
    return "inproc://queues-" + uuid.uuid4().hex[:12]


def timeout_opts(ms: int) -> Any:
    return tf.RunOptions(timeout_in_ms=ms)


@pytest.fixture
def g():
    graph = tf.Graph()
    with graph.as_default():
        yield graph


@pytest.fixture
def sess(g):
    s = tf.Session(graph=g)
    yield s
    s.close()


# -- graph structure ------------------------------------------------------------------------
def test_ops_names_and_static_shapes(g):
    q = tf.FIFOQueue(10, [tf.int32, tf.string], shapes=[[2], []])
    assert q.queue_ref.op.type == "FIFOQueueV2" and q.queue_ref.op.name == "fifo_queue"
    assert q.queue_ref.dtype == tf.resource and q.queue_ref.shape.as_list() == []
    assert q.name == "fifo_queue" and q.dtypes == [tf.int32, tf.string]
    assert [s.as_list() for s in q.shapes] == [[2], []] and q.names is None
    attrs = q.queue_ref.op.node_attrs
    assert attrs["capacity"] == 10 and attrs["component_types"] == [tf.int32, tf.string]
    enq = q.enqueue([[1, 2], "a"])
    assert enq.type == "QueueEnqueueV2" and enq.name == "fifo_queue_enqueue"
    assert [t.op.name for t in enq.inputs[1:]] == ["fifo_queue_enqueue/component_0",
                                                   "fifo_queue_enqueue/component_1"]
    assert q.enqueue_many([[[1, 2]], ["a"]]).name == "fifo_queue_EnqueueMany"
    d = q.dequeue()
    assert d[0].op.type == "QueueDequeueV2" and d[0].op.name == "fifo_queue_Dequeue"
    assert d[0].shape.as_list() == [2] and d[1].shape.as_list() == []
    assert d[1].dtype == tf.string
    dm = q.dequeue_many(3)
    assert dm[0].op.name == "fifo_queue_DequeueMany"
    assert dm[0].shape.as_list() == [3, 2] and dm[1].shape.as_list() == [3]
    n = tf.placeholder(tf.int32, [])
    assert q.dequeue_many(n)[0].shape.as_list() == [None, 2]
    du = q.dequeue_up_to(4)
    assert du[0].op.type == "QueueDequeueUpToV2" and du[0].shape.as_list() == [None, 2]
    assert q.close().name == "fifo_queue_Close" and q.close().type == "QueueCloseV2"
    assert q.close(cancel_pending_enqueues=True).get_attr("cancel_pending_enqueues") is True
    assert q.size().op.name == "fifo_queue_Size" and q.size().dtype == tf.int32
    assert q.is_closed().op.name == "fifo_queue_Is_Closed"
    assert q.is_closed().dtype == tf.bool
    single = tf.FIFOQueue(3, tf.float32, name="single")
    assert isinstance(single.dequeue(), tf.Tensor)
    assert single.dequeue().shape.ndims is None and single.queue_ref.op.name == "single"
    assert single.queue_ref.op.node_attrs["shapes"] == []


def test_namespaces_and_classes():
    assert tf.queue.FIFOQueue is tf.FIFOQueue
    assert tf.queue.PaddingFIFOQueue is tf.PaddingFIFOQueue is tf.io.PaddingFIFOQueue
    assert tf.queue.QueueBase is tf.QueueBase is tf.io.QueueBase
    assert issubclass(tf.FIFOQueue, tf.QueueBase) and issubclass(tf.PaddingFIFOQueue,
                                                                 tf.QueueBase)


def test_queue_is_built_outside_control_dependencies(g):
    c = tf.constant(1)
    with tf.control_dependencies([c]):
        q = tf.FIFOQueue(2, tf.int32)
    assert q.queue_ref.op.control_inputs == []


def test_shape_fn_reads_queue_shapes_for_raw_ops(g):
    q = tf.FIFOQueue(4, [tf.float32], shapes=[[3]])
    (d,) = apply_op("QueueDequeueV2", handle=q.queue_ref, component_types=[tf.float32])
    assert d.shape.as_list() == [3]
    (dm,) = apply_op("QueueDequeueManyV2", handle=q.queue_ref, n=5,
                     component_types=[tf.float32])
    assert dm.shape.as_list() == [5, 3]
    (du,) = apply_op("QueueDequeueUpToV2", handle=q.queue_ref, n=5,
                     component_types=[tf.float32])
    assert du.shape.as_list() == [None, 3]


@pytest.mark.parametrize("make, match", [
    (lambda: tf.FIFOQueue(2, tf.int32, shapes=[[None]]), "fully defined"),
    (lambda: tf.FIFOQueue(2, [tf.int32, tf.int32], shapes=[[1]]), "same length"),
    (lambda: tf.FIFOQueue(2, [tf.int32], names=["a", "b"]), "same length"),
    (lambda: tf.PaddingFIFOQueue(2, [tf.int32], shapes=None), "list of shapes"),
    (lambda: tf.PaddingFIFOQueue(2, [tf.int32, tf.int32], shapes=[[None]]),
     "Shapes must be provided for all components"),
])
def test_bad_constructor_arguments(g, make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_build_time_errors(g):
    q = tf.FIFOQueue(5, [tf.int32], shapes=[[2]])
    with pytest.raises(ValueError, match="incompatible"):
        q.enqueue([[1, 2, 3]])
    with pytest.raises(ValueError, match="rank at least 1"):
        q.enqueue_many([5])
    with pytest.raises(ValueError, match="incompatible"):
        q.enqueue_many([[[1, 2, 3]]])
    with pytest.raises(ValueError, match="names to enqueue a dictionary"):
        q.enqueue({"a": [1, 2]})
    with pytest.raises((TypeError, ValueError)):
        q.enqueue([[1.5, 2.5]])  # float values for an int32 component
    with pytest.raises(ValueError, match="must be >= 0"):
        q.dequeue_many(-1)
    two = tf.FIFOQueue(5, [tf.int32, tf.float32], shapes=[[], []])
    with pytest.raises(ValueError, match="not compatible"):
        two.enqueue_many([[1, 2], [1.0, 2.0, 3.0]])
    named = tf.FIFOQueue(5, [tf.int32, tf.int32], names=["a", "b"])
    with pytest.raises(ValueError, match="must enqueue a dictionary"):
        named.enqueue([1, 2])
    with pytest.raises(ValueError, match="do not match names"):
        named.enqueue({"a": 1, "c": 2})


# -- FIFO basics ------------------------------------------------------------------------------
def test_fifo_order_size_and_components(g, sess):
    q = tf.FIFOQueue(10, [tf.int32, tf.string, tf.float64], shapes=[[2], [], []])
    x = tf.placeholder(tf.int32, [2])
    s = tf.placeholder(tf.string, [])
    f = tf.placeholder(tf.float64, [])
    enq = q.enqueue([x, s, f])
    deq = q.dequeue()
    size = q.size()
    for i in range(4):
        sess.run(enq, {x: [i, -i], s: f"s{i}", f: i / 2})
    assert sess.run(size) == 4
    for i in range(4):
        a, b, c = sess.run(deq)
        np.testing.assert_array_equal(a, [i, -i])
        assert a.dtype == np.int32 and b == f"s{i}".encode() and c == i / 2
        assert isinstance(c, np.float64)
    assert sess.run(size) == 0
    assert sess.run(q.is_closed()) == False  # noqa: E712 - numpy bool


@pytest.mark.parametrize("dtype, values", [
    (tf.bool, [True, False, True]),
    (tf.float16, [1.5, -2.0, 3.25]),
    (tf.int64, [2**40, -1, 7]),
    (tf.uint8, [0, 255, 7]),
    (tf.complex128, [1 + 2j, -3j, 0.5]),
    (tf.string, [b"a", b"", b"xyz"]),
])
def test_dtypes_round_trip(g, sess, dtype, values):
    q = tf.FIFOQueue(5, dtype, shapes=[[]])
    sess.run(q.enqueue_many([values]))
    one = sess.run(q.dequeue())
    rest = sess.run(q.dequeue_many(2))
    assert one == values[0]
    if dtype != tf.string:  # string scalars come back as bytes
        assert np.asarray(one).dtype == dtype.np
    np.testing.assert_array_equal(rest, np.array(values[1:], dtype=dtype.np))
    assert rest.dtype == dtype.np and rest.shape == (2,)


def test_enqueue_many_dequeue_many_and_up_to(g, sess):
    q = tf.FIFOQueue(10, [tf.int32, tf.float32], shapes=[[], [2]])
    sess.run(q.enqueue_many([[1, 2, 3, 4, 5], np.arange(10, dtype=np.float32).reshape(5, 2)]))
    a, b = sess.run(q.dequeue_many(2))
    np.testing.assert_array_equal(a, [1, 2])
    np.testing.assert_array_equal(b, [[0, 1], [2, 3]])
    a, b = sess.run(q.dequeue_up_to(2))
    np.testing.assert_array_equal(a, [3, 4])
    a, b = sess.run(q.dequeue_many(0))
    assert a.shape == (0,) and b.shape == (0, 2) and b.dtype == np.float32
    sess.run(q.enqueue_many([np.zeros(0, np.int32), np.zeros((0, 2), np.float32)]))
    assert sess.run(q.size()) == 1


def test_runtime_shape_and_dtype_errors(g, sess):
    q = tf.FIFOQueue(10, [tf.int32, tf.string], shapes=[[2], []])
    p = tf.placeholder(tf.int32)
    ps = tf.placeholder(tf.string)
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"Shape mismatch in tuple component 0. Expected \[2\], got \[3\]"):
        sess.run(q.enqueue([p, ps]), {p: [1, 2, 3], ps: "a"})
    em = q.enqueue_many([p, ps])
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"component 1. Expected \[3\], got \[2\]"):
        sess.run(em, {p: [[1, 2]] * 3, ps: ["a", "b"]})
    with pytest.raises(errors.InvalidArgumentError, match=r"Expected \[2,2\], got \[2,3\]"):
        sess.run(em, {p: [[1, 2, 3]] * 2, ps: ["a", "b"]})
    with pytest.raises(errors.InvalidArgumentError, match=r"got \[\]"):
        sess.run(em, {p: 1, ps: "a"})
    n = tf.placeholder(tf.int32)
    with pytest.raises(errors.InvalidArgumentError, match="requested -1 < 0 elements"):
        sess.run(q.dequeue_many(n), {n: -1})
    with pytest.raises(errors.InvalidArgumentError, match="must be scalar"):
        sess.run(q.dequeue_up_to(n), {n: [1, 2]})
    loose = tf.FIFOQueue(10, tf.float32)
    sess.run(loose.enqueue([[1.0, 2.0]]))
    with pytest.raises(errors.InvalidArgumentError, match="require the components to have "
                                                         "specified shapes"):
        sess.run(loose.dequeue_many(1))
    two = tf.FIFOQueue(10, [tf.float32, tf.float32])
    fa, fb = tf.placeholder(tf.float32), tf.placeholder(tf.float32)
    with pytest.raises(errors.InvalidArgumentError, match="All input tensors must have the "
                                                         "same size in the 0th dimension"):
        sess.run(two.enqueue_many([fa, fb]), {fa: [1.0, 2.0], fb: [1.0]})
    with pytest.raises(errors.InvalidArgumentError,
                       match="Wrong number of components in tuple. Expected 2, got 1"):
        sess.run(two.enqueue([fa]), {fa: 1.0})  # as TF, the missing one fails at run time
    assert sess.run(q.size()) == 0  # nothing half-enqueued


def test_timeout_attr_is_not_supported_as_in_tf(g, sess):
    q = tf.FIFOQueue(2, tf.int32, shapes=[[]])
    (d,) = apply_op("QueueDequeueV2", handle=q.queue_ref, component_types=[tf.int32],
                    timeout_ms=10)
    with pytest.raises(errors.InvalidArgumentError, match="Timeout not supported yet"):
        sess.run(d)


def test_unshaped_queue_holds_elements_of_any_shape(g, sess):
    q = tf.FIFOQueue(10, tf.float32)
    p = tf.placeholder(tf.float32)
    enq = q.enqueue(p)
    for v in ([1.0], [[1.0, 2.0]], 3.0):
        sess.run(enq, {p: v})
    deq = q.dequeue()
    assert sess.run(deq).shape == (1,)
    assert sess.run(deq).shape == (1, 2)
    assert sess.run(deq).shape == ()


def test_dequeued_values_do_not_alias_the_feed(g, sess):
    q = tf.FIFOQueue(10, tf.float32, shapes=[[3]])
    p = tf.placeholder(tf.float32, [3])
    sess.run(q.enqueue(p), {p: np.ones(3, np.float32)})
    feed = np.ones(3, np.float32)
    sess.run(q.enqueue(p), {p: feed})
    feed[:] = 7  # the queue keeps what was fed at the time
    a = sess.run(q.dequeue())
    a[:] = 5  # the caller owns what it gets
    np.testing.assert_array_equal(sess.run(q.dequeue()), [1, 1, 1])


def test_from_list_picks_a_queue_at_run_time(g, sess):
    q1 = tf.FIFOQueue(5, tf.int32, shapes=[[]])
    q2 = tf.FIFOQueue(5, tf.int32, shapes=[[2]])
    i = tf.placeholder(tf.int32, [])
    with pytest.raises(TypeError, match="matching component dtypes"):
        tf.QueueBase.from_list(i, [q1, tf.FIFOQueue(5, tf.float32)])
    picked = tf.QueueBase.from_list(i, [q1, q1])
    assert picked.shapes[0].as_list() == []
    sess.run(picked.enqueue(7), {i: 1})
    assert sess.run([q1.size(), q2.size()]) == [1, 0]
    assert sess.run(picked.dequeue(), {i: 0}) == 7
    mixed = tf.QueueBase.from_list(i, [q1, q2])
    assert mixed.shapes[0].ndims is None  # no common rank


def test_ref_handle_ops_of_tf1_graphs(g, sess):
    h = apply_op("FIFOQueue", component_types=[tf.float32], shapes=[[2]], capacity=3)
    assert h.dtype == tf.string._as_ref and h.shape.as_list() == [2]
    enq = apply_op("QueueEnqueue", handle=h, components=[[1.0, 2.0]])
    enq_many = apply_op("QueueEnqueueMany", handle=h, components=[[[3.0, 4.0], [5.0, 6.0]]])
    (deq,) = apply_op("QueueDequeue", handle=h, component_types=[tf.float32])
    (dm,) = apply_op("QueueDequeueMany", handle=h, n=2, component_types=[tf.float32])
    size = apply_op("QueueSize", handle=h)
    close = apply_op("QueueClose", handle=h)
    closed = apply_op("QueueIsClosed", handle=h)
    assert deq.shape.as_list() == [2] and dm.shape.as_list() == [2, 2]
    sess.run(enq)
    sess.run(enq_many)
    assert sess.run(size) == 3
    np.testing.assert_array_equal(sess.run(deq), [1, 2])
    sess.run(close)
    assert sess.run(closed)
    np.testing.assert_array_equal(sess.run(dm), [[3, 4], [5, 6]])
    with pytest.raises(errors.OutOfRangeError):
        sess.run(deq)


# -- capacity, blocking and waking ------------------------------------------------------------
def test_enqueue_blocks_while_full(g, sess):
    q = tf.FIFOQueue(2, tf.int32, shapes=[[]])
    p = tf.placeholder(tf.int32, [])
    enq = q.enqueue(p)
    deq = q.dequeue()
    sess.run(enq, {p: 1})
    sess.run(enq, {p: 2})
    with pytest.raises(errors.DeadlineExceededError):
        sess.run(enq, {p: 99}, options=timeout_opts(50))
    assert sess.run(q.size()) == 2  # the timed-out enqueue left nothing behind
    qobj = queue_obj(sess, q)
    assert pending(qobj, "enq") == 0
    bg = Bg(lambda: sess.run(enq, {p: 3}))
    wait_for(lambda: pending(qobj, "enq") == 1)
    assert bg.alive()
    assert sess.run(deq) == 1
    bg.result()
    assert [sess.run(deq) for _ in range(2)] == [2, 3]


def test_dequeue_blocks_while_empty_and_wakes(g, sess):
    q = tf.FIFOQueue(5, tf.float32, shapes=[[]])
    deq = q.dequeue()
    with pytest.raises(errors.DeadlineExceededError):
        sess.run(deq, options=timeout_opts(50))
    qobj = queue_obj(sess, q)
    assert pending(qobj) == 0
    bg = Bg(lambda: sess.run(deq))
    wait_for(lambda: pending(qobj) == 1)
    sess.run(q.enqueue(2.5))
    assert bg.result() == 2.5


def test_enqueue_many_fills_in_pieces_as_room_appears(g, sess):
    q = tf.FIFOQueue(2, tf.int32, shapes=[[]])
    qobj = queue_obj(sess, q)
    enq, size, deq = q.enqueue_many([[1, 2, 3, 4, 5]]), q.size(), q.dequeue()
    bg = Bg(lambda: sess.run(enq))
    wait_for(lambda: sess.run(size) == 2)
    out = []
    for _ in range(5):
        out.append(int(sess.run(deq)))
    bg.result()
    assert out == [1, 2, 3, 4, 5] and pending(qobj, "enq") == 0


def test_waiters_are_served_in_arrival_order(g, sess):
    q = tf.FIFOQueue(5, tf.int32, shapes=[[]])
    qobj = queue_obj(sess, q)
    deq = q.dequeue()
    first = Bg(lambda: sess.run(deq))
    wait_for(lambda: pending(qobj) == 1)
    second = Bg(lambda: sess.run(deq))
    wait_for(lambda: pending(qobj) == 2)
    p = tf.placeholder(tf.int32, [])
    enq = q.enqueue(p)
    sess.run(enq, {p: 10})
    assert first.result() == 10
    assert second.alive()
    sess.run(enq, {p: 20})
    assert second.result() == 20


def test_dequeue_many_at_the_head_holds_its_partial_batch(g, sess):
    q = tf.FIFOQueue(10, tf.int32, shapes=[[]])
    qobj = queue_obj(sess, q)
    p = tf.placeholder(tf.int32, [])
    enq = q.enqueue(p)
    sess.run(enq, {p: 1})
    sess.run(enq, {p: 2})
    many = Bg(lambda: sess.run(q.dequeue_many(3)))
    wait_for(lambda: pending(qobj) == 1 and sess.run(q.size()) == 0)
    single = Bg(lambda: sess.run(q.dequeue()))
    wait_for(lambda: pending(qobj) == 2)
    sess.run(enq, {p: 3})
    np.testing.assert_array_equal(many.result(), [1, 2, 3])
    assert single.alive()  # served after the batch, not before
    sess.run(enq, {p: 4})
    assert single.result() == 4


# -- the same step enqueues and dequeues ----------------------------------------------------
def test_step_dequeues_while_its_own_branch_enqueues(g, sess):
    """The dequeue blocks first; the enqueue of the same step then wakes it: a blocked
    dequeue must not hold the step's thread."""
    a = tf.FIFOQueue(5, tf.int32, shapes=[[]], name="a")
    b = tf.FIFOQueue(5, tf.int32, shapes=[[]], name="b")
    deq_a = a.dequeue()
    enq_a = a.enqueue(b.dequeue() * 10)  # ready only after b's dequeue completes
    aobj, bobj = queue_obj(sess, a), queue_obj(sess, b)
    run = Bg(lambda: sess.run([deq_a, enq_a]))
    wait_for(lambda: pending(aobj) == 1 and pending(bobj) == 1)
    assert run.alive()
    sess.run(b.enqueue(4))
    assert run.result() == [40, None]
    sess.run(b.enqueue(5))  # and again, with b already full when the step starts
    assert sess.run([deq_a, enq_a]) == [50, None]
    assert sess.run([a.size(), b.size()]) == [0, 0]


def test_one_step_enqueues_many_and_dequeues_many(g, sess):
    q = tf.FIFOQueue(3, tf.int32, shapes=[[]])
    v = tf.constant([1, 2, 3, 4, 5, 6])
    out = sess.run([q.dequeue_many(6), q.enqueue_many([v])])
    np.testing.assert_array_equal(out[0], [1, 2, 3, 4, 5, 6])


# -- close ------------------------------------------------------------------------------------
def test_close_semantics(g, sess):
    q = tf.FIFOQueue(5, tf.int32, shapes=[[]])
    sess.run(q.enqueue_many([[1, 2]]))
    sess.run(q.close())
    assert sess.run(q.is_closed())
    with pytest.raises(errors.CancelledError, match=r"FIFOQueue '_\d+_fifo_queue' is closed\."):
        sess.run(q.enqueue(4))
    with pytest.raises(errors.CancelledError, match=r"Queue '_\d+_fifo_queue' is already "
                                                    r"closed\."):
        sess.run(q.close())
    sess.run(q.close(cancel_pending_enqueues=True))  # no error when cancelling
    with pytest.raises(errors.OutOfRangeError,
                       match=r"FIFOQueue '_\d+_fifo_queue' is closed and has insufficient "
                             r"elements \(requested 3, current size 2\)"):
        sess.run(q.dequeue_many(3))
    assert sess.run(q.size()) == 2  # a failed dequeue_many takes nothing
    assert sess.run(q.dequeue()) == 1
    np.testing.assert_array_equal(sess.run(q.dequeue_up_to(5)), [2])
    with pytest.raises(errors.OutOfRangeError,
                       match=r"insufficient elements \(requested 5, current size 0\)"):
        sess.run(q.dequeue_up_to(5))
    with pytest.raises(errors.OutOfRangeError,
                       match=r"FIFOQueue '_\d+_fifo_queue' is closed and has insufficient "
                             r"elements \(requested 1, current size 0\)"):
        sess.run(q.dequeue())
    np.testing.assert_array_equal(sess.run(q.dequeue_many(0)), np.zeros(0, np.int32))


def test_close_wakes_blocked_dequeues(g, sess):
    q = tf.FIFOQueue(5, tf.int32, shapes=[[]])
    qobj = queue_obj(sess, q)
    dm, du, d = q.dequeue_many(3), q.dequeue_up_to(3), q.dequeue()
    sess.run(q.enqueue(1))
    one = Bg(lambda: sess.run(dm))
    wait_for(lambda: pending(qobj) == 1)
    up_to = Bg(lambda: sess.run(du))
    wait_for(lambda: pending(qobj) == 2)
    empty = Bg(lambda: sess.run(d))
    wait_for(lambda: pending(qobj) == 3)
    sess.run(q.close())
    # the dequeue_many gives back its partial batch (TF's message counts what it still
    # needed and the size before the give-back)
    e = one.error()
    assert isinstance(e, errors.OutOfRangeError)
    assert "(requested 2, current size 0)" in e.message
    np.testing.assert_array_equal(up_to.result(), [1])
    assert isinstance(empty.error(), errors.OutOfRangeError)


def test_close_waits_for_pending_enqueues(g, sess):
    q = tf.FIFOQueue(1, tf.int32, shapes=[[]])
    qobj = queue_obj(sess, q)
    p = tf.placeholder(tf.int32, [])
    enq = q.enqueue(p)
    sess.run(enq, {p: 1})
    blocked = Bg(lambda: sess.run(enq, {p: 2}))
    wait_for(lambda: pending(qobj, "enq") == 1)
    closer = Bg(lambda: sess.run(q.close()))
    wait_for(lambda: pending(qobj, "enq") == 2)
    assert closer.alive() and not sess.run(q.is_closed())
    assert sess.run(q.dequeue()) == 1
    blocked.result()
    closer.result()
    assert sess.run(q.is_closed()) and sess.run(q.size()) == 1
    assert sess.run(q.dequeue()) == 2


def test_close_cancelling_pending_enqueues(g, sess):
    q = tf.FIFOQueue(1, tf.int32, shapes=[[]])
    qobj = queue_obj(sess, q)
    sess.run(q.enqueue(1))
    enq, enq_many = q.enqueue(2), q.enqueue_many([[3, 4]])
    blocked = Bg(lambda: sess.run(enq))
    wait_for(lambda: pending(qobj, "enq") == 1)
    many = Bg(lambda: sess.run(enq_many))
    wait_for(lambda: pending(qobj, "enq") == 2)
    sess.run(q.close(cancel_pending_enqueues=True))
    for bg in (blocked, many):
        e = bg.error()
        assert isinstance(e, errors.CancelledError)
        assert "Enqueue operation was cancelled" in e.message
    assert sess.run(q.dequeue()) == 1
    with pytest.raises(errors.OutOfRangeError):
        sess.run(q.dequeue())


# -- cancellation ---------------------------------------------------------------------------
@pytest.mark.parametrize("shared", [False, True])
def test_session_close_cancels_blocked_dequeue(shared):
    addr = target() if shared else ""
    g = tf.Graph()
    with g.as_default():
        q = tf.FIFOQueue(1, tf.int32, shapes=[[]], shared_name="q" if shared else None)
        deq = q.dequeue()
        enq = q.enqueue(5)
    s = tf.Session(addr, graph=g)
    qobj = queue_obj(s, q)
    bg = Bg(lambda: s.run(deq))
    wait_for(lambda: pending(qobj) == 1)
    t0 = time.monotonic()
    s.close()
    e = bg.error()
    assert isinstance(e, errors.CancelledError) and time.monotonic() - t0 < WAIT
    assert "Dequeue operation was cancelled" in e.message
    assert pending(qobj) == 0
    if shared:  # the queue outlives the session; the withdrawn dequeue takes nothing
        with tf.Session(addr, graph=g) as s2:
            s2.run(enq)
            assert s2.run(q.size()) == 1 and s2.run(deq) == 5


def test_session_close_cancels_blocked_enqueue_and_close(g):
    q = tf.FIFOQueue(1, tf.int32, shapes=[[]])
    s = tf.Session(graph=g)
    qobj = queue_obj(s, q)
    s.run(q.enqueue(1))
    enq_op, close_op = q.enqueue(2), q.close()
    enq = Bg(lambda: s.run(enq_op))
    wait_for(lambda: pending(qobj, "enq") == 1)
    closer = Bg(lambda: s.run(close_op))
    wait_for(lambda: pending(qobj, "enq") == 2)
    s.close()
    e = enq.error()
    assert isinstance(e, errors.CancelledError) and "Enqueue operation was cancelled" in e.message
    closer.thread.join(WAIT)
    assert not closer.alive()
    # the close was waiting behind the enqueue: once that is withdrawn it may run before
    # its own step is cancelled (TF has the same race); either way it does not hang
    assert closer.exc is None or isinstance(closer.exc, errors.CancelledError)


def test_cancelled_dequeue_many_gives_its_partial_batch_back():
    addr = target()
    g = tf.Graph()
    with g.as_default():
        q = tf.FIFOQueue(10, tf.int32, shapes=[[]], shared_name="partial")
        dm = q.dequeue_many(3)
        fill, size, enq = q.enqueue_many([[1, 2]]), q.size(), q.enqueue(3)
    s1 = tf.Session(addr, graph=g)
    s2 = tf.Session(addr, graph=g)
    try:
        qobj = queue_obj(s1, q)
        s1.run(fill)
        bg = Bg(lambda: s1.run(dm))
        wait_for(lambda: pending(qobj) == 1 and s2.run(size) == 0)
        s1.close()
        assert isinstance(bg.error(), errors.CancelledError)
        assert s2.run(size) == 2
        s2.run(enq)
        np.testing.assert_array_equal(s2.run(dm), [1, 2, 3])
    finally:
        s1.close()
        s2.close()


def test_step_abort_from_a_failing_node_cancels_the_dequeue(g, sess):
    q = tf.FIFOQueue(5, tf.int32, shapes=[[]])
    qobj = queue_obj(sess, q)
    x = tf.placeholder(tf.float32, [None])
    bad = tf.reshape(x, [3])
    with pytest.raises(errors.InvalidArgumentError):
        sess.run([q.dequeue(), bad], {x: [1.0, 2.0]})
    assert pending(qobj) == 0
    sess.run(q.enqueue(7))
    assert sess.run(q.size()) == 1 and sess.run(q.dequeue()) == 7


def test_run_timeout_while_another_thread_waits(g, sess):
    q = tf.FIFOQueue(5, tf.int32, shapes=[[]])
    qobj = queue_obj(sess, q)
    deq = q.dequeue()
    patient = Bg(lambda: sess.run(deq))
    wait_for(lambda: pending(qobj) == 1)
    with pytest.raises(errors.DeadlineExceededError):
        sess.run(deq, options=timeout_opts(30))
    assert pending(qobj) == 1  # only the timed-out attempt was withdrawn
    sess.run(q.enqueue(3))
    assert patient.result() == 3


def test_reset_cancels_waiters_of_a_shared_queue():
    addr = target()
    g = tf.Graph()
    with g.as_default():
        q = tf.FIFOQueue(5, tf.int32, shapes=[[]], shared_name="reset_me")
        deq = q.dequeue()
    s = tf.Session(addr, graph=g)
    qobj = queue_obj(s, q)
    bg = Bg(lambda: s.run(deq))
    wait_for(lambda: pending(qobj) == 1)
    tf.Session.reset(addr)
    assert isinstance(bg.error(), errors.CancelledError)
    assert qobj.closed


# -- sharing between sessions ---------------------------------------------------------------
def _cpu_rm(addr: str) -> Any:
    master = tf.default_runtime().transport("inproc").master_client(addr[len("inproc://"):])
    return [d for d in master.local_worker.devices if d.device_type == "CPU"][0].resource_mgr


def test_sharing_rules():
    addr = target()
    g = tf.Graph()
    with g.as_default():
        shared = tf.FIFOQueue(5, tf.int32, shapes=[[]], shared_name="shared")
        private = tf.FIFOQueue(5, tf.int32, shapes=[[]])
        enq_both = [shared.enqueue(1), private.enqueue(1)]
        sizes = [shared.size(), private.size()]
        deq, enq = shared.dequeue(), shared.enqueue(1)
    s1, s2 = tf.Session(addr, graph=g), tf.Session(addr, graph=g)
    d1, d2 = tf.Session(graph=g), tf.Session(graph=g)
    try:
        s1.run(enq_both)
        assert s2.run(sizes) == [1, 0]
        assert s2.run(deq) == 1 and s1.run(sizes[0]) == 0
        d1.run(enq)  # sessions on "" are private, shared_name or not
        assert d2.run(sizes[0]) == 0 and s1.run(sizes[0]) == 0
        names = _cpu_rm(addr).names()  # one private queue per session that used it
        assert "shared" in names and sorted(n for n in names if n.startswith("_")) == [
            "_0_fifo_queue_1", "_1_fifo_queue_1"]
    finally:
        s1.close()
        gc.collect()
        # the private queue of the closed session is dropped; the shared one stays
        names = _cpu_rm(addr).names()
        assert "shared" in names and [n for n in names if n.startswith("_")] == [
            "_1_fifo_queue_1"]
        for s in (s2, d1, d2):
            s.close()


@pytest.mark.parametrize("make, match", [
    (lambda: tf.FIFOQueue(4, tf.int32, shared_name="shq"),
     "Shared queue 'shq' has capacity 3 but requested capacity was 4"),
    (lambda: tf.FIFOQueue(3, tf.float32, shared_name="shq"),
     "Shared queue 'shq' has component types int32 but requested component types were float"),
    (lambda: tf.FIFOQueue(3, tf.int32, shapes=[[2]], shared_name="shq"),
     r"has component shapes \[\] but requested component shapes were \[\[2\]\]"),
    (lambda: tf.PaddingFIFOQueue(3, tf.int32, shapes=[[None]], shared_name="shq"),
     "Expected FIFOQueue, found PaddingFIFOQueueV2"),
])
def test_shared_queue_must_match(g, sess, make, match):
    sess.run(tf.FIFOQueue(3, tf.int32, shared_name="shq").size())
    with pytest.raises(errors.InvalidArgumentError, match=match):
        sess.run(make().size())


def test_producers_and_consumers_in_several_sessions():
    addr = target()
    g = tf.Graph()
    with g.as_default():
        q = tf.FIFOQueue(4, [tf.int32, tf.int32], shapes=[[], []], shared_name="work")
        who = tf.placeholder(tf.int32, [None])
        seq = tf.placeholder(tf.int32, [None])
        enq = q.enqueue_many([who, seq])
        take = q.dequeue_up_to(3)
        close = q.close()
    n_prod, per = 3, 40
    producers = [tf.Session(addr, graph=g) for _ in range(n_prod)]
    consumers = [tf.Session(addr, graph=g) for _ in range(2)]
    got: list[list[tuple[int, int]]] = [[] for _ in consumers]

    def produce(k: int) -> None:
        for start in range(0, per, 5):
            producers[k].run(enq, {who: [k] * 5, seq: list(range(start, start + 5))})

    def consume(k: int) -> None:
        while True:
            try:
                a, b = consumers[k].run(take)
            except errors.OutOfRangeError:
                return
            got[k].extend(zip(a.tolist(), b.tolist()))

    try:
        cons = [Bg(lambda k=k: consume(k)) for k in range(len(consumers))]
        prods = [Bg(lambda k=k: produce(k)) for k in range(n_prod)]
        for p in prods:
            p.result(10)
        producers[0].run(close)
        for c in cons:
            c.result(10)
    finally:
        for s in producers + consumers:
            s.close()
    everything = sorted(x for part in got for x in part)
    assert everything == sorted((k, i) for k in range(n_prod) for i in range(per))
    for part in got:  # each producer's elements come out in the order it put them in
        for k in range(n_prod):
            mine = [i for w, i in part if w == k]
            assert mine == sorted(mine)


def test_threads_share_one_session(g, sess):
    q = tf.FIFOQueue(3, tf.int32, shapes=[[]])
    p = tf.placeholder(tf.int32, [])
    enq = q.enqueue(p)
    deq = q.dequeue()
    out: list[int] = []
    consumer = Bg(lambda: [out.append(int(sess.run(deq))) for _ in range(30)])
    producer = Bg(lambda: [sess.run(enq, {p: i}) for i in range(30)])
    producer.result()
    consumer.result()
    assert out == list(range(30))


# -- PaddingFIFOQueue ---------------------------------------------------------------------------
def test_padding_queue_pads_batches(g, sess):
    q = tf.PaddingFIFOQueue(10, [tf.int32, tf.string], shapes=[[None, 2], [None]])
    assert q.queue_ref.op.type == "PaddingFIFOQueueV2"
    assert q.queue_ref.op.name == "padding_fifo_queue"
    p = tf.placeholder(tf.int32)
    ps = tf.placeholder(tf.string)
    enq = q.enqueue([p, ps])
    dm = q.dequeue_many(2)
    assert [t.shape.as_list() for t in dm] == [[2, None, 2], [2, None]]
    assert [t.shape.as_list() for t in q.dequeue()] == [[None, 2], [None]]
    sess.run(enq, {p: [[1, 2]], ps: ["x"]})
    sess.run(enq, {p: [[1, 2], [3, 4], [5, 6]], ps: ["x", "yy"]})
    sess.run(enq, {p: np.zeros((0, 2)), ps: []})
    a, b = sess.run(dm)
    np.testing.assert_array_equal(a, [[[1, 2], [0, 0], [0, 0]], [[1, 2], [3, 4], [5, 6]]])
    assert a.dtype == np.int32
    assert b.tolist() == [[b"x", b""], [b"x", b"yy"]]
    a, b = sess.run(q.dequeue_many(1))
    assert a.shape == (1, 0, 2) and b.shape == (1, 0)
    a, b = sess.run(q.dequeue_many(0))
    assert a.shape == (0, 0, 2) and b.shape == (0, 0)
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"Shape mismatch in tuple component 0. Expected \[\?,2\], "
                             r"got \[2\]"):
        sess.run(enq, {p: [1, 2], ps: ["x"]})
    with pytest.raises(errors.InvalidArgumentError, match=r"Expected \[\?,2\], got \[1,3\]"):
        sess.run(enq, {p: [[1, 2, 3]], ps: ["x"]})


def test_padding_queue_single_dequeue_and_close(g, sess):
    q = tf.PaddingFIFOQueue(10, [tf.float32], shapes=[[None]])
    p = tf.placeholder(tf.float32, [None])
    enq = q.enqueue([p])
    for v in ([1.0], [1.0, 2.0, 3.0], [4.0, 5.0]):
        sess.run(enq, {p: v})
    np.testing.assert_array_equal(sess.run(q.dequeue()), [1.0])  # no padding
    sess.run(q.close())
    np.testing.assert_array_equal(sess.run(q.dequeue_up_to(5)), [[1, 2, 3], [4, 5, 0]])
    with pytest.raises(errors.OutOfRangeError,
                       match=r"PaddingFIFOQueue '_\d+_padding_fifo_queue' is closed and has "
                             r"insufficient elements \(requested 5, current size 0\)"):
        sess.run(q.dequeue_up_to(5))
    with pytest.raises(errors.OutOfRangeError, match=r"^FIFOQueue '_\d+_padding_fifo_queue'"):
        sess.run(q.dequeue())


def test_padding_queue_enqueue_many_with_fixed_and_free_dims(g, sess):
    q = tf.PaddingFIFOQueue(10, [tf.int64, tf.bool], shapes=[[None], [2]])
    sess.run(q.enqueue_many([[[1, 2], [3, 4]], [[True, False], [False, True]]]))
    a, b = sess.run(q.dequeue_many(2))
    np.testing.assert_array_equal(a, [[1, 2], [3, 4]])
    assert a.dtype == np.int64 and b.dtype == np.bool_
    flags = tf.placeholder(tf.bool)
    with pytest.raises(errors.InvalidArgumentError, match=r"Expected \[2,2\], got \[2,3\]"):
        sess.run(q.enqueue_many([[[1], [2]], flags]), {flags: [[True] * 3] * 2})


# -- named components ---------------------------------------------------------------------------
def test_names_give_dicts(g, sess):
    q = tf.FIFOQueue(5, [tf.int32, tf.float32], names=["a", "b"], shapes=[[], [2]])
    assert q.names == ["a", "b"]
    sess.run(q.enqueue({"b": [1.0, 2.0], "a": 1}))
    sess.run(q.enqueue_many({"a": [2, 3], "b": [[3.0, 4.0], [5.0, 6.0]]}))
    d = q.dequeue()
    assert set(d) == {"a", "b"} and d["b"].shape.as_list() == [2]
    out = sess.run(d)
    assert out["a"] == 1
    np.testing.assert_array_equal(out["b"], [1, 2])
    many = sess.run(q.dequeue_many(2))
    np.testing.assert_array_equal(many["a"], [2, 3])
    np.testing.assert_array_equal(many["b"], [[3, 4], [5, 6]])
    single = tf.FIFOQueue(5, tf.int32, names="only", shapes=[[]])
    sess.run(single.enqueue({"only": 4}))
    assert sess.run(single.dequeue()) == {"only": 4}
    padded = tf.PaddingFIFOQueue(5, [tf.int32], names=["v"], shapes=[[None]])
    sess.run(padded.enqueue({"v": [1, 2]}))
    sess.run(padded.enqueue({"v": [3]}))
    np.testing.assert_array_equal(sess.run(padded.dequeue_many(2))["v"], [[1, 2], [3, 0]])


# -- a model check ------------------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["enq", "deq", "up_to", "size"]),
                          st.integers(0, 4)), min_size=1, max_size=12))
def test_matches_a_deque_model(ops):
    g = tf.Graph()
    with g.as_default():
        q = tf.FIFOQueue(100, tf.int32, shapes=[[]])
        vals = tf.placeholder(tf.int32, [None])
        n = tf.placeholder(tf.int32, [])
        enq, deq, size = q.enqueue_many([vals]), q.dequeue_many(n), q.size()
        up_to = q.dequeue_up_to(n)
    model: list[int] = []
    counter = 0
    with tf.Session(graph=g) as s:
        for op, k in ops:
            if op == "enq":
                new = list(range(counter, counter + k))
                counter += k
                s.run(enq, {vals: new})
                model.extend(new)
            elif op in ("deq", "up_to") and k <= len(model):
                got = s.run(deq if op == "deq" else up_to, {n: k})
                assert got.tolist() == model[:k] and got.dtype == np.int32
                del model[:k]
            elif op != "size":  # too few elements: it would block
                with pytest.raises(errors.DeadlineExceededError):
                    s.run(deq, {n: k}, options=timeout_opts(5))
            assert s.run(size) == len(model)
        s.run(q.close())
        rest = s.run(up_to, {n: 1000}) if model else np.zeros(0, np.int32)
        assert rest.tolist() == model


# -- RandomShuffleQueue ---------------------------------------------------------------------------
def test_shuffle_queue_structure_and_seeds(g):
    q = tf.RandomShuffleQueue(10, 2, [tf.int32], shapes=[[]])
    op = q.queue_ref.op
    assert op.type == "RandomShuffleQueueV2" and op.name == "random_shuffle_queue"
    assert op.get_attr("min_after_dequeue") == 2 and op.get_attr("capacity") == 10
    assert (op.get_attr("seed"), op.get_attr("seed2")) == (0, 0)  # no seed: random
    assert tf.queue.RandomShuffleQueue is tf.RandomShuffleQueue is tf.io.RandomShuffleQueue
    seeded = tf.RandomShuffleQueue(10, 0, tf.int32, seed=5)
    assert seeded.queue_ref.op.get_attr("seed2") == 5
    g.seed = 3
    shared = tf.RandomShuffleQueue(10, 3, tf.int32, shared_name="sq2")
    # TF: a shared queue's op seed comes from the graph seed and the shared name only
    assert (shared.queue_ref.op.get_attr("seed"), shared.queue_ref.op.get_attr("seed2")) == \
        (3, 1118592748)
    assert q.dequeue_many(4).shape.as_list() == [4]


def test_shuffle_queue_keeps_min_after_dequeue_until_closed(g, sess):
    q = tf.RandomShuffleQueue(10, 2, tf.int32, shapes=[[]], seed=7)
    sess.run(q.enqueue_many([[1, 2, 3, 4, 5]]))
    first = sess.run(q.dequeue_many(3))
    assert len(set(first.tolist())) == 3 and set(first.tolist()) <= {1, 2, 3, 4, 5}
    assert sess.run(q.size()) == 2
    with pytest.raises(errors.DeadlineExceededError):
        sess.run(q.dequeue(), options=timeout_opts(30))
    qobj = queue_obj(sess, q)
    dm = q.dequeue_many(3)
    bg = Bg(lambda: sess.run(dm))
    wait_for(lambda: pending(qobj) == 1)
    sess.run(q.close())
    e = bg.error()  # the partial batch goes back; TF's message
    assert isinstance(e, errors.OutOfRangeError)
    assert re.search(r"RandomShuffleQueue '_\d+_random_shuffle_queue' is closed and has "
                     r"insufficient elements \(requested 3, current size 2\)", e.message)
    rest = sess.run(q.dequeue_up_to(10)).tolist()  # closed: min_after_dequeue is ignored
    assert sorted(first.tolist() + rest) == [1, 2, 3, 4, 5]
    with pytest.raises(errors.OutOfRangeError, match=r"\(requested 1, current size 0\)"):
        sess.run(q.dequeue())
    with pytest.raises(errors.CancelledError, match="RandomShuffleQueue '.*' is closed."):
        sess.run(q.enqueue(1))


def test_shuffle_queue_order_is_random_and_seeded():
    def drain(seed: int) -> list[int]:
        g = tf.Graph()
        with g.as_default():
            q = tf.RandomShuffleQueue(100, 0, tf.int32, shapes=[[]], seed=seed)
            fill, take = q.enqueue_many([list(range(50))]), q.dequeue_many(50)
        with tf.Session(graph=g) as s:
            s.run(fill)
            return s.run(take).tolist()

    a, b, c = drain(1), drain(1), drain(2)
    assert sorted(a) == list(range(50))
    assert a == b and a != c and a != list(range(50))


def test_shared_shuffle_queue_must_match(g, sess):
    sess.run(tf.RandomShuffleQueue(10, 3, tf.int32, shared_name="sq", seed=5).size())
    with pytest.raises(errors.InvalidArgumentError, match="has min_after_dequeue 3 but "
                                                         "requested min_after_dequeue was 2"):
        sess.run(tf.RandomShuffleQueue(10, 2, tf.int32, shared_name="sq", seed=5).size())
    with pytest.raises(errors.InvalidArgumentError, match=r"has random seeds \(87654321, 5\) "
                                                         r"but requested seeds are"):
        sess.run(tf.RandomShuffleQueue(10, 3, tf.int32, shared_name="sq", seed=6).size())
    with pytest.raises(errors.InvalidArgumentError, match="Expected RandomShuffleQueue, found "
                                                         "FIFOQueueV2"):
        sess.run(tf.FIFOQueue(10, tf.int32, shared_name="sq").size())


# -- placement ----------------------------------------------------------------------------
def test_ops_on_a_queue_or_ref_variable_go_where_it_is_whatever_their_device_scope() -> None:
    """TF's placer ignores the device request of an op whose reference or resource input
    lives elsewhere ("... is a reference connection"), and puts the op with it; its
    other inputs stay where they were asked to be."""
    cpu0, cpu1 = ("/job:localhost/replica:0/task:0/device:CPU:0",
                  "/job:localhost/replica:0/task:0/device:CPU:1")
    g = tf.Graph()
    with g.as_default():
        with tf.device("/cpu:0"):
            q = tf.FIFOQueue(2, tf.float32)
            v = tf.Variable(1.0, use_resource=False)
        with tf.device("/cpu:1"):
            e = q.enqueue(tf.constant(5.0, name="five"))
            d = q.dequeue()
            a = tf.assign_add(v, 2.0)
    with tf.Session(graph=g, config=tf.ConfigProto(device_count={"CPU": 2})) as s:
        s.run(v.initializer)
        s.run(e)
        assert s.run(d) == 5.0
        assert s.run(a) == 3.0
        placed = s.placement(e)
        assert placed[e.name] == cpu0 and placed[q.queue_ref.op.name] == cpu0
        assert placed["five"] == cpu1
        assert s.placement(a)[a.op.name] == cpu0
    # two explicit colocation requests that disagree are still an error, as in TF
    g = tf.Graph()
    with g.as_default():
        with tf.device("/cpu:0"):
            c = tf.constant(1.0, name="c")
        with tf.colocate_with(c), tf.device("/cpu:1"):
            x = tf.identity(c, name="x")
        x.op._set_device("/cpu:1")
    with tf.Session(graph=g, config=tf.ConfigProto(device_count={"CPU": 2})) as s:
        with pytest.raises(errors.InvalidArgumentError, match="Cannot colocate nodes"):
            s.run(x)
