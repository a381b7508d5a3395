"""The program shell (helper P) under TensorFlow and flowrt: ``tf.gfile`` /
``tf.io.gfile``, ``tf.flags`` (absl.flags under TF), ``tf.logging``, ``tf.app.run``,
``tf.train.write_graph`` and ``tf.train.checkpoints_iterator``.

Each scenario runs the same calls with both modules and compares plain results: values,
remaining argv, error class names (and message parts), file bytes. Files cross over:
what one writes (GFile, write_graph, checkpoints) the other reads.

Where TF 2.x (the reference here) and TF 1.15 differ, TF 1.15 wins: ``Stat``'s
``mtime_nsec`` has whole-second precision in 1.15 (compared in seconds). flowrt's
checkpoints use flowrt's own index format, which TF does not read: TF only iterates
over them here (``checkpoints_iterator``), flowrt also loads TF's.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from typing import Any, Callable

import numpy as np
import pytest
from google.protobuf import text_format

from compat_harness import flowrt_module, tf_module

IMPLS = ("tf", "flowrt")


def _mod(impl: str) -> Any:
    return tf_module() if impl == "tf" else flowrt_module()


def _outcome(fn: Callable[[], Any]) -> Any:
    """``("ok", value)`` or ``("error", class name)``."""
    try:
        return ("ok", fn())
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        return ("error", type(e).__name__)


def _both(scenario: Callable[[Any, str], Any]) -> None:
    """Run ``scenario(tf, workdir)`` under each implementation, each in a fresh
    directory, and compare what they return (paths made relative to the directory)."""
    got = {}
    for impl in IMPLS:
        d = tempfile.mkdtemp(prefix=f"flowrt_shell_{impl}_")
        res = scenario(_mod(impl), d)
        got[impl] = json.loads(json.dumps(res, default=repr).replace(d, "<dir>"))
    assert got["flowrt"] == got["tf"]


# =========================================================================================
# gfile
# =========================================================================================
def _gfile_files(tf: Any, d: str) -> Any:
    out = []
    p = os.path.join(d, "t.txt")
    with tf.gfile.GFile(p, "w") as f:
        f.write("héllo\nworld\n")
        f.write(b"bytes\n")
    with tf.gfile.GFile(p, "r") as f:
        out.append(f.read(3))
        out.append(f.tell())
        out.append(f.readline())
        out.append(f.readlines())
        f.seek(0)
        out.append([line for line in f])
        out.append(f.size())
    with tf.io.gfile.GFile(p, "rb") as f:
        data = f.read()
        out.append(list(data))
        f.seek(-3, 2)
        out.append(list(f.read()))
    with tf.gfile.GFile(p, "a") as f:
        f.write("more")
    out.append(open(p, "rb").read().decode())
    never = os.path.join(d, "never")
    tf.gfile.GFile(never, "w").close()
    out.append(os.path.exists(never))
    return out


def test_gfile_read_write() -> None:
    _both(_gfile_files)


def test_gfile_files_cross_over() -> None:
    tf, fr = tf_module(), flowrt_module()
    d = tempfile.mkdtemp(prefix="flowrt_shell_x_")
    blob = bytes(range(256)) * 3
    for writer, reader in ((tf, fr), (fr, tf)):
        p = os.path.join(d, f"from_{writer.__name__}")
        with writer.gfile.GFile(p, "wb") as f:
            f.write(blob)
        with reader.gfile.GFile(p, "rb") as f:
            assert f.read() == blob
        with writer.gfile.GFile(p + ".txt", "w") as f:
            f.write("ünïcode\nlines\n")
        with reader.io.gfile.GFile(p + ".txt") as f:
            assert f.readlines() == ["ünïcode\n", "lines\n"]


def _gfile_tree(tf: Any, d: str) -> Any:
    out = []
    tf.gfile.MakeDirs(os.path.join(d, "a", "b"))
    tf.io.gfile.mkdir(os.path.join(d, "c"))
    for name in ("a/f1.txt", "a/b/f2.txt", "a/b/.h.txt", "g.log"):
        with tf.gfile.GFile(os.path.join(d, name), "w") as f:
            f.write(name)
    out.append(sorted(tf.gfile.ListDirectory(d)))
    out.append(sorted(tf.io.gfile.listdir(os.path.join(d, "a"))))
    # listing order is the directory's (unsorted in TF): compare sets, and that parents
    # come before (top-down) or after (bottom-up) their children
    down = [w for w, _s, _f in tf.io.gfile.walk(d)]
    up = [w for w, _s, _f in tf.io.gfile.walk(d, topdown=False)]
    out.append(sorted((w, sorted(s), sorted(f)) for w, s, f in tf.io.gfile.walk(d)))
    out.append(all(down.index(os.path.dirname(w)) < down.index(w) for w in down[1:]))
    out.append(all(up.index(os.path.dirname(w)) > up.index(w) for w in up[:-1]))
    out.append(sorted(w for w, _s, _f in tf.gfile.Walk(d, False)) == sorted(down))
    out.append(sorted(tf.gfile.Glob(os.path.join(d, "a", "*", "*.txt"))))
    out.append(sorted(tf.io.gfile.glob(os.path.join(d, "*"))))
    out.append(sorted(tf.io.gfile.glob([os.path.join(d, "g.*"), os.path.join(d, "a/f?.txt")])))
    out.append(tf.gfile.Glob(os.path.join(d, "nothing", "*")))
    out.append([tf.gfile.Exists(os.path.join(d, n)) for n in ("a", "g.log", "zz")])
    out.append([tf.gfile.IsDirectory(os.path.join(d, n)) for n in ("a", "g.log", "zz")])
    s = tf.gfile.Stat(os.path.join(d, "g.log"))
    out.append((s.length, s.is_directory, s.mtime_nsec // 10**9 == int(os.stat(
        os.path.join(d, "g.log")).st_mtime)))
    out.append(tf.io.gfile.stat(os.path.join(d, "a")).is_directory)
    tf.gfile.Copy(os.path.join(d, "g.log"), os.path.join(d, "h.log"))
    tf.gfile.Rename(os.path.join(d, "h.log"), os.path.join(d, "i.log"))
    tf.io.gfile.copy(os.path.join(d, "a/f1.txt"), os.path.join(d, "i.log"), overwrite=True)
    out.append(open(os.path.join(d, "i.log")).read())
    tf.io.gfile.rename(os.path.join(d, "i.log"), os.path.join(d, "g.log"), overwrite=True)
    out.append(open(os.path.join(d, "g.log")).read())
    tf.gfile.Remove(os.path.join(d, "g.log"))
    tf.gfile.DeleteRecursively(os.path.join(d, "a"))
    tf.io.gfile.rmtree(os.path.join(d, "c"))
    out.append(sorted(os.listdir(d)))
    return out


def test_gfile_tree_operations() -> None:
    _both(_gfile_tree)


def _gfile_errors(tf: Any, d: str) -> Any:
    f = os.path.join(d, "file")
    with open(f, "w") as fh:
        fh.write("x")
    os.mkdir(os.path.join(d, "dir"))
    open(os.path.join(d, "w2"), "w").close()
    missing = os.path.join(d, "missing")
    calls = {
        "read_missing": lambda: tf.gfile.GFile(missing).read(),
        "stat_missing": lambda: tf.gfile.Stat(missing),
        "remove_missing": lambda: tf.gfile.Remove(missing),
        "rmtree_missing": lambda: tf.gfile.DeleteRecursively(missing),
        "listdir_missing": lambda: tf.gfile.ListDirectory(missing),
        "listdir_file": lambda: tf.io.gfile.listdir(f),
        "mkdir_exists": lambda: tf.gfile.MkDir(os.path.join(d, "dir")),
        "mkdir_no_parent": lambda: tf.gfile.MkDir(os.path.join(missing, "x")),
        "mkdir_under_file": lambda: tf.io.gfile.mkdir(os.path.join(f, "x")),
        "rename_exists": lambda: tf.gfile.Rename(f, os.path.join(d, "dir")),
        "copy_exists": lambda: tf.gfile.Copy(f, f),
        "copy_missing": lambda: tf.gfile.Copy(missing, os.path.join(d, "y")),
        "rename_missing": lambda: tf.gfile.Rename(missing, os.path.join(d, "y")),
        "write_on_read": lambda: tf.gfile.GFile(f, "r").write("x"),
        "read_on_write": lambda: tf.gfile.GFile(os.path.join(d, "w"), "w").read(),
        "bad_mode": lambda: tf.gfile.GFile(f, "q"),
        "scheme": lambda: tf.gfile.Exists("foo://bucket/x"),
        "scheme_open": lambda: tf.gfile.GFile("foo://bucket/x").read(),
        "walk_missing": lambda: list(tf.io.gfile.walk(missing)),
        "makedirs_exists": lambda: tf.gfile.MakeDirs(os.path.join(d, "dir")),
        "makedirs_under_file": lambda: tf.gfile.MakeDirs(os.path.join(f, "x", "y")),
        "mkdir_on_file": lambda: tf.gfile.MkDir(f),
        "remove_dir": lambda: tf.gfile.Remove(os.path.join(d, "dir")),
        "rmtree_file": lambda: tf.io.gfile.rmtree(os.path.join(d, "w2")),
        "seek_bad_whence": lambda: tf.gfile.GFile(f).seek(0, 5),
    }
    return {k: _outcome(v) for k, v in calls.items()}


def test_gfile_errors() -> None:
    _both(_gfile_errors)


def test_gfile_error_messages_name_the_path() -> None:
    for impl in IMPLS:
        tf = _mod(impl)
        d = tempfile.mkdtemp()
        missing = os.path.join(d, "missing.txt")
        with pytest.raises(tf.errors.NotFoundError, match="missing.txt"):
            tf.gfile.GFile(missing).read()
        with pytest.raises(tf.errors.NotFoundError, match="Could not find directory"):
            tf.gfile.ListDirectory(missing)
        with pytest.raises(tf.errors.UnimplementedError,
                           match="File system scheme 'foo' not implemented"):
            tf.gfile.Exists("foo://b/x")


# =========================================================================================
# flags
# =========================================================================================
def _define(tf: Any) -> Any:
    fv = tf.flags.FlagValues()
    F = tf.flags
    F.DEFINE_string("s", "x", "a string", flag_values=fv)
    F.DEFINE_integer("n", 3, "an int", lower_bound=0, flag_values=fv)
    F.DEFINE_float("f", 0.5, "a float", flag_values=fv)
    F.DEFINE_boolean("b", False, "a bool", flag_values=fv)
    F.DEFINE_bool("c", True, "a bool", flag_values=fv)
    F.DEFINE_enum("e", "a", ["a", "b"], "an enum", flag_values=fv)
    F.DEFINE_list("l", "p,q", "a list", flag_values=fv)
    F.DEFINE_multi_string("ms", None, "strings", flag_values=fv)
    F.DEFINE_multi_integer("mi", [1, 2], "ints", flag_values=fv)
    F.DEFINE_string("req", None, "required", flag_values=fv)
    return fv


ARGVS = {
    "all_forms": ["p", "--s=hi", "x1", "--n", "7", "-f=2.5", "--b", "--noc", "--e=b",
                  "--l=u, v", "--ms", "m1", "--ms=m2", "--mi=0x10", "x2", "--", "--n=9"],
    "bool_values": ["p", "--b=false", "--c=T", "--n=0o17"],
    "nothing": ["p"],
    "unknown": ["p", "--sss=1"],
    "unknown_suggest": ["p", "--ms_=1"],
    "bad_int": ["p", "--n=x"],
    "below_bound": ["p", "--n=-1"],
    "bad_bool": ["p", "--b=yes"],
    "bad_enum": ["p", "--e=z"],
    "bool_with_arg": ["p", "--nob=1"],
    "missing_value": ["p", "--s"],
    "undefok": ["p", "--undefok=zz,yy", "--zz=1", "--noyy", "--n=1"],
    "positional_first": ["p", "pos", "--n=4"],
    "single_dash_value": ["p", "-n", "5", "-s=t"],
}


@pytest.mark.parametrize("name", sorted(ARGVS))
def test_flags_parse(name: str) -> None:
    got = {}
    for impl in IMPLS:
        fv = _define(_mod(impl))

        def parse() -> Any:
            rest = fv(list(ARGVS[name]))
            return rest, {k: fv[k].value for k in sorted(fv)}
        got[impl] = _outcome(parse)
        if got[impl][0] == "ok":
            got[impl] = (got[impl], [fv[k].present for k in sorted(fv)])
    assert got["flowrt"] == got["tf"]


@pytest.mark.parametrize("known_only", [True, False])
def test_flags_known_only(known_only: bool) -> None:
    got = {}
    for impl in IMPLS:
        fv = _define(_mod(impl))
        got[impl] = _outcome(lambda: fv(["p", "--zz=1", "a", "--n=2", "--", "--q"],
                                        known_only=known_only))
    assert got["flowrt"] == got["tf"]


def test_flags_error_messages() -> None:
    msgs = {}
    for impl in IMPLS:
        tf = _mod(impl)
        out = []
        for argv in (["p", "--ms_=1"], ["p", "--n=x"], ["p", "--n=-1"], ["p", "--e=z"],
                     ["p", "--s"]):
            try:
                _define(tf)(argv)
            except Exception as e:  # noqa: BLE001 - the message is compared
                out.append(str(e))
        fv = _define(tf)
        try:
            fv.s
        except Exception as e:  # noqa: BLE001
            out.append(f"{type(e).__name__}: {e}")
        tf.flags.mark_flag_as_required("req", flag_values=fv)
        try:
            fv(["p"])
        except Exception as e:  # noqa: BLE001
            out.append(f"{type(e).__name__}: {e}")
        fv(["p", "--req=r"])
        try:
            fv.n = -5
        except Exception as e:  # noqa: BLE001
            out.append(f"{type(e).__name__}: {e}")
        out.append(fv.n)
        try:
            tf.flags.DEFINE_string("s", "y", "again", flag_values=fv)
        except Exception as e:  # noqa: BLE001
            out.append(type(e).__name__)
        msgs[impl] = out
    assert msgs["flowrt"] == msgs["tf"]


def test_flags_validators_and_serialize() -> None:
    got = {}
    for impl in IMPLS:
        tf = _mod(impl)
        fv = _define(tf)
        tf.flags.register_validator("n", lambda v: v % 2 == 1, message="odd please",
                                    flag_values=fv)
        out = [_outcome(lambda: fv(["p", "--n=4"]))]
        fv(["p", "--n=5", "--b", "--l=a,b", "--ms=x", "--ms=y"])
        out.append([fv[k].serialize() for k in ("s", "n", "b", "c", "l", "ms", "mi", "e")])
        out.append([fv[k].default_as_str for k in ("s", "n", "b", "l", "mi")])
        out.append([fv[k].flag_type() for k in ("s", "n", "f", "b", "e", "l")])
        fv.unparse_flags()
        out.append(_outcome(lambda: fv.s))
        got[impl] = out
    assert got["flowrt"] == got["tf"]


def test_flagfile() -> None:
    d = tempfile.mkdtemp()
    ff = os.path.join(d, "f.cfg")
    with open(ff, "w") as f:
        f.write("# comment\n--s=from_file\n\n--n=8\n")
    got = {}
    for impl in IMPLS:
        fv = _define(_mod(impl))
        got[impl] = (fv(["p", f"--flagfile={ff}", "--n=9", "rest"]), fv.s, fv.n,
                     _outcome(lambda: fv(["p", "--flagfile=" + os.path.join(d, "no")])))
    assert got["flowrt"] == got["tf"]


_APP = textwrap.dedent('''
    import json, sys
    import {module} as tf
    tf.flags.DEFINE_integer("steps", 1, "steps")
    tf.flags.DEFINE_string("name", None, "name")
    FLAGS = tf.flags.FLAGS

    def main(argv):
        print(json.dumps([argv, FLAGS.steps, FLAGS.name]))
        return {ret}

    if __name__ == "__main__":
        {pre}
        tf.app.run({args})
''')


def _app(module: str, argv: list[str], ret: str = "0", pre: str = "pass",
         args: str = "") -> tuple[int, str]:
    src = _APP.format(module=module, ret=ret, pre=pre, args=args)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    p = subprocess.run([sys.executable, "-c", src, *argv], capture_output=True, text=True,
                       env=env, timeout=120, cwd=os.path.dirname(os.path.dirname(
                           os.path.abspath(__file__))))
    last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    err = [ln for ln in p.stderr.splitlines() if "Error" in ln][-1:] if p.returncode else []
    return p.returncode, last, [e.split(":")[0].rsplit(".", 1)[-1] for e in err]


APP_CASES = {
    "flags_and_rest": (["--steps=4", "pos", "--other=1"], "0", "pass", ""),
    "exit_code": (["--name=n"], "3", "pass", ""),
    "required_missing": ([], "0", 'tf.flags.mark_flag_as_required("name")', ""),
    "bad_value": (["--steps=x"], "0", "pass", ""),
    "explicit_argv": ([], "None", "pass", "argv=['prog', '--steps=9', 'z']"),
    "implicit_parse": (["--steps=6"], "0", "print(FLAGS.steps)", ""),
}


@pytest.mark.parametrize("case", sorted(APP_CASES))
def test_app_run(case: str) -> None:
    argv, ret, pre, args = APP_CASES[case]
    tf_res = _app("tensorflow.compat.v1", argv, ret, pre, args)
    fr_res = _app("flowrt", argv, ret, pre, args)
    assert fr_res[0] == tf_res[0] and fr_res[2] == tf_res[2]
    if tf_res[0] in (0, 3):
        assert json.loads(fr_res[1].replace("-c", "PROG")) == \
            json.loads(tf_res[1].replace("-c", "PROG"))


# =========================================================================================
# logging
# =========================================================================================
def test_logging_levels_and_filtering() -> None:
    import logging

    got = {}
    for impl in IMPLS:
        tf = _mod(impl)
        lg = tf.logging
        recs: list = []

        class Keep(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                recs.append((record.levelno, record.getMessage()))

        h = Keep()
        logger = tf.get_logger()
        logger.addHandler(h)
        try:
            out = [(lg.DEBUG, lg.INFO, lg.WARN, lg.ERROR, lg.FATAL), logger.name]
            lg.set_verbosity(lg.WARN)
            out.append(lg.get_verbosity())
            lg.debug("d")
            lg.info("i")
            lg.warn("w %d", 1)
            lg.warning("w2")
            lg.error("e %s", "x")
            lg.fatal("f")
            lg.set_verbosity(lg.DEBUG)
            lg.log(lg.INFO, "log")
            lg.vlog(lg.DEBUG, "vlog")
            lg.log_if(lg.INFO, "if-yes", True)
            lg.log_if(lg.INFO, "if-no", False)
            for i in range(5):
                lg.log_every_n(lg.INFO, "every %d", 2, i)
            for i in range(4):
                lg.log_first_n(lg.INFO, "first %d", 3, i)
            lg.TaskLevelStatusMessage("status")
            out.append(recs)
            out.append(_outcome(lg.flush))
            out.append(logger is logging.getLogger("tensorflow"))
        finally:
            logger.removeHandler(h)
            tf.get_logger().setLevel(logging.ERROR)
        got[impl] = out
    assert got["flowrt"] == got["tf"]


# =========================================================================================
# write_graph and checkpoints_iterator
# =========================================================================================
def _graph(tf: Any) -> Any:
    g = tf.Graph()
    with g.as_default():
        a = tf.constant(np.array([1.5, -2.0], np.float32), name="a")
        tf.multiply(a, tf.constant(2.0, name="b"), name="sum")
    return g


@pytest.mark.parametrize("as_text", [True, False])
def test_write_graph_cross_reads(as_text: bool) -> None:
    tf, fr = tf_module(), flowrt_module()
    for writer, reader in ((tf, fr), (fr, tf)):
        d = os.path.join(tempfile.mkdtemp(), "new", "logdir")
        path = writer.train.write_graph(_graph(writer), d, "g.pb", as_text=as_text)
        assert path == os.path.join(d, "g.pb") and os.listdir(d) == ["g.pb"]
        gd = reader.GraphDef()
        with reader.gfile.GFile(path, "r" if as_text else "rb") as f:
            data = f.read()
        if as_text:
            text_format.Parse(data, gd)
        else:
            gd.ParseFromString(data)
        assert [n.name for n in gd.node] == ["a", "b", "sum"]
        g = reader.Graph()
        with g.as_default():
            reader.import_graph_def(gd, name="")
            with reader.Session() as sess:
                np.testing.assert_allclose(sess.run("sum:0"), [3.0, -4.0])
    # the same GraphDef text from both (field order, float formatting)
    texts = []
    for m in (tf, fr):
        d = tempfile.mkdtemp()
        gd = m.GraphDef()
        gd.ParseFromString(_graph(m).as_graph_def().SerializeToString())
        keep = [n for n in gd.node]
        del gd.node[:]
        for n in keep:
            n2 = gd.node.add()
            n2.CopyFrom(n)
            n2.ClearField("device")
            for k in [k for k in n2.attr if k.startswith("_")]:
                del n2.attr[k]
        gd.ClearField("versions")
        p = m.train.write_graph(gd, d, "g.pbtxt")
        texts.append(open(p).read())
    assert texts[0] == texts[1]


def _checkpoint(tf: Any, d: str, step: int) -> str:
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(np.float32(step), name="v")
        saver = tf.train.Saver([v])
        with tf.Session() as sess:
            sess.run(v.initializer)
            return saver.save(sess, os.path.join(d, "model.ckpt"), global_step=step)


def test_checkpoints_iterator_cross() -> None:
    tf, fr = tf_module(), flowrt_module()
    for writer, reader in ((tf, fr), (fr, tf)):
        d = tempfile.mkdtemp()
        assert list(reader.train.checkpoints_iterator(d, timeout=0)) == []
        _checkpoint(writer, d, 1)
        last = _checkpoint(writer, d, 2)
        got = list(reader.train.checkpoints_iterator(d, timeout=0))
        assert got == [last] == [os.path.join(d, "model.ckpt-2")]
        if reader is fr:  # flowrt writes its own index format, which TF does not read
            assert reader.train.load_variable(got[0], "v") == 2.0
