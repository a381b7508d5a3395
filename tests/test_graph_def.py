"""GraphDef/NodeDef/AttrValue/TensorProto conversion and ``import_graph_def``.

The wire layouts checked here are TensorFlow 1.15's (``tf.make_tensor_proto`` and
``Graph.as_graph_def``); ``TF_GRAPH_PBTXT`` below is a GraphDef written by TensorFlow.
"""
from __future__ import annotations

import struct

import numpy as np
import pytest
from google.protobuf import text_format
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import flowrt as tf
from flowrt import dtypes as D
from flowrt.graph_def import (GRAPH_DEF_VERSION, attr_value_of, graph_to_graph_def,
                              import_graph_def, make_ndarray, make_tensor_proto,
                              node_def_of, python_attr_of)
from flowrt.proto import attr_value_pb2, graph_def_pb2, node_def_pb2, op_def_pb2, tensor_pb2
from flowrt.proto import types_pb2
from flowrt.tensor_shape import TensorShape

TensorProto = tensor_pb2.TensorProto
AttrValue = attr_value_pb2.AttrValue

# Multi-element tensors of these dtypes go to tensor_content (TF 1.15's set).
CONTENT_DTYPES = {D.float16, D.float32, D.float64, D.int8, D.int16, D.int32, D.int64,
                  D.uint8, D.uint32, D.uint64}
VAL_FIELD = {D.float16: "half_val", D.float32: "float_val", D.float64: "double_val",
             D.int8: "int_val", D.int16: "int_val", D.int32: "int_val", D.uint8: "int_val",
             D.uint16: "int_val", D.int64: "int64_val", D.uint32: "uint32_val",
             D.uint64: "uint64_val", D.complex64: "scomplex_val",
             D.complex128: "dcomplex_val", D.bool: "bool_val", D.string: "string_val"}


def api(name):
    return tf.default_runtime().api_function(name)


def serialized(msg):
    return msg.SerializeToString(deterministic=True)


def sample(dtype, shape):
    """Deterministic values of ``dtype`` including the awkward ones (nan, -0.0, extremes,
    non-ASCII and NUL bytes)."""
    n = int(np.prod(shape, dtype=np.int64))
    if dtype is D.string:
        pool = [b"", b"a", "\u00e9t\u00e9".encode(), b"\x00\xff\x01", b"x" * 200]
        out = np.empty(n, dtype=object)
        out[:] = [pool[i % len(pool)] for i in range(n)]
        return out.reshape(shape)
    if dtype is D.bool:
        return (np.arange(n) % 3 == 0).reshape(shape)
    if dtype.is_complex:
        pool = np.array([0, 1.5 - 2j, -0.0 + 1j, complex(np.inf, -1), complex(np.nan, 2)])
        return pool[np.arange(n) % len(pool)].astype(dtype.np).reshape(shape)
    if dtype.is_floating:
        info = np.finfo(dtype.np)
        pool = np.array([0.0, -0.0, 1.5, -2.25, np.inf, -np.inf, np.nan, info.max, info.tiny],
                        dtype=dtype.np)
        return pool[np.arange(n) % len(pool)].reshape(shape)
    info = np.iinfo(dtype.np)
    pool = np.array([0, 1, info.max, info.min, 7], dtype=dtype.np)
    return pool[np.arange(n) % len(pool)].reshape(shape)


def assert_same_array(got, want):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape
    if want.dtype == object:
        assert got.tolist() == want.tolist()
        assert all(isinstance(x, bytes) for x in got.reshape(-1))
        return
    np.testing.assert_array_equal(got, want)  # nan == nan here
    if want.dtype.kind == "f":
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


# ---------------------------------------------------------------------------------------
# make_tensor_proto / make_ndarray
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", D.TF_VALUE_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(2, 3), (), (1,), (0,), (3, 0, 2)], ids=str)
def test_tensor_proto_round_trip_every_dtype(dtype, shape):
    arr = sample(dtype, shape)
    proto = make_tensor_proto(arr, dtype=dtype)
    assert proto.dtype == dtype.as_datatype_enum
    assert [d.size for d in proto.tensor_shape.dim] == list(shape)
    assert proto.HasField("tensor_shape")
    size = int(np.prod(shape, dtype=np.int64))
    if dtype in CONTENT_DTYPES and size > 1:
        assert len(proto.tensor_content) == size * dtype.np.itemsize
        assert len(getattr(proto, VAL_FIELD[dtype])) == 0
    else:
        assert proto.tensor_content == b""
        per = 2 if dtype.is_complex else 1
        assert len(getattr(proto, VAL_FIELD[dtype])) == size * per
    again = TensorProto.FromString(proto.SerializeToString())
    assert again == proto or dtype.is_floating or dtype.is_complex  # nan != nan
    assert_same_array(make_ndarray(again), arr)
    # a Python list (not an ndarray) of the same values gives the same tensor
    if dtype is not D.string and size:
        assert_same_array(make_ndarray(make_tensor_proto(arr.tolist(), dtype=dtype)), arr)


@pytest.mark.parametrize("dtype", D.TF_VALUE_DTYPES, ids=lambda d: d.name)
def test_make_ndarray_result_is_writable_and_fresh(dtype):
    arr = sample(dtype, (4,))
    proto = make_tensor_proto(arr)
    out = make_ndarray(proto)
    assert out.flags.writeable
    out[0] = out[1]
    assert_same_array(make_ndarray(proto), arr)


def test_tensor_content_is_little_endian_raw_bytes():
    p = make_tensor_proto(np.array([1, -2, 3], dtype=np.int32))
    assert p.tensor_content == struct.pack("<3i", 1, -2, 3)
    p = make_tensor_proto(np.array([1.5, -2.0], dtype=">f8"))  # big-endian input
    assert p.dtype == types_pb2.DT_DOUBLE
    assert p.tensor_content == struct.pack("<2d", 1.5, -2.0)
    p = make_tensor_proto(np.array([1.0, -2.0], dtype=np.float16))
    assert p.tensor_content == struct.pack("<2e", 1.0, -2.0)


def test_half_val_holds_float16_bit_patterns():
    p = make_tensor_proto(np.float16(1.0))
    assert list(p.half_val) == [0x3C00]
    p = make_tensor_proto(np.float16(-2.0))
    assert list(p.half_val) == [0xC000]
    assert make_ndarray(p).dtype == np.float16


@pytest.mark.parametrize("value,dtype,field,expect", [
    (1.0, D.float32, "float_val", [1.0]),
    (7, D.int32, "int_val", [7]),
    (2 ** 40, D.int64, "int64_val", [2 ** 40]),
    (True, D.bool, "bool_val", [True]),
    (1 + 2j, D.complex128, "dcomplex_val", [1.0, 2.0]),
    ("h\u00e9", D.string, "string_val", ["h\u00e9".encode()]),
    (b"\x00b", D.string, "string_val", [b"\x00b"]),
])
def test_python_scalar_inference(value, dtype, field, expect):
    p = make_tensor_proto(value)
    assert p.dtype == dtype.as_datatype_enum
    assert list(getattr(p, field)) == expect
    assert list(p.tensor_shape.dim) == []


def test_python_list_inference():
    assert make_tensor_proto([1.5, 2.0]).dtype == types_pb2.DT_FLOAT  # float64 -> float32
    assert make_tensor_proto([1, 2]).dtype == types_pb2.DT_INT32
    assert make_tensor_proto([1, 2 ** 40]).dtype == types_pb2.DT_INT64
    assert make_tensor_proto([[1, 2.5]]).dtype == types_pb2.DT_FLOAT
    assert make_tensor_proto(["a", b"b"]).dtype == types_pb2.DT_STRING
    empty = make_tensor_proto([])
    assert empty.dtype == types_pb2.DT_FLOAT and [d.size for d in empty.tensor_shape.dim] == [0]
    # numpy arrays keep their dtype
    assert make_tensor_proto(np.array([1.5])).dtype == types_pb2.DT_DOUBLE
    assert make_tensor_proto(np.float64(1.5)).dtype == types_pb2.DT_DOUBLE
    assert make_tensor_proto(np.array(["a", "bc"])).string_val == [b"a", b"bc"]


def test_scalar_broadcast_and_tf1_padding():
    p = make_tensor_proto(3.0, shape=[2, 2])
    assert list(p.float_val) == [3.0] and p.tensor_content == b""
    np.testing.assert_array_equal(make_ndarray(p), np.full((2, 2), 3.0, np.float32))
    p = make_tensor_proto([1, 2], shape=[4])
    np.testing.assert_array_equal(make_ndarray(p), [1, 2, 2, 2])
    p = make_tensor_proto("ab", shape=[3])
    assert make_ndarray(p).tolist() == [b"ab"] * 3
    p = make_tensor_proto(np.arange(6.0), dtype=D.float32, shape=[2, 3])
    np.testing.assert_array_equal(make_ndarray(p), np.arange(6.0).reshape(2, 3))
    assert p.tensor_content  # same number of elements: raw bytes in the new shape
    p = make_tensor_proto(5, shape=[0, 3])
    assert make_ndarray(p).shape == (0, 3)
    p = make_tensor_proto(1.0, dtype=D.float16, shape=TensorShape([3]))
    np.testing.assert_array_equal(make_ndarray(p), np.ones(3, np.float16))
    p = make_tensor_proto(np.array([1.5]), shape=[2], allow_broadcast=True)
    np.testing.assert_array_equal(make_ndarray(p), [1.5, 1.5])


def test_make_tensor_proto_errors():
    with pytest.raises(ValueError, match="None values not supported"):
        make_tensor_proto(None)
    with pytest.raises(ValueError, match="Too many elements provided. Needed at most 2"):
        make_tensor_proto([1, 2, 3], shape=[2])
    with pytest.raises(TypeError, match="Expected Tensor's shape"):
        make_tensor_proto([1, 2], shape=[2, 1], verify_shape=True)
    with pytest.raises(TypeError, match="Expected Tensor's shape"):
        make_tensor_proto([1, 2], shape=[4], allow_broadcast=True)
    with pytest.raises(TypeError):
        make_tensor_proto(1.5, dtype=D.int32)
    with pytest.raises(TypeError):
        make_tensor_proto("a", dtype=D.float32)
    with pytest.raises(TypeError):
        make_tensor_proto([1, 2], dtype=D.string)
    with pytest.raises(TypeError):
        make_tensor_proto(1, dtype=D.resource)
    with pytest.raises(ValueError):
        make_tensor_proto([[1, 2], [3]])
    with pytest.raises(ValueError, match="fully defined"):
        make_tensor_proto(1.0, shape=[None, 2])
    tp = make_tensor_proto(1.0)
    assert make_tensor_proto(tp) is tp


def test_quantized_dtypes_keep_their_enum():
    p = make_tensor_proto([1, 2, 3], dtype=D.qint8)
    assert p.dtype == types_pb2.DT_QINT8 and p.tensor_content == b"\x01\x02\x03"
    np.testing.assert_array_equal(make_ndarray(p), np.array([1, 2, 3], np.int8))
    p = make_tensor_proto(5, dtype=D.quint16)
    assert list(p.int_val) == [5] and make_ndarray(p).dtype == np.uint16


def _proto(dtype, shape, **fields):
    p = TensorProto(dtype=dtype.as_datatype_enum)
    p.tensor_shape.SetInParent()
    for d in shape:
        p.tensor_shape.dim.add(size=d)
    for k, v in fields.items():
        if k == "tensor_content":
            p.tensor_content = v
        else:
            getattr(p, k).extend(v)
    return p


@pytest.mark.parametrize("proto,want", [
    (_proto(D.float32, [2, 2], tensor_content=struct.pack("<4f", 1, 2, 3, 4)),
     np.array([[1, 2], [3, 4]], np.float32)),
    (_proto(D.int64, [2], tensor_content=struct.pack("<2q", -1, 2 ** 40)),
     np.array([-1, 2 ** 40], np.int64)),
    (_proto(D.bool, [3], tensor_content=b"\x01\x00\x01"), np.array([True, False, True])),
    (_proto(D.complex64, [1], tensor_content=struct.pack("<2f", 1, -1)),
     np.array([1 - 1j], np.complex64)),
    (_proto(D.uint16, [2], tensor_content=struct.pack("<2H", 1, 65535)),
     np.array([1, 65535], np.uint16)),
    (_proto(D.float32, [2, 3], float_val=[7.5]), np.full((2, 3), 7.5, np.float32)),
    (_proto(D.float32, [4], float_val=[1, 2]), np.array([1, 2, 2, 2], np.float32)),
    (_proto(D.float64, [2], double_val=[0.1, 0.2]), np.array([0.1, 0.2])),
    (_proto(D.float16, [3], half_val=[0x3C00, 0xC000]), np.array([1, -2, -2], np.float16)),
    (_proto(D.int8, [3], int_val=[-128, 127, 5]), np.array([-128, 127, 5], np.int8)),
    (_proto(D.uint8, [2], int_val=[255, 0]), np.array([255, 0], np.uint8)),
    (_proto(D.int16, [], int_val=[-300]), np.array(-300, np.int16)),
    (_proto(D.uint16, [2], int_val=[65535]), np.array([65535, 65535], np.uint16)),
    (_proto(D.int32, [2, 2], int_val=[3]), np.full((2, 2), 3, np.int32)),
    (_proto(D.int64, [1], int64_val=[-2 ** 62]), np.array([-2 ** 62], np.int64)),
    (_proto(D.uint32, [2], uint32_val=[2 ** 32 - 1, 1]), np.array([2 ** 32 - 1, 1], np.uint32)),
    (_proto(D.uint64, [1], uint64_val=[2 ** 64 - 1]), np.array([2 ** 64 - 1], np.uint64)),
    (_proto(D.complex64, [2], scomplex_val=[1, 2, 3, 4]), np.array([1 + 2j, 3 + 4j], np.complex64)),
    (_proto(D.complex128, [3], dcomplex_val=[1, -1]), np.full(3, 1 - 1j, np.complex128)),
    (_proto(D.bool, [2, 1], bool_val=[True]), np.array([[True], [True]])),
    (_proto(D.float32, [2], ), np.zeros(2, np.float32)),
    (_proto(D.int32, [0, 4]), np.zeros((0, 4), np.int32)),
    (_proto(D.qint32, [2], int_val=[9, 8]), np.array([9, 8], np.int32)),
])
def test_make_ndarray_reads_every_encoding(proto, want):
    got = make_ndarray(proto)
    assert_same_array(got, want)
    assert_same_array(make_ndarray(TensorProto.FromString(proto.SerializeToString())), want)


def test_make_ndarray_strings():
    p = _proto(D.string, [2, 2], string_val=[b"a", b"bc"])
    assert make_ndarray(p).tolist() == [[b"a", b"bc"], [b"bc", b"bc"]]
    assert make_ndarray(_proto(D.string, [2])).tolist() == [b"", b""]
    # C++'s tensor_content packing: varint lengths, then the bytes
    data = [b"abc", b"", b"z" * 200]
    content = bytes([3, 0, 0xC8, 0x01]) + b"".join(data)
    assert make_ndarray(_proto(D.string, [3], tensor_content=content)).tolist() == data


@pytest.mark.parametrize("proto,err", [
    (_proto(D.float32, [3], tensor_content=b"\x00" * 8), ValueError),
    (_proto(D.int32, [1], int_val=[1, 2]), ValueError),
    (_proto(D.string, [1], string_val=[b"a", b"b"]), ValueError),
    (_proto(D.complex64, [1], scomplex_val=[1.0]), ValueError),
    (_proto(D.resource, [1]), TypeError),
    (TensorProto(dtype=0), TypeError),
    (_proto(D.string, [2], tensor_content=b"\x05ab"), ValueError),
])
def test_make_ndarray_rejects_malformed_protos(proto, err):
    with pytest.raises(err):
        make_ndarray(proto)
    unknown = TensorProto(dtype=types_pb2.DT_FLOAT)
    unknown.tensor_shape.unknown_rank = True
    with pytest.raises(ValueError, match="unknown rank"):
        make_ndarray(unknown)


_NUMERIC = [d for d in D.TF_VALUE_DTYPES if d is not D.string]


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_tensor_proto_round_trip_property(data):
    dtype = data.draw(st.sampled_from(D.TF_VALUE_DTYPES))
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    if dtype is D.string:
        n = int(np.prod(shape, dtype=np.int64))
        flat = np.empty(n, dtype=object)
        flat[:] = data.draw(st.lists(st.binary(max_size=5), min_size=n, max_size=n))
        arr = flat.reshape(shape)
    else:
        arr = data.draw(hnp.arrays(dtype.np, shape))
    wire = make_tensor_proto(arr).SerializeToString()
    assert_same_array(make_ndarray(TensorProto.FromString(wire)), arr)


# ---------------------------------------------------------------------------------------
# AttrValue
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("value,kind,field", [
    (D.float32, "type", "type"), (3, "int", "i"), (2.5, "float", "f"), (True, "bool", "b"),
    ("SAME", "string", "s"), (TensorShape([None, 3]), "shape", "shape"),
    (TensorShape(None), "shape", "shape"), (TensorShape([]), "shape", "shape"),
])
def test_attr_value_scalars(value, kind, field):
    for k in (kind, None):
        av = attr_value_of(value, k)
        assert av.WhichOneof("value") == field
        back = python_attr_of(AttrValue.FromString(av.SerializeToString()), k)
        assert type(back) is type(value)
        if kind == "shape":  # TF1 shapes with unknown dims never compare equal
            assert back.as_tuple() == value.as_tuple()
        else:
            assert back == value
    if kind == "string":
        assert av.s == b"SAME"


def test_attr_value_details():
    assert attr_value_of(D.int64).type == types_pb2.DT_INT64
    assert attr_value_of(3, "float").f == 3.0
    av = attr_value_of(None, "shape")
    assert av.shape.unknown_rank and python_attr_of(av, "shape") == TensorShape(None)
    assert list(attr_value_of([2, None], "shape").shape.dim) == \
        list(TensorShape([2, None]).as_proto().dim)
    assert [d.size for d in attr_value_of(TensorShape([None, 3])).shape.dim] == [-1, 3]
    arr = np.arange(6, dtype=np.int32).reshape(2, 3)
    av = attr_value_of(arr)
    assert av.tensor.dtype == types_pb2.DT_INT32
    np.testing.assert_array_equal(python_attr_of(av, "tensor"), arr)
    fn = attr_value_pb2.NameAttrList(name="f")
    assert python_attr_of(attr_value_of(fn)) == fn
    assert python_attr_of(attr_value_of("g", "func")).name == "g"
    # bytes that are not UTF-8 stay bytes; UTF-8 becomes str
    assert python_attr_of(AttrValue(s=b"\xff\x00")) == b"\xff\x00"
    assert python_attr_of(AttrValue(s="\u00e9".encode())) == "\u00e9"
    assert python_attr_of(AttrValue()) is None


@pytest.mark.parametrize("value,kind,field", [
    ([D.float32, D.int32], "list(type)", "type"), ([1, 2, 3], "list(int)", "i"),
    ([0.5, 1.0], "list(float)", "f"), ([True, False], "list(bool)", "b"),
    (["loc:@a", "loc:@b"], "list(string)", "s"),
    ([TensorShape([1]), TensorShape(None)], "list(shape)", "shape"),
])
def test_attr_value_lists(value, kind, field):
    for k in (kind, None):
        av = attr_value_of(value, k)
        assert av.WhichOneof("value") == "list"
        assert len(getattr(av.list, field)) == len(value)
        assert python_attr_of(AttrValue.FromString(av.SerializeToString()), k) == value


def test_attr_value_empty_and_mixed_lists():
    av = attr_value_of([], "list(int)")
    assert av.WhichOneof("value") == "list"
    wire = AttrValue.FromString(av.SerializeToString())
    assert wire.WhichOneof("value") == "list"
    for kind in ("list(string)", "list(type)", "list(shape)", None):
        assert python_attr_of(wire, kind) == []
    assert python_attr_of(AttrValue(), "list(int)") == []
    assert attr_value_of([1, 2.5]).list.f == [1.0, 2.5]
    tensors = attr_value_of([np.zeros(2, np.float32), np.ones((), np.int64)], "list(tensor)")
    back = python_attr_of(tensors, "list(tensor)")
    assert back[0].dtype == np.float32 and back[1].dtype == np.int64


@pytest.mark.parametrize("av,kind", [
    (AttrValue(i=3), "float"), (AttrValue(f=1.0), "int"), (AttrValue(type=1), "string"),
    (AttrValue(), "type"), (attr_value_of([1, 2]), "list(float)"),
    (attr_value_of([1, 2]), "int"), (AttrValue(i=3), "list(int)"),
])
def test_python_attr_of_kind_mismatch(av, kind):
    with pytest.raises(ValueError, match="AttrValue had value with type"):
        python_attr_of(av, kind)


@pytest.mark.parametrize("value,kind", [
    ("x", "int"), (1.5, "int"), (True, "int"), ("x", "bool"), (1, "bool"), ("a", "float"),
    (3, "string"), ([1, "a"], None), (object(), None), (5, "list(int)"), ("ab", "list(string)"),
    ("notatype", "type"),
])
def test_attr_value_of_type_errors(value, kind):
    with pytest.raises(TypeError):
        attr_value_of(value, kind)


# ---------------------------------------------------------------------------------------
# NodeDef / GraphDef
# ---------------------------------------------------------------------------------------
def _create(g, op_type, inputs=(), name=None, **attrs):
    """create_op with the OpDef's defaults filled (as apply_op does)."""
    op_def = g._runtime.op_def(op_type)
    for k, a in op_def.attrs.items():
        if k not in attrs and a.has_default:
            attrs[k] = list(a.default) if isinstance(a.default, list) else a.default
    return g.create_op(op_type, list(inputs), name=name, attrs=attrs, op_def=op_def)


def small_graph():
    g = tf.Graph()
    with g.as_default():
        x = api("placeholder")(tf.float32, [None, 2], name="x")
        c = api("constant")([[1.0, 2.0]], name="c")
        with g.device("/cpu:0"):
            i = api("identity")(x, name="i")
        with g.control_dependencies([i.op, c.op]):
            n = api("no_op")(name="n")
        d = api("placeholder_with_default")(c, [None, 2], name="d")
    return g, dict(x=x, c=c, i=i, n=n, d=d)


def test_node_def_of():
    g, t = small_graph()
    nd = node_def_of(t["i"].op)
    assert isinstance(nd, node_def_pb2.NodeDef)
    assert (nd.name, nd.op, list(nd.input)) == ("i", "Identity", ["x"])
    assert nd.device == "/device:CPU:0"
    assert nd.attr["T"].type == types_pb2.DT_FLOAT
    assert list(node_def_of(t["n"]).input) == ["^i", "^c"]
    assert t["n"].node_def == node_def_of(t["n"])
    ph = node_def_of(t["x"].op)
    assert [d.size for d in ph.attr["shape"].shape.dim] == [-1, 2]
    assert ph.device == ""
    with g.as_default():
        v = _create(g, "VariableV2", name="v", shape=TensorShape([2]), dtype=D.float32)
        a = _create(g, "Assign", [v.outputs[0], api("constant")([1.0, 2.0])], name="a",
                    T=D.float32)
        mo = _create(g, "Identity", [a.outputs[0]], name="second", T=D.float32)
    assert list(node_def_of(a).input) == ["v", "Const"]
    assert mo.node_def.input == ["a"]
    assert "name: \"i\"" in str(t["i"].op)


def test_node_def_output_index_and_colocation_attr():
    g = tf.Graph()
    with g.as_default():
        x = api("placeholder")(tf.float32, name="x")
        with g.colocate_with(x.op):
            y = api("identity")(x, name="y")
        fake = _create(g, "Identity", [y], name="z", T=D.float32)
        fake._inputs[0] = type(y)(x.op, 3, D.float32)  # an output index > 0
    assert node_def_of(fake).input == ["x:3"]
    assert node_def_of(y.op).attr["_class"].list.s == [b"loc:@x"]
    assert y.op.node_attrs["_class"] == ["loc:@x"]


def test_graph_def_order_versions_and_shapes():
    g, t = small_graph()
    gd = g.as_graph_def()
    assert isinstance(gd, graph_def_pb2.GraphDef)
    assert [n.name for n in gd.node] == [o.name for o in g.get_operations()]
    assert gd.versions.producer == GRAPH_DEF_VERSION == 134
    assert all("_output_shapes" not in n.attr for n in gd.node)
    gs = graph_to_graph_def(g, add_shapes=True)
    by_name = {n.name: n for n in gs.node}
    shp = by_name["x"].attr["_output_shapes"].list.shape
    assert len(shp) == 1 and [d.size for d in shp[0].dim] == [-1, 2]
    assert [d.size for d in by_name["c"].attr["_output_shapes"].list.shape[0].dim] == [1, 2]
    assert "_output_shapes" not in by_name["n"].attr  # no outputs
    # wire round trip
    again = graph_def_pb2.GraphDef()
    again.ParseFromString(gs.SerializeToString())
    assert again == gs


# ---------------------------------------------------------------------------------------
# import_graph_def
# ---------------------------------------------------------------------------------------
def test_import_round_trip_and_session_values():
    g, t = small_graph()
    gd = g.as_graph_def()
    g2 = tf.Graph()
    with g2.as_default():
        assert import_graph_def(gd, name="") is None
    assert serialized(g2.as_graph_def()) == serialized(gd)
    for a, b in zip(g.get_operations(), g2.get_operations()):
        assert a.name == b.name and a.type == b.type and a.device == b.device
        assert [o.dtype for o in a.outputs] == [o.dtype for o in b.outputs]
        assert [o.shape.as_tuple() for o in a.outputs] == [o.shape.as_tuple() for o in b.outputs]
    feed = np.array([[3.0, 4.0], [5.0, 6.0]], np.float32)
    with tf.Session(graph=g) as s1, tf.Session(graph=g2) as s2:
        want = s1.run([t["i"], t["c"], t["d"]], {t["x"]: feed})
        got = s2.run(["i:0", "c:0", "d:0"], {"x:0": feed})
    for w, v in zip(want, got):
        assert_same_array(np.asarray(v), np.asarray(w))
    np.testing.assert_array_equal(got[0], feed)


def test_import_prefix_scopes_and_uniqueness():
    g, _ = small_graph()
    gd = g.as_graph_def()
    g2 = tf.Graph()
    with g2.as_default():
        import_graph_def(gd)
        import_graph_def(gd)
        import_graph_def(gd, name="foo")
        with tf.name_scope("outer"):
            import_graph_def(gd, name="inner")
        import_graph_def(gd, name="")
        import_graph_def(gd, name="")
    names = [o.name for o in g2.get_operations()]
    for node in ("x", "c", "i", "n", "d"):
        for prefix in ("import/", "import_1/", "foo/", "outer/inner/", ""):
            assert prefix + node in names
        assert node + "_1" in names  # the second unprefixed import
    assert len(names) == 6 * 5
    op = g2.get_operation_by_name("import_1/i")
    assert op.inputs[0].name == "import_1/x:0"
    assert g2.get_operation_by_name("x_1").outputs[0].shape.as_list() == [None, 2]
    assert [c.name for c in g2.get_operation_by_name("import/n").control_inputs] == \
        ["import/i", "import/c"]


def test_import_return_elements_in_order():
    g, _ = small_graph()
    g2 = tf.Graph()
    with g2.as_default():
        r = import_graph_def(g.as_graph_def(), return_elements=["n", "x:0", "i", "c:0"],
                             name="r")
    assert [type(e).__name__ for e in r] == ["Operation", "Tensor", "Operation", "Tensor"]
    assert [e.name for e in r] == ["r/n", "r/x:0", "r/i", "r/c:0"]
    with g2.as_default():
        with pytest.raises(ValueError, match="Requested return tensor 'x:1' not found"):
            import_graph_def(g.as_graph_def(), return_elements=["x:1"])
        with pytest.raises(ValueError, match="Requested return node 'zzz' not found"):
            import_graph_def(g.as_graph_def(), return_elements=["zzz"])
        with pytest.raises(TypeError):
            import_graph_def(g.as_graph_def(), return_elements=[1])


def test_import_input_map_replaces_tensors():
    g, _ = small_graph()
    gd = g.as_graph_def()
    g2 = tf.Graph()
    with g2.as_default():
        src = api("constant")([[7.0, 8.0]], name="src")
        i, d, x = import_graph_def(gd, input_map={"x:0": src, "c": src},
                                   return_elements=["i:0", "d:0", "x:0"])
        assert i.op.inputs[0] is src and d.op.inputs[0] is src
        assert x is src  # a mapped tensor is returned as its replacement
        assert g2.get_operation_by_name("import/x").type == "Placeholder"  # still imported
        i2 = import_graph_def(gd, input_map={"x": [[1.0, 1.0]]}, return_elements=["i:0"])[0]
        assert i2.op.inputs[0].op.name == "import_1/_inputs/Const"
    with tf.Session(graph=g2) as s:
        np.testing.assert_array_equal(s.run(i), [[7.0, 8.0]])
        np.testing.assert_array_equal(s.run(i2), [[1.0, 1.0]])


def test_import_input_map_errors():
    g, _ = small_graph()
    gd = g.as_graph_def()
    g2 = tf.Graph()
    with g2.as_default():
        ints = api("constant")([[1, 2]])
        floats = api("constant")([[1.0, 2.0]])
        with pytest.raises(ValueError, match=r"Input 0 of node 'import/i' was passed int32 "
                                             r"from Const:0 incompatible with expected float"):
            import_graph_def(gd, input_map={"x:0": ints})
        with pytest.raises(ValueError, match=r"not found in graph_def: \[zzz:0\]"):
            import_graph_def(gd, input_map={"zzz:0": floats})
        with pytest.raises(ValueError, match=r"not found in graph_def: \[x:3\]"):
            import_graph_def(gd, input_map={"x:3": floats})
        with pytest.raises(ValueError, match="non-empty `name`"):
            import_graph_def(gd, input_map={"x:0": [[1.0, 2.0]]}, name="")
        with pytest.raises(TypeError):
            import_graph_def(gd, input_map=[("x:0", floats)])
        with pytest.raises(TypeError):
            import_graph_def(gd, input_map={1: floats})
        # a key naming an existing tensor that nothing consumes is fine (as in TF)
        import_graph_def(gd, input_map={"i:0": floats}, name="ok")
        with pytest.raises(ValueError, match=r"not found in graph_def: \[n:0\]"):
            import_graph_def(gd, input_map={"n:0": floats})  # NoOp has no outputs
    other = tf.Graph()
    with other.as_default():
        foreign = api("constant")([[1.0, 2.0]])
    with g2.as_default(), pytest.raises(ValueError, match="not in the default graph"):
        import_graph_def(gd, input_map={"x:0": foreign})


def test_import_control_input_remap():
    g, _ = small_graph()
    g2 = tf.Graph()
    with g2.as_default():
        anchor = api("no_op")(name="anchor")
        n = import_graph_def(g.as_graph_def(), input_map={"^i": anchor},
                             return_elements=["n"])[0]
    assert [c.name for c in n.control_inputs] == ["anchor", "import/c"]


def _gd(text):
    return text_format.Parse(text, graph_def_pb2.GraphDef())


PH = 'op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } }'
IDENT = 'op: "Identity" attr { key: "T" value { type: DT_FLOAT } }'


def test_import_sorts_nodes_topologically():
    gd = _gd(f'node {{ name: "c" {IDENT} input: "b" }} '
             f'node {{ name: "b" {IDENT} input: "a" input: "^d" }} '
             f'node {{ name: "a" {PH} }} node {{ name: "d" op: "NoOp" }}')
    g = tf.Graph()
    with g.as_default():
        c = import_graph_def(gd, return_elements=["c:0"], name="")[0]
    assert [o.name for o in g.get_operations()] == ["a", "d", "b", "c"]
    assert c.op.inputs[0].op.inputs[0].op.name == "a"
    assert [x.name for x in g.get_operation_by_name("b").control_inputs] == ["d"]
    assert g.get_operation_by_name("a").get_attr("shape") == TensorShape(None)  # default
    with tf.Session(graph=g) as s:
        np.testing.assert_array_equal(s.run(c, {"a:0": np.float32(2.5)}), 2.5)


@pytest.mark.parametrize("text,match", [
    (f'node {{ name: "a" {PH} }} node {{ name: "b" {IDENT} input: "c" }} '
     f'node {{ name: "c" {IDENT} input: "b" }}', r"cycle.*'b'.*'c'|cycle.*b -> c -> b"),
    (f'node {{ name: "a" {IDENT} input: "a" }}', "cycle.*a -> a"),
    (f'node {{ name: "a" {PH} }} node {{ name: "b" {IDENT} input: "zzz" }}',
     "Node 'b' \\(op 'Identity'\\) has input 'zzz', but node 'zzz' does not exist"),
    (f'node {{ name: "b" op: "NoOp" input: "^zzz" }}',
     "Node 'b' \\(op 'NoOp'\\) has control input '\\^zzz', but node 'zzz' does not exist"),
    (f'node {{ name: "a" {PH} }} node {{ name: "a" {PH} }}', "Node 'a' is not unique"),
    ('node { name: "a" op: "NoSuchOpAnywhere" }', "Node 'a'.*Op type not registered"),
    (f'node {{ name: "a" {PH} attr {{ key: "bogus" value {{ i: 1 }} }} }}',
     "Node 'a'.*attr 'bogus' not in the op definition"),
    ('node { name: "a" op: "Placeholder" }', "Node 'a'.*missing attr 'dtype'"),
    ('node { name: "a" op: "Placeholder" attr { key: "dtype" value { i: 1 } } }',
     "Node 'a'.*attr 'dtype'.*type 'int' when 'type' expected"),
    (f'node {{ name: "a" {PH} }} node {{ name: "b" {IDENT} }}',
     "Node 'b' \\(op 'Identity'\\) has 0 inputs, but its op definition expects 1"),
    (f'node {{ name: "a" {PH} }} node {{ name: "b" {IDENT} input: "a:1" }}',
     "Node 'b'.*output 1 of node 'a', which has 1 outputs"),
    (f'node {{ name: "a" {PH} }} node {{ name: "d" op: "NoOp" }} '
     f'node {{ name: "b" {IDENT} input: "^d" input: "a" }}',
     "Node 'b'.*control inputs must come after"),
    (f'node {{ name: "a" {PH} }} node {{ name: "b" op: "Identity" input: "a" '
     'attr { key: "T" value { type: DT_INT32 } } }',
     "Input 0 of node 'b' was passed float32 from a:0 incompatible with expected int32"),
    ('node { name: "c" op: "Const" attr { key: "dtype" value { type: DT_INT32 } } '
     'attr { key: "value" value { tensor { dtype: DT_FLOAT float_val: 1 } } } }',
     "Node 'c'.*value is float32 but its dtype attr is int32"),
    (f'node {{ name: "a" {PH} device: "/bogus:thing:1:2" }}', "Node 'a'.*bad device"),
    (f'node {{ name: "b" {IDENT} input: "a:x" }} node {{ name: "a" {PH} }}', "Node 'b'.*bad input"),
])
def test_import_errors_name_the_node_and_leave_graph_unchanged(text, match):
    g = tf.Graph()
    with g.as_default():
        keep = api("placeholder")(tf.float32, name="keep")
        before = [o.name for o in g.get_operations()]
        version = g.version
        with pytest.raises(ValueError, match=match):
            import_graph_def(_gd(text), name="")
    assert [o.name for o in g.get_operations()] == before
    assert keep.consumers() == []
    assert g.version >= version
    with g.as_default():  # the names a failed import used are free again
        import_graph_def(_gd(f'node {{ name: "a" {PH} }}'), name="")
    assert g.get_operation_by_name("a").type == "Placeholder"


def test_import_type_errors_and_versions():
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(TypeError, match="graph_def must be a GraphDef proto"):
            import_graph_def(b"\n\x00")
        with pytest.raises(TypeError):
            import_graph_def(node_def_pb2.NodeDef())
        bad = _gd(f'node {{ name: "a" {PH} }} versions {{ producer: 3000 min_consumer: 9999 }}')
        with pytest.raises(ValueError, match="min consumer version 9999"):
            import_graph_def(bad)
        ok = _gd(f'node {{ name: "a" {PH} }} versions {{ producer: 2474 min_consumer: 12 }}')
        import_graph_def(ok)
        g.finalize()
        with pytest.raises(RuntimeError):
            import_graph_def(ok)


def _private_runtime():
    """A runtime holding only a few test ops, to check attr constraints on import
    whatever the standard kernel set defines."""
    from flowrt.hookspecs import hookimpl
    from flowrt.op_registry import KernelSet, OpDef

    ks = KernelSet("graph_def_test_ops")
    ks.op(OpDef("Src", outputs=["y: T"], attrs=["T: type"]),
          OpDef("Pool", inputs=["x: N * T"], outputs=["y: T"],
                attrs=["T: {float, double}", "padding: {'SAME', 'VALID'}",
                       "ksize: list(int) >= 2", "N: int >= 2", "alpha: float = 0.5",
                       "Tlist: list(type) = []"]))

    class Plugin:
        @hookimpl
        def flowrt_kernel_sets(self):
            return [ks]

    return tf.Runtime(plugins={"graph_def_test_ops": Plugin()}, builtins=False,
                      autoload=False)


POOL = ('node { name: "s" op: "Src" attr { key: "T" value { type: %s } } } '
        'node { name: "p" op: "Pool" input: "s" input: "s" '
        'attr { key: "T" value { type: %s } } attr { key: "N" value { i: %d } } '
        'attr { key: "padding" value { s: "%s" } } '
        'attr { key: "ksize" value { list { i: %s } } } }')


@pytest.mark.parametrize("src_t,t,n,padding,ksize,match", [
    ("DT_FLOAT", "DT_FLOAT", 2, "SAME", "[1, 2]", None),
    ("DT_INT32", "DT_INT32", 2, "SAME", "[1, 2]",
     "Node 'p'.*attr 'T' of int32 is not in the list of allowed values: float32, float64"),
    ("DT_FLOAT", "DT_FLOAT", 2, "FULL", "[1, 2]",
     "Node 'p'.*attr 'padding' of 'FULL' is not in the list of allowed values"),
    ("DT_FLOAT", "DT_FLOAT", 2, "SAME", "[1]",
     "Node 'p'.*length 1 for attr 'ksize' must be at least minimum 2"),
    ("DT_FLOAT", "DT_FLOAT", 3, "SAME", "[1, 2]",
     "Node 'p' \\(op 'Pool'\\) has 2 inputs, but its op definition expects 3"),
    ("DT_FLOAT", "DT_FLOAT", 1, "SAME", "[1, 2]",
     "Node 'p'.*attr 'N' of 1 must be at least minimum 2"),
    ("DT_DOUBLE", "DT_FLOAT", 2, "SAME", "[1, 2]",
     "Input 0 of node 'p' was passed float64 from s:0 incompatible with expected float32"),
])
def test_import_checks_attr_constraints(src_t, t, n, padding, ksize, match):
    g = tf.Graph(runtime=_private_runtime())
    text = POOL % (src_t, t, n, padding, ksize)
    with g.as_default():
        if match is None:
            p = import_graph_def(_gd(text), return_elements=["p"], name="")[0]
            assert p.node_attrs["alpha"] == 0.5 and p.node_attrs["Tlist"] == []
            assert p.node_attrs["ksize"] == [1, 2] and p.node_attrs["padding"] == "SAME"
            assert serialized(g.as_graph_def().node[1]) != b""
            g2 = tf.Graph(runtime=g._runtime)
            with g2.as_default():
                import_graph_def(g.as_graph_def(), name="")
            assert serialized(g2.as_graph_def()) == serialized(g.as_graph_def())
        else:
            with pytest.raises(ValueError, match=match):
                import_graph_def(_gd(text), name="")
            assert g.get_operations() == []


def test_import_devices_and_colocation():
    gd = _gd(f'node {{ name: "a" {PH} device: "/gpu:0" }} '
             f'node {{ name: "b" {IDENT} input: "a" device: "/cpu:0" '
             'attr { key: "_class" value { list { s: "loc:@a" } } } } '
             f'node {{ name: "c" {IDENT} input: "a" device: "/cpu:1" }} '
             f'node {{ name: "e" {IDENT} input: "a" }}')
    g = tf.Graph()
    with g.as_default():
        import_graph_def(gd, name="p")
        with g.device("/job:w/task:2"):
            import_graph_def(gd, name="q")
    get = g.get_operation_by_name
    assert get("p/a").device == "/device:GPU:0"
    assert get("p/b").device == "/device:GPU:0"  # follows its colocation group
    assert get("p/b").node_attrs["_class"] == ["loc:@p/a"]
    assert get("p/b").node_def.attr["_class"].list.s == [b"loc:@p/a"]
    assert get("p/c").device == "/device:CPU:1"
    assert get("p/e").device == ""
    assert get("q/a").device == "/job:w/task:2/device:GPU:0"
    assert get("q/e").device == "/job:w/task:2"
    dangling = _gd(f'node {{ name: "a" {PH} '
                   'attr { key: "_class" value { list { s: "loc:@zz" } } } }')
    with g.as_default(), pytest.raises(ValueError, match="colocation to an op that does not "
                                                         "exist during import: r/zz in r/a"):
        import_graph_def(dangling, name="r")


def test_import_keeps_output_shapes_attr():
    g, _ = small_graph()
    gd = g.as_graph_def(add_shapes=True)
    g2 = tf.Graph()
    with g2.as_default():
        import_graph_def(gd, name="")
    shapes = g2.get_operation_by_name("x").node_attrs["_output_shapes"]
    assert [s.as_tuple() for s in shapes] == [(None, 2)]
    assert serialized(g2.as_graph_def()) == serialized(gd)  # kept, as TensorFlow keeps it


def test_import_does_not_inherit_outer_control_dependencies():
    g, _ = small_graph()
    g2 = tf.Graph()
    with g2.as_default():
        outer = api("no_op")(name="outer")
        with g2.control_dependencies([outer]):
            x = import_graph_def(g.as_graph_def(), return_elements=["x"])[0]
    assert x.control_inputs == []


def test_import_producer_op_list_strips_unknown_default_attrs():
    text = (f'node {{ name: "a" {PH} }} node {{ name: "b" {IDENT} input: "a" '
            'attr { key: "new_attr" value { i: %d } } }')
    ops = op_def_pb2.OpList()
    od = ops.op.add(name="Identity")
    ad = od.attr.add(name="new_attr", type="int")
    ad.default_value.i = 0
    g = tf.Graph()
    with g.as_default():
        gd = _gd(text % 0)
        import_graph_def(gd, producer_op_list=ops, name="ok")
        assert "new_attr" in gd.node[1].attr  # the caller's message is not modified
        assert "new_attr" not in g.get_operation_by_name("ok/b").node_attrs
        with pytest.raises(ValueError, match="new_attr"):
            import_graph_def(_gd(text % 1), producer_op_list=ops)


def test_import_const_nodes_with_every_encoding():
    nodes = {
        "content": _proto(D.float32, [2], tensor_content=struct.pack("<2f", 1.5, -1)),
        "fill": _proto(D.int32, [2, 3], int_val=[4]),
        "pad": _proto(D.int64, [3], int64_val=[1, 2]),
        "half": _proto(D.float16, [2], half_val=[0x3C00, 0x4000]),
        "cplx": _proto(D.complex64, [2], scomplex_val=[1, 2, 3, 4]),
        "flags": _proto(D.bool, [3], bool_val=[True, False]),
        "text": _proto(D.string, [2], string_val=[b"ab", b"\x00"]),
        "zeros": _proto(D.float64, [2, 2]),
        "u64": _proto(D.uint64, [], uint64_val=[2 ** 64 - 1]),
    }
    gd = graph_def_pb2.GraphDef()
    for name, tp in nodes.items():
        n = gd.node.add(name=name, op="Const")
        n.attr["dtype"].type = tp.dtype
        n.attr["value"].tensor.CopyFrom(tp)
    gd = graph_def_pb2.GraphDef.FromString(gd.SerializeToString())
    g = tf.Graph()
    with g.as_default():
        outs = import_graph_def(gd, return_elements=[f"{k}:0" for k in nodes], name="")
    for t, tp in zip(outs, nodes.values()):
        assert t.dtype.as_datatype_enum == tp.dtype
        assert t.shape.as_list() == [d.size for d in tp.tensor_shape.dim]
    # broadcast single values keep their compact form when written back
    back = {n.name: n for n in g.as_graph_def().node}
    assert list(back["fill"].attr["value"].tensor.int_val) == [4]
    assert back["fill"].attr["value"].tensor.tensor_content == b""
    with tf.Session(graph=g) as s:
        got = s.run(outs)
    for (name, tp), v in zip(nodes.items(), got):
        assert_same_array(np.asarray(v, dtype=object if tp.dtype == types_pb2.DT_STRING
                                     else None), make_ndarray(tp))


# A GraphDef written by TensorFlow (tf.compat.v1 graph mode; versions set to 1.15's).
TF_GRAPH_PBTXT = r'''
node {name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "shape" value { shape { dim { size: -1 } dim { size: 2 } } } }}
node {name: "h" op: "Const" attr { key: "dtype" value { type: DT_HALF } } attr { key: "value" value { tensor { dtype: DT_HALF tensor_shape { dim { size: 2 } } tensor_content: "\000>\000\300" } } }}
node {name: "z" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } dim { size: 2 } } float_val: 0.25 } } }}
node {name: "s" op: "Const" attr { key: "dtype" value { type: DT_STRING } } attr { key: "value" value { tensor { dtype: DT_STRING tensor_shape { dim { size: 2 } } string_val: "ab" string_val: "c" } } }}
node {name: "i" op: "Identity" input: "x" device: "/job:worker/task:1/device:CPU:0" attr { key: "T" value { type: DT_FLOAT } } attr { key: "_has_manual_control_dependencies" value { b: true } }}
node {name: "v/initial_value" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } dim { size: 2 } } tensor_content: "\000\000\200?\000\000\000@\000\000@@\000\000\200@" } } }}
node {name: "v" op: "VariableV2" attr { key: "container" value { s: "" } } attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "shape" value { shape { dim { size: 2 } dim { size: 2 } } } } attr { key: "shared_name" value { s: "" } }}
node {name: "v/Assign" op: "Assign" input: "v" input: "v/initial_value" attr { key: "T" value { type: DT_FLOAT } } attr { key: "_class" value { list { s: "loc:@v" } } } attr { key: "use_locking" value { b: true } } attr { key: "validate_shape" value { b: true } }}
node {name: "v/read" op: "Identity" input: "v" attr { key: "T" value { type: DT_FLOAT } } attr { key: "_class" value { list { s: "loc:@v" } } }}
node {name: "n" op: "NoOp" input: "^i"}
node {name: "d" op: "PlaceholderWithDefault" input: "z" attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "shape" value { shape { dim { size: -1 } dim { size: 2 } } } }}
versions {producer: 134}
'''


def test_tensorflow_written_graph_def_round_trips_byte_for_byte():
    gd = _gd(TF_GRAPH_PBTXT)
    g = tf.Graph()
    with g.as_default():
        import_graph_def(gd, name="")
    assert serialized(g.as_graph_def()) == serialized(gd)
    get = g.get_operation_by_name
    assert get("v").outputs[0].dtype == D.float32_ref
    assert get("v/read").node_attrs["_class"] == ["loc:@v"]
    assert get("i").device == "/job:worker/task:1/device:CPU:0"
    assert get("i").node_attrs["_has_manual_control_dependencies"] is True
    assert get("v").get_attr("container") == b"" and get("v").get_attr("dtype") == D.float32
    assert get("x").get_attr("shape").as_tuple() == (None, 2)
    config = tf.ConfigProto(allow_soft_placement=True)  # there is no /job:worker here
    with tf.Session(graph=g, config=config) as s:
        s.run(get("v/Assign"))
        h, z, st_, d, v = s.run(["h:0", "z:0", "s:0", "d:0", "v/read:0"])
        fed = s.run("i:0", {"x:0": np.ones((1, 2), np.float32)})
    assert_same_array(np.asarray(h), np.array([1.5, -2.0], np.float16))
    assert_same_array(np.asarray(z), np.full((2, 2), 0.25, np.float32))
    assert list(np.asarray(st_, dtype=object)) == [b"ab", b"c"]
    assert_same_array(np.asarray(d), np.full((2, 2), 0.25, np.float32))
    assert_same_array(np.asarray(v), np.array([[1, 2], [3, 4]], np.float32))
    np.testing.assert_array_equal(fed, np.ones((1, 2)))


def test_top_level_names():
    assert tf.import_graph_def is import_graph_def
    assert tf.make_tensor_proto is make_tensor_proto
    assert tf.make_ndarray is make_ndarray
    import flowrt.graph_def as mod

    assert set(mod.__all__) >= {"make_tensor_proto", "make_ndarray", "attr_value_of",
                                "python_attr_of", "node_def_of", "graph_to_graph_def",
                                "import_graph_def"}


# ---------------------------------------------------------------------------------------
# every registered op type: build, export, import, export again, run both
# ---------------------------------------------------------------------------------------
_PREFERRED = [D.float32, D.int32, D.float64, D.int64, D.bool, D.string, D.complex64]
# Input shapes to try: (first input, the other inputs); None is an unknown shape.
_PROFILES = {"mat": ([2, 2], [2, 2]), "img": ([1, 4, 4, 2], [1, 4, 4, 2]), "vec": ([4], [4]),
             "scalar": ([], []), "unknown": (None, None), "mat_vec": ([2, 2], [2]),
             "mat_scalar": ([2, 2], [])}
# Attr values for required attrs a generic rule gets wrong (by op type, then attr name).
_ATTR_OVERRIDES: dict[str, dict[str, object]] = {
    "Einsum": {"equation": "ab,bc->ac"},
}


def _pick_type(adef):
    if adef.allowed is None:
        return D.float32
    for d in _PREFERRED:
        if d in adef.allowed:
            return d
    return adef.allowed[0]


def _generic_attrs(op_def, profile):
    shape = _PROFILES[profile][0]
    counts = {a.number_attr for a in op_def.inputs + op_def.outputs if a.number_attr}
    attrs = {}
    for name, a in op_def.attrs.items():
        over = _ATTR_OVERRIDES.get(op_def.name, {})
        if name in over:
            attrs[name] = over[name]
        elif a.has_default:
            attrs[name] = list(a.default) if isinstance(a.default, list) else a.default
        elif a.kind == "type":
            attrs[name] = _pick_type(a)
        elif a.kind == "list(type)":
            attrs[name] = [_pick_type(a)]
        elif a.kind == "int":
            attrs[name] = max(a.minimum or 0, 2 if name in counts else 1)
        elif a.kind == "float":
            attrs[name] = 1.0
        elif a.kind == "bool":
            attrs[name] = False
        elif a.kind == "string":
            attrs[name] = a.allowed[0] if a.allowed else "a"
        elif a.kind == "shape":
            attrs[name] = TensorShape(shape)
        elif a.kind == "tensor":
            attrs[name] = np.ones(shape or [], np.float32)
        elif a.kind == "list(int)":
            attrs[name] = [1] * max(a.minimum or 0, 4)
        elif a.kind == "list(float)":
            attrs[name] = [1.0] * max(a.minimum or 0, 1)
        elif a.kind == "list(string)":
            attrs[name] = ["a"] * max(a.minimum or 0, 1)
        elif a.kind == "list(shape)":
            attrs[name] = [TensorShape(shape)] * max(a.minimum or 0, 1)
        else:
            raise NotImplementedError(f"attr kind {a.kind}")
    if "value" in attrs and isinstance(attrs.get("dtype"), D.DType):
        attrs["value"] = np.ones(shape or [], attrs["dtype"].np) \
            if attrs["dtype"] is not D.string else np.full(shape or [], b"a", object)
    return attrs


def _feed_value(dtype, shape, rng):
    shape = [2, 2] if shape is None else shape
    if dtype is D.string:
        return np.full(shape, b"a", dtype=object)
    if dtype is D.bool:
        return rng.rand(*shape) > 0.5
    if dtype.is_integer:
        return np.ones(shape, dtype.np)  # valid as an index, a divisor, an axis, a size
    if dtype.is_complex:
        return (rng.uniform(0.5, 2, shape) + 1j * rng.uniform(0.5, 2, shape)).astype(dtype.np)
    return rng.uniform(0.5, 2, shape).astype(dtype.np)


def _build_generic(g, op_def, profile, inits):
    """One node of ``op_def`` fed by placeholders (variables for ref inputs)."""
    from flowrt.graph_def import _expected_inputs

    attrs = _generic_attrs(op_def, profile)
    inputs, feeds = [], {}
    for i, (dt, is_ref) in enumerate(_expected_inputs(op_def, attrs)):
        shape = _PROFILES[profile][0 if i == 0 else 1]
        pname = f"{op_def.name}_{profile}_in{i}"
        if is_ref:
            v = _create(g, "VariableV2", name=pname, shape=TensorShape(shape), dtype=dt)
            value = np.ones(shape or [], dt.np) if dt is not D.string else \
                np.full(shape or [], b"a", object)
            c = _create(g, "Const", name=pname + "_init", dtype=dt, value=value)
            inits.append(_create(g, "Assign", [v.outputs[0], c.outputs[0]],
                                 name=pname + "_assign", T=dt))
            inputs.append(v.outputs[0])
            continue
        p = _create(g, "Placeholder", name=pname, dtype=dt, shape=TensorShape(shape))
        inputs.append(p.outputs[0])
        feeds[pname + ":0"] = (dt, shape)
    op = g.create_op(op_def.name, inputs, name=f"{op_def.name}_{profile}", attrs=attrs,
                     op_def=op_def)
    return op, feeds


def _same_result(a, b):
    if isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b)
        for x, y in zip(a, b):
            _same_result(x, y)
        return
    if a is None:
        assert b is None
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype == object:
        assert a.tolist() == b.tolist()
    else:
        np.testing.assert_array_equal(a, b)


def test_every_registered_op_round_trips_and_computes_the_same(tmp_path, monkeypatch):
    # ops that write files (WriteFile, savers, readers' state) get generic names such as
    # b"a": let them land in a scratch directory, not the checkout
    monkeypatch.chdir(tmp_path)
    runtime = tf.default_runtime()
    op_defs = runtime.op_defs
    g = tf.Graph()
    built: dict[str, list] = {}
    failures: dict[str, list[str]] = {}
    inits: list = []
    with g.as_default():
        for name, op_def in sorted(op_defs.items()):
            if "Const" not in op_defs or "Placeholder" not in op_defs:
                break
            for profile in _PROFILES:
                try:  # try it on a scratch graph first so failures leave no debris
                    scratch = tf.Graph()
                    with scratch.as_default():
                        _build_generic(scratch, op_def, profile, [])
                except Exception as e:  # noqa: BLE001 - record why and try the next shape
                    failures.setdefault(name, []).append(f"{profile}: {type(e).__name__}: {e}")
                    continue
                built.setdefault(name, []).append(_build_generic(g, op_def, profile, inits))
    covered = sorted(built)
    missing = {k: failures.get(k) for k in sorted(set(op_defs) - set(built))}
    assert len(covered) >= 0.9 * len(op_defs), f"ops not built generically: {missing}"

    gd = g.as_graph_def()
    g2 = tf.Graph()
    with g2.as_default():
        import_graph_def(graph_def_pb2.GraphDef.FromString(gd.SerializeToString()), name="")
    assert serialized(g2.as_graph_def()) == serialized(gd)
    assert serialized(g2.as_graph_def(add_shapes=True)) == \
        serialized(g.as_graph_def(add_shapes=True))
    for a, b in zip(g.get_operations(), g2.get_operations()):
        assert (a.name, a.type, a.device) == (b.name, b.type, b.device)
        assert [t.dtype for t in a.outputs] == [t.dtype for t in b.outputs]
        assert [t.shape.as_tuple() for t in a.outputs] == [t.shape.as_tuple() for t in b.outputs]

    # kernels that wait for something (queues, receives) could block forever here
    waiting = {op for (op, _), k in runtime.kernels.items() if k.kind == "async"}
    rng = np.random.RandomState(1234)
    compared = set()
    with tf.Session(graph=g) as s1, tf.Session(graph=g2) as s2:
        if inits:
            s1.run(inits)
            s2.run([o.name for o in inits])
        for name, nodes in built.items():
            if name in waiting:
                continue
            stateful = op_defs[name].is_stateful
            for op, feeds in nodes:
                fd = {k: _feed_value(dt, shape, rng) for k, (dt, shape) in feeds.items()}
                fetch1 = list(op.outputs) if op.outputs else op
                fetch2 = [t.name for t in op.outputs] if op.outputs else op.name
                try:
                    want = s1.run(fetch1, fd)
                except Exception:  # noqa: BLE001 - generic inputs may be invalid for the op
                    continue
                got = s2.run(fetch2, fd)
                if stateful:  # random ops: compare what does not depend on the draw
                    for w, v in zip(want or [], got or []):
                        assert np.asarray(w).dtype == np.asarray(v).dtype
                        assert np.shape(w) == np.shape(v)
                else:
                    _same_result(want, got)
                compared.add(name)
    # the ops every graph has must have computed on both sides
    assert {"Const", "Identity"} <= compared


# -- loops: NextIteration -> Merge back edges ---------------------------------------------
def _n(name, op, inputs=(), **attrs):
    """A NodeDef in text form: attrs as ``key='<AttrValue text>'``."""
    ins = "".join(f' input: "{i}"' for i in inputs)
    ats = "".join(f' attr {{ key: "{k}" value {{ {v} }} }}' for k, v in attrs.items())
    return f'node {{ name: "{name}" op: "{op}"{ins}{ats} }}'


# A loop laid out as TensorFlow 1.15 writes it: ``y = y * x`` three times. Body nodes
# come before the Enter they read, and each Merge names its NextIteration, defined later.
F, I32 = "type: DT_FLOAT", "type: DT_INT32"
ENTER = dict(frame_name='s: "w/while_context"', parallel_iterations="i: 10")
TF_LOOP_PBTXT = "\n".join([
    _n("x", "Placeholder", dtype=F),
    _n("Const", "Const", dtype=I32, value="tensor { dtype: DT_INT32 int_val: 0 }"),
    _n("Const_1", "Const", dtype=F, value="tensor { dtype: DT_FLOAT float_val: 1.0 }"),
    _n("w/Enter", "Enter", ["Const"], T=I32, is_constant="b: false", **ENTER),
    _n("w/Enter_1", "Enter", ["Const_1"], T=F, is_constant="b: false", **ENTER),
    _n("w/Merge", "Merge", ["w/Enter", "w/NextIteration"], T=I32, N="i: 2"),
    _n("w/Merge_1", "Merge", ["w/Enter_1", "w/NextIteration_1"], T=F, N="i: 2"),
    _n("w/Less/y", "Const", ["^w/Merge"], dtype=I32,
       value="tensor { dtype: DT_INT32 int_val: 3 }"),
    _n("w/Less", "Less", ["w/Merge", "w/Less/y"], T=I32),
    _n("w/LoopCond", "LoopCond", ["w/Less"]),
    _n("w/Switch", "Switch", ["w/Merge", "w/LoopCond"], T=I32, _class='list { s: "loc:@w/Merge" }'),
    _n("w/Switch_1", "Switch", ["w/Merge_1", "w/LoopCond"], T=F),
    _n("w/Identity", "Identity", ["w/Switch:1"], T=I32),
    _n("w/Identity_1", "Identity", ["w/Switch_1:1"], T=F),
    _n("w/add/y", "Const", ["^w/Identity"], dtype=I32,
       value="tensor { dtype: DT_INT32 int_val: 1 }"),
    _n("w/add", "AddV2", ["w/Identity", "w/add/y"], T=I32),
    _n("w/mul", "Mul", ["w/Identity_1", "w/mul/Enter"], T=F),
    _n("w/mul/Enter", "Enter", ["x"], T=F, is_constant="b: true", **ENTER),
    _n("w/NextIteration", "NextIteration", ["w/add"], T=I32),
    _n("w/NextIteration_1", "NextIteration", ["w/mul"], T=F),
    _n("w/Exit", "Exit", ["w/Switch"], T=I32),
    _n("w/Exit_1", "Exit", ["w/Switch_1"], T=F),
    _n("out", "Identity", ["w/Exit_1"], T=F),
])


def test_import_a_tensorflow_loop_graph_def():
    gd = text_format.Parse(TF_LOOP_PBTXT, graph_def_pb2.GraphDef())
    g = tf.Graph()
    with g.as_default():
        out, merge = import_graph_def(gd, return_elements=["out:0", "w/Merge_1"])
    assert [t.op.name for t in merge.inputs] == ["import/w/Enter_1",
                                                  "import/w/NextIteration_1"]
    assert merge in g.get_operation_by_name("import/w/NextIteration_1").outputs[0].consumers()
    assert g.get_operation_by_name("import/w/Enter_1").outputs[0].consumers() == [merge]
    with tf.Session(graph=g) as s:
        assert s.run(out, {"import/x:0": 1.5}) == pytest.approx(1.5 ** 3)


def test_loop_graph_def_in_any_node_order_imports_the_same():
    gd = text_format.Parse(TF_LOOP_PBTXT, graph_def_pb2.GraphDef())
    rev = graph_def_pb2.GraphDef()
    rev.node.extend(reversed(gd.node))
    g = tf.Graph()
    with g.as_default():
        out, = import_graph_def(rev, return_elements=["out:0"], name="r")
    with tf.Session(graph=g) as s:
        assert s.run(out, {"r/x:0": -2.0}) == -8.0


def test_round_trip_of_nested_loops_and_loop_gradients():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float64, [], name="x")

        def outer(i, y):
            _, y = tf.while_loop(lambda j, z: j < i, lambda j, z: (j + 1, z * x + 1.0), [0, y])
            return i + 1, y

        _, y = tf.while_loop(lambda i, y: i < 4, outer, [0, tf.constant(1.0, tf.float64)])
        tf.identity(y, name="y")
        tf.identity(tf.gradients(y, x)[0], name="dy")
    g2 = tf.Graph()
    with g2.as_default():
        import_graph_def(g.as_graph_def(), name="")
    ops = {op.type for op in g2.get_operations()}
    assert {"StackPushV2", "StackPopV2", "NextIteration", "Merge"} <= ops

    def f(xv):
        y = 1.0
        for i in range(4):
            for _ in range(i):
                y = y * xv + 1.0
        return y

    with tf.Session(graph=g2) as s:
        y, dy = s.run(["y:0", "dy:0"], {"x:0": 0.7})
    assert y == pytest.approx(f(0.7), rel=1e-12)
    assert dy == pytest.approx((f(0.7 + 1e-6) - f(0.7 - 1e-6)) / 2e-6, rel=1e-6)


def test_loop_back_edge_of_the_wrong_dtype_is_refused():
    bad = TF_LOOP_PBTXT.replace('"w/Merge_1" op: "Merge" input: "w/Enter_1" input: '
                                '"w/NextIteration_1"',
                                '"w/Merge_1" op: "Merge" input: "w/Enter_1" input: '
                                '"w/NextIteration"')
    assert bad != TF_LOOP_PBTXT
    gd = text_format.Parse(bad, graph_def_pb2.GraphDef())
    g = tf.Graph()
    with g.as_default(), pytest.raises(ValueError, match="Input 1 of node 'import/w/Merge_1' "
                                       "was passed int32 from import/w/NextIteration:0"):
        import_graph_def(gd)
    assert g.get_operations() == []


def test_a_cycle_without_a_loop_is_still_refused():
    gd = text_format.Parse("\n".join([
        _n("a", "Identity", ["b"], T=F), _n("b", "Identity", ["a"], T=F)]),
        graph_def_pb2.GraphDef())
    with tf.Graph().as_default(), pytest.raises(ValueError, match="cycle"):
        import_graph_def(gd)
