"""tf.gfile / tf.io.gfile on the local file system: values, file bytes, TF's error
classes and messages."""
from __future__ import annotations

import os
import pathlib
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors

from _unprivileged import as_unprivileged


def test_both_namespaces_publish_every_name() -> None:
    v1 = ["GFile", "Open", "FastGFile", "Exists", "MakeDirs", "MkDir", "Glob",
          "ListDirectory", "Remove", "Rename", "Copy", "Walk", "IsDirectory",
          "DeleteRecursively", "Stat"]
    v2 = ["GFile", "exists", "makedirs", "mkdir", "glob", "listdir", "remove", "rename",
          "copy", "walk", "isdir", "rmtree", "stat"]
    for n in v1:
        assert callable(getattr(tf.gfile, n)), n
    for n in v2:
        assert callable(getattr(tf.io.gfile, n)), n
        assert getattr(tf.compat.v1.io.gfile, n) is getattr(tf.io.gfile, n)
    assert tf.gfile.Open is tf.gfile.GFile is tf.io.gfile.GFile is tf.gfile.FastGFile


def test_text_and_binary_round_trip(tmp_path: pathlib.Path) -> None:
    p = str(tmp_path / "a.txt")
    with tf.gfile.GFile(p, "w") as f:
        f.write("héllo\n")
        f.write(b"line2\n")
        f.write("last")
    assert (tmp_path / "a.txt").read_bytes() == "héllo\nline2\nlast".encode()
    with tf.gfile.GFile(p) as f:
        assert f.read() == "héllo\nline2\nlast"
    with tf.gfile.GFile(p, "rb") as f:
        data = f.read()
    assert isinstance(data, bytes) and data == "héllo\nline2\nlast".encode()
    with tf.gfile.GFile(p, "r") as f:
        assert f.readline() == "héllo\n"
        assert f.readlines() == ["line2\n", "last"]
        assert f.readline() == ""
    with tf.gfile.GFile(p, "rb") as f:
        assert list(f) == [b"h\xc3\xa9llo\n", b"line2\n", b"last"]


def test_read_n_seek_tell_size(tmp_path: pathlib.Path) -> None:
    p = tmp_path / "b.bin"
    p.write_bytes(bytes(range(10)))
    f = tf.gfile.GFile(str(p), "rb")
    assert f.size() == 10
    assert f.read(3) == b"\x00\x01\x02" and f.tell() == 3
    f.seek(2, 1)
    assert f.tell() == 5 and f.read(2) == b"\x05\x06"
    f.seek(-1, 2)
    assert f.read() == b"\x09"
    f.seek(position=1)
    assert f.read(1) == b"\x01"
    with pytest.raises(TypeError, match="offset argument required"):
        f.seek()
    with pytest.raises(errors.InvalidArgumentError, match="Invalid whence argument: 3"):
        f.seek(0, 3)
    f.close()
    assert f.name == str(p) and f.mode == "rb"


def test_append_and_write_in_place(tmp_path: pathlib.Path) -> None:
    p = tmp_path / "c.txt"
    p.write_text("one\n")
    with tf.gfile.GFile(str(p), "a") as f:
        f.write("two\n")
    assert p.read_text() == "one\ntwo\n"
    with tf.gfile.GFile(str(p), "w") as f:
        f.write("x")
        f.flush()
        # written in place: the bytes are at the target path before close
        assert p.read_bytes() == b"x"
        assert f.tell() == 1
        assert os.listdir(tmp_path) == ["c.txt"]
    assert p.read_text() == "x"


def test_write_mode_creates_the_file_only_when_written(tmp_path: pathlib.Path) -> None:
    p = tmp_path / "never"
    tf.gfile.GFile(str(p), "w").close()
    assert not p.exists()  # TF opens lazily, at the first write


def test_mode_errors(tmp_path: pathlib.Path) -> None:
    p = tmp_path / "d"
    p.write_text("abc")
    with pytest.raises(errors.PermissionDeniedError, match="File isn't open for writing"):
        tf.gfile.GFile(str(p), "r").write("x")
    with pytest.raises(errors.PermissionDeniedError, match="File isn't open for reading"):
        tf.gfile.GFile(str(p), "w").read()
    with pytest.raises(errors.InvalidArgumentError, match="mode is not 'r' or 'w'"):
        tf.gfile.GFile(str(p), "x")
    f = tf.gfile.GFile(str(p), "r+")
    assert f.read() == "abc"


def test_reading_a_missing_file_names_it(tmp_path: pathlib.Path) -> None:
    missing = str(tmp_path / "nope.txt")
    f = tf.gfile.GFile(missing)  # lazy: no error yet
    with pytest.raises(errors.NotFoundError) as e:
        f.read()
    assert missing in str(e.value) and "No such file or directory" in str(e.value)
    with pytest.raises(errors.NotFoundError, match="nope.txt"):
        tf.gfile.Stat(missing)
    with pytest.raises(errors.NotFoundError, match="nope.txt"):
        tf.gfile.GFile(missing).size()


def test_reading_a_directory_is_failed_precondition(tmp_path: pathlib.Path) -> None:
    with pytest.raises(errors.FailedPreconditionError, match="Is a directory"):
        tf.gfile.GFile(str(tmp_path)).read()


def test_invalid_utf8_in_text_mode(tmp_path: pathlib.Path) -> None:
    p = tmp_path / "bad"
    p.write_bytes(b"\xff\xfe")
    with pytest.raises(errors.InvalidArgumentError, match="binary mode"):
        tf.gfile.GFile(str(p)).read()


def test_exists_isdir_stat(tmp_path: pathlib.Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"12345")
    assert tf.gfile.Exists(str(f)) and tf.io.gfile.exists(f)
    assert tf.gfile.Exists(str(tmp_path))
    assert not tf.gfile.Exists(str(tmp_path / "x"))
    assert not tf.gfile.Exists(str(f / "under_a_file"))
    assert tf.gfile.IsDirectory(str(tmp_path)) and not tf.gfile.IsDirectory(str(f))
    assert not tf.io.gfile.isdir(str(tmp_path / "x"))
    s = tf.gfile.Stat(str(f))
    assert s.length == 5 and not s.is_directory
    assert s.mtime_nsec == int(os.stat(f).st_mtime) * 10**9
    assert tf.io.gfile.stat(str(tmp_path)).is_directory
    assert tf.gfile.Exists(b"" + str(f).encode())
    assert tf.gfile.Exists("file://" + str(f))


def test_other_schemes_are_unimplemented(tmp_path: pathlib.Path) -> None:
    for call in (lambda: tf.gfile.Exists("gs://bucket/x"),
                 lambda: tf.gfile.GFile("hdfs://nn/x", "w"),
                 lambda: tf.io.gfile.listdir("s3://b/"),
                 lambda: tf.gfile.Copy(str(tmp_path), "gs://b/c")):
        with pytest.raises(errors.UnimplementedError, match="File system scheme '(gs|hdfs|s3)' "
                                                            "not implemented"):
            call()


def test_mkdir_makedirs(tmp_path: pathlib.Path) -> None:
    d = tmp_path / "a"
    tf.gfile.MkDir(str(d))
    assert d.is_dir()
    tf.gfile.MkDir(str(d))  # exists already: no error, as TF 1.15
    with pytest.raises(errors.NotFoundError, match="x/y"):
        tf.io.gfile.mkdir(str(tmp_path / "x" / "y"))
    tf.gfile.MakeDirs(str(tmp_path / "x" / "y" / "z"))
    assert (tmp_path / "x" / "y" / "z").is_dir()
    tf.gfile.MakeDirs(str(tmp_path / "x" / "y"))  # exists already: fine
    (tmp_path / "file").write_text("")
    with pytest.raises(errors.FailedPreconditionError, match="Not a directory"):
        tf.gfile.MakeDirs(str(tmp_path / "file" / "sub"))


def test_listdir_walk(tmp_path: pathlib.Path) -> None:
    (tmp_path / "d1" / "d2").mkdir(parents=True)
    (tmp_path / "f1").write_text("1")
    (tmp_path / "d1" / "f2").write_text("2")
    (tmp_path / "d1" / "d2" / ".hidden").write_text("3")
    assert tf.gfile.ListDirectory(str(tmp_path)) == ["d1", "f1"]
    assert tf.io.gfile.listdir(str(tmp_path / "d1")) == ["d2", "f2"]
    with pytest.raises(errors.NotFoundError, match="Could not find directory .*f1"):
        tf.gfile.ListDirectory(str(tmp_path / "f1"))
    with pytest.raises(errors.NotFoundError, match="Could not find directory"):
        tf.gfile.ListDirectory(str(tmp_path / "missing"))
    top = str(tmp_path)
    down = list(tf.io.gfile.walk(top))
    assert down == [(top, ["d1"], ["f1"]),
                    (os.path.join(top, "d1"), ["d2"], ["f2"]),
                    (os.path.join(top, "d1", "d2"), [], [".hidden"])]
    up = list(tf.io.gfile.walk(top, topdown=False))
    assert up == down[::-1]
    assert list(tf.gfile.Walk(top, False)) == up
    assert list(tf.gfile.Walk(top, in_order=True)) == down
    # pruning in place, top-down
    seen = []
    for d, subdirs, _files in tf.io.gfile.walk(top):
        seen.append(d)
        subdirs.clear()
    assert seen == [top]
    assert list(tf.io.gfile.walk(str(tmp_path / "missing"))) == []
    errs: list = []
    assert list(tf.io.gfile.walk(str(tmp_path / "missing"), onerror=errs.append)) == []
    assert isinstance(errs[0], errors.NotFoundError)


def test_glob(tmp_path: pathlib.Path) -> None:
    for name in ("a1.txt", "a2.txt", "b.txt", ".hid.txt", "sub/c.txt", "sub/d.log"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("")
    t = str(tmp_path)
    assert tf.gfile.Glob(f"{t}/a?.txt") == [f"{t}/a1.txt", f"{t}/a2.txt"]
    assert tf.gfile.Glob(f"{t}/*.txt") == [f"{t}/.hid.txt", f"{t}/a1.txt", f"{t}/a2.txt",
                                           f"{t}/b.txt"]
    assert tf.io.gfile.glob(f"{t}/*/*.txt") == [f"{t}/sub/c.txt"]
    assert tf.io.gfile.glob(f"{t}/[ab]*.txt") == [f"{t}/a1.txt", f"{t}/a2.txt",
                                                  f"{t}/b.txt"]
    assert tf.gfile.Glob(f"{t}/b.txt") == [f"{t}/b.txt"]
    assert tf.gfile.Glob(f"{t}/nothing*") == []
    assert tf.gfile.Glob(f"{t}/nodir/*") == []
    assert tf.gfile.Glob([f"{t}/b*", f"{t}/sub/*.log"]) == [f"{t}/b.txt", f"{t}/sub/d.log"]


def test_remove_rename_copy(tmp_path: pathlib.Path) -> None:
    a, b, c = (str(tmp_path / n) for n in "abc")
    pathlib.Path(a).write_text("A")
    pathlib.Path(b).write_text("B")
    with pytest.raises(errors.AlreadyExistsError, match="file already exists"):
        tf.gfile.Rename(a, b)
    with pytest.raises(errors.AlreadyExistsError, match="file already exists"):
        tf.gfile.Copy(a, b)
    tf.gfile.Copy(a, c)
    assert pathlib.Path(c).read_text() == "A"
    tf.io.gfile.copy(b, c, overwrite=True)
    assert pathlib.Path(c).read_text() == "B"
    tf.gfile.Rename(a, b, overwrite=True)
    assert pathlib.Path(b).read_text() == "A" and not os.path.exists(a)
    tf.io.gfile.rename(b, a)
    assert pathlib.Path(a).read_text() == "A"
    with pytest.raises(errors.NotFoundError, match="/b"):
        tf.gfile.Rename(b, str(tmp_path / "z"))
    with pytest.raises(errors.NotFoundError, match="/b"):
        tf.gfile.Copy(b, str(tmp_path / "z"))
    tf.gfile.Remove(a)
    assert not os.path.exists(a)
    with pytest.raises(errors.NotFoundError, match="No such file or directory"):
        tf.io.gfile.remove(a)
    os.mkdir(tmp_path / "dir")
    with pytest.raises(errors.FailedPreconditionError, match="dir"):
        tf.gfile.Remove(str(tmp_path / "dir"))


def test_rmtree(tmp_path: pathlib.Path) -> None:
    d = tmp_path / "t"
    (d / "x" / "y").mkdir(parents=True)
    (d / "x" / "f").write_text("1")
    tf.gfile.DeleteRecursively(str(d))
    assert not d.exists()
    with pytest.raises(errors.NotFoundError, match="/t"):
        tf.io.gfile.rmtree(str(d))
    f = tmp_path / "single"
    f.write_text("")
    tf.io.gfile.rmtree(str(f))  # a file is deleted too, as TF
    assert not f.exists()


def test_permission_denied() -> None:
    # a directory anyone may enter: as root, the check runs as nobody
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o755)
        p = pathlib.Path(d) / "locked"
        p.write_text("secret")
        p.chmod(0)

        def check() -> None:
            with pytest.raises(errors.PermissionDeniedError,
                               match="locked; Permission denied"):
                tf.gfile.GFile(str(p)).read()

        as_unprivileged(check)


def test_file_helpers(tmp_path: pathlib.Path) -> None:
    from flowrt.framework import gfile

    p = str(tmp_path / "h")
    gfile.write_string_to_file(p, "abc")
    assert gfile.read_file_to_string(p) == "abc"
    assert gfile.read_file_to_string(p, binary_mode=True) == b"abc"
    gfile.atomic_write_string_to_file(p, b"xyz")
    assert pathlib.Path(p).read_bytes() == b"xyz" and os.listdir(tmp_path) == ["h"]
    with pytest.raises(errors.AlreadyExistsError):
        gfile.atomic_write_string_to_file(p, b"no", overwrite=False)
    assert os.listdir(tmp_path) == ["h"]  # the temporary file is gone


@settings(max_examples=30, deadline=None)
@given(chunks=st.lists(st.binary(max_size=200), max_size=6), n=st.integers(1, 50))
def test_binary_chunks_round_trip(tmp_path_factory: pytest.TempPathFactory,
                                  chunks: list[bytes], n: int) -> None:
    p = str(tmp_path_factory.mktemp("h") / "f")
    with tf.gfile.GFile(p, "wb") as f:
        for c in chunks:
            f.write(c)
    want = b"".join(chunks)
    if not chunks:  # never written: never created (TF opens at the first write)
        assert not os.path.exists(p)
        return
    got = []
    with tf.gfile.GFile(p, "rb") as f:
        assert f.size() == len(want)
        while True:
            piece = f.read(n)
            if not piece:
                break
            got.append(piece)
    assert b"".join(got) == want
    if want:
        with tf.gfile.GFile(p, "rb") as f:
            assert b"".join(f.readlines()) == want


@settings(max_examples=30, deadline=None)
@given(text=st.text(max_size=100))
def test_text_round_trip(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    p = str(tmp_path_factory.mktemp("t") / "f")
    with tf.io.gfile.GFile(p, "w") as f:
        f.write(text)
    with tf.io.gfile.GFile(p, "r") as f:
        assert f.read() == text


def test_permission_denied_from_errno(tmp_path: pathlib.Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """EACCES is PermissionDeniedError naming the file (simulated: tests may run as
    root, which ignores file modes)."""
    import errno

    from flowrt.framework import gfile

    def refuse(path: str, *a: object, **k: object) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", path)

    monkeypatch.setattr(gfile, "open", refuse, raising=False)
    p = str(tmp_path / "locked")
    with pytest.raises(errors.PermissionDeniedError, match="locked; Permission denied"):
        tf.gfile.GFile(p, "w").write("x")
    with pytest.raises(errors.PermissionDeniedError, match="locked; Permission denied"):
        tf.gfile.GFile(p, "rb").read()


def test_errno_classes() -> None:
    import errno

    from flowrt.framework import gfile

    cases = {errno.ENOENT: errors.NotFoundError, errno.EEXIST: errors.AlreadyExistsError,
             errno.EACCES: errors.PermissionDeniedError,
             errno.ENOTDIR: errors.FailedPreconditionError,
             errno.ENOTEMPTY: errors.FailedPreconditionError,
             errno.ENOSPC: errors.ResourceExhaustedError,
             errno.EXDEV: errors.UnimplementedError, 9999: errors.UnknownError}
    for no, cls in cases.items():
        e = gfile._error(OSError(no, "why"), "/p")
        assert type(e) is cls and str(e) == "/p; why"
