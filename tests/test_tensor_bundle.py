"""TF's tensor bundle as flowrt's checkpoint format (flowrt.framework.tensor_bundle):
byte-for-byte equality with a bundle TensorFlow wrote (tests/data/tf_ckpt/bundle, made by
compat/make_tf_checkpoint_fixtures.py), every dtype, strings, slices, the table layout,
corruption (DataLossError naming the file) and a hypothesis round trip."""
from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import checkpoint as ck
from flowrt import errors
from flowrt.framework import tensor_bundle as tb

DATA = Path(__file__).resolve().parent / "data" / "tf_ckpt"


def _key(k: str) -> str:
    return (k.replace("|", "@").replace(" ", "_").replace(",", "c").replace(":", "_")
            .replace("-", "m"))


def _fixture_tensors():
    """The (name, spec, dtype, value) TF saved, in its order (bfloat16 as its bits)."""
    meta = json.loads((DATA / "bundle.json").read_text())
    vals = np.load(DATA / "bundle_values.npz", allow_pickle=False)
    out = []
    for n, s, d in zip(meta["names"], meta["specs"], meta["dtypes"]):
        if d == "string":
            v = np.array([bytes.fromhex(x) for x in meta["strings"][n]] or [],
                         dtype=object).reshape(meta["string_shapes"][n])
        elif d == "bfloat16":
            v = vals["t_bfloat16_bits"]
        else:
            v = vals[_key(n if not s else f"{n}|{s}")]
        out.append((n, s, tf.as_dtype(d), v))
    return out, vals


def _write_like_tf(f):
    w = tb.BundleWriter(f)
    for n, s, d, v in _fixture_tensors()[0]:
        if s:
            full, ext = tb.parse_slice_spec(s)
            w.add_slice(n, full, ext, v, d)
        else:
            w.add(n, v, d)
    return w


def test_bytes_equal_tensorflows():
    buf = io.BytesIO()
    w = _write_like_tf(buf)
    assert buf.getvalue() == (DATA / "bundle" / "b.data-00000-of-00001").read_bytes()
    assert tb.encode_index(w.entries) == (DATA / "bundle" / "b.index").read_bytes()


def test_write_checkpoint_matches_tf_files(tmp_path):
    tensors, _ = _fixture_tensors()
    tensors = [t for t in tensors if t[2] is not tf.bfloat16 or tf.bfloat16.is_numpy_compatible]
    prefix = str(tmp_path / "b")
    ck.write_checkpoint(prefix, [t[0] for t in tensors], [t[3] for t in tensors],
                        [t[2] for t in tensors], [t[1] for t in tensors])
    r = ck.CheckpointReader(prefix)
    theirs = ck.CheckpointReader(str(DATA / "bundle" / "b"))
    for n in r.keys():
        a, b = r.get_tensor(n), theirs.get_tensor(n)
        assert np.array_equal(np.asarray(a), np.asarray(b)), n


def test_reads_every_dtype_tf_wrote():
    tensors, vals = _fixture_tensors()
    r = ck.CheckpointReader(str(DATA / "bundle" / "b"))
    for n, s, d, v in tensors:
        if s or d is tf.bfloat16:
            continue
        got = r.get_tensor(n)
        assert r.dtype(n) is d and np.array_equal(np.asarray(got), v), n
    assert np.array_equal(r.get_tensor("emb"), vals["emb_full"])
    assert np.array_equal(r.get_tensor("cols"), vals["cols_full"])
    assert r.get_tensor("whole_by_slice").tolist() == [[1, 2], [3, 4]]
    assert r.get_tensor("s_scalar") == b"one string"
    assert r.get_tensor("s_strings").tolist() == [[b"hello", b""],
                                                  [b"\x00\xffbytes", "\u00e9t\u00e9".encode()]]
    (part,) = r.read(["emb"], ["6 3 2,3:1,2"])
    assert np.array_equal(part, vals["emb_full"][2:5, 1:3])


def test_table_layout():
    blob = (DATA / "bundle" / "b.index").read_bytes()
    assert int.from_bytes(blob[-8:], "little") == tb.TABLE_MAGIC == 0xdb4775248b80fb57
    header, entries = tb.parse_index(blob, "b.index")
    assert header.num_shards == 1 and header.version.producer == 1
    e = entries["t_float32"]
    assert e.offset == 0 and e.size == 24 and [d.size for d in e.shape.dim] == [2, 3]
    raw = (DATA / "bundle" / "b.data-00000-of-00001").read_bytes()[:24]
    assert e.crc32c == tb.mask_crc(tb.crc32c(raw))
    assert tb.unmask_crc(tb.mask_crc(12345)) == 12345
    assert len(entries["emb"].slices) == 2 and not entries["emb"].size
    # many rows: several data blocks, separators in the index block, all read back
    rows = [(f"k{i:06d}".encode() * 40, bytes([i % 256]) * 300) for i in range(2000)]
    table = tb.build_table(rows)
    assert tb.read_table(table, "t") == dict(rows)
    with pytest.raises(ValueError, match="out of order"):
        tb.build_table([(b"b", b""), (b"a", b"")])


@pytest.fixture
def tf_copy(tmp_path):
    for f in (DATA / "bundle").iterdir():
        shutil.copy(f, tmp_path / f.name)
    return str(tmp_path / "b")


@pytest.mark.parametrize("keep", [0, 20, 47, 500, -1])
def test_truncated_index_is_data_loss(tf_copy, keep):
    path = Path(tf_copy + ".index")
    blob = path.read_bytes()
    path.write_bytes(blob[:keep] if keep >= 0 else blob[:-1])
    with pytest.raises(errors.DataLossError, match=re.escape(str(path))):
        ck.CheckpointReader(tf_copy)


def test_flipped_data_byte_and_wrong_crc(tf_copy):
    data = Path(tf_copy + ".data-00000-of-00001")
    orig = data.read_bytes()
    _, entries = tb.parse_index(Path(tf_copy + ".index").read_bytes(), "x")
    for name in ("t_float64", "s_strings", "t_int64"):
        e = entries[name]
        for off in (e.offset, e.offset + e.size - 1):
            b = bytearray(orig)
            b[off] ^= 0x10
            data.write_bytes(bytes(b))
            with pytest.raises(errors.DataLossError, match=re.escape(str(data)) + ".*" + name):
                ck.CheckpointReader(tf_copy).get_tensor(name)
    data.write_bytes(orig)
    # a wrong checksum in an entry: rewrite the index with it
    entries["t_int32"].crc32c ^= 1
    Path(tf_copy + ".index").write_bytes(tb.encode_index(entries))
    r = ck.CheckpointReader(tf_copy)
    assert r.get_tensor("t_float32").shape == (2, 3)
    with pytest.raises(errors.DataLossError, match="checksum of tensor 't_int32'"):
        r.get_tensor("t_int32")


def test_truncated_data_file(tf_copy):
    data = Path(tf_copy + ".data-00000-of-00001")
    data.write_bytes(data.read_bytes()[:-10])
    with pytest.raises(errors.DataLossError, match=re.escape(str(data)) + " is truncated"):
        ck.CheckpointReader(tf_copy)


def test_slice_keys_and_specs():
    assert tb.slice_key("emb", [(0, 4), (0, 3)]) == b"\x00emb\x00\x01\x01\x02\x80\x84\x80\x83"
    assert tb.parse_slice_spec("4 5 -:2,3") == ([4, 5], [(0, None), (2, 3)])
    with pytest.raises(errors.InvalidArgumentError, match="outside"):
        tb.parse_slice_spec("4 2 3,2:-")


_DTYPES = [tf.float16, tf.float32, tf.float64, tf.int8, tf.int16, tf.int32, tf.int64,
           tf.uint8, tf.uint16, tf.uint32, tf.uint64, tf.bool, tf.complex64, tf.complex128,
           tf.string]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_DTYPES),
                          st.lists(st.integers(0, 4), max_size=3),
                          st.integers(0, 2 ** 31 - 1)), min_size=1, max_size=5))
def test_round_trip(tmp_path_factory, specs):
    d = tmp_path_factory.mktemp("rt")
    names, values, dts = [], [], []
    for i, (dt, shape, seed) in enumerate(specs):
        rng = np.random.RandomState(seed)
        n = int(np.prod(shape))
        if dt is tf.string:
            v = np.array([bytes(rng.randint(0, 256, rng.randint(0, 300)).astype(np.uint8))
                          for _ in range(n)] or [], dtype=object).reshape(shape)
        elif dt is tf.bool:
            v = np.asarray(rng.rand(*shape) > 0.5)
        else:
            v = np.asarray(rng.randn(*shape) * 50).astype(dt.np)
        names.append(f"v{i}")
        values.append(np.asarray(v))
        dts.append(dt)
    ck.write_checkpoint(str(d / "c"), names, values, dts)
    r = ck.CheckpointReader(str(d / "c"))
    for n, v, dt in zip(names, values, dts):
        got = r.read([n])[0]
        assert got.shape == v.shape and r.dtype(n) is dt
        assert np.array_equal(got, v) or (dt.is_floating and np.allclose(got, v, equal_nan=True))
