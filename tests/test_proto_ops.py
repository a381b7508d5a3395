"""tf.io.decode_proto / encode_proto: fields of tf.train.Example and of a proto2 message
loaded from a FileDescriptorSet (a file, or ``bytes://``): sizes, padding with the
field's default, submessages and map entries as raw bytes in wire order, the last value
of a singular field, unsigned values as TF converts them, text format, TF's errors, and
a hypothesis round trip decode -> encode -> decode."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors
from flowrt.proto import example_pb2, feature_pb2

_F = descriptor_pb2.FieldDescriptorProto


def _rec_file() -> descriptor_pb2.FileDescriptorProto:
    """wtest.Rec (proto2): defaults, packed and unpacked repeated fields, an enum, a
    submessage, a map."""
    fdp = descriptor_pb2.FileDescriptorProto(name="wtest/rec.proto", package="wtest",
                                             syntax="proto2")
    m = fdp.message_type.add(name="Rec")
    e = m.enum_type.add(name="E")
    e.value.add(name="ONE", number=1)
    e.value.add(name="TWO", number=2)
    entry = m.nested_type.add(name="MEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=_F.TYPE_INT32, label=_F.LABEL_OPTIONAL)
    opt, rep = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED
    for name, num, typ, label, extra in (
            ("a", 1, _F.TYPE_INT32, opt, {"default_value": "-7"}),
            ("s", 2, _F.TYPE_STRING, opt, {"default_value": "dflt"}),
            ("r", 3, _F.TYPE_SINT64, rep, {}),
            ("e", 4, _F.TYPE_ENUM, opt, {"type_name": ".wtest.Rec.E", "default_value": "TWO"}),
            ("f", 5, _F.TYPE_FIXED32, rep, {}),
            ("b", 6, _F.TYPE_BOOL, opt, {}),
            ("d", 7, _F.TYPE_DOUBLE, opt, {"default_value": "2.5"}),
            ("fl", 8, _F.TYPE_FLOAT, rep, {}),
            ("u", 9, _F.TYPE_UINT64, opt, {}),
            ("child", 10, _F.TYPE_MESSAGE, opt, {"type_name": ".wtest.Rec"}),
            ("m", 11, _F.TYPE_MESSAGE, rep, {"type_name": ".wtest.Rec.MEntry"})):
        f = m.field.add(name=name, number=num, type=typ, label=label, **extra)
        if name == "r":
            f.options.packed = True
    return fdp


_FILE = _rec_file()
_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_FILE)
Rec = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("wtest.Rec"))
SET = descriptor_pb2.FileDescriptorSet(file=[_FILE]).SerializeToString()


def run(fetches: Any) -> Any:
    with tf.Session() as sess:
        return sess.run(fetches)


@pytest.fixture
def source(tmp_path: Any) -> str:
    path = tmp_path / "rec.desc"
    path.write_bytes(SET)
    return str(path)


def test_example_features_and_map_entries_in_wire_order() -> None:
    ex = example_pb2.Example()
    ex.features.feature["b"].int64_list.value.extend([1, 2, 3])
    ex.features.feature["a"].bytes_list.value.append(b"x")
    data = [ex.SerializeToString(), b""]
    sizes, (feats,) = tf.io.decode_proto(data, "tensorflow.Example", ["features"],
                                         [tf.string])
    assert sizes.shape.as_list() == [2, 1] and feats.shape.as_list() == [2, None]
    entries = tf.io.decode_proto(feats[:, 0], "tensorflow.Features", ["feature"], [tf.string])
    s, f, es, ev = run((sizes, feats, entries.sizes, entries.values[0]))
    assert s.tolist() == [[1], [0]] and s.dtype == np.int32
    assert f[0, 0] == ex.features.SerializeToString() and f[1, 0] == b""
    assert es.tolist() == [[2], [0]] and ev.shape == (2, 2)
    wire = ex.features.SerializeToString()
    assert [wire.index(e) for e in ev[0]] == sorted(wire.index(e) for e in ev[0])
    keys = [feature_pb2.Features.FeatureEntry.FromString(e).key for e in ev[0]]
    assert sorted(keys) == ["a", "b"] and ev[1].tolist() == [b"", b""]


def test_defaults_padding_and_types(source: str) -> None:
    full = Rec(a=3, s="hi", r=[-1, 2**40], e=1, f=[7, 2**32 - 1], b=True, d=-0.5,
               fl=[1.5], u=2**64 - 1)
    data = [[full.SerializeToString()], [b""]]
    names = ["a", "s", "r", "e", "f", "b", "d", "fl", "u"]
    types = [tf.int32, tf.string, tf.int64, tf.int32, tf.int64, tf.bool, tf.float64,
             tf.float64, tf.int64]
    out = tf.io.decode_proto(data, "wtest.Rec", names, types, descriptor_source=source)
    assert out.sizes.shape.as_list() == [2, 1, 9]
    sizes, vals = run(out)
    assert sizes[:, 0].tolist() == [[1, 1, 2, 1, 2, 1, 1, 1, 1], [0] * 9]
    got = {n: v[:, 0] for n, v in zip(names, vals)}
    assert got["a"].tolist() == [[3], [-7]]
    assert got["s"].tolist() == [[b"hi"], [b"dflt"]]
    assert got["r"].tolist() == [[-1, 2**40], [0, 0]]
    assert got["e"].tolist() == [[1], [2]]
    assert got["f"].dtype == np.int64 and got["f"].tolist() == [[7, 2**32 - 1], [0, 0]]
    assert got["b"].tolist() == [[True], [False]]
    assert got["d"].tolist() == [[-0.5], [2.5]]
    assert got["fl"].dtype == np.float64 and got["fl"].tolist() == [[1.5], [0.0]]
    assert got["u"].tolist() == [[-1], [0]]  # uint64 as int64: two's complement


def test_singular_field_keeps_last_value(source: str) -> None:
    data = Rec(a=1).SerializeToString() + Rec(a=5).SerializeToString()
    s, (a,) = run(tf.io.decode_proto([data], "wtest.Rec", ["a"], [tf.int32],
                                     descriptor_source=source))
    assert s.tolist() == [[1]] and a.tolist() == [[5]]


def test_text_format_bytes_source_and_sanitize() -> None:
    src = b"bytes://" + SET
    s, (a, c) = run(tf.io.decode_proto(["a: 4 child { a: 9 }"], "wtest.Rec", ["a", "child"],
                                       [tf.int64, tf.string], descriptor_source=src,
                                       message_format="text"))
    assert s.tolist() == [[1, 1]] and a.tolist() == [[4]]
    assert Rec.FromString(c[0, 0]).a == 9
    s, (a,) = run(tf.io.decode_proto([Rec(a=2).SerializeToString()], "wtest.Rec", ["a"],
                                     [tf.int32], descriptor_source=src, sanitize=True))
    assert a.tolist() == [[2]]


def test_encode_matches_protobuf_serialization(source: str) -> None:
    sizes = [[1, 2, 0], [0, 1, 1]]
    values = [[[3], [0]], tf.constant([[-1, 5], [6, 0]], tf.int64),
              [[b"c"], [Rec(a=1).SerializeToString()]]]
    out = tf.io.encode_proto(sizes, values, ["a", "r", "child"], "wtest.Rec",
                             descriptor_source=source)
    assert out.shape.as_list() == [2]
    got = run(out)
    assert got[0] == Rec(a=3, r=[-1, 5]).SerializeToString()
    assert Rec.FromString(got[1]) == Rec(r=[6], child=Rec(a=1))
    il = run(tf.io.encode_proto([[3]], [tf.constant([[5, -1, 2**40]], tf.int64)], ["value"],
                                "tensorflow.Int64List"))
    assert il[0] == feature_pb2.Int64List(value=[5, -1, 2**40]).SerializeToString()


def test_errors(source: str) -> None:
    data = [example_pb2.Example().SerializeToString()]
    cases = [
        (lambda: tf.io.decode_proto(data, "tensorflow.Nope", ["x"], [tf.string]),
         errors.InvalidArgumentError, "No descriptor found for message type tensorflow.Nope"),
        (lambda: tf.io.decode_proto(data, "tensorflow.Example", ["x"], [tf.string]),
         errors.InvalidArgumentError, "Unknown field: x in message type tensorflow.Example"),
        (lambda: tf.io.decode_proto(data, "tensorflow.Example", ["features"], [tf.int32]),
         errors.InvalidArgumentError, "Unexpected output type for flowrt.Example.features"),
        (lambda: tf.io.decode_proto([b"\xff\xff"], "tensorflow.Example", ["features"],
                                    [tf.string]),
         errors.DataLossError, "Unable to parse binary protobuf"),
        (lambda: tf.io.decode_proto(["a: 'x'"], "wtest.Rec", ["a"], [tf.int32],
                                    descriptor_source=source, message_format="text"),
         errors.DataLossError, "Unable to parse text protobuf"),
        (lambda: tf.io.decode_proto(tf.zeros([0], tf.string), "wtest.Rec", ["a"],
                                    [tf.int32], descriptor_source=source),
         errors.InvalidArgumentError, "Bufs argument must contain at least one value"),
        (lambda: tf.io.decode_proto(data, "wtest.Rec", ["a"], [tf.int32],
                                    descriptor_source=source + ".missing"),
         errors.InvalidArgumentError, "Source does not represent serialized file descriptor "
                                      "set proto: cannot read .*missing"),
        (lambda: tf.io.encode_proto([[2]], [tf.constant([[1]], tf.int64)], ["value"],
                                    "tensorflow.Int64List"),
         errors.InvalidArgumentError, r"Size to write must not be larger than value tensor; "
                                      r"but saw: 2 > 1 at message 0 field 0"),
        (lambda: tf.io.encode_proto([[1]], [[["s"]]], ["value"], "tensorflow.Int64List"),
         errors.InvalidArgumentError, "Incompatible type for field value.  Saw dtype: string "
                                      "but field type is: int64"),
        (lambda: tf.io.encode_proto([[1, 1]], [tf.constant([[1]], tf.int64)], ["value"],
                                    "tensorflow.Int64List"),
         errors.InvalidArgumentError, r"sizes should be batch_size \+ \[len\(field_names\)\]"),
    ]
    for build, cls, msg in cases:
        with pytest.raises(cls, match=msg):
            run(build())
    with pytest.raises(ValueError, match="at least rank 2"):
        tf.io.encode_proto([[1]], [[1]], ["value"], "tensorflow.Int64List")
    with pytest.raises(TypeError, match="Expected list for 'field_names'"):
        tf.io.decode_proto(data, "tensorflow.Example", "features", [tf.string])


_recs = st.builds(
    lambda a, s, r, f, fl, u: Rec(**{k: v for k, v in dict(a=a, s=s, r=r, f=f, fl=fl,
                                                             u=u).items()
                                     if v is not None and v != []}),
    st.one_of(st.none(), st.integers(-2**31, 2**31 - 1)), st.one_of(st.none(), st.text()),
    st.lists(st.integers(-2**63, 2**63 - 1), max_size=4),
    st.lists(st.integers(0, 2**32 - 1), max_size=4),
    st.lists(st.floats(width=32, allow_nan=False), max_size=3),
    st.one_of(st.none(), st.integers(0, 2**64 - 1)))


@settings(max_examples=20, deadline=None)
@given(st.lists(_recs, min_size=1, max_size=4))
def test_round_trip(recs: list[Any]) -> None:
    names = ["a", "s", "r", "f", "fl", "u"]
    types = [tf.int32, tf.string, tf.int64, tf.uint32, tf.float32, tf.uint64]
    src = b"bytes://" + SET
    data = [r.SerializeToString() for r in recs]
    dec = tf.io.decode_proto(data, "wtest.Rec", names, types, descriptor_source=src)
    enc = tf.io.encode_proto(dec.sizes, dec.values, names, "wtest.Rec",
                             descriptor_source=src)
    sizes, vals, back = run((dec.sizes, dec.values, enc))
    for i, r in enumerate(recs):
        assert Rec.FromString(back[i]) == r
        for j, n in enumerate(names):
            want = list(getattr(r, n)) if n in ("r", "f", "fl") else (
                [getattr(r, n)] if r.HasField(n) else [])
            assert sizes[i, j] == len(want)
            got = vals[j][i, :len(want)].tolist()
            assert got == [w.encode() if isinstance(w, str) else w for w in want]


def test_binary_descriptor_source_survives_graph_def_round_trip():
    """A ``bytes://`` descriptor set is binary: the string attr keeps its bytes through
    GraphDef export and import, and the imported graph decodes the same."""
    from google.protobuf import descriptor_pb2

    from flowrt.proto import example_pb2, feature_pb2

    fds = descriptor_pb2.FileDescriptorSet()
    feature_pb2.DESCRIPTOR.CopyToProto(fds.file.add())
    example_pb2.DESCRIPTOR.CopyToProto(fds.file.add())
    source = b"bytes://" + fds.SerializeToString()
    assert b"\xff" in source or source != source.decode("utf-8", "replace").encode()
    ex = example_pb2.Example()
    ex.features.feature["a"].int64_list.value.extend([3, 4])
    g = tf.Graph()
    with g.as_default():
        sizes, values = tf.io.decode_proto(tf.constant([ex.features.feature["a"]
                                                        .int64_list.SerializeToString()]),
                                           "flowrt.Int64List", ["value"], [tf.int64],
                                           descriptor_source=source)
    g2 = tf.Graph()
    with g2.as_default():
        tf.import_graph_def(g.as_graph_def(), name="")
        with tf.Session() as sess:
            s, v = sess.run([sizes.name, values[0].name])
    np.testing.assert_array_equal(s, [[2]])
    np.testing.assert_array_equal(v, [[3, 4]])
