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


# =========================================================================================
# flags, the rest of absl.flags (helper X): enum classes, aliases, key flags and help
# text, set_default / override_value, the helpers, tf_decorator
# =========================================================================================
import enum  # noqa: E402 - kept with the tests that use it


class Fruit(enum.Enum):
    APPLE = 1
    Banana = 2
    cherry = 3


def _names(v: Any) -> Any:
    """Enum members (in values, lists) as their names, for comparing across modules."""
    if isinstance(v, enum.Enum):
        return f"<{v.name}>"
    if isinstance(v, list):
        return [_names(x) for x in v]
    return v


def _fv_state(fv: Any) -> Any:
    return {k: (_names(fv[k].value), fv[k].present) for k in sorted(fv)}


ENUM_ARGVS = {
    "names": ["p", "--fruit=banana", "--cs=Banana", "--mf=apple", "--mf=CHERRY", "--mcs=APPLE"],
    "defaults": ["p"],
    "bad_cs": ["p", "--cs=banana"],
    "bad_name": ["p", "--fruit=grape"],
    "repeat": ["p", "--fruit=APPLE", "--fruit=cherry", "--mf", "banana"],
}


@pytest.mark.parametrize("name", sorted(ENUM_ARGVS))
def test_enum_class_flags(name: str) -> None:
    got = {}
    for impl in IMPLS:
        F = _mod(impl).flags
        fv = F.FlagValues()
        F.DEFINE_enum_class("fruit", Fruit.APPLE, Fruit, "a fruit", flag_values=fv)
        F.DEFINE_enum_class("cs", "cherry", Fruit, "case", case_sensitive=True,
                            flag_values=fv)
        F.DEFINE_multi_enum_class("mf", ["APPLE", Fruit.Banana], Fruit, "fruits",
                                  flag_values=fv)
        F.DEFINE_multi_enum_class("mcs", None, Fruit, "fruits", case_sensitive=True,
                                  flag_values=fv)
        out = [_outcome(lambda: fv(list(ENUM_ARGVS[name])))]
        if out[0][0] == "ok":
            out.append(_fv_state(fv))
            out.append([fv[k].serialize() for k in ("fruit", "cs", "mf", "mcs")])
        out.append([(fv[k].help, fv[k].default_as_str, fv[k].flag_type(),
                     fv[k].parser.member_names) for k in ("fruit", "cs", "mf", "mcs")])
        got[impl] = out
    assert got["flowrt"] == got["tf"]


def test_enum_class_definition_errors() -> None:
    class Empty(enum.Enum):
        pass

    class Twins(enum.Enum):
        a = 1
        A = 2

    got = {}
    for impl in IMPLS:
        F = _mod(impl).flags
        fv = F.FlagValues()
        out = []
        for call in (lambda: F.DEFINE_enum_class("e", None, Empty, "h", flag_values=fv),
                     lambda: F.DEFINE_enum_class("e", None, Twins, "h", flag_values=fv),
                     lambda: F.DEFINE_enum_class("e", None, int, "h", flag_values=fv),
                     lambda: F.DEFINE_enum_class("e", "x", Fruit, "h", flag_values=fv),
                     lambda: F.DEFINE_enum_class("e", 3, Fruit, "h", flag_values=fv)):
            try:
                call()
                out.append("ok")
            except Exception as e:  # noqa: BLE001 - class and message are compared
                out.append((type(e).__name__, str(e).replace("test_compat_shell.", "")))
        F.DEFINE_enum_class("t", "a", Twins, "h", case_sensitive=True, flag_values=fv)
        fv(["p", "--t=A"])
        out.append(_names(fv.t))
        got[impl] = out
    assert got["flowrt"] == got["tf"]


def test_alias_flags() -> None:
    got = {}
    for impl in IMPLS:
        F = _mod(impl).flags
        fv = F.FlagValues()
        F.DEFINE_integer("num", 3, "a number", flag_values=fv)
        F.DEFINE_boolean("verbose", False, "talk", flag_values=fv)
        F.DEFINE_multi_string("tag", ["x"], "tags", flag_values=fv)
        F.DEFINE_alias("n", "num", flag_values=fv)
        F.DEFINE_alias("v", "verbose", flag_values=fv)
        h = F.DEFINE_alias("t", "tag", flag_values=fv)
        out = [_outcome(lambda: F.DEFINE_alias("q", "nope", flag_values=fv)),
               _outcome(lambda: F.DEFINE_alias("n", "verbose", flag_values=fv))]
        out.append(fv(["p", "--n=7", "--v", "--t=a", "--tag=b", "--t", "c", "rest"]))
        out.append(_fv_state(fv))
        out.append([fv[k].serialize() for k in ("n", "v", "t")])
        out.append([(fv[k].help, fv[k].default_as_str, fv[k].boolean)
                    for k in ("n", "v", "t")])
        out.append((h.name, h.value, h.default))
        fv.n = 11
        out.append((fv.num, fv.n))
        fv(["p", "--nov"])
        out.append((fv.verbose, fv.v))
        fv.unparse_flags()
        out.append(_outcome(lambda: fv.n))
        fv(["p"])
        out.append(_fv_state(fv))
        got[impl] = out
    assert got["flowrt"] == got["tf"]


def _key_flag_help(tf: Any) -> Any:
    F = tf.flags
    fv = F.FlagValues()
    mod = type(sys)("x_other_module")
    F.DEFINE_integer("other_n", 1, "in another module " * 6, flag_values=fv,
                     module_name="x_other_module")
    F.DEFINE_boolean("other_b", True, "other switch", flag_values=fv,
                     module_name="x_other_module")
    F.DEFINE_string("mine", "m", "defined here", short_name="m", flag_values=fv)
    F.DEFINE_list("main_l", "a,b", "main's list", flag_values=fv, module_name=sys.argv[0])
    F.DEFINE_enum("color", "red", ["red", "blue"], "a color\nwith a second line",
                  flag_values=fv, module_name="x_third")
    F.DEFINE_multi_integer("ints", [1, 2], "some ints", lower_bound=0,
                           flag_values=fv, module_name="x_third")
    out = [fv.module_help(__name__), fv.module_help("x_other_module")]
    F.declare_key_flag("other_n", flag_values=fv)
    F.declare_key_flag("flagfile", flag_values=fv)
    out.append(_outcome(lambda: F.declare_key_flag("nope", flag_values=fv)))
    out.append(fv.module_help(__name__))
    F.adopt_module_key_flags(mod, flag_values=fv)
    out.append(fv.module_help(__name__))
    out.append(_outcome(lambda: F.adopt_module_key_flags("x_other_module", flag_values=fv)))
    out.append([f.name for f in fv.get_key_flags_for_module(__name__)])
    out.append([f.name for f in fv.get_flags_for_module("x_other_module")])
    out.append(fv.main_module_help())
    out.append(fv.get_help())
    out.append(fv.get_help(prefix="# ", include_special_flags=False))
    out.append(str(fv))
    del fv.other_n
    out.append(fv.module_help(__name__))
    empty = F.FlagValues()
    out.append(empty.get_help())
    return out


@pytest.mark.parametrize("columns", ["80", "50"])
def test_key_flags_and_help_text(columns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    got = {impl: _key_flag_help(_mod(impl)) for impl in IMPLS}
    assert got["flowrt"] == got["tf"]


@pytest.mark.parametrize("registered", [True, False])
def test_disclaim_key_flags_in_a_wrapping_module(registered: bool,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Flags are attributed to the first caller up the stack that is a module in
    sys.modules and did not disclaim key flags."""
    got = {}
    for impl in IMPLS:
        src = textwrap.dedent(f'''
            import {'tensorflow.compat.v1' if impl == 'tf' else 'flowrt'} as tf
            tf.flags.disclaim_key_flags()
            def define_port(fv):
                return tf.flags.DEFINE_integer("port", 80, "a port", flag_values=fv)
            def define_host(fv):
                return tf.flags.DEFINE_string("host", "h", "a host", flag_values=fv)
        ''')
        wrapper = type(sys)(f"x_wrap_{impl}")
        plain = type(sys)(f"x_plain_{impl}")
        if registered:
            monkeypatch.setitem(sys.modules, wrapper.__name__, wrapper)
            monkeypatch.setitem(sys.modules, plain.__name__, plain)
        exec(compile(src, wrapper.__name__, "exec"), wrapper.__dict__)
        F = _mod(impl).flags
        fv = F.FlagValues()
        wrapper.define_port(fv)
        exec(compile(src.replace("tf.flags.disclaim_key_flags()", ""), plain.__name__,
                     "exec"), plain.__dict__)
        plain.define_host(fv)
        got[impl] = (sorted((m.replace(impl, "IMPL"), [f.name for f in fl])
                            for m, fl in fv.flags_by_module_dict().items()),
                     fv.module_help(__name__))
    assert got["flowrt"] == got["tf"]


def test_set_default_and_override_value() -> None:
    got = {}
    for impl in IMPLS:
        F = _mod(impl).flags
        fv = F.FlagValues()
        n = F.DEFINE_integer("n", 1, "n", upper_bound=10, flag_values=fv)
        s = F.DEFINE_string("s", "a", "s", flag_values=fv)
        m = F.DEFINE_multi_integer("m", [1], "m", flag_values=fv)
        e = F.DEFINE_enum_class("e", "apple", Fruit, "e", flag_values=fv)
        fv(["p", "--s=cmd"])
        out = []
        F.set_default(n, 5)
        F.set_default(s, "new")
        out.append((fv.n, fv.s, n.default, s.default, fv["n"].default_as_str))
        out.append(_outcome(lambda: F.set_default(n, 11)))
        out.append(_outcome(lambda: F.set_default(n, "x")))
        out.append((fv.n, n.default))
        F.override_value(n, 7)
        F.override_value(s, "over")
        F.override_value(m, [4, 5])
        F.override_value(e, Fruit.cherry)
        out.append((fv.n, fv.s, fv.m, _names(fv.e), fv["n"].using_default_value))
        for args in ((n, "8"), (n, 12), (n, 2.0), (s, 3), (m, 4), (e, "Banana")):
            try:
                F.override_value(*args)
                out.append("ok")
            except Exception as ex:  # noqa: BLE001
                out.append((type(ex).__name__, str(ex)))
        out.append((fv.n, fv.s))
        F.set_default(n, 3)
        out.append((fv.n, n.default))
        got[impl] = out
    assert got["flowrt"] == got["tf"]


def test_flag_holder_and_required() -> None:
    got = {}
    for impl in IMPLS:
        F = _mod(impl).flags
        fv = F.FlagValues()
        out = []
        h = F.DEFINE_string("a", "x", "a", flag_values=fv)
        r = F.DEFINE_string("r", None, "r", flag_values=fv, required=True)
        o = F.DEFINE_string("o", None, "o", flag_values=fv)
        out.append(_outcome(lambda: F.DEFINE_string("bad", "d", "h", flag_values=fv,
                                                    required=True)))
        for fn in (lambda: h == h, lambda: bool(h), lambda: h.value):
            try:
                fn()
            except Exception as ex:  # noqa: BLE001
                out.append((type(ex).__name__, str(ex)))
        fv(["p", "--r=v"])
        out.append((h.value, r.value, o.value, h.present, r.present))
        fv.a = None
        try:
            h.value
        except Exception as ex:  # noqa: BLE001
            out.append((type(ex).__name__, str(ex)))
        F.mark_flag_as_required(o)
        out.append(_outcome(lambda: fv(["p", "--r=v"])))
        out.append(_outcome(lambda: F.register_validator(o, lambda v: True,
                                                         flag_values=F.FlagValues())))
        got[impl] = out
    assert got["flowrt"] == got["tf"]


def test_bool_mutual_exclusion() -> None:
    got = {}
    for impl in IMPLS:
        F = _mod(impl).flags
        fv = F.FlagValues()
        a = F.DEFINE_boolean("a", False, "a", flag_values=fv)
        F.DEFINE_boolean("b", False, "b", flag_values=fv)
        F.DEFINE_string("s", None, "s", flag_values=fv)
        F.DEFINE_string("t", None, "t", flag_values=fv)
        out = []
        try:
            F.mark_bool_flags_as_mutual_exclusive(["a", "s"], flag_values=fv)
        except Exception as ex:  # noqa: BLE001
            out.append((type(ex).__name__, str(ex)))
        F.mark_bool_flags_as_mutual_exclusive([a, "b"], required=True, flag_values=fv)
        F.mark_flags_as_mutual_exclusive(["s", "t"], flag_values=fv)
        for argv in (["p"], ["p", "--a"], ["p", "--a", "--b"], ["p", "--b", "--noa"],
                     ["p", "--a", "--s=1", "--t=2"]):
            try:
                fv(argv)
                out.append(("ok", fv.a, fv.b))
            except Exception as ex:  # noqa: BLE001
                out.append((type(ex).__name__, str(ex)))
        other = F.FlagValues()
        F.DEFINE_boolean("c", False, "c", flag_values=other)
        out.append(_outcome(lambda: F.mark_bool_flags_as_mutual_exclusive(
            [a, "c"], flag_values=other)))
        out.append(_outcome(lambda: F.mark_bool_flags_as_mutual_exclusive([])))
        got[impl] = out
    assert got["flowrt"] == got["tf"]


TEXTS = [
    "", "one", "a b c d e f g h i j k l m n o p q r s t u v w x y z " * 4,
    "para one is here\n\n   para two\tafter a tab\n  \nlast " + "word " * 20,
    "\tlead\ttabs\n" + "x" * 100,
]


def test_help_helpers(monkeypatch: pytest.MonkeyPatch) -> None:
    def doc() -> None:
        """First line.

        Second paragraph
        continues here,
            indented more.

        Third.
        """

    got = {}
    for impl in IMPLS:
        F = _mod(impl).flags
        out = []
        for cols in ("80", "33"):
            monkeypatch.setenv("COLUMNS", cols)
            out.append(F.get_help_width())
            for t in TEXTS:
                out.append(F.text_wrap(t))
                out.append(F.text_wrap(t, 30, indent="    ", firstline_indent="> "))
                out.append(F.text_wrap(t, 20, indent="  "))
        for args in ((("x", 4, "    ")), ("x", 4, "", "     ")):
            out.append(_outcome(lambda: F.text_wrap(*args)))
        for d in (doc.__doc__, "  one\n  two\n\n  three  ", "", "x\n   \ny"):
            out.append(F.doc_to_help(d))
        out.append(list(F.flag_dict_to_args(
            {"a": None, "b": True, "c": False, "d": "str", "e": [1, 2], "f": ("x",),
             "g": 3, "h": 2.5, "i": b"by", "j": [], "k": ["p", "q"], "l": 7},
            multi_flags={"k", "l"})))
        out.append(list(F.flag_dict_to_args({"x": {"k": 1}, "y": range(3)})))
        got[impl] = out
    assert got["flowrt"] == got["tf"]


def test_tf_decorator() -> None:
    got = {}
    for impl in IMPLS:
        td = _mod(impl).flags.tf_decorator

        def target(a: int, b: int = 2, *args: Any, c: int = 3, **kw: Any) -> int:
            """Adds."""
            return a + b + c

        target.extra = "attr"

        def wrapper(*args: Any, **kwargs: Any) -> int:
            return 10 * target(*args, **kwargs)

        dec = td.make_decorator(target, wrapper)
        out = [dec is wrapper, dec.__name__, dec.__qualname__.rsplit(".", 1)[-1],
               dec.__doc__, dec.extra, dec.__wrapped__ is target, str(dec.__signature__),
               dec(1), dec._tf_decorator.decorator_name,
               dec._tf_decorator.decorated_target is target]
        decs, inner = td.unwrap(dec)
        out.append((len(decs), inner is target, decs[0].decorator_name))

        def outer(*args: Any, **kwargs: Any) -> int:
            return dec(*args, **kwargs) + 1

        two = td.make_decorator(dec, outer, decorator_name="outer_dec",
                                decorator_doc="outer doc")
        decs, inner = td.unwrap(two)
        out.append(([d.decorator_name for d in decs], inner is target, two.__doc__,
                     two(1, 1, c=0)))
        out.append(td.unwrap(len) == ([], len))

        class K:
            def m(self, x: int) -> int:
                return x

        k = K()
        bm = td.make_decorator(k.m, lambda *a: k.m(*a))
        out.append((str(bm.__signature__), getattr(bm, "__self__", None) is k))
        got[impl] = out
    assert got["flowrt"] == got["tf"]


_HELP_APP = textwrap.dedent('''
    """My program.

    Usage: %s [flags]
    """
    import {module} as tf
    tf.flags.DEFINE_integer("steps", 1, "how many steps to take " * 5, lower_bound=0)
    tf.flags.DEFINE_enum_class("mode", "fast", __import__("enum").Enum(
        "Mode", "FAST SLOW"), "the mode")
    tf.flags.DEFINE_alias("s", "steps")
    tf.flags.DEFINE_string("other", "o", "other", module_name="x_elsewhere")
    tf.flags.declare_key_flag("other")
    tf.flags.declare_key_flag("undefok")

    def main(argv):
        print("MAIN", argv)

    if __name__ == "__main__":
        tf.app.run()
''')


@pytest.mark.parametrize("argv", [["--helpshort"], ["--s=3", "x"]])
def test_app_run_helpshort_lists_key_flags(argv: list[str]) -> None:
    outs = {}
    for impl, module in (("tf", "tensorflow.compat.v1"), ("flowrt", "flowrt")):
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", COLUMNS="72")
        p = subprocess.run([sys.executable, "-c", _HELP_APP.format(module=module), *argv],
                           capture_output=True, text=True, env=env, timeout=120,
                           cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        outs[impl] = (p.returncode, p.stdout)
    assert outs["flowrt"] == outs["tf"]
