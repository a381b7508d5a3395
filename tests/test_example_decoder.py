"""The wire-format Example decoder behind tf.parse_example (plugins/kernels/standard/
example_decoder.py) against the protobuf runtime: random Examples written by protobuf and
by hand (packed and unpacked lists, empty features, unknown fields, keys twice), malformed
bytes (the decoder must leave to protobuf whatever protobuf rejects), the op on batches
through both paths (values, errors), and the batched TFRecord read path of
core/framework/tf_record.py (checksums, chunk edges, the first bad record)."""
from __future__ import annotations

import io
import struct

import google_crc32c
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors
from flowrt.framework import tf_record
from flowrt.plugins.kernels.standard import example_decoder as ed
from flowrt.plugins.kernels.standard import parsing_ops
from flowrt.proto import example_pb2

KINDS = (ed.BYTES, ed.FLOAT, ed.INT64)
SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


# -- writing Examples by hand -------------------------------------------------------------
def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def ld(field: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def encode_feature(kind: int, vals: list, packed: bool) -> bytes:
    """A Feature's bytes: no list (kind NONE), or one list, packed or not."""
    if kind == ed.NONE:
        return b""
    if kind == ed.BYTES:
        return ld(1, b"".join(ld(1, v) for v in vals))
    if kind == ed.FLOAT:
        body = (ld(1, struct.pack(f"<{len(vals)}f", *vals)) if packed
                else b"".join(b"\x0d" + struct.pack("<f", v) for v in vals))
        return ld(2, body)
    body = (ld(1, b"".join(varint(v) for v in vals)) if packed
            else b"".join(b"\x08" + varint(v) for v in vals))
    return ld(3, body)


def encode_example(features: list[tuple[str, bytes]]) -> bytes:
    return ld(1, b"".join(ld(1, ld(1, k.encode()) + ld(2, f)) for k, f in features))


values_of = {
    ed.BYTES: st.lists(st.binary(max_size=12), max_size=5),
    ed.FLOAT: st.lists(st.floats(width=32, allow_nan=False), max_size=20),
    ed.INT64: st.lists(st.integers(-2**63, 2**63 - 1) | st.integers(0, 300), max_size=20),
}
keys = st.sampled_from(["a", "b", "label", "x", "a_longer_key_name", "", "é"])


#: bytes slipped into a message: unknown fields, fields repeated, wrong wire types,
#: garbage -- protobuf takes some, rejects others
JUNK = [b"\x28\x01", b"\x25\0\0\0\0", b"\x08\x05", b"\x10\x05", b"\x0d\0\0\x80\x3f",
        b"\x12\x00", b"\x0a\x00", b"\x0a\x01a", b"\x1a\x00", b"\xff", b"\x80", b"\x0b",
        b"\x0a\x05ab", b"\x08", b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"]


class Junk:
    """Where (the how-many-th place a message body is written) and what odd bytes go
    into a hand-written Example; ``at=-1``: nowhere. :attr:`places` counts the places."""

    def __init__(self, at: int = -1, piece: bytes = b"", before: bool = False) -> None:
        self.at, self.piece, self.before, self.places = at, piece, before, 0

    def __call__(self, body: bytes) -> bytes:
        self.places += 1
        if self.places - 1 != self.at:
            return body
        return self.piece + body if self.before else body + self.piece


def write_feature(kind: int, vals: list, packed: bool, junk: Junk) -> bytes:
    """:func:`encode_feature` with junk at any of its levels."""
    if kind == ed.NONE:
        return junk(b"")
    if kind == ed.BYTES:
        body = b"".join(ld(1, v) for v in vals)
    elif kind == ed.FLOAT:
        body = (ld(1, junk(struct.pack(f"<{len(vals)}f", *vals))) if packed
                else b"".join(b"\x0d" + struct.pack("<f", v) for v in vals))
    else:
        body = (ld(1, junk(b"".join(varint(v) for v in vals))) if packed
                else b"".join(b"\x08" + varint(v) for v in vals))
    return junk(ld(kind, junk(body)))


def write_example(feats: list, junk: Junk) -> bytes:
    """An Example of ``feats`` (key bytes, kind, values, packed) with junk."""
    entries = b"".join(ld(1, junk(ld(1, k) + ld(2, write_feature(kind, v, p, junk))))
                       for k, kind, v, p in feats)
    return junk(ld(1, junk(entries)))


feature_st = st.sampled_from((ed.NONE,) + KINDS).flatmap(
    lambda kind: st.tuples(st.just(kind), values_of[kind] if kind else st.just([]),
                           st.booleans()))


@st.composite
def raw_example(draw: st.DrawFn, odd: bool = False) -> bytes:
    """An Example written by hand; ``odd``: with a piece of :data:`JUNK` at one of its
    places, or a key that is not UTF-8."""
    feats = [(k.encode(), *f) for k, f in draw(st.lists(st.tuples(keys, feature_st),
                                                        min_size=odd, max_size=4))]
    if not odd:
        return write_example(feats, Junk())
    if feats and not draw(st.integers(0, 5)):
        i = draw(st.integers(0, len(feats) - 1))
        feats[i] = (draw(st.sampled_from([b"\xff", b"a\xc3", b"long_key_\xe9x"])),
                    *feats[i][1:])
        return write_example(feats, Junk())
    count = Junk()
    write_example(feats, count)
    return write_example(feats, Junk(draw(st.integers(0, count.places - 1)),
                                     draw(st.sampled_from(JUNK[9:]) | st.sampled_from(JUNK)),
                                     draw(st.booleans())))


@st.composite
def proto_example(draw: st.DrawFn) -> bytes:
    e = example_pb2.Example()
    for k in draw(st.lists(keys, max_size=6, unique=True)):
        kind = draw(st.sampled_from((ed.NONE,) + KINDS))
        f = e.features.feature[k]
        if kind == ed.NONE:
            continue
        lst = getattr(f, ed._FIELD[kind])
        lst.SetInParent()
        lst.value.extend(draw(values_of[kind]))
    return e.SerializeToString()


specs_st = st.lists(st.tuples(keys, st.sampled_from(KINDS)), min_size=1, max_size=6)


def by_protobuf(records: list[bytes], specs: list) -> list[ed.Column] | None:
    try:
        maps = [example_pb2.Example.FromString(r).features.feature for r in records]
    except Exception:  # noqa: BLE001 -- protobuf's decode errors
        return None
    return ed.proto_columns(maps, specs)


def assert_same(fast: list[ed.Column], ref: list[ed.Column], n: int) -> None:
    everyone = np.arange(n)
    for a, b in zip(fast, ref):
        np.testing.assert_array_equal(a.lens, b.lens)
        assert a.values.dtype == b.values.dtype
        np.testing.assert_array_equal(a.values, b.values)
        np.testing.assert_array_equal(a.kinds_at(everyone), b.kinds_at(everyone))


# -- the decoder ----------------------------------------------------------------------------
@SETTINGS
@given(st.lists(proto_example(), max_size=12), specs_st)
def test_protobuf_written_examples_decode_as_protobuf_reads_them(records: list,
                                                                  specs: list) -> None:
    fast = ed.decode_columns(records, specs)
    assert fast is not None  # what protobuf writes is never left to protobuf
    assert_same(fast, by_protobuf(records, specs), len(records))


@settings(SETTINGS, max_examples=300)
@given(st.lists(raw_example(), max_size=4), raw_example(odd=True),
       st.integers(0, 4), specs_st)
def test_odd_bytes_at_any_level_are_left_to_protobuf(records: list, odd: bytes, at: int,
                                                     specs: list) -> None:
    records.insert(at, odd)
    ref = by_protobuf(records, specs)
    fast = ed.decode_columns(records, specs)
    if ref is None:
        assert fast is None  # protobuf's error, from the protobuf path
    elif fast is not None:
        assert_same(fast, ref, len(records))


@SETTINGS
@given(st.lists(st.tuples(keys, st.sampled_from(KINDS), st.booleans(), st.data()),
                max_size=6), specs_st)
def test_plain_hand_written_examples_are_decoded(feats: list, specs: list) -> None:
    records = []
    for i in range(3):
        chosen = {k: (kind, packed, data) for k, kind, packed, data in feats[i:]}
        records.append(encode_example([
            (k, encode_feature(kind, data.draw(values_of[kind]), packed))
            for k, (kind, packed, data) in chosen.items()]))
    fast = ed.decode_columns(records, specs)
    assert fast is not None  # packed or not, every plain Example is decoded
    assert_same(fast, by_protobuf(records, specs), len(records))


@SETTINGS
@given(st.lists(raw_example(), min_size=1, max_size=6), specs_st, st.data())
def test_malformed_bytes_are_left_to_protobuf(records: list, specs: list,
                                              data: st.DataObject) -> None:
    i = data.draw(st.integers(0, len(records) - 1))
    r = bytearray(records[i])
    how = data.draw(st.sampled_from(["cut", "flip", "insert", "unknown"]))
    if how == "cut" and r:
        del r[data.draw(st.integers(0, len(r) - 1)):]
    elif how == "flip" and r:
        r[data.draw(st.integers(0, len(r) - 1))] = data.draw(st.integers(0, 255))
    elif how == "insert":
        r[data.draw(st.integers(0, len(r))):0] = data.draw(st.binary(min_size=1,
                                                                     max_size=3))
    else:
        r += b"\x28\x01"  # field 5, a varint: unknown to Example
    records[i] = bytes(r)
    ref = by_protobuf(records, specs)
    fast = ed.decode_columns(records, specs)
    if ref is None:
        assert fast is None
    elif fast is not None:
        assert_same(fast, ref, len(records))


def test_each_odd_piece_at_each_place() -> None:
    """Every piece of :data:`JUNK`, before and after, at every place of small Examples
    of each kind and encoding: what protobuf rejects is left to it, the rest agrees."""
    shapes = [[(b"k", ed.NONE, [], True)]] + [
        [(b"k", kind, vals, packed), (b"z", ed.INT64, [3], True)]
        for kind, vals in ((ed.BYTES, [b"ab", b""]), (ed.FLOAT, [1.5, -2.0]),
                           (ed.INT64, [5, 300]))
        for packed in (True, False)]
    specs = [("k", ed.BYTES), ("k", ed.FLOAT), ("k", ed.INT64), ("z", ed.INT64)]
    plain = encode_example([("z", encode_feature(ed.INT64, [1], True))])
    for feats in shapes:
        count = Junk()
        write_example(feats, count)
        for at in range(count.places):
            for piece in JUNK:
                for before in (True, False):
                    records = [plain, write_example(feats, Junk(at, piece, before))]
                    ref = by_protobuf(records, specs)
                    fast = ed.decode_columns(records, specs)
                    if ref is None:
                        assert fast is None, (feats, at, piece, before)
                    elif fast is not None:
                        assert_same(fast, ref, 2)


def test_unusual_but_valid_inputs_fall_back() -> None:
    one = encode_example([("a", encode_feature(ed.INT64, [1], True))])
    twice = encode_example([("a", encode_feature(ed.INT64, [1], True)),
                            ("a", encode_feature(ed.INT64, [2], True))])
    split = ld(1, ld(1, ld(1, b"a") + ld(2, ld(3, ld(1, b"\x01")) + ld(3, ld(1, b"\x02")))))
    specs = [("a", ed.INT64)]
    for r in (twice, split, one + b"\x28\x01", b"\x28\x01" + one, ld(1, b"") + one):
        assert ed.decode_columns([r], specs) is None
        assert by_protobuf([r], specs) is not None
    assert ed.decode_columns(["not bytes"], specs) is None
    got = ed.decode_columns([one, b"", ld(1, b"")], specs)
    assert got[0].lens.tolist() == [1, 0, 0] and got[0].values.tolist() == [1]


def test_wide_varints_and_bytes_ending_in_nul() -> None:
    recs = [encode_example([("i", encode_feature(ed.INT64, [-1, 2**63 - 1, -2**63, 0, 127,
                                                            128, 300], p)),
                            ("s", encode_feature(ed.BYTES, [b"ab\0", b"", b"\0"], p))])
            for p in (True, False)]
    specs = [("i", ed.INT64), ("s", ed.BYTES)]
    assert_same(ed.decode_columns(recs, specs), by_protobuf(recs, specs), 2)


# -- the op: both paths -----------------------------------------------------------------------
def _parse(records: list[bytes], features: dict, fast: bool,
           monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setattr(parsing_ops, "_FAST_MIN", 0 if fast else 1 << 30)
    with tf.Graph().as_default():
        out = tf.parse_example(tf.constant(records, dtype=tf.string), features)
        with tf.Session() as sess:
            return sess.run(out)


FEATURES = {"label": tf.FixedLenFeature([], tf.int64),
            "x": tf.FixedLenFeature([2], tf.float32, default_value=[0.5, 1.5]),
            "id": tf.FixedLenFeature([], tf.string, default_value="none"),
            "tokens": tf.VarLenFeature(tf.int64),
            "seq": tf.FixedLenSequenceFeature([], tf.float32, allow_missing=True)}


def _record(i: int, rng: np.random.RandomState) -> bytes:
    feats = [("label", encode_feature(ed.INT64, [i], True)),
             ("tokens", encode_feature(ed.INT64, rng.randint(-5, 500, i % 4).tolist(),
                                       i % 2 == 0))]
    if i % 3:
        feats.append(("x", encode_feature(ed.FLOAT, [i, -i], i % 5 != 1)))
        feats.append(("id", encode_feature(ed.BYTES, [b"r%d" % i], True)))
        feats.append(("seq", encode_feature(ed.FLOAT, [0.25] * (i % 3), True)))
    rng.shuffle(feats)
    return encode_example(feats)


def test_parse_example_same_on_both_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.RandomState(1)
    records = [_record(i, rng) for i in range(40)]
    fast = _parse(records, FEATURES, True, monkeypatch)
    slow = _parse(records, FEATURES, False, monkeypatch)
    for k in FEATURES:
        if k == "tokens":
            for a, b in zip(fast[k], slow[k]):
                np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_array_equal(fast[k], slow[k])
    assert fast["id"].tolist()[:3] == [b"none", b"r1", b"r2"]
    np.testing.assert_array_equal(fast["x"][:2], [[0.5, 1.5], [1, -1]])
    assert fast["seq"].shape == (40, 2)


@pytest.mark.parametrize("bad, features, match", [
    (("x", encode_feature(ed.INT64, [1, 2], True)), {"x": tf.FixedLenFeature([2], tf.float32)},
     "Name: <unknown>, Key: x, Index: 5.  Data types don't match. Data type: int64 but "
     "expected type: float"),
    (("x", encode_feature(ed.FLOAT, [1.0], True)), {"x": tf.FixedLenFeature([2], tf.float32)},
     "Key: x, Index: 5.  Number of float values != expected.  Values size: 1 but output "
     "shape: \\[2\\]"),
    (("y", encode_feature(ed.FLOAT, [1.0], True)), {"x": tf.FixedLenFeature([2], tf.float32)},
     "Name: <unknown>, Feature: x \\(data type: float\\) is required but could not be found"),
    (("x", encode_feature(ed.BYTES, [b"q"], True)), {"x": tf.VarLenFeature(tf.float32)},
     "Key: x, Index: 5.  Data types don't match. Expected type: float, Actual type: string"),
])
def test_errors_same_on_both_paths(bad: tuple, features: dict, match: str,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    good = encode_example([("x", encode_feature(ed.FLOAT, [1.0, 2.0], False))])
    records = [good] * 5 + [encode_example([bad])] + [good] * 4
    for fast in (True, False):
        with pytest.raises(errors.InvalidArgumentError, match=match):
            _parse(records, features, fast, monkeypatch)


def test_malformed_record_error_on_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    records = [encode_example([("x", encode_feature(ed.FLOAT, [1.0], True))])] * 9
    records[4] = records[4][:-1]
    with pytest.raises(errors.InvalidArgumentError, match="Could not parse example input"):
        _parse(records, {"x": tf.VarLenFeature(tf.float32)}, True, monkeypatch)


# -- the TFRecord read path -----------------------------------------------------------------
def test_length_crcs_match_google_crc32c() -> None:
    rng = np.random.RandomState(0)
    buf = rng.randint(0, 256, 4096).astype(np.uint8).tobytes()
    starts = rng.randint(0, 4096 - 8, 300)
    got = tf_record._length_crcs(np.frombuffer(buf, np.uint8), starts)
    assert got.tolist() == [tf_record.masked_crc(buf[s:s + 8]) for s in starts.tolist()]
    assert google_crc32c.value(b"123456789") == 0xE3069283


def reference_read(data: bytes) -> tuple[list[bytes], str | None]:
    """The records of ``data`` one at a time, as the format defines them, and the error."""
    out, pos = [], 0
    while len(data) - pos >= 12:
        n, c = struct.unpack_from("<QI", data, pos)
        if tf_record.masked_crc(data[pos:pos + 8]) != c:
            return out, f"corrupted record at {pos}"
        if len(data) - pos < n + 16:
            return out, f"truncated record at {pos}"
        rec = data[pos + 12:pos + 12 + n]
        if tf_record.masked_crc(rec) != struct.unpack_from("<I", data, pos + 12 + n)[0]:
            return out, f"corrupted record at {pos}"
        out.append(rec)
        pos += n + 16
    return out, None


@SETTINGS
@given(st.lists(st.binary(max_size=40), max_size=30), st.integers(1, 64), st.data())
def test_read_records_matches_a_record_by_record_reader(records: list, chunk: int,
                                                        data: st.DataObject) -> None:
    raw = bytearray(b"".join(map(tf_record.encode_record, records)))
    if raw and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] ^= data.draw(st.integers(1, 255))
    if raw and data.draw(st.booleans()):
        del raw[data.draw(st.integers(0, len(raw) - 1)):]
    want, err = reference_read(bytes(raw))
    got: list[bytes] = []
    old = tf_record._CHUNK
    tf_record._CHUNK = chunk  # records cross chunk edges
    try:
        if err is None:
            got.extend(tf_record.read_records(io.BytesIO(bytes(raw)), "f"))
        else:
            with pytest.raises(errors.DataLossError, match=f"^f: {err}$"):
                for r in tf_record.read_records(io.BytesIO(bytes(raw)), "f"):
                    got.append(r)
    finally:
        tf_record._CHUNK = old
    assert got == want
