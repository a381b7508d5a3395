"""The envelope codec of flowrt.rpc: written and read by hand, it must agree with the
protobuf classes both ways, cache only what is safe to cache, and refuse bad input."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from flowrt import errors
from flowrt.distributed import rpc
from flowrt.distributed import shm
from flowrt.executor import DEAD
from flowrt.proto import service_pb2 as pb


def _views(buffers):
    return [memoryview(bytes(memoryview(b).cast("B"))) if not isinstance(b, bytes)
            else memoryview(b) for b in buffers]


def _same(a, b) -> None:
    if a is DEAD or b is DEAD:
        assert a is b
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    if a.dtype.kind in "OSU":
        assert [x if isinstance(x, bytes) else str(x).encode() for x in a.reshape(-1)] == \
            [x if isinstance(x, bytes) else str(x).encode() for x in b.reshape(-1)]
    else:
        assert a.dtype.newbyteorder("=") == b.dtype.newbyteorder("=")
        np.testing.assert_array_equal(a, b)


_DTYPES = [np.float32, np.float64, np.int8, np.int32, np.int64, np.uint8, np.uint16,
           np.bool_, np.complex64, np.float16]


@st.composite
def _tensors(draw):
    kind = draw(st.sampled_from(["array", "scalar", "dead", "strings", "strided"]))
    if kind == "dead":
        return DEAD
    if kind == "strings":
        return np.array(draw(st.lists(st.binary(max_size=5), max_size=4)), dtype=object)
    shape = tuple(draw(st.lists(st.integers(0, 4), max_size=3)))
    dt = np.dtype(draw(st.sampled_from(_DTYPES)))
    arr = (np.arange(int(np.prod(shape)), dtype=np.int64) % 7).astype(dt).reshape(shape)
    if kind == "scalar":
        return dt.type(3)
    if kind == "strided" and arr.ndim:
        return np.repeat(arr, 2, axis=-1)[..., ::2]
    return arr


@settings(max_examples=80, deadline=None)
@given(st.lists(_tensors(), max_size=5), st.booleans())
def test_pack_agrees_with_the_protobuf_classes_both_ways(tensors, host):
    body = pb.RunGraphRequest(graph_handle="g", step_id=2**63 - 5, arg_index=[0, 3])
    header, buffers = rpc.pack(body, tensors, host=host)
    # what pack writes, protobuf reads as the same envelope encode_tensor builds
    env = pb.Envelope.FromString(header)
    ref = pb.Envelope(body=body.SerializeToString())
    ref_buffers: list = []
    for t in tensors:
        rpc.encode_tensor(t, ref.tensors, ref_buffers)
    if host:
        ref.host = shm.host_token() or ""
    assert env == ref
    assert [bytes(memoryview(b).cast("B")) for b in buffers] == \
        [bytes(memoryview(b).cast("B")) for b in ref_buffers]
    # and what protobuf writes, unpack reads (twice: the second time from its caches)
    for _ in range(2):
        got_body, got, _same_host = rpc.unpack_from_peer(ref.SerializeToString(),
                                                         _views(ref_buffers),
                                                         pb.RunGraphRequest)
        assert got_body == body and len(got) == len(tensors)
        for a, b in zip(tensors, got):
            _same(a, b)


def test_field_order_unknown_fields_and_unpacked_shapes_are_read():
    meta = pb.TensorMeta(dtype=1, shape=[2, 3], buffer=0)  # DT_FLOAT
    # shape as repeated, unpacked varints (field 2, wire type 0), then an unknown field
    raw_meta = b"\x08\x01\x10\x02\x10\x03" + b"\xf8\x01\x07"
    assert pb.TensorMeta.FromString(raw_meta).shape == meta.shape
    body = pb.RecvTensorsRequest(step_id=9, key=["k"]).SerializeToString()
    unknown = b"\x28\x05" + b"\x31" + bytes(8) + b"\x3a\x02hi" + b"\x45" + bytes(4)
    header = (b"\x1a" + bytes([len(raw_meta)]) + raw_meta + unknown +
              b"\x12" + bytes([len(body)]) + body)
    data = np.arange(6, dtype="<f4")
    got_body, (arr,), same = rpc.unpack_from_peer(header, [memoryview(data.tobytes())],
                                                  pb.RecvTensorsRequest)
    assert got_body.step_id == 9 and list(got_body.key) == ["k"] and not same
    np.testing.assert_array_equal(arr, data.reshape(2, 3))
    assert not arr.flags.writeable  # a view of the received buffer


@pytest.mark.parametrize("header", [
    b"\x12", b"\x12\x05abc", b"\x1a\xff", b"\x0f", b"\x12\x80\x80\x80\x80\x80\x80\x80\x80"
    b"\x80\x80\x01", b"\x1a\x02\x08\xff", b"\x0a\x03\x08\x01",
], ids=["no-length", "short", "bad-varint", "wire-type-7", "long-varint", "bad-meta",
        "bad-status"])
def test_malformed_headers_are_invalid_argument(header):
    with pytest.raises(errors.InvalidArgumentError, match="malformed"):
        rpc.unpack_from_peer(header, [memoryview(b"\0" * 4)], pb.Empty)


def test_cached_tensor_metas_still_check_every_message():
    header, buffers = rpc.pack(pb.Empty(), [np.ones((2, 2), np.float32)])
    body, (arr,), _ = rpc.unpack_from_peer(header, _views(buffers), pb.Empty)
    assert arr.shape == (2, 2)
    with pytest.raises(errors.InvalidArgumentError, match="needs 16 bytes, the buffer has 12"):
        rpc.unpack_from_peer(header, [memoryview(bytes(12))], pb.Empty)
    with pytest.raises(errors.InvalidArgumentError, match="refers to buffer 0; the message has 0"):
        rpc.unpack_from_peer(header, [], pb.Empty)
    bad = pb.Envelope()
    bad.tensors.add(dtype=1, shape=[-2, 1], buffer=0)
    with pytest.raises(errors.InvalidArgumentError, match="negative shape"):
        rpc.unpack_from_peer(bad.SerializeToString(), [memoryview(b"")], pb.Empty)
    bad = pb.Envelope()
    bad.tensors.add(dtype=999, shape=[1], buffer=0)
    with pytest.raises(errors.InvalidArgumentError, match="bad tensor dtype 999"):
        rpc.unpack_from_peer(bad.SerializeToString(), [memoryview(b"\0")], pb.Empty)


def test_status_replies_and_serialised_bodies():
    header, _ = rpc.pack(status=errors.NotFoundError(None, None, "no such graph g7"))
    with pytest.raises(errors.NotFoundError, match="no such graph g7"):
        rpc.unpack(header, [], pb.Empty)
    body = pb.CallableRequest(session_handle="s", handle=3)
    assert rpc.pack(body)[0] == rpc.pack(body.SerializeToString())[0]
    assert rpc.unpack(rpc.pack(body.SerializeToString())[0], [], pb.CallableRequest)[0] == body


def test_the_host_token_marks_the_same_machine():
    token = shm.host_token()
    header, _ = rpc.pack(pb.Empty(), host=True)
    _, _, same = rpc.unpack_from_peer(header, [], pb.Empty)
    assert same == bool(token and shm.enabled())
    other = pb.Envelope(host="another-machine").SerializeToString()
    assert rpc.unpack_from_peer(other, [], pb.Empty)[2] is False


def test_big_endian_and_non_numpy_tensors_travel():
    """A big-endian array is sent little-endian (it used to fail the dtype lookup); a
    value that is not a numpy array reaches the wire through host_array."""
    big = np.arange(6, dtype=">f4").reshape(2, 3)
    header, buffers = rpc.pack(None, [big, [1, 2, 3]])
    _, values = rpc.unpack(header, buffers, pb.Status)
    np.testing.assert_array_equal(values[0], big)
    assert values[0].dtype == np.float32 and values[0].dtype.byteorder in "=<"
    np.testing.assert_array_equal(values[1], [1, 2, 3])
