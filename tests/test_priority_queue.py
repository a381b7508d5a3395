"""tf.PriorityQueue (also tf.io / tf.queue): elements leave in ascending int64 priority
(ties in the order TF's std::priority_queue gives), dequeue_many waits for a whole sorted
batch, dequeue_up_to and close follow TF's PriorityQueue (including its OutOfRange after
a partial batch), capacity blocks, and TF's errors for bad priorities and shapes."""
from __future__ import annotations

import heapq
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors
from flowrt.graph import apply_op

from _threads import Bg


def test_names_structure_and_static_shapes() -> None:
    assert tf.PriorityQueue is tf.io.PriorityQueue is tf.queue.PriorityQueue
    q = tf.PriorityQueue(10, [tf.string, tf.int32], shapes=[[], [2]])
    assert q.dtypes == [tf.int64, tf.string, tf.int32]
    assert [s.as_list() for s in q.shapes] == [[], [], [2]]
    op = q.queue_ref.op
    assert op.type == "PriorityQueueV2" and op.get_attr("capacity") == 10
    assert [tf.as_dtype(t) for t in op.get_attr("component_types")] == [tf.string, tf.int32]
    assert [s.as_list() for s in op.get_attr("shapes")] == [[], [2]]
    d = q.dequeue_many(3)
    assert [t.shape.as_list() for t in d] == [[3], [3], [3, 2]]


def test_order_ties_and_batches() -> None:
    q = tf.PriorityQueue(10, [tf.string], shapes=[[]])
    enq = q.enqueue_many(([3, 1, 1, 1, 0, 3], [b"a", b"b", b"c", b"d", b"e", b"f"]))
    with tf.Session() as sess:
        sess.run(enq)
        assert sess.run(q.size()) == 6
        p, v = sess.run(q.dequeue_many(6))
    assert p.tolist() == [0, 1, 1, 1, 3, 3]
    assert v.tolist() == [b"e", b"c", b"b", b"d", b"a", b"f"]  # TF's order for ties


def test_dequeue_one_and_named_components() -> None:
    q = tf.PriorityQueue(5, [tf.float32], shapes=[[2]], names=["p", "x"])
    enq = [q.enqueue({"p": np.int64(p), "x": [p, -p]}) for p in (4, -2, 9)]
    out = q.dequeue()
    with tf.Session() as sess:
        sess.run(enq)
        got = [sess.run(out) for _ in range(3)]
    assert [g["p"] for g in got] == [-2, 4, 9]
    np.testing.assert_array_equal(got[0]["x"], np.float32([-2, 2]))


def test_closed_queue_errors_and_up_to_after_close() -> None:
    q = tf.PriorityQueue(10, [tf.string], shapes=[[]])
    with tf.Session() as sess:
        sess.run(q.enqueue_many(([5, 1, 3], [b"a", b"b", b"c"])))
        sess.run(q.close())
        with pytest.raises(errors.CancelledError, match="PriorityQueue '.*' is closed."):
            sess.run(q.enqueue((1, "x")))
        with pytest.raises(errors.OutOfRangeError, match=r"is closed and has insufficient "
                           r"elements \(requested 4, current size 3\)"):
            sess.run(q.dequeue_many(4))
        # as TF: up_to takes what is left, then fails for the rest
        with pytest.raises(errors.OutOfRangeError, match=r"\(requested 2, current size 0\)"):
            sess.run(q.dequeue_up_to(5))
        assert sess.run(q.size()) == 0
        with pytest.raises(errors.OutOfRangeError, match=r"\(requested 1, current size 0\)"):
            sess.run(q.dequeue())
        assert sess.run(q.is_closed())


def test_up_to_full_batch_and_zero() -> None:
    q = tf.PriorityQueue(10, [tf.int32], shapes=[[]])
    with tf.Session() as sess:
        sess.run(q.enqueue_many(([2, 1, 3], [20, 10, 30])))
        p, v = sess.run(q.dequeue_up_to(2))
        assert p.tolist() == [1, 2] and v.tolist() == [10, 20]
        p, v = sess.run(q.dequeue_many(0))
        assert p.shape == (0,) and v.dtype == np.int32


def test_bad_priorities_and_shapes() -> None:
    q = tf.PriorityQueue(10, [tf.string], shapes=[[]])
    with pytest.raises(ValueError, match="incompatible"):
        q.enqueue(([1, 2], "x"))
    p = tf.placeholder(tf.int64)
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError, match=r"Shape mismatch in tuple "
                           r"component 0. Expected \[\], got \[2\]"):
            sess.run(q.enqueue((p, "x")), {p: [1, 2]})
    # shapes=[] at the op: unspecified (Python's PriorityQueue always gives shapes)
    ref = apply_op("PriorityQueueV2", component_types=[tf.string], shapes=[], capacity=10)
    free = tf.queue.QueueBase([tf.int64, tf.string], None, None, ref)
    with tf.Session() as sess:
        with pytest.raises(errors.InvalidArgumentError, match="Expected the priority "
                           r"element to be a scalar, but received shape: \[2\]"):
            sess.run(free.enqueue((p, "x")), {p: [1, 2]})
        with pytest.raises(errors.InvalidArgumentError, match="PriorityQueue's DequeueMany "
                           "requires the components to have specified shapes."):
            sess.run(free.dequeue_many(1))
        sess.run(free.enqueue((p, "x")), {p: 3})
        assert sess.run(free.dequeue())[1] == b"x"
    with pytest.raises(TypeError, match="Expected list for 'shapes'"):
        tf.PriorityQueue(10, [tf.string])


def test_capacity_blocks_until_dequeue_and_cancel_pending() -> None:
    q = tf.PriorityQueue(1, [tf.int32], shapes=[[]])
    enq = q.enqueue((tf.constant(7, tf.int64), 70))
    with tf.Session() as sess:
        sess.run(enq)
        bg = Bg(lambda: sess.run(enq))
        time.sleep(0.2)
        assert bg.alive()
        assert sess.run(q.dequeue())[0] == 7
        bg.result()
        blocked = Bg(lambda: sess.run(enq))
        time.sleep(0.2)
        sess.run(q.close(cancel_pending_enqueues=True))
        assert isinstance(blocked.error(), errors.CancelledError)


def test_dequeue_many_waits_for_whole_batch() -> None:
    q = tf.PriorityQueue(10, [tf.int32], shapes=[[]])
    with tf.Session() as sess:
        sess.run(q.enqueue((5, 50)))
        bg = Bg(lambda: sess.run(q.dequeue_many(2)))
        time.sleep(0.2)
        assert bg.alive() and sess.run(q.size()) == 1
        sess.run(q.enqueue((2, 20)))
        p, v = bg.result()
    assert p.tolist() == [2, 5] and v.tolist() == [20, 50]


def test_shared_queue_must_match() -> None:
    a = tf.PriorityQueue(4, [tf.int32], shapes=[[]], shared_name="pq_shared")
    b = tf.PriorityQueue(4, [tf.float32], shapes=[[]], shared_name="pq_shared")
    with tf.Session() as sess:
        sess.run(a.enqueue((1, 1)))
        with pytest.raises(errors.InvalidArgumentError, match="component types"):
            sess.run(b.size())


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(-2**62, 2**62), min_size=1, max_size=20))
def test_sorted_like_a_heap(prios: list[int]) -> None:
    q = tf.PriorityQueue(100, [tf.int64], shapes=[[]])
    enq = q.enqueue_many((prios, list(range(len(prios)))))
    with tf.Session() as sess:
        sess.run(enq)
        p, idx = sess.run(q.dequeue_many(len(prios)))
    assert p.tolist() == sorted(prios)
    assert sorted(idx.tolist()) == list(range(len(prios)))
    assert [prios[i] for i in idx.tolist()] == p.tolist()
    assert heapq.nsmallest(1, prios)[0] == p[0]
