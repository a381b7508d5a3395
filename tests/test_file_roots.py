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


def test_every_reader_refuses_files_outside(server, dirs):
    """TextLineReader, WholeFileReader, FixedLengthRecordReader (TFRecordReader above):
    a file outside, one through ``..`` and one through a symbolic link are refused with
    the reader's op and the path; the allowed file is read."""
    root, outside = dirs
    (root / "lines.txt").write_bytes(b"l1\nl2\n")
    (outside / "far.txt").write_bytes(b"far\n")
    refused = [str(outside / "far.txt"), f"{root}/../outside/far.txt",
               str(root / "out" / "far.txt")]
    for make, op, first in ((lambda: tf.TextLineReader(), "TextLineReaderV2", b"l1"),
                            (lambda: tf.WholeFileReader(), "WholeFileReaderV2",
                             b"l1\nl2\n"),
                            (lambda: tf.FixedLengthRecordReader(3),
                             "FixedLengthRecordReaderV2", b"l1\n")):
        with tf.Graph().as_default():
            q = tf.FIFOQueue(8, tf.string)
            fill = q.enqueue_many([refused + [str(root / "lines.txt")]])
            _key, value = make().read(q)
            with tf.Session(server.target) as sess:
                sess.run(fill)
                for path in refused:
                    with pytest.raises(tf.errors.PermissionDeniedError) as e:
                        sess.run(value)
                    assert path in str(e.value) and op in str(e.value), str(e.value)
                    assert "far" not in str(e.value).split("may not read")[0]
                assert sess.run(value) == first


def test_match_filenames_once_lists_only_what_is_inside(server, dirs):
    root, outside = dirs
    with tf.Graph().as_default():
        names = tf.train.match_filenames_once(str(root / "*.txt"))
        with tf.Session(server.target) as sess:
            sess.run(tf.local_variables_initializer())
            got = sorted(os.path.basename(n.decode()) for n in sess.run(names))
    assert "hello.txt" in got and all(n.endswith(".txt") for n in got), got
    with tf.Graph().as_default():
        names = tf.train.match_filenames_once(str(outside / "*"))
        with tf.Session(server.target) as sess:
            with pytest.raises(tf.errors.PermissionDeniedError) as e:
                sess.run(tf.local_variables_initializer())
    assert str(outside) in str(e.value) and "MatchingFiles" in str(e.value)


@pytest.fixture(scope="module")
def python_server(dirs):
    """A ``tf.train.Server`` of this process restricted to ``root``: file datasets run
    in the process that built them, so a server process cannot be sent one."""
    root, _ = dirs
    s = tf.train.Server({"worker": [f"127.0.0.1:{free_port()}"]}, protocol="grpc",
                        file_roots=[str(root)])
    try:
        yield s
    finally:
        s.stop()


def _records(target: str, make_ds) -> list[bytes]:  # type: ignore[no-untyped-def]
    with tf.Graph().as_default():
        nxt = tf.data.make_one_shot_iterator(make_ds()).get_next()
        out = []
        with tf.Session(target) as sess:
            while True:
                try:
                    out.append(sess.run(nxt))
                except tf.errors.OutOfRangeError:
                    return out


@pytest.mark.parametrize("kind", ["TFRecordDataset", "TextLineDataset",
                                  "FixedLengthRecordDataset"])
def test_file_datasets_read_only_inside_the_roots(python_server, dirs, kind):
    root, outside = dirs
    name = {"TFRecordDataset": "rec.tfrecord", "TextLineDataset": "rec.txt",
            "FixedLengthRecordDataset": "rec.bin"}[kind]
    for d in (root, outside):
        if kind == "TFRecordDataset":
            with tf.python_io.TFRecordWriter(str(d / name)) as w:
                w.write(b"abc")
        else:
            (d / name).write_bytes(b"abc\n" if kind == "TextLineDataset" else b"abc")
    make = {"TFRecordDataset": lambda f: tf.data.TFRecordDataset(f),
            "TextLineDataset": lambda f: tf.data.TextLineDataset(f),
            "FixedLengthRecordDataset": lambda f: tf.data.FixedLengthRecordDataset(f, 3)
            }[kind]
    inside = str(root / name)
    assert _records(python_server.target, lambda: make(inside)) == [b"abc"]
    for path in (str(outside / name), f"{root}/../outside/{name}",
                 str(root / "out" / name)):
        with pytest.raises(tf.errors.PermissionDeniedError) as e:
            _records(python_server.target, lambda: make(path))
        msg = str(e.value)
        assert path in msg and f"{kind} in " in msg and "may not read" in msg, msg
        assert os.path.realpath(root) in msg, msg
        # through a dataset of names, several files at once, and inside interleave
        with pytest.raises(tf.errors.PermissionDeniedError):
            _records(python_server.target, lambda: tf.data.TFRecordDataset(
                tf.data.Dataset.from_tensor_slices([inside, path]), num_parallel_reads=2))
        with pytest.raises(tf.errors.PermissionDeniedError):
            _records(python_server.target, lambda: tf.data.Dataset.from_tensor_slices(
                [path]).interleave(make, cycle_length=1))
    # a local session of the same process is not restricted
    assert _records("", lambda: make(str(outside / name))) == [b"abc"]


def test_dataset_ops_that_run_a_whole_dataset_are_checked(python_server, dirs):
    root, outside = dirs
    (outside / "one.txt").write_bytes(b"x\n")
    (root / "one.txt").write_bytes(b"y\n")

    def single(path):  # type: ignore[no-untyped-def]
        return tf.data.experimental.get_single_element(tf.data.TextLineDataset(path))

    assert _run(python_server.target, lambda: single(str(root / "one.txt"))) == b"y"
    with pytest.raises(tf.errors.PermissionDeniedError) as e:
        _run(python_server.target, lambda: single(str(outside / "one.txt")))
    assert "TextLineDataset in DatasetToSingleElement" in str(e.value)
    # a TFRecordWriter writing inside the root may not copy a file from outside
    copy = str(root / "copy.tfrecord")
    with pytest.raises(tf.errors.PermissionDeniedError) as e:
        _run(python_server.target, lambda: tf.data.experimental.TFRecordWriter(copy).write(
            tf.data.TextLineDataset(str(outside / "one.txt"))))
    assert "TextLineDataset in DatasetToTFRecord" in str(e.value)


def test_csv_and_list_files_keep_to_the_roots(python_server, dirs):
    root, outside = dirs
    (root / "in.csv").write_bytes(b"1,2\n3,4\n")
    (outside / "out.csv").write_bytes(b"5,6\n")
    make = lambda f: tf.data.experimental.CsvDataset(f, [tf.int32, tf.int32])  # noqa: E731
    got = _records(python_server.target, lambda: make(str(root / "in.csv")))
    assert [tuple(int(v) for v in r) for r in got] == [(1, 2), (3, 4)]
    with pytest.raises(tf.errors.PermissionDeniedError) as e:
        _records(python_server.target, lambda: make(str(outside / "out.csv")))
    assert "CsvDataset" in str(e.value) and "out.csv" in str(e.value)
    # list_files names only the files inside; a pattern matching only outside ones
    # matches nothing, as MatchingFiles does under roots
    both = str(root.parent / "*" / "*.csv")
    names = _records(python_server.target,
                     lambda: tf.data.Dataset.list_files(both, shuffle=False))
    assert names == [str(root / "in.csv").encode()]
    with pytest.raises(tf.errors.InvalidArgumentError, match="No files matched"):
        _records(python_server.target, lambda: tf.data.Dataset.list_files(
            str(outside / "*.csv"), shuffle=False))
    # the same patterns in a local session see every file
    assert len(_records("", lambda: tf.data.Dataset.list_files(both, shuffle=False))) == 2


def test_a_restored_iterator_reads_again_only_inside_the_roots(python_server, dirs,
                                                                tmp_path):
    root, outside = dirs
    (outside / "lines.txt").write_bytes(b"a\nb\nc\n")
    path = str(outside / "lines.txt")
    with tf.Graph().as_default():
        it = tf.data.make_initializable_iterator(tf.data.TextLineDataset(path))
        nxt = it.get_next()
        saveable = tf.data.experimental.make_saveable_from_iterator(it)
        tf.add_to_collection(tf.GraphKeys.SAVEABLE_OBJECTS, saveable)
        saver = tf.train.Saver()
        prefix = str(root / "iterator_ckpt")  # inside: the checkpoint itself may be read
        with tf.Session() as sess:  # local: reads outside, saves its position
            sess.run(it.initializer)
            assert sess.run(nxt) == b"a"
            saver.save(sess, prefix)
        with tf.Session(python_server.target) as sess:
            # restoring re-reads the elements before the position: refused outside
            with pytest.raises(tf.errors.PermissionDeniedError) as e:
                saver.restore(sess, prefix)
            assert "lines.txt" in str(e.value)
