"""Issue 20: the standard kernels bring their small host-side inputs (shapes, axes,
sizes, paddings, indices) to host memory through their device's ``to_host``, never by
duck typing on a device library (``.get()``).

The device here is ``BOX``: it runs the standard array-module kernels (``xp`` is numpy),
but keeps integer arrays in :class:`Boxed` wrappers, which have no ``.get()``, no
``__array__``, no buffer and no DLPack: a kernel that read one any other way than
through ``BOX``'s ``to_host`` would fail (or compute with a wrong value).
"""
from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any, Callable

import numpy as np
import pytest

import flowrt as tf
from flowrt.device import Device, DeviceType
from flowrt.graph import apply_op
from flowrt.op_registry import KernelContext
from flowrt.plugins.kernels.standard._common import host_ints, host_reader
from flowrt.runtime import Runtime

BOX = "/device:BOX:0"


class Boxed:
    """An integer array in BOX memory: only the BOX device reads it."""

    __slots__ = ("_data", "shape", "dtype", "ndim", "size")

    def __init__(self, data: Any):
        self._data = np.array(data, copy=True)
        self.shape, self.dtype = self._data.shape, self._data.dtype
        self.ndim, self.size = self._data.ndim, self._data.size


class BoxDevice(Device):
    """Integer arrays boxed, others as numpy copies; counts the boxed reads."""

    xp = np

    def __init__(self, index: int = 0, job: str = "localhost", task: int = 0):
        super().__init__("BOX", index, job, task, memory_limit=1 << 20)
        self.lock = threading.Lock()
        self.boxed_reads = 0

    def to_host(self, value: Any) -> np.ndarray:
        if isinstance(value, Boxed):
            with self.lock:
                self.boxed_reads += 1
            return np.array(value._data, copy=True)
        if isinstance(value, (np.ndarray, np.generic)):
            return np.array(value, copy=True)
        raise TypeError(f"BOX to_host got a {type(value).__name__}")

    def from_host(self, value: np.ndarray) -> Any:
        a = np.asarray(value)
        return Boxed(a) if a.dtype.kind in "iu" else np.array(a, copy=True)


def box_runtime() -> tuple[Runtime, list[BoxDevice]]:
    """A runtime with the BOX device type (its devices are returned as they are made)."""
    made: list[BoxDevice] = []

    def discover(config: Any, job: str, task: int) -> list[Device]:
        d = BoxDevice(0, job, task)
        made.append(d)
        return [d]

    plugin = SimpleNamespace(flowrt_device_types=tf.hookimpl(
        lambda: [DeviceType("BOX", discover, priority=1, array_kernels=True)]))
    return Runtime(autoload=False, plugins={"box": plugin}), made


def _i32(v: Any) -> Any:
    return tf.constant(np.array(v, np.int32))


X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)

#: name -> graph builder: ``f(x, fed)`` with x a float32 [2, 3, 4] tensor; int arguments
#: are int32 constants or, where a graph of constants would be folded, ``fed(value)``
#: placeholders (on BOX, both reach the kernel as Boxed arrays: through ``from_host``)
CASES: dict[str, Callable[[Any, Callable[[Any], Any]], Any]] = {
    "Reshape": lambda x, fed: tf.reshape(x, _i32([4, 6])),
    "Tile": lambda x, fed: tf.tile(x, _i32([1, 2, 1])),
    "Slice": lambda x, fed: tf.slice(x, _i32([0, 1, 1]), _i32([2, 2, -1])),
    "Pad": lambda x, fed: tf.pad(x, _i32([[0, 0], [1, 0], [0, 2]])),
    "MirrorPad": lambda x, fed: tf.pad(x, _i32([[0, 0], [1, 1], [2, 1]]), mode="REFLECT"),
    "Transpose": lambda x, fed: tf.transpose(x, _i32([2, 0, 1])),
    "ConcatV2": lambda x, fed: tf.concat([x, x], _i32(2)),
    "ExpandDims": lambda x, fed: tf.expand_dims(x, _i32(1)),
    "SplitV": lambda x, fed: tf.split(x, _i32([1, 3]), axis=_i32(2))[1],
    "ReverseV2": lambda x, fed: tf.reverse(x, _i32([0, 2])),
    "GatherV2": lambda x, fed: tf.gather(x, tf.range(fed(2), fed(-1), fed(-2)),
                                         axis=_i32(1)),
    "Range": lambda x, fed: tf.range(fed(1), fed(10), fed(3)),
    "LinSpace": lambda x, fed: tf.linspace(1.0, 2.0, fed(5)),
    "BroadcastTo": lambda x, fed: tf.broadcast_to(x[0:1], _i32([3, 3, 4])),
    "Fill": lambda x, fed: tf.fill(fed([2, 3]), 1.5),
    "OneHot": lambda x, fed: tf.one_hot(tf.range(fed(0), fed(3)), fed(4)),
    "Roll": lambda x, fed: tf.roll(x, _i32([1, -1]), _i32([1, 2])),
    "SpaceToBatchND": lambda x, fed: tf.space_to_batch_nd(
        tf.reshape(x, [2, 2, 6, 1]), _i32([2, 3]), _i32([[0, 0], [0, 0]])),
    "MatrixBandPart": lambda x, fed: tf.linalg.band_part(x, _i32(1), _i32(0)),
    "StridedSlice": lambda x, fed: tf.strided_slice(x, _i32([0, 2, 3]), _i32([2, 0, 0]),
                                                    _i32([1, -1, -2])),
    "Unique": lambda x, fed: tf.unique(fed([3, 1, 3, 2, 1]))[1],
    "ListDiff": lambda x, fed: tf.setdiff1d(fed([5, 1, 4, 1, 2]), fed([1, 2]))[0],
    "InvertPermutation": lambda x, fed: tf.invert_permutation(fed([2, 0, 1])),
}


def _run(f: Callable[..., Any], device: str | None, rt: Runtime | None) -> tuple[Any, Any]:
    g = tf.Graph(runtime=rt) if rt is not None else tf.Graph()
    feeds: dict[Any, np.ndarray] = {}

    def fed(v: Any) -> Any:
        a = np.array(v, np.int32)
        p = tf.placeholder(tf.int32, a.shape)
        feeds[p] = a
        return p

    with g.as_default():
        x = tf.placeholder(tf.float32, X.shape, name="x")
        feeds[x] = X
        with tf.device(device):
            y = f(x, fed)
    with tf.Session(graph=g) as sess:
        where = sess.placement(y, list(feeds))
        return sess.run(y, feeds), where[y.op.name]


@pytest.mark.parametrize("op", sorted(CASES))
def test_int_arguments_held_on_the_device_are_read_through_its_to_host(op: str) -> None:
    rt, made = box_runtime()
    want, cpu_at = _run(CASES[op], None, None)
    got, box_at = _run(CASES[op], BOX, rt)
    assert cpu_at.endswith("CPU:0") and box_at.endswith("BOX:0"), (cpu_at, box_at)
    np.testing.assert_array_equal(got, want)
    assert type(got) is np.ndarray and got.dtype == want.dtype
    assert sum(d.boxed_reads for d in made) >= 1


def test_each_step_reads_each_int_argument_once() -> None:
    """Reshape on BOX: one ``to_host`` of the shape per step, none of anything else
    that is boxed."""
    rt, made = box_runtime()
    g = tf.Graph(runtime=rt)
    with g.as_default():
        with tf.device(BOX):
            x = tf.placeholder(tf.float32, [2, 3], name="x")
            y = tf.reshape(x, _i32([3, 2])) + 1.0
    with tf.Session(graph=g) as sess:
        sess.run(y, {x: np.zeros((2, 3), np.float32)})
        (dev,) = made
        before = dev.boxed_reads
        for i in range(3):
            out = sess.run(y, {x: np.full((2, 3), i, np.float32)})
            assert out.shape == (3, 2) and float(out[0, 0]) == i + 1.0
        assert dev.boxed_reads - before == 3


def test_tensor_array_with_indices_and_size_on_the_device() -> None:
    rt, made = box_runtime()
    g = tf.Graph(runtime=rt)
    with g.as_default():
        with tf.device(BOX):
            x = tf.placeholder(tf.float32, [4, 2], name="x")
            ta = tf.TensorArray(tf.float32, size=_i32(4), element_shape=[2])
            ta = ta.scatter(_i32([3, 0, 2, 1]), x)
            read = ta.read(_i32(2))
            gathered = ta.gather(_i32([1, 3]))
            tb = tf.TensorArray(tf.float32, size=_i32(2), infer_shape=False)
            tb = tb.split(x, tf.constant(np.array([3, 1], np.int64)))
            parts = tb.read(_i32(0))
            tc = tf.TensorArray(tf.float32, size=_i32(1)).write(_i32(0), x[0])
            written = tc.read(_i32(0))
    v = np.arange(8, dtype=np.float32).reshape(4, 2)
    with tf.Session(graph=g) as sess:
        where = sess.placement(read, [x])
        assert where[read.op.name].endswith("BOX:0")
        r, gt, p, w = sess.run([read, gathered, parts, written], {x: v})
    np.testing.assert_array_equal(r, v[2])
    np.testing.assert_array_equal(gt, v[[3, 0]])
    np.testing.assert_array_equal(p, v[:3])
    np.testing.assert_array_equal(w, v[0])
    # 3 sizes, 6 indices or index lists, the split's lengths, x[0]'s begin, end, strides
    assert made[0].boxed_reads == 13


# -- the kernel factories, called directly -----------------------------------------------
CPU = SimpleNamespace(device_type="CPU", xp=np, name="/job:localhost/replica:0/task:0/"
                      "device:CPU:0")


def _node(build: Callable[[], Any]) -> Any:
    g = tf.Graph()
    with g.as_default():
        return build().op


def _both(op: Any, args: list[Any], boxed: set[int]) -> tuple[Any, Any]:
    """The kernel of ``op`` run on the CPU on host ``args``, and on a BOX device with
    the arguments at ``boxed`` positions boxed (checking each was read once)."""
    k = op.graph._runtime.find_kernel(op.type, "CPU")
    assert k is not None, op.type
    want = k.factory(KernelContext(op, CPU))(*args)
    dev = BoxDevice()
    got = k.factory(KernelContext(op, dev))(*[Boxed(a) if i in boxed else a
                                              for i, a in enumerate(args)])
    assert dev.boxed_reads == len(boxed), op.type
    return got, want


def _ph(shape: list[int], dtype: Any = tf.int32) -> Any:
    return tf.placeholder(dtype, shape)


def test_kernel_factories_given_a_box_context_read_through_to_host() -> None:
    seq = np.array([0, 2, 4], np.int64)
    op = _node(lambda: apply_op(
        "FractionalAvgPoolGrad", orig_input_tensor_shape=_ph([4], tf.int64),
        out_backprop=tf.zeros([1, 2, 2, 1]), row_pooling_sequence=_ph([3], tf.int64),
        col_pooling_sequence=_ph([3], tf.int64)))
    got, want = _both(op, [np.array([1, 4, 4, 1], np.int64),
                           np.ones((1, 2, 2, 1), np.float32), seq, seq], {0, 2, 3})
    np.testing.assert_allclose(want, np.full((1, 4, 4, 1), 0.25, np.float32))
    np.testing.assert_array_equal(got, want)

    op = _node(lambda: tf.linalg.diag_part(tf.zeros([3, 3]), k=_ph([2]),
                                           padding_value=9.0))
    x = np.arange(9, dtype=np.float32).reshape(3, 3)
    got, want = _both(op, [x, np.array([0, 1], np.int32), np.float32(9.0)], {1})
    assert want.shape == (2, 3) and 9.0 in want
    np.testing.assert_array_equal(got, want)

    op = _node(lambda: tf.nn.conv2d_backprop_input(_ph([4]), tf.ones([1, 1, 1, 1]),
                                                   tf.ones([1, 2, 2, 1]), [1, 1, 1, 1],
                                                   "VALID"))
    got, want = _both(op, [np.array([1, 2, 2, 1], np.int32),
                           np.ones((1, 1, 1, 1), np.float32),
                           np.full((1, 2, 2, 1), 2.0, np.float32)], {0})
    np.testing.assert_array_equal(want, np.full((1, 2, 2, 1), 2.0, np.float32))
    np.testing.assert_array_equal(got, want)

    op = _node(lambda: apply_op("AvgPoolGrad", orig_input_shape=_ph([4]),
                                grad=tf.zeros([1, 1, 1, 1]), ksize=[1, 2, 2, 1],
                                strides=[1, 2, 2, 1], padding="VALID"))
    got, want = _both(op, [np.array([1, 2, 2, 1], np.int32),
                           np.full((1, 1, 1, 1), 4.0, np.float32)], {0})
    np.testing.assert_array_equal(want, np.ones((1, 2, 2, 1), np.float32))
    np.testing.assert_array_equal(got, want)

    op = _node(lambda: apply_op("StridedSliceGrad", shape=_ph([2]), begin=_ph([2]),
                                end=_ph([2]), strides=_ph([2]), dy=tf.zeros([1, 2])))
    got, want = _both(op, [np.array([3, 2], np.int32), np.array([1, 0], np.int32),
                           np.array([2, 2], np.int32), np.array([1, 1], np.int32),
                           np.ones((1, 2), np.float32)], {0, 1, 2, 3})
    np.testing.assert_array_equal(want, [[0, 0], [1, 1], [0, 0]])
    np.testing.assert_array_equal(got, want)


def test_host_reader_is_numpy_itself_on_the_cpu() -> None:
    """No extra call per kernel invocation on the CPU: the reader chosen there is
    ``np.asarray``; on another device it goes through that device."""
    op = _node(lambda: tf.reshape(tf.zeros([6]), [2, 3]))
    cpu = SimpleNamespace(device_type="CPU", xp=np, name="/device:CPU:0")
    assert host_reader(KernelContext(op, cpu)) is np.asarray
    dev = BoxDevice()
    read = host_reader(KernelContext(op, dev))
    assert host_ints(Boxed([2, 3]), read) == [2, 3] and dev.boxed_reads == 1
    assert host_ints(np.array([4]), read) == [4] and dev.boxed_reads == 1  # host as is
    with pytest.raises(TypeError):  # no guessing: a Boxed on the CPU is not converted
        host_ints(Boxed([1]), np.asarray)
