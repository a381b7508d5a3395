"""A server's file roots (issue 21): the file ops of a remote client's graph touch only
the directories the server allows.

A real ``flowrt server`` process on a free 127.0.0.1 port, started with ``--file-root``;
clients in this process send it graphs whose checkpoint, ReadFile/WriteFile,
MatchingFiles and reader ops name paths inside and outside the root (through ``..``
and symbolic links too). In-process servers cover the ops a remote client cannot run
here (datasets live in their builder's process) and the opt-in default of Python's
``tf.train.Server``; a local session stays unrestricted.
"""
from __future__ import annotations

import os
import pathlib
import time

import numpy as np
import pytest

import flowrt as tf
from flowrt.graph import apply_op
from flowrt.plugin.file_policy import FilePolicy
from flowrt.testing import ServerProcess, free_port

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    """``root`` (the server's only file root, holding a symbolic link ``root/out``
    to ``outside``, and ``root/secret_link`` to a file outside) and ``outside``."""
    base = tmp_path_factory.mktemp("roots")
    root, outside = base / "root", base / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_bytes(b"not for clients")
    (root / "out").symlink_to(outside, target_is_directory=True)
    (root / "secret_link").symlink_to(outside / "secret.txt")
    (root / "hello.txt").write_bytes(b"hello")
    return root, outside


@pytest.fixture(scope="module")
def server(dirs):
    root, _ = dirs
    p = ServerProcess({"worker": [f"127.0.0.1:{free_port()}"]}, "worker", 0, "grpc",
                      extra_args=["--file-root", str(root)])
    try:
        yield p
    finally:
        p.stop()


def _run(target: str, build):  # type: ignore[no-untyped-def]
    with tf.Graph().as_default():
        fetches = build()
        with tf.Session(target) as sess:
            return sess.run(fetches)


def _save_op(prefix: str):  # type: ignore[no-untyped-def]
    v = tf.constant([1.0, 2.0])
    return apply_op("SaveV2", name="save_it", prefix=prefix, tensor_names=["v"],
                    shape_and_slices=[""], tensors=[v])


def _denied(excinfo: pytest.ExceptionInfo, path: str, root: pathlib.Path,
            node: str) -> None:
    msg = str(excinfo.value)
    assert path in msg and os.path.realpath(root) in msg, msg
    assert f"node {node}" in msg, msg


def test_the_server_says_its_roots(server, dirs):
    line = f"file ops may touch {os.path.realpath(dirs[0])}"
    deadline = time.monotonic() + 10.0  # printed just after the "serving" line
    while line not in server.output and time.monotonic() < deadline:
        time.sleep(0.05)
    assert line in server.output, server.output


def test_save_outside_the_root_is_refused_and_creates_nothing(server, dirs):
    root, outside = dirs
    prefix = str(outside / "new_dir" / "model")
    with pytest.raises(tf.errors.PermissionDeniedError) as e:
        _run(server.target, lambda: _save_op(prefix))
    _denied(e, prefix, root, "save_it")
    assert "SaveV2" in str(e.value) and "may not write" in str(e.value)
    assert not (outside / "new_dir").exists()


def test_save_and_restore_inside_the_root(server, dirs):
    root, _ = dirs
    prefix = str(root / "ckpt" / "model")

    def build():  # type: ignore[no-untyped-def]
        v = tf.Variable([3.0, 4.0], name="v")
        saver = tf.train.Saver([v])
        return v, saver

    with tf.Graph().as_default():
        v, saver = build()
        with tf.Session(server.target) as sess:
            sess.run(v.initializer)
            assert saver.save(sess, prefix) == prefix
            sess.run(v.assign([0.0, 0.0]))
            saver.restore(sess, prefix)
            np.testing.assert_array_equal(sess.run(v), [3.0, 4.0])
    assert (root / "ckpt" / "model.index").is_file()


def test_dotdot_and_symlinks_out_of_the_root_are_refused(server, dirs):
    root, outside = dirs
    base = os.path.realpath(outside.parent)
    for prefix, resolved in (
            (f"{root}/../outside/up/model", f"{base}/outside/up/model"),
            (str(root / "out" / "linked" / "model"), f"{base}/outside/linked/model"),
            # the link first, then "..": the OS climbs from the link's target
            (f"{root}/out/../escaped/model", f"{base}/escaped/model")):
        with pytest.raises(tf.errors.PermissionDeniedError) as e:
            _run(server.target, lambda: _save_op(prefix))
        _denied(e, prefix, root, "save_it")
        assert f"(resolved: {resolved})" in str(e.value)
    assert sorted(os.listdir(outside)) == ["secret.txt"]
    assert sorted(os.listdir(base)) == ["outside", "root"]


def test_read_write_and_matching_files(server, dirs):
    root, outside = dirs
    secret = str(outside / "secret.txt")
    for path in (secret, str(root / "secret_link")):
        # a constant file name: not folded (read) on the master when the graph compiles
        with pytest.raises(tf.errors.PermissionDeniedError) as e:
            _run(server.target, lambda: tf.read_file(path, name="reader"))
        _denied(e, path, root, "reader")
        assert "not for clients" not in str(e.value)
    # a fed name is checked the same way
    with tf.Graph().as_default():
        ph = tf.placeholder(tf.string, [])
        with tf.Session(server.target) as sess:
            with pytest.raises(tf.errors.PermissionDeniedError):
                sess.run(tf.read_file(ph), {ph: secret})
    assert _run(server.target, lambda: tf.read_file(str(root / "hello.txt"))) == b"hello"

    target = str(outside / "written.txt")
    with pytest.raises(tf.errors.PermissionDeniedError) as e:
        _run(server.target, lambda: tf.write_file(target, "x", name="writer"))
    _denied(e, target, root, "writer")
    assert not os.path.exists(target)
    _run(server.target, lambda: tf.write_file(str(root / "sub" / "w.txt"), "x"))
    assert (root / "sub" / "w.txt").read_bytes() == b"x"

    with pytest.raises(tf.errors.PermissionDeniedError):
        _run(server.target, lambda: tf.matching_files(str(outside / "*")))
    with pytest.raises(tf.errors.PermissionDeniedError):
        _run(server.target, lambda: tf.matching_files(f"{root}/*/../../outside/*"))
    names = _run(server.target, lambda: tf.matching_files(str(root / "*")))
    # the link to a file outside is left out; the linked directory too
    assert sorted(os.path.basename(n.decode()) for n in names) == \
        sorted(set(os.listdir(root)) - {"out", "secret_link"})
    assert "hello.txt" in os.listdir(root)


def test_a_reader_refuses_a_file_outside_and_goes_on(server, dirs):
    root, outside = dirs
    inside, far = str(root / "in.tfrecord"), str(outside / "far.tfrecord")
    for path, rec in ((inside, b"inside"), (far, b"outside")):
        with tf.python_io.TFRecordWriter(path) as w:
            w.write(rec)
    with tf.Graph().as_default():
        q = tf.FIFOQueue(4, tf.string)
        fill = q.enqueue_many([[far, inside]])
        _key, value = tf.TFRecordReader().read(q)
        with tf.Session(server.target) as sess:
            sess.run(fill)
            with pytest.raises(tf.errors.PermissionDeniedError) as e:
                sess.run(value)
            assert far in str(e.value) and "TFRecordReaderV2" in str(e.value)
            assert sess.run(value) == b"inside"  # the refused work unit was dropped


def test_a_python_server_restricts_only_when_asked(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    cluster = {"worker": [f"127.0.0.1:{free_port()}"]}
    open_server = tf.train.Server(cluster, protocol="grpc")
    closed = tf.train.Server({"worker": [f"127.0.0.1:{free_port()}"]}, protocol="grpc",
                             file_roots=[str(root)])
    try:
        assert open_server.file_policy is None
        assert closed.file_policy.roots == (os.path.realpath(root),)
        _run(open_server.target, lambda: tf.write_file(str(outside / "a.txt"), "a"))
        assert (outside / "a.txt").read_bytes() == b"a"
        # a dataset runs on a server of its own process: its writer is checked too
        path = str(outside / "d.tfrecord")

        def write_records():  # type: ignore[no-untyped-def]
            ds = tf.data.Dataset.from_tensor_slices(np.array([b"r1", b"r2"], object))
            return tf.data.experimental.TFRecordWriter(path).write(ds)

        with pytest.raises(tf.errors.PermissionDeniedError):
            _run(closed.target, write_records)
        assert not os.path.exists(path)
        with pytest.raises(tf.errors.PermissionDeniedError):
            _run(closed.target, lambda: tf.print("x", output_stream=f"file://{path}"))
        assert not os.path.exists(path)
        # a local session in the same process may write anywhere, as in TF
        _run("", lambda: tf.write_file(str(outside / "local.txt"), "l"))
        _run("", write_records)
        assert (outside / "local.txt").read_bytes() == b"l" and os.path.exists(path)
    finally:
        open_server.stop()
        closed.stop()


def test_file_policy_rules(tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    p = FilePolicy([str(root)])
    assert p.allows(str(root)) and p.allows(str(root / "new" / "deeper"))
    assert not p.allows(str(tmp_path / "r2" / "x"))  # a sibling sharing the prefix
    assert not p.allows(str(root) + "/../x") and not p.allows(str(root) + "/..")
    (tmp_path / "elsewhere" / "deep").mkdir(parents=True)
    (root / "link").symlink_to(tmp_path / "elsewhere" / "deep")
    assert not p.allows(str(root / "link" / "x"))
    assert not p.allows(str(root / "link" / ".." / "x"))  # tmp_path/elsewhere/x
    (root / "inner").mkdir()
    (root / "alias").symlink_to(root / "inner")
    assert p.allows(str(root / "alias" / "x")) and p.allows(str(root / "alias" / ".." / "y"))
    assert FilePolicy(["/"]).allows("/anything/at/all")
    assert FilePolicy(None).allows("/x") and not FilePolicy(None).restricted
    assert not FilePolicy([]).allows(str(root))
    with pytest.raises(TypeError):
        tf.train.Server({"w": ["127.0.0.1:0"]}, file_roots=str(root), start=False)
