"""The same-host shared-memory fast path (``flowrt.shm``): segment names and files,
read-only mappings, recycling once the receiver lets go, retiring (failed calls, claims
held too long), refusing bad names, the pool limit, sweeping the segments of dead
processes, the host token; its use by ``flowrt.rpc`` envelopes, and whole steps over
zmq and grpc between in-process servers.

Most tests write through a fresh pool (the ``pool`` fixture), so that segments other
tests of this process left in the process-wide pool cannot change which segment a
write picks, and every file a test made is removed afterwards."""
from __future__ import annotations

import gc
import os
import re
import secrets
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from flowrt import errors, shm

if not shm.enabled():
    pytest.skip("the shared-memory fast path is off here (FLOWRT_SHM=0 or no usable "
                "/dev/shm)", allow_module_level=True)

import flowrt as tf  # noqa: E402
import flowrt.testing as ft  # noqa: E402
from flowrt import rpc  # noqa: E402
from flowrt.proto import service_pb2 as pb  # noqa: E402
from flowrt.server import Server  # noqa: E402

NAME = re.compile(r"flowrt-(\d+)-(\d+)-([0-9a-f]{16})\Z")


def _path(name: str) -> str:
    return os.path.join(shm.DIR, name)


def _files_of(pool: shm._Pool) -> list[str]:
    """The files in the shared-memory directory that belong to ``pool``."""
    return sorted(n for n in os.listdir(shm.DIR) if n.endswith("-" + pool._tag)
                  and n.startswith(f"flowrt-{os.getpid()}-"))


def _data(nbytes: int, seed: int = 0, dtype: str = "float32") -> np.ndarray:
    n = nbytes // np.dtype(dtype).itemsize
    return np.random.default_rng(seed).standard_normal(n).astype(dtype)


def _gone() -> None:
    """Let finalizers of dropped arrays run (they give segments back)."""
    gc.collect()


@pytest.fixture
def pool(monkeypatch):
    """A fresh pool in place of the process-wide one; closed (files unlinked) after."""
    p = shm._Pool()
    monkeypatch.setattr(shm, "_pool", p)
    yield p
    _gone()
    p.close()
    assert _files_of(p) == []


@pytest.fixture
def scratch():
    """Names of hand-made entries in the shared-memory directory, removed after."""
    made: list[str] = []
    yield made
    for name in made:
        path = _path(name)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                os.rmdir(path)
            else:
                os.unlink(path)
        except FileNotFoundError:
            pass


def _fake_name(pid: int | None = None, slot: int = 1) -> str:
    return f"flowrt-{os.getpid() if pid is None else pid}-{slot}-{secrets.token_hex(8)}"


# -- writing and mapping -----------------------------------------------------------------
def test_write_makes_a_private_segment_file_and_open_maps_it_read_only(pool):
    a = _data(300_000)
    name = shm.write(a)
    m = NAME.match(name)
    assert m is not None and int(m.group(1)) == os.getpid() and int(m.group(2)) >= 1
    assert m.group(3) == pool._tag
    st_ = os.stat(_path(name), follow_symlinks=False)
    assert st_.st_uid == os.getuid() and st_.st_size >= a.nbytes
    assert (st_.st_mode & 0o777) == 0o600 and os.path.isfile(_path(name))
    # the control file (slot 0) sits next to it
    assert f"flowrt-{os.getpid()}-0-{pool._tag}" in _files_of(pool)

    got = shm.open_segment(name, a.nbytes)
    assert got.dtype == np.uint8 and got.shape == (a.nbytes,)
    assert not got.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        got[0] = 1
    np.testing.assert_array_equal(got.view(np.float32), a)


@pytest.mark.parametrize("dtype,shape", [
    ("float32", (512, 256)), ("float64", (3, 50_000)), ("int8", (1 << 20,)),
    ("int64", (7, 11, 13)), ("complex64", (40_001,)), ("bool", (999,)),
    ("uint16", (1,)),
])
def test_arrays_of_several_dtypes_and_sizes_round_trip(pool, dtype, shape):
    rng = np.random.default_rng(len(shape))
    a = (rng.standard_normal(shape) * 100).astype(dtype)
    name = shm.write(a)
    got = shm.open_segment(name, a.nbytes).view(dtype).reshape(shape)
    np.testing.assert_array_equal(got, a)
    assert got.dtype == a.dtype and not got.flags.writeable


_DTYPES = st.sampled_from(["float16", "float32", "float64", "int8", "int16", "int32",
                           "int64", "uint8", "uint32", "complex128", "bool"])


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=_DTYPES.flatmap(lambda dt: hnp.arrays(
    dt, hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=9))))
def test_round_trip_property(pool, a):
    name = shm.write(a)
    got = shm.open_segment(name, a.nbytes)
    back = got.view(a.dtype).reshape(a.shape)
    np.testing.assert_array_equal(back, a)  # NaNs compare equal here
    assert back.tobytes() == a.tobytes()
    del got, back
    _gone()
    # the segment was given back: the next write of the same size reuses it
    assert shm.write(a) == name
    shm.discard([name])


# -- recycling ---------------------------------------------------------------------------
def test_a_segment_is_reused_once_every_array_from_it_is_gone(pool):
    a, b = _data(300_000, 1), _data(300_000, 2)
    n1 = shm.write(a)
    r1 = shm.open_segment(n1, a.nbytes)
    ino = os.stat(_path(n1)).st_ino
    n2 = shm.write(b)  # r1 still reads n1: another segment
    assert n2 != n1
    r2 = shm.open_segment(n2, b.nbytes)
    np.testing.assert_array_equal(r2.view(np.float32), b)

    kept = r1[4:].view(np.float32)  # a view keeps the segment lent
    del r1, r2
    _gone()
    c = _data(200_000, 3)
    n3 = shm.write(c)
    assert n3 == n2  # n2 was given back; n1 is still lent through `kept`
    np.testing.assert_array_equal(kept, a[1:])  # not overwritten
    r3 = shm.open_segment(n3, c.nbytes)
    np.testing.assert_array_equal(r3.view(np.float32), c)

    del kept
    _gone()
    d = _data(250_000, 4)
    n4 = shm.write(d)  # n3 (= n2) is lent to r3: the free one is n1 again
    assert n4 == n1 and os.stat(_path(n1)).st_ino == ino  # the same file and pages
    r4 = shm.open_segment(n4, d.nbytes)
    np.testing.assert_array_equal(r4.view(np.float32), d)
    np.testing.assert_array_equal(r3.view(np.float32), c)
    assert len(_files_of(pool)) == 3  # control file + two segments, nothing more


def test_a_free_segment_too_small_is_not_used(pool):
    small = _data(shm.MIN_BYTES, 5)
    n1 = shm.write(small)
    _gone()
    shm.open_segment(n1, small.nbytes)  # mapped and dropped at once: given back
    _gone()
    big = _data(3 * shm.MIN_BYTES, 6)
    n2 = shm.write(big)
    assert n2 != n1
    r = shm.open_segment(n2, big.nbytes)
    np.testing.assert_array_equal(r.view(np.float32), big)
    assert shm.write(small) == n1  # and the small one still fits a small tensor


def test_the_smallest_free_segment_that_fits_is_picked(pool):
    sizes = [shm.MIN_BYTES, 4 * shm.MIN_BYTES, 2 * shm.MIN_BYTES]
    names = [shm.write(_data(n, i)) for i, n in enumerate(sizes)]
    for name, n in zip(names, sizes):
        shm.open_segment(name, n)  # each mapped once and dropped: all free now
    _gone()
    assert shm.write(_data(int(1.5 * shm.MIN_BYTES))) == names[2]
    assert shm.write(_data(100)) == names[0]
    assert shm.write(_data(100)) == names[1]  # the only free one left


# -- retiring ----------------------------------------------------------------------------
def test_discard_retires_a_segment_for_good(pool):
    a = _data(300_000, 7)
    name = shm.write(a)
    assert os.path.exists(_path(name))
    shm.discard([name])
    assert not os.path.exists(_path(name))
    with pytest.raises(errors.InvalidArgumentError, match=re.escape(name)):
        shm.open_segment(name, a.nbytes)
    seen = set()
    for i in range(6):
        n = shm.write(_data(300_000, i))
        seen.add(n)
        shm.open_segment(n, 300_000)
        _gone()
    assert name not in seen and len(seen) == 1  # one new segment, recycled
    shm.discard([])  # nothing to do
    shm.discard(["flowrt-1-1-0123456789abcdef"])  # not ours: ignored


def test_discard_after_the_receiver_mapped_keeps_its_pages(pool):
    a = _data(400_000, 8)
    name = shm.write(a)
    got = shm.open_segment(name, a.nbytes)
    shm.discard([name])
    assert not os.path.exists(_path(name))
    np.testing.assert_array_equal(got.view(np.float32), a)
    del got
    _gone()  # giving back a retired segment is harmless; it is not written again
    assert shm.write(a) != name


def test_a_segment_lent_past_claim_s_is_retired_on_the_next_write(pool, monkeypatch):
    a = _data(300_000, 9)
    n1 = shm.write(a)
    held = shm.open_segment(n1, a.nbytes)
    n_other = shm.write(_data(1000))  # lent for less than CLAIM_S (60 s): kept
    assert os.path.exists(_path(n1)) and n_other != n1
    monkeypatch.setattr(shm, "CLAIM_S", 0.05)
    time.sleep(0.15)
    n2 = shm.write(_data(300_000, 10))
    assert n2 not in (n1, n_other)
    assert not os.path.exists(_path(n1)) and not os.path.exists(_path(n_other))
    # the receiver still holds the retired pages, with the right data
    np.testing.assert_array_equal(held.view(np.float32), a)
    del held
    _gone()
    assert shm.write(a) not in (n1, n_other)


# -- what a receiver refuses ---------------------------------------------------------------
@pytest.mark.parametrize("bad", [
    "../etc/passwd",
    "/etc/passwd",
    "flowrt-1-1-0123456789abcdef/../../etc/passwd",
    "flowrt-1-0-0123456789abcdef",      # slot 0: a control file
    "flowrt-1-1-0123456789abcde",       # 15 hex digits
    "flowrt-1-1-0123456789abcdef0",     # 17
    "flowrt-1-1-0123456789ABCDEF",      # upper case
    "flowrt-x-1-0123456789abcdef",
    "",
])
def test_names_this_module_would_not_make_are_refused(bad):
    with pytest.raises(errors.InvalidArgumentError, match="bad shared-memory segment"):
        shm.open_segment(bad, 16)


def test_this_processes_control_file_is_refused(pool):
    shm.write(_data(1000))
    ctl = f"flowrt-{os.getpid()}-0-{pool._tag}"
    assert os.path.exists(_path(ctl))
    with pytest.raises(errors.InvalidArgumentError, match=re.escape(ctl)):
        shm.open_segment(ctl, 16)


def test_a_non_positive_size_is_refused(pool):
    name = shm.write(_data(1000))
    for n in (0, -1):
        with pytest.raises(errors.InvalidArgumentError, match="bad shared-memory"):
            shm.open_segment(name, n)


def test_a_missing_segment_is_refused():
    name = _fake_name()
    with pytest.raises(errors.InvalidArgumentError,
                       match=re.escape(name) + ".*cannot be opened"):
        shm.open_segment(name, 16)


def test_a_symlink_with_a_segment_name_is_refused(scratch, tmp_path):
    target = tmp_path / "elsewhere"
    target.write_bytes(b"secret!!" * 1024)
    name = _fake_name()
    os.symlink(target, _path(name))
    scratch.append(name)
    with pytest.raises(errors.InvalidArgumentError, match=re.escape(name)):
        shm.open_segment(name, 8)


def test_a_directory_with_a_segment_name_is_refused(scratch):
    name = _fake_name()
    os.mkdir(_path(name))
    scratch.append(name)
    with pytest.raises(errors.InvalidArgumentError,
                       match=re.escape(name) + ".*not a regular file"):
        shm.open_segment(name, 8)


def test_a_segment_of_another_user_is_refused(scratch, monkeypatch):
    name = _fake_name()
    with open(_path(name), "wb") as f:
        f.write(b"\0" * 4096)
    scratch.append(name)
    if os.geteuid() == 0:
        os.chown(_path(name), 65534, 65534)
    else:  # without root, the reader pretends to be another user instead
        uid = os.getuid()
        monkeypatch.setattr(os, "getuid", lambda: uid + 1)
    with pytest.raises(errors.InvalidArgumentError,
                       match="not a regular file of this user"):
        shm.open_segment(name, 16)


def test_a_segment_smaller_than_the_tensor_is_refused(pool):
    a = _data(1000)
    name = shm.write(a)
    with pytest.raises(errors.InvalidArgumentError,
                       match=re.escape(name) + f": {a.nbytes} bytes for a tensor of "
                       f"{a.nbytes + 1}"):
        shm.open_segment(name, a.nbytes + 1)
    np.testing.assert_array_equal(shm.open_segment(name, a.nbytes).view(np.float32), a)


# -- the pool limit ----------------------------------------------------------------------
def test_past_the_pool_limit_write_returns_none(pool):
    pool._control()  # (it sets the limit from the size of the directory first)
    pool._limit = 2 * shm.MIN_BYTES
    n1 = shm.write(_data(shm.MIN_BYTES, 1))
    held = shm.open_segment(n1, shm.MIN_BYTES)
    assert shm.write(_data(3 * shm.MIN_BYTES)) is None  # can never fit
    n2 = shm.write(_data(shm.MIN_BYTES, 2))
    assert n2 not in (None, n1)
    assert shm.write(_data(shm.MIN_BYTES, 3)) is None  # both lent, no room for a third
    # the caller then puts the tensor on the socket: rpc gets a buffer, no segment
    segments: list[str] = []
    header, buffers = rpc.pack(None, [_data(shm.MIN_BYTES, 4)], host=True,
                               segments=segments)
    env = pb.Envelope.FromString(header)
    assert segments == [] and env.tensors[0].shm == "" and env.tensors[0].buffer == 0
    del held
    _gone()
    assert shm.write(_data(shm.MIN_BYTES, 5)) == n1  # given back: usable again
    assert pool._bytes <= pool._limit


# -- leftovers of killed processes --------------------------------------------------------
def _dead_pid() -> int:
    """A pid no process can have: one above the kernel's pid_max."""
    with open("/proc/sys/kernel/pid_max") as f:
        pid = int(f.read()) + 1
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    return pid


def test_sweep_orphans_removes_only_segments_of_dead_processes(monkeypatch, tmp_path):
    """In a directory of its own (no other process of this machine sweeps there)."""
    monkeypatch.setattr(shm, "DIR", str(tmp_path))
    dead, tag = _dead_pid(), secrets.token_hex(8)
    orphans = [f"flowrt-{dead}-0-{tag}", f"flowrt-{dead}-3-{tag}"]
    alive = [f"flowrt-{os.getpid()}-1-{tag}", f"flowrt-{os.getppid()}-2-{tag}"]
    unrelated = [f"flowrt-{dead}-1-{tag[:-1]}", f"other-{dead}-1-{tag}", "flowrt-x"]
    for name in orphans + alive + unrelated:
        (tmp_path / name).write_bytes(b"x")
    assert shm.sweep_orphans() == 2
    assert sorted(os.listdir(tmp_path)) == sorted(alive + unrelated)
    assert shm.sweep_orphans() == 0


def test_the_first_write_of_a_process_sweeps_orphans(monkeypatch, tmp_path):
    monkeypatch.setattr(shm, "DIR", str(tmp_path))
    dead, tag = _dead_pid(), secrets.token_hex(8)
    orphan = tmp_path / f"flowrt-{dead}-1-{tag}"
    orphan.write_bytes(b"x" * 64)
    p = shm._Pool()
    try:
        name = p.write(memoryview(_data(1000)).cast("B"))
        assert name is not None and (tmp_path / name).exists()
        assert not orphan.exists()  # swept before the pool made its control file
    finally:
        p.close()
    assert os.listdir(tmp_path) == []


def test_sweep_orphans_in_the_shared_memory_directory(pool, scratch):
    dead = _dead_pid()
    orphans = [_fake_name(dead, 0), _fake_name(dead, 1)]
    live = _fake_name(os.getppid(), 1)
    for name in orphans + [live]:
        with open(_path(name), "wb") as f:
            f.write(b"\0" * 64)
        scratch.append(name)
    mine = shm.write(_data(1000))
    # (a server starting in another process may sweep them first: no exact count here)
    assert shm.sweep_orphans() >= 0
    assert not any(os.path.exists(_path(n)) for n in orphans)
    assert os.path.exists(_path(live)) and os.path.exists(_path(mine))
    assert f"flowrt-{os.getpid()}-0-{pool._tag}" in _files_of(pool)


# -- the host token and the switch -------------------------------------------------------
def test_host_token_is_stable_and_names_this_user():
    tok = shm.host_token()
    assert tok and tok == shm.host_token()
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot = f.read().strip()
    assert tok.startswith(boot + "/") and tok.endswith(f"/{os.getuid()}")
    assert shm.enabled()


@pytest.mark.parametrize("value,on", [("0", False), ("Off", False), ("1", True)])
def test_flowrt_shm_in_the_environment_switches_the_fast_path(value, on):
    env = dict(os.environ, FLOWRT_SHM=value)
    out = subprocess.run(
        [sys.executable, "-c", "import flowrt.shm as s; print(s.enabled(), "
         "s.host_token() is not None)"],
        env=env, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == [str(on), "True"]


# -- rpc envelopes -------------------------------------------------------------------------
def _metas(header: bytes) -> list:
    return list(pb.Envelope.FromString(header).tensors)


def test_pack_puts_a_large_tensor_in_a_segment_and_a_small_one_in_a_buffer(pool):
    big = _data(shm.MIN_BYTES, 11).reshape(256, -1)
    small = np.arange(10, dtype=np.float32)
    body = pb.RecvTensorsResponse(index=[0, 1])
    segments: list[str] = []
    header, buffers = rpc.pack(body, [big, small], host=True, segments=segments)
    m_big, m_small = _metas(header)
    assert m_big.shm == segments[0] and m_big.buffer == -1 and len(segments) == 1
    assert list(m_big.shape) == [256, big.shape[1]]
    assert m_small.shm == "" and m_small.buffer == 0 and len(buffers) == 1
    assert pb.Envelope.FromString(header).host == shm.host_token()

    resp, values, same = rpc.unpack_from_peer(header, buffers, pb.RecvTensorsResponse)
    assert same is True and list(resp.index) == [0, 1]
    np.testing.assert_array_equal(values[0], big)
    np.testing.assert_array_equal(values[1], small)
    assert values[0].dtype == np.float32 and values[0].shape == big.shape


def test_a_decoded_segment_is_a_read_only_view_that_holds_the_segment(pool):
    big = _data(shm.MIN_BYTES, 12)
    segments: list[str] = []
    header, buffers = rpc.pack(None, [big], host=True, segments=segments)
    _, values, _ = rpc.unpack_from_peer(header, buffers, pb.RecvTensorsResponse)
    np.testing.assert_array_equal(values[0], big)
    # a view of the mapping, not a copy (docs/wire.md: "receiving copies nothing")
    assert not values[0].flags.writeable and not values[0].flags.owndata
    # the decoded tensor holds the segment; once dropped, the next pack reuses it
    again: list[str] = []
    rpc.pack(None, [big], host=True, segments=again)
    assert again[0] != segments[0]
    del values
    _gone()
    shm.discard(again)
    third: list[str] = []
    rpc.pack(None, [big], host=True, segments=third)
    assert third == segments


@pytest.mark.parametrize("dtype", ["float64", "int32", "int64", "bool", "complex64",
                                   "uint8", "float16"])
def test_decoded_segments_keep_dtype_and_shape(pool, dtype):
    a = (np.random.default_rng(1).standard_normal((64, 4096)) * 50).astype(dtype)
    segments: list[str] = []
    header, buffers = rpc.pack(None, [a], host=True, segments=segments)
    assert len(segments) == 1
    _, (back,), same = rpc.unpack_from_peer(header, buffers, pb.RecvTensorsResponse)
    assert same and back.dtype == a.dtype and back.shape == a.shape
    np.testing.assert_array_equal(back, a)


def test_without_segments_a_large_tensor_goes_in_a_buffer(pool):
    big = _data(shm.MIN_BYTES * 2)
    header, buffers = rpc.pack(None, [big], host=True)  # the peer is not known to share
    (m,) = _metas(header)
    assert m.shm == "" and m.buffer == 0
    _, (back,), same = rpc.unpack_from_peer(header, buffers, pb.RecvTensorsResponse)
    assert same is True
    np.testing.assert_array_equal(back, big)
    assert _files_of(pool) == []  # nothing was written


def test_a_segment_from_another_host_is_refused(pool):
    segments: list[str] = []
    header, buffers = rpc.pack(None, [_data(shm.MIN_BYTES)], host=True, segments=segments)
    env = pb.Envelope.FromString(header)
    env.host = "another-machine/mnt:[1]/0"
    with pytest.raises(errors.InvalidArgumentError, match="another host"):
        rpc.unpack_from_peer(env.SerializeToString(), buffers, pb.RecvTensorsResponse)
    with pytest.raises(errors.InvalidArgumentError, match="another host"):
        rpc.unpack(env.SerializeToString(), buffers, pb.RecvTensorsResponse)
    shm.discard(segments)


def test_without_a_host_token_the_peer_is_not_on_this_host(pool):
    small = np.float32([1.5, 2.5])
    header, buffers = rpc.pack(None, [small])
    assert pb.Envelope.FromString(header).host == ""
    _, values, same = rpc.unpack_from_peer(header, buffers, pb.RecvTensorsResponse)
    assert same is False
    np.testing.assert_array_equal(values[0], small)
    # a segment in a message that names no host is refused too
    segments: list[str] = []
    header, buffers = rpc.pack(None, [_data(shm.MIN_BYTES)], host=False,
                               segments=segments)
    assert len(segments) == 1
    with pytest.raises(errors.InvalidArgumentError, match="did not say which"):
        rpc.unpack_from_peer(header, buffers, pb.RecvTensorsResponse)
    shm.discard(segments)


# -- whole steps between in-process servers ------------------------------------------------
@pytest.mark.parametrize("protocol", ["zmq", "grpc"])
def test_a_4mib_variable_read_across_tasks_goes_through_recycled_segments(
        pool, monkeypatch, protocol):
    written: list[str | None] = []
    write = shm.write

    def counting_write(data):
        name = write(data)
        written.append(name)
        return name

    monkeypatch.setattr(shm, "write", counting_write)
    cluster = ft.cluster_addresses(protocol, {"ps": 1, "worker": 1})
    servers = [Server(cluster, job, 0, protocol=protocol) for job in ("ps", "worker")]
    try:
        init = (np.arange(1 << 20) % 97).astype(np.float32)  # 4 MiB
        g = tf.Graph()
        with g.as_default():
            with tf.device("/job:ps/task:0"):
                v = tf.Variable(init, name="v")
                bump = v.assign_add(tf.ones([1 << 20]))
            with tf.device("/job:worker/task:0"):
                total = tf.reduce_sum(v)
        with tf.Session(servers[1].target, graph=g,
                        config=tf.ConfigProto(operation_timeout_in_ms=30000)) as sess:
            sess.run(v.initializer)
            written.clear()
            counts = []
            for step in range(20):
                if step == 10:
                    sess.run(bump)
                    init = init + 1.0
                assert sess.run(total) == pytest.approx(float(init.astype(np.float64)
                                                              .sum()), rel=1e-6)
                counts.append(len(_files_of(pool)))
        # every step's 4 MiB took a segment, and the same few were used again and again
        assert len(written) >= 20 and None not in written
        assert len(set(written)) <= 2
        assert max(counts) <= 3  # control file + at most two segments: no growth per step
        client = servers[1].master.worker_for("ps", 0)
        assert client._same_host is True  # the ps's replies carried this host's token
    finally:
        for srv in servers:
            srv.stop()
    _gone()
    assert len(_files_of(pool)) <= 3
