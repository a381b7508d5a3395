"""The on-disk checkpoint format (flowrt.checkpoint, docs/checkpoints.md) and the raw
checkpoint ops (SaveV2, RestoreV2, MergeV2Checkpoints, ShardedFilename, ShardedFilespec):
round trips of every dtype, the documented byte layout, checksums and the errors for
truncated, corrupted and missing files, atomic writes, in-place overwrites, merges and
the clean-up of what killed saves leave behind."""
from __future__ import annotations

import ast
import os
import re
import shutil
import struct
import threading
import time
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import checkpoint as ck
from flowrt import errors
from flowrt.framework import tensor_bundle as tb
from flowrt.proto import tensor_bundle_pb2

ROOT = Path(__file__).resolve().parent.parent

NUMERIC = [tf.float16, tf.float32, tf.float64, tf.int8, tf.int16, tf.int32, tf.int64,
           tf.uint8, tf.uint16, tf.uint32, tf.uint64, tf.complex64, tf.complex128, tf.bool,
           tf.qint8, tf.quint8, tf.qint16, tf.quint16, tf.qint32]


def sample(dtype: tf.DType, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    rng = np.random.RandomState(seed)
    n = int(np.prod(shape, dtype=np.int64))
    if dtype is tf.string:
        out = np.empty(n, dtype=object)
        for i in range(n):
            out[i] = bytes(rng.randint(0, 256, size=rng.randint(0, 6)).astype(np.uint8))
        return out.reshape(shape)
    if dtype is tf.bool:
        return np.asarray(rng.rand(*shape) > 0.5)
    if dtype.is_complex:
        return np.asarray(rng.randn(*shape) + 1j * rng.randn(*shape)).astype(dtype.np)
    if dtype.is_floating:
        return np.asarray(rng.randn(*shape) * 100).astype(dtype.np)
    info = np.iinfo(dtype.np)
    return rng.randint(max(info.min, -1000), min(info.max, 1000) + 1,
                       size=shape).astype(dtype.np)


def index_of(prefix: str) -> tensor_bundle_pb2.CheckpointIndex:
    """The index as flowrt's legacy CheckpointIndex (a TF bundle's entries converted)."""
    blob = Path(prefix + ".index").read_bytes()
    idx = tensor_bundle_pb2.CheckpointIndex()
    if blob[:8] == b"FRTCKIDX":
        idx.ParseFromString(blob[24:])
        return idx
    header, entries = tb.parse_index(blob, prefix + ".index")
    base = os.path.basename(prefix)
    for k in range(header.num_shards):
        idx.shards.add(filename=ck.data_filename(base, k, header.num_shards))
    for name, e in entries.items():
        if not e.slices:
            c = idx.entries.add(name=name, dtype=e.dtype, shard=e.shard_id, offset=e.offset,
                                size=e.size, crc32=e.crc32c)
            c.shape.CopyFrom(e.shape)
    return idx


def legacy_index_bytes(idx: tensor_bundle_pb2.CheckpointIndex) -> bytes:
    """flowrt's legacy index file (24-byte header, CheckpointIndex)."""
    payload = idx.SerializeToString(deterministic=True)
    head = struct.pack("<8sIQ", b"FRTCKIDX", 1, len(payload))
    return head + struct.pack("<I", zlib.crc32(payload, zlib.crc32(head))) + payload


def legacy_write(prefix: str, names, values, dtypes) -> None:
    """A checkpoint in flowrt's legacy layout (before TF's became flowrt's format), as
    the old writer made it: data header, tensors sorted by name, strings as u64 lengths
    and bytes; still read by the checkpoint reader."""
    head = struct.pack("<8sI", b"FRTCKDAT", 1)
    data = bytearray(head + struct.pack("<I", zlib.crc32(head)))
    idx = tensor_bundle_pb2.CheckpointIndex()
    base = os.path.basename(prefix) + ".data-00000-of-00001"
    for i in sorted(range(len(names)), key=lambda k: names[k]):
        v, d = values[i], dtypes[i]
        if d is tf.string:
            raw = b"".join(struct.pack("<Q", len(x)) + x
                           for x in np.asarray(v, dtype=object).reshape(-1))
        else:
            raw = np.ascontiguousarray(v, dtype=d.np).tobytes()
        e = idx.entries.add(name=names[i], dtype=d.as_datatype_enum, offset=len(data),
                            size=len(raw), crc32=zlib.crc32(raw))
        for n in np.shape(v):
            e.shape.dim.add(size=n)
        data += raw
    idx.shards.add(filename=base, size=len(data))
    os.makedirs(os.path.dirname(prefix) or ".", exist_ok=True)
    Path(prefix + ".data-00000-of-00001").write_bytes(bytes(data))
    Path(prefix + ".index").write_bytes(legacy_index_bytes(idx))


def flip(path: str, offset: int) -> None:
    b = bytearray(Path(path).read_bytes())
    b[offset] ^= 0x40
    Path(path).write_bytes(bytes(b))


# -- round trips --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", NUMERIC + [tf.string], ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3, 4)], ids=str)
def test_round_trip_every_dtype(tmp_path, dtype, shape):
    prefix = str(tmp_path / "ck")
    value = sample(dtype, shape)
    ck.write_checkpoint(prefix, ["t"], [value], [dtype])
    r = ck.CheckpointReader(prefix)
    got = r.read(["t"])[0]
    assert got.shape == shape
    assert got.dtype == dtype.np
    np.testing.assert_array_equal(got, np.asarray(value, dtype=dtype.np))
    assert r.dtype("t") is dtype and r.shape("t") == shape
    assert r.get_variable_to_shape_map() == {"t": list(shape)}
    assert r.get_variable_to_dtype_map() == {"t": dtype}


def test_scalar_get_tensor_returns_scalars(tmp_path):
    prefix = str(tmp_path / "ck")
    ck.write_checkpoint(prefix, ["f", "s", "b"],
                        [np.float32(2.5), np.array(b"hi", dtype=object), np.bool_(True)],
                        [tf.float32, tf.string, tf.bool])
    r = tf.train.NewCheckpointReader(prefix)
    f, s, b = r.get_tensor("f"), r.get_tensor("s"), r.get_tensor("b")
    assert f == np.float32(2.5) and isinstance(f, np.float32)
    assert s == b"hi" and isinstance(s, bytes)
    assert b is np.True_ or b == True  # noqa: E712
    assert r.has_tensor("f") and r.has_tensor(b"s") and not r.has_tensor("x")
    assert r.debug_string() == b"b (DT_BOOL) []\nf (DT_FLOAT) []\ns (DT_STRING) []\n"


def test_strings_with_empty_and_binary_elements(tmp_path):
    prefix = str(tmp_path / "ck")
    value = np.array([[b"", b"\x00\xff"], ["caf\u00e9".encode(), b"x" * 1000]], dtype=object)
    ck.write_checkpoint(prefix, ["s"], [value], [tf.string])
    got = ck.CheckpointReader(prefix).get_tensor("s")
    assert got.dtype == object and got.shape == (2, 2)
    assert got.tolist() == value.tolist()


@settings(max_examples=30, deadline=None)
@given(dtype=st.sampled_from(NUMERIC + [tf.string]),
       shape=st.lists(st.integers(0, 4), min_size=0, max_size=3),
       seed=st.integers(0, 2**31 - 1))
def test_round_trip_property(tmp_path_factory, dtype, shape, seed):
    prefix = str(tmp_path_factory.mktemp("prop") / "ck")
    value = sample(dtype, tuple(shape), seed)
    other = sample(tf.int32, (2,), seed)
    ck.write_checkpoint(prefix, ["x", "a"], [value, other], [dtype, tf.int32])
    r = ck.CheckpointReader(prefix)
    x, a = r.read(["x", "a"])
    np.testing.assert_array_equal(x, np.asarray(value, dtype=dtype.np))
    np.testing.assert_array_equal(a, other)
    assert x.shape == tuple(shape)


# -- the documented layout ----------------------------------------------------------------
def test_legacy_layout_is_read(tmp_path):
    prefix = str(tmp_path / "model.ckpt")
    f = np.arange(6, dtype=np.float32).reshape(2, 3)
    s = np.array([b"ab", b"", b"xyz"], dtype=object)
    legacy_write(prefix, ["w", "names"], [f, s], [tf.float32, tf.string])
    r = ck.CheckpointReader(prefix)
    assert r.get_tensor("w").tolist() == f.tolist()
    assert r.get_tensor("names").tolist() == s.tolist()
    assert sorted(os.listdir(tmp_path)) == ["model.ckpt.data-00000-of-00001",
                                            "model.ckpt.index"]
    # index: magic, version, payload length, crc32 over bytes 0..19 + payload
    blob = (tmp_path / "model.ckpt.index").read_bytes()
    magic, version, length, crc = struct.unpack_from("<8sIQI", blob)
    assert magic == b"FRTCKIDX" and version == ck.FORMAT_VERSION == 1
    assert length == len(blob) - 24
    assert crc == zlib.crc32(blob[24:], zlib.crc32(blob[:20]))
    idx = index_of(prefix)
    assert [(sh.filename, sh.size) for sh in idx.shards] == [
        ("model.ckpt.data-00000-of-00001",
         os.path.getsize(tmp_path / "model.ckpt.data-00000-of-00001"))]
    assert [e.name for e in idx.entries] == ["names", "w"]  # sorted by name
    data = (tmp_path / "model.ckpt.data-00000-of-00001").read_bytes()
    dmagic, dversion, dcrc = struct.unpack_from("<8sII", data)
    assert dmagic == b"FRTCKDAT" and dversion == 1 and dcrc == zlib.crc32(data[:12])
    by = {e.name: e for e in idx.entries}
    w = by["w"]
    assert w.dtype == tf.float32.as_datatype_enum and w.shard == 0
    assert [d.size for d in w.shape.dim] == [2, 3]
    raw = data[w.offset:w.offset + w.size]
    assert raw == f.astype("<f4").tobytes() and w.crc32 == zlib.crc32(raw)
    n = by["names"]
    expect = b"".join(struct.pack("<Q", len(x)) + x for x in s)
    assert data[n.offset:n.offset + n.size] == expect and n.crc32 == zlib.crc32(expect)
    assert n.offset == 16  # the first tensor follows the 16-byte header
    assert w.offset == n.offset + n.size and w.offset + w.size == len(data)


def test_no_pickle_in_the_checkpoint_code():
    banned = {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle"}
    for rel in ("core/training/checkpoint.py", "core/training/saver.py", "plugins/kernels/standard/io_ops.py"):
        tree = ast.parse((ROOT / rel).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert not {a.name.split(".")[0] for a in node.names} & banned, rel
            elif isinstance(node, ast.ImportFrom):
                assert (node.module or "").split(".")[0] not in banned, rel
            elif isinstance(node, ast.Attribute):  # np.save/np.load may pickle objects
                assert node.attr not in ("save", "load", "savez", "frombuffer") or \
                    not (isinstance(node.value, ast.Name) and node.value.id == "np"), rel


def test_unsaveable_dtype_and_duplicate_keys(tmp_path):
    prefix = str(tmp_path / "ck")
    with pytest.raises(errors.InvalidArgumentError, match="Adding duplicate key: a"):
        ck.write_checkpoint(prefix, ["a", "a"], [np.zeros(1), np.zeros(1)],
                            [tf.float64, tf.float64])
    with pytest.raises(errors.InvalidArgumentError, match="resource"):
        ck.write_checkpoint(prefix, ["r"], [np.zeros(1)], [tf.resource])
    assert not os.path.exists(prefix + ".index")


# -- corruption ---------------------------------------------------------------------------
@pytest.fixture(params=["tf", "legacy"])
def saved(tmp_path, request):
    prefix = str(tmp_path / "ck")
    (ck.write_checkpoint if request.param == "tf" else legacy_write)(prefix, ["a", "b"], [np.arange(100, dtype=np.int64),
                                             np.array([b"hello", b"world"], dtype=object)],
                        [tf.int64, tf.string])
    return prefix


def _data(prefix: str) -> str:
    return prefix + ".data-00000-of-00001"


def test_missing_checkpoint_is_not_found(tmp_path):
    with pytest.raises(errors.NotFoundError, match="Failed to find any matching files"):
        ck.CheckpointReader(str(tmp_path / "nothing"))


@pytest.mark.parametrize("keep", [0, 10, 23, 30, -1])
def test_truncated_index(saved, keep):
    path = saved + ".index"
    blob = Path(path).read_bytes()
    Path(path).write_bytes(blob[:keep] if keep >= 0 else blob[:-1])
    with pytest.raises(errors.DataLossError, match=re.escape(path)):
        ck.CheckpointReader(saved)


def test_every_flipped_index_byte_is_detected(saved):
    path = saved + ".index"
    orig = Path(path).read_bytes()
    for off in range(len(orig)):
        b = bytearray(orig)
        b[off] ^= 0x01
        Path(path).write_bytes(bytes(b))
        with pytest.raises(errors.DataLossError, match=re.escape(path)):
            ck.CheckpointReader(saved)
    Path(path).write_bytes(orig)
    assert ck.CheckpointReader(saved).get_tensor("a")[5] == 5


def test_flipped_data_bytes_fail_their_checksum(saved):
    idx = index_of(saved)
    path = _data(saved)
    orig = Path(path).read_bytes()
    for e in idx.entries:
        for off in (e.offset, e.offset + e.size // 2, e.offset + e.size - 1):
            flip(path, off)
            r = ck.CheckpointReader(saved)
            with pytest.raises(errors.DataLossError, match=f"{re.escape(path)}.*'{e.name}'"):
                r.get_tensor(e.name)
            Path(path).write_bytes(orig)


def _legacy_saved(tmp_path) -> str:
    """A checkpoint in flowrt's legacy layout: the only one with file headers (TF's data
    files have none, its index's footer is checked by tests/test_tensor_bundle.py)."""
    prefix = str(tmp_path / "legacy")
    legacy_write(prefix, ["a", "b"], [np.arange(100, dtype=np.int64),
                                      np.array([b"hello", b"world"], dtype=object)],
                 [tf.int64, tf.string])
    return prefix


def test_flipped_data_header_is_detected(tmp_path):
    saved = _legacy_saved(tmp_path)
    flip(_data(saved), 3)
    r = ck.CheckpointReader(saved)
    with pytest.raises(errors.DataLossError, match="bad header"):
        r.get_tensor("a")


def test_truncated_data_file(saved):
    path = _data(saved)
    blob = Path(path).read_bytes()
    Path(path).write_bytes(blob[:-5])
    with pytest.raises(errors.DataLossError, match=f"{re.escape(path)} is truncated"):
        ck.CheckpointReader(saved)


def test_deleted_data_file_is_not_found(saved):
    os.unlink(_data(saved))
    with pytest.raises(errors.NotFoundError, match="data-00000-of-00001 is missing"):
        ck.CheckpointReader(saved)


def test_newer_format_version_is_refused(tmp_path):
    saved = _legacy_saved(tmp_path)
    path = saved + ".index"
    blob = bytearray(Path(path).read_bytes())
    struct.pack_into("<I", blob, 8, ck.FORMAT_VERSION + 1)
    struct.pack_into("<I", blob, 20, zlib.crc32(bytes(blob[24:]), zlib.crc32(bytes(blob[:20]))))
    Path(path).write_bytes(bytes(blob))
    with pytest.raises(errors.UnimplementedError, match="format version 2"):
        ck.CheckpointReader(saved)


def test_missing_key(saved):
    r = ck.CheckpointReader(saved)
    with pytest.raises(errors.NotFoundError, match="Key zz not found in checkpoint"):
        r.get_tensor("zz")


# -- atomic writes, overwrites, merges, clean-up ------------------------------------------
def test_atomic_file_commits_or_leaves_nothing(tmp_path):
    target = tmp_path / "f"
    ck.atomic_write(str(target), b"old")
    with pytest.raises(RuntimeError):
        with ck.AtomicFile(str(target)) as f:
            f.write(b"new, but interrupted")
            raise RuntimeError("boom")
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["f"]
    with ck.AtomicFile(str(target)) as f:
        f.write(b"new")
        assert target.read_bytes() == b"old"  # nothing visible before the commit
        temps = [n for n in os.listdir(tmp_path) if ck.is_temp_name(n)]
        assert len(temps) == 1 and temps[0].startswith("f.tmp-")
    assert target.read_bytes() == b"new" and os.listdir(tmp_path) == ["f"]


def test_merge_checkpoints_moves_shards_and_removes_temp_dir(tmp_path):
    tmp = tmp_path / "model_temp_0123456789abcdef0123456789abcdef"
    parts = [str(tmp / ck.sharded_filename("part", k, 2)) for k in range(2)]
    ck.write_checkpoint(parts[0], ["a", "c"], [np.arange(3), np.float32(1)],
                        [tf.int64, tf.float32])
    ck.write_checkpoint(parts[1], ["b"], [np.array([b"x"], dtype=object)], [tf.string])
    dest = str(tmp_path / "model")
    ck.merge_checkpoints(parts, dest)
    assert sorted(os.listdir(tmp_path)) == ["model.data-00000-of-00002",
                                            "model.data-00001-of-00002", "model.index"]
    r = ck.CheckpointReader(dest)
    assert r.keys() == ["a", "b", "c"]
    assert r.get_tensor("a").tolist() == [0, 1, 2] and r.get_tensor("c") == 1.0
    assert r.get_tensor("b").tolist() == [b"x"]
    assert [e.shard for e in index_of(dest).entries] == [0, 1, 0]


def test_merge_rejects_duplicate_names(tmp_path):
    parts = [str(tmp_path / "t" / f"p{k}") for k in range(2)]
    for p in parts:
        ck.write_checkpoint(p, ["a"], [np.zeros(1)], [tf.float64])
    with pytest.raises(errors.InvalidArgumentError, match="keyed by a "):
        ck.merge_checkpoints(parts, str(tmp_path / "m"))
    assert not os.path.exists(tmp_path / "m.index")


def test_cleanup_stale_files(tmp_path):
    ck.write_checkpoint(str(tmp_path / "model.ckpt-1"), ["v"], [np.zeros(2)], [tf.float64])
    hexs = "0" * 32
    stale = [f"model.ckpt-2.data-00000-of-00001.tmp-{hexs}", f"checkpoint.tmp-{hexs}",
             "model.ckpt-3.data-00000-of-00001",  # a data file without its index
             "model.ckpt-5.data-00000-of-00001.tempstate123",
             "model.ckpt-5.index.tempstate123",  # not a valid index: removed
             "model.ckpt-6.data-00000-of-00001.alt"]  # old flowrt's name, no index
    for n in stale:
        (tmp_path / n).write_bytes(b"partial")
    (tmp_path / f"model.ckpt-4_temp_{hexs}").mkdir()
    (tmp_path / f"model.ckpt-4_temp_{hexs}" / "part-00000-of-00002.index").write_bytes(b"x")
    (tmp_path / "other.data-00000-of-00001").write_bytes(b"not ours")
    removed = ck.cleanup_stale_files(str(tmp_path), "model.ckpt")
    assert len(removed) == 7
    assert sorted(os.listdir(tmp_path)) == ["model.ckpt-1.data-00000-of-00001",
                                            "model.ckpt-1.index", "other.data-00000-of-00001"]


def test_remove_checkpoint_files(tmp_path):
    prefix = str(tmp_path / "m")
    ck.write_checkpoint(prefix, ["v"], [np.zeros(2)], [tf.float64])
    (tmp_path / "m.meta").write_bytes(b"meta")
    (tmp_path / "m2.index").write_bytes(b"another checkpoint")
    ck.remove_checkpoint_files(prefix)
    assert os.listdir(tmp_path) == ["m2.index"]


# -- overwriting a prefix in place: TF's names, crash safety --------------------------------
TF_NAMES_1 = ["ck.data-00000-of-00001", "ck.index"]


def test_overwriting_a_prefix_keeps_tf_names(tmp_path):
    prefix = str(tmp_path / "ck")
    for i in range(4):
        ck.write_checkpoint(prefix, ["v"], [np.full(3, i, np.int32)], [tf.int32])
        # TF's names and nothing else, after every save (no ".alt", no temporaries)
        assert sorted(os.listdir(tmp_path)) == TF_NAMES_1
        assert [s.filename for s in index_of(prefix).shards] == [TF_NAMES_1[0]]
        assert ck.CheckpointReader(prefix).get_tensor("v").tolist() == [i] * 3


def test_temporary_names_follow_tf(tmp_path, monkeypatch):
    """Data and index are written as ``<name>.tempstate<digits>`` (TF's BundleWriter
    names), all files of one save sharing the digits."""
    prefix = str(tmp_path / "ck")
    seen: list[list[str]] = []
    real = os.replace

    def spy(src, dst):
        seen.append(sorted(os.listdir(tmp_path)))
        return real(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    ck.write_checkpoint(prefix, ["v"], [np.zeros(2)], [tf.float64])
    monkeypatch.undo()
    temps = [n for n in seen[0] if ck.is_temp_name(n)]
    m = [re.fullmatch(r"ck\.(data-00000-of-00001|index)\.tempstate(\d+)", n) for n in temps]
    assert len(temps) == 2 and all(m), temps
    assert len({x.group(2) for x in m}) == 1  # one token per save
    assert sorted(os.listdir(tmp_path)) == TF_NAMES_1


def _snapshot_renames(monkeypatch, src_dir: Path, images: Path) -> list[Path]:
    """Make every ``os.replace`` first copy ``src_dir``: each copy is what a process
    killed just before that rename (after the previous one) would leave on disk."""
    real = os.replace
    out: list[Path] = []

    def replace(src, dst):
        img = images / f"img{len(out):03d}"
        shutil.copytree(src_dir, img, symlinks=True)
        out.append(img)
        return real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    return out


def _value_or_error(prefix: str, names: list[str]) -> list | str:
    try:
        return [np.asarray(x).tolist() for x in ck.CheckpointReader(prefix).read(names)]
    except errors.OpError as e:
        return f"{type(e).__name__}: {e.message}"


def _write_sharded(prefix: str, values: dict[str, np.ndarray], shards: int) -> None:
    tmp = prefix + "_temp_" + "ab" * 16
    names = sorted(values)
    parts = []
    for k in range(shards):
        p = os.path.join(tmp, ck.sharded_filename("part", k, shards))
        mine = names[k::shards]
        ck.write_checkpoint(p, mine, [values[n] for n in mine], [tf.float32] * len(mine))
        parts.append(p)
    ck.merge_checkpoints(parts, prefix)


@pytest.mark.parametrize("shards", [0, 1, 3], ids=["SaveV2", "merge1", "merge3"])
def test_every_crash_point_of_an_overwrite_leaves_old_or_new(tmp_path, monkeypatch,
                                                               shards):
    """Kill a save to an existing prefix before any of its renames: the directory left
    reads as the old checkpoint or the new one (same-sized data, so only the
    checksums tell them apart), and the clean-up the next save runs leaves exactly
    TF's names with the same values."""
    d = tmp_path / "d"
    d.mkdir()
    prefix = str(d / "ck")
    names = ["a", "b", "c"]
    old = {n: np.full(4, i, np.float32) for i, n in enumerate(names)}
    new = {n: np.full(4, 10 + i, np.float32) for i, n in enumerate(names)}

    def save(values):
        if shards:
            _write_sharded(prefix, values, shards)
        else:
            ck.write_checkpoint(prefix, names, [values[n] for n in names],
                                [tf.float32] * 3)

    save(old)
    tf_names = sorted(os.listdir(d))
    want_old = [old[n].tolist() for n in names]
    want_new = [new[n].tolist() for n in names]
    images = _snapshot_renames(monkeypatch, d, tmp_path / "images")
    save(new)
    monkeypatch.undo()
    assert sorted(os.listdir(d)) == tf_names
    assert _value_or_error(prefix, names) == want_new
    # a save killed while writing its temporaries: a truncated temporary index
    first = images[0]
    torn = tmp_path / "images" / "torn"
    shutil.copytree(first, torn)
    for n in os.listdir(torn):
        if ck.is_temp_name(n) and n.startswith("ck."):
            with open(torn / n, "r+b") as f:
                f.truncate(os.path.getsize(torn / n) // 2)
    outcomes = set()
    for img in images + [torn]:
        p = str(img / "ck")
        got = _value_or_error(p, names)
        assert got in (want_old, want_new), (img.name, sorted(os.listdir(img)), got)
        ck.cleanup_stale_files(str(img), "ck")
        assert sorted(os.listdir(img)) == tf_names, img.name
        assert _value_or_error(p, names) == got, img.name
        outcomes.add(got == want_new)
    # the images run from "nothing renamed yet" to "data renamed, index not yet"
    assert outcomes == {False, True}


def test_index_not_matching_its_data_is_data_loss(tmp_path):
    """An index next to data it does not describe (same size, other values: what an
    interrupted overwrite leaves once its temporary index is gone) is detected by the
    per-tensor checksums and reported as DataLossError naming the data file, never
    read as wrong values."""
    prefix = str(tmp_path / "ck")
    ck.write_checkpoint(prefix, ["v", "w"], [np.arange(5.0), np.ones(2)],
                        [tf.float64, tf.float64])
    old_index = Path(prefix + ".index").read_bytes()
    ck.write_checkpoint(prefix, ["v", "w"], [np.arange(5.0) + 1, np.ones(2)],
                        [tf.float64, tf.float64])
    Path(prefix + ".index").write_bytes(old_index)
    r = ck.CheckpointReader(prefix)
    data = prefix + ".data-00000-of-00001"
    assert r.get_tensor("w").tolist() == [1.0, 1.0]  # unchanged bytes: the same value
    with pytest.raises(errors.DataLossError, match=re.escape(data) + ".*checksum of "
                       "tensor 'v'"):
        r.get_tensor("v")


@pytest.mark.parametrize("fail_at", [1, 2], ids=["data-rename", "index-rename"])
def test_failed_save_removes_its_temporaries(tmp_path, monkeypatch, fail_at):
    prefix = str(tmp_path / "ck")
    ck.write_checkpoint(prefix, ["v"], [np.arange(3.0)], [tf.float64])
    real = os.replace
    calls = []

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == fail_at:
            raise OSError(5, "Input/output error")
        return real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(errors.UnknownError, match="Input/output error"):
        ck.write_checkpoint(prefix, ["v"], [np.arange(3.0) + 7], [tf.float64])
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == TF_NAMES_1
    r = ck.CheckpointReader(prefix)
    if fail_at == 1:  # nothing was replaced: the old checkpoint
        assert r.get_tensor("v").tolist() == [0.0, 1.0, 2.0]
    else:  # new data under the old index: detected, not read as wrong values
        with pytest.raises(errors.DataLossError, match="checksum"):
            r.get_tensor("v")


def test_interrupt_between_renames_finishes_the_commit(tmp_path, monkeypatch):
    """A KeyboardInterrupt once the data file is renamed still renames the index, so the
    prefix is never left with an index naming data it does not describe."""
    prefix = str(tmp_path / "ck")
    ck.write_checkpoint(prefix, ["v"], [np.arange(3.0)], [tf.float64])
    real = os.replace
    calls = []

    def replace(src, dst):
        real(src, dst)
        calls.append(dst)
        if len(calls) == 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        ck.write_checkpoint(prefix, ["v"], [np.arange(3.0) + 7], [tf.float64])
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == TF_NAMES_1
    assert ck.CheckpointReader(prefix).get_tensor("v").tolist() == [7.0, 8.0, 9.0]


def test_reader_opened_before_an_overwrite_reads_the_new_checkpoint(tmp_path):
    prefix = str(tmp_path / "ck")
    ck.write_checkpoint(prefix, ["v"], [np.arange(3.0)], [tf.float64])
    r = ck.CheckpointReader(prefix)
    ck.write_checkpoint(prefix, ["v"], [np.arange(3.0) + 7], [tf.float64])
    # the data under the reader's index changed; it re-reads the (new) index
    assert r.get_tensor("v").tolist() == [7.0, 8.0, 9.0]


def test_readers_racing_overwrites_get_one_whole_checkpoint(tmp_path):
    """A reader of a prefix that another thread keeps overwriting (back to back, so
    every moment of the commit is hit) gets all tensors of one read from one save:
    re-opening when the files change under it, the save's temporary index inside the
    rename window. Never a mix, never an error."""
    prefix = str(tmp_path / "ck")
    names = ["a", "b", "c"]

    def save(k: int) -> None:
        ck.write_checkpoint(prefix, names, [np.full(5000, k, np.float32)] * 3,
                            [tf.float32] * 3)

    save(0)
    stop = threading.Event()
    failures: list[BaseException] = []

    def overwrite() -> None:
        k = 1
        try:
            while not stop.is_set():
                save(k)
                k += 1
        except BaseException as e:  # reported by the test, not lost in the thread
            failures.append(e)

    t = threading.Thread(target=overwrite)
    t.start()
    reads = 0
    try:
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            got = ck.CheckpointReader(prefix).read(names)
            first = got[0][0]
            assert all((x == first).all() for x in got), [x[:3] for x in got]
            reads += 1
    finally:
        stop.set()
        t.join()
    assert not failures, failures
    assert reads > 10
    assert sorted(os.listdir(tmp_path)) == TF_NAMES_1


def _make_legacy_alt(prefix: str) -> str:
    """Rename a checkpoint's data file to the ``.alt`` name flowrt <= this change used
    for every second overwrite, with an index naming it."""
    idx = index_of(prefix)
    plain = idx.shards[0].filename
    os.replace(os.path.join(os.path.dirname(prefix), plain),
               os.path.join(os.path.dirname(prefix), plain + ".alt"))
    idx.shards[0].filename = plain + ".alt"
    Path(prefix + ".index").write_bytes(legacy_index_bytes(idx))
    return plain + ".alt"


def test_legacy_alt_data_files_are_read_and_replaced(tmp_path):
    prefix = str(tmp_path / "ck")
    legacy_write(prefix, ["v"], [np.arange(3)], [tf.int64])
    alt = _make_legacy_alt(prefix)
    assert sorted(os.listdir(tmp_path)) == [alt, "ck.index"]
    assert ck.CheckpointReader(prefix).get_tensor("v").tolist() == [0, 1, 2]
    ck.write_checkpoint(prefix, ["v"], [np.arange(3) + 5], [tf.int64])
    assert sorted(os.listdir(tmp_path)) == TF_NAMES_1  # the .alt file is gone
    assert ck.CheckpointReader(prefix).get_tensor("v").tolist() == [5, 6, 7]
    legacy_write(str(tmp_path / "m-1"), ["v"], [np.arange(3)], [tf.int64])
    _make_legacy_alt(str(tmp_path / "m-1"))
    ck.remove_checkpoint_files(str(tmp_path / "m-1"))
    assert sorted(os.listdir(tmp_path)) == TF_NAMES_1


def test_merge_to_a_prefix_with_another_shard_count(tmp_path):
    prefix = str(tmp_path / "ck")
    vals = {n: np.full(2, i, np.float32) for i, n in enumerate("abc")}
    _write_sharded(prefix, vals, 3)
    _write_sharded(prefix, {n: v + 1 for n, v in vals.items()}, 2)
    assert sorted(os.listdir(tmp_path)) == ["ck.data-00000-of-00002",
                                            "ck.data-00001-of-00002", "ck.index"]
    assert ck.CheckpointReader(prefix).get_tensor("c").tolist() == [3.0, 3.0]


# -- the raw ops ---------------------------------------------------------------------------
def _apply(op_type: str, **kw):
    from flowrt.graph import apply_op

    return apply_op(op_type, **kw)


def test_save_v2_and_restore_v2_ops(tmp_path):
    prefix = str(tmp_path / "raw")
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([[1.5, 2.5]])
        s = tf.constant("str")
        save = _apply("SaveV2", prefix=prefix, tensor_names=["x", "s"],
                      shape_and_slices=["", ""], tensors=[x, s])
        assert save.type == "SaveV2" and save.outputs == []
        assert save.get_attr("dtypes") == [tf.float32, tf.string]
        outs = _apply("RestoreV2", prefix=prefix, tensor_names=["s", "x"],
                      shape_and_slices=["", ""], dtypes=[tf.string, tf.float32])
        assert [t.dtype for t in outs] == [tf.string, tf.float32]
        assert all(t.shape.ndims is None for t in outs)
        one = _apply("RestoreV2", prefix=prefix, tensor_names=["x"], shape_and_slices=[""],
                     dtypes=[tf.float32])
        bad_type = _apply("RestoreV2", prefix=prefix, tensor_names=["x"],
                          shape_and_slices=[""], dtypes=[tf.int32])
        missing = _apply("RestoreV2", prefix=prefix, tensor_names=["nope"],
                         shape_and_slices=[""], dtypes=[tf.int32])
        sliced = _apply("RestoreV2", prefix=prefix, tensor_names=["x"],
                        shape_and_slices=["2 0,1"], dtypes=[tf.float32])
    with tf.Session(graph=g) as sess:
        sess.run(save)
        sv, xv = sess.run(outs)
        assert sv == b"str"
        np.testing.assert_array_equal(xv, [[1.5, 2.5]])
        assert isinstance(one, list) and sess.run(one[0]).dtype == np.float32
        with pytest.raises(errors.InvalidArgumentError, match="expected dtype int32 does "
                           "not equal restored dtype float32"):
            sess.run(bad_type)
        with pytest.raises(errors.NotFoundError, match="Key nope not found in checkpoint"):
            sess.run(missing)
        # a slice spec whose full shape is not the saved tensor's (slices are read since
        # partitioned variables are saved as TF saves them)
        with pytest.raises(errors.InvalidArgumentError, match="does not match the shape stored"):
            sess.run(sliced)


def test_op_shape_functions():
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(ValueError, match="rank 0"):
            _apply("SaveV2", prefix=["a", "b"], tensor_names=["x"], shape_and_slices=[""],
                   tensors=[1.0])
        with pytest.raises(ValueError, match="one entry per tensor"):
            _apply("SaveV2", prefix="p", tensor_names=["x", "y"], shape_and_slices=["", ""],
                   tensors=[1.0])
        with pytest.raises(ValueError, match="one entry per dtype"):
            _apply("RestoreV2", prefix="p", tensor_names=["x"], shape_and_slices=[""],
                   dtypes=[tf.float32, tf.int32])
        with pytest.raises(ValueError, match="less than minimum"):
            _apply("RestoreV2", prefix="p", tensor_names=[], shape_and_slices=[], dtypes=[])
        fn = _apply("ShardedFilename", basename="/d/part", shard=3, num_shards=12)
        spec = _apply("ShardedFilespec", basename="/d/part", num_shards=12)
        assert fn.shape.as_list() == [] and fn.dtype == tf.string
    with tf.Session(graph=g) as sess:
        assert sess.run(fn) == b"/d/part-00003-of-00012"
        assert sess.run(spec) == b"/d/part-?????-of-00012"


def test_merge_op(tmp_path):
    g = tf.Graph()
    parts = [str(tmp_path / "t" / f"p{k}") for k in range(2)]
    with g.as_default():
        saves = [_apply("SaveV2", prefix=p, tensor_names=[f"v{k}"], shape_and_slices=[""],
                        tensors=[tf.constant(k)]) for k, p in enumerate(parts)]
        with tf.control_dependencies(saves):
            merge = _apply("MergeV2Checkpoints", checkpoint_prefixes=parts,
                           destination_prefix=str(tmp_path / "m"))
    with tf.Session(graph=g) as sess:
        sess.run(merge)
    assert not os.path.exists(tmp_path / "t")
    r = tf.train.NewCheckpointReader(str(tmp_path / "m"))
    assert r.get_tensor("v0") == 0 and r.get_tensor("v1") == 1
