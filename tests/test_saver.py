"""``tf.train.Saver`` and the ``tf.train`` checkpoint helpers against TF 1.15's behaviour:
round trips of every dtype, graph structure, global steps, max_to_keep, var_list forms,
restores into fresh graphs, save/restore ops placed on the variables' devices (sharded
and not), the state file, readers, meta graphs, errors for missing, mismatched and
corrupted checkpoints, and crash safety: a saving process killed at random moments
always leaves a complete latest checkpoint."""
from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import flowrt as tf
from flowrt import checkpoint as ck
from flowrt import errors
from flowrt.proto import meta_graph_pb2

VALUE_DTYPES = [tf.float16, tf.float32, tf.float64, tf.int8, tf.int16, tf.int32, tf.int64,
                tf.uint8, tf.uint16, tf.uint32, tf.uint64, tf.complex64, tf.complex128,
                tf.bool, tf.string]


@pytest.fixture
def g():
    graph = tf.Graph()
    with graph.as_default():
        yield graph


def value_for(dtype: tf.DType, shape: tuple[int, ...], k: int) -> np.ndarray:
    n = int(np.prod(shape, dtype=np.int64))
    if dtype is tf.string:
        out = np.empty(n, dtype=object)
        for i in range(n):
            out[i] = f"s{k}-{i}".encode() * (i % 3)
        return out.reshape(shape)
    if dtype is tf.bool:
        return (np.arange(n) % 2 == k % 2).reshape(shape)
    base = np.arange(n).reshape(shape) + k
    if dtype.is_complex:
        return (base + 1j * (base + 1)).astype(dtype.np)
    return base.astype(dtype.np)


def files(d) -> list[str]:
    return sorted(os.listdir(d))


# -- round trips --------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(), (2, 3)], ids=["scalar", "matrix"])
def test_round_trip_every_dtype(g, tmp_path, shape):
    vs = [tf.Variable(value_for(d, shape, 1), dtype=d, name=f"v_{d.name}")
          for d in VALUE_DTYPES]
    saver = tf.train.Saver()
    prefix = str(tmp_path / "model.ckpt")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert saver.save(sess, prefix) == prefix
        sess.run([v.assign(value_for(v.dtype.base_dtype, shape, 5)) for v in vs])
        saver.restore(sess, prefix)
        got = sess.run(vs)
    for v, x in zip(vs, got):
        d = v.dtype.base_dtype
        want = value_for(d, shape, 1)
        assert np.shape(x) == shape, d
        if d is tf.string:
            assert np.asarray(x, dtype=object).tolist() == want.tolist()
        else:
            assert np.asarray(x).dtype == d.np
            np.testing.assert_array_equal(x, want)
    reader = tf.train.NewCheckpointReader(prefix)
    assert reader.get_variable_to_dtype_map() == {f"v_{d.name}": d for d in VALUE_DTYPES}
    assert reader.get_variable_to_shape_map() == {f"v_{d.name}": list(shape)
                                                  for d in VALUE_DTYPES}


def test_restore_into_a_fresh_graph_and_session(tmp_path):
    prefix = str(tmp_path / "m")
    with tf.Graph().as_default():
        a = tf.Variable([[1.0, 2.0]], name="a")
        with tf.name_scope("scope"):
            b = tf.Variable(7, name="b")
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            saver.save(sess, prefix)
        assert sorted(tf.train.NewCheckpointReader(prefix).get_variable_to_shape_map()) == \
            ["a", b.op.name]
    with tf.Graph().as_default():
        a2 = tf.Variable([[0.0, 0.0]], name="a")
        with tf.name_scope("scope"):
            b2 = tf.Variable(0, name="b")
        saver = tf.train.Saver()
        with tf.Session() as sess:  # nothing initialised: restore initialises
            saver.restore(sess, prefix)
            av, bv = sess.run([a2, b2])
    np.testing.assert_array_equal(av, [[1.0, 2.0]])
    assert bv == 7


def test_graph_structure_and_saver_def(g):
    tf.Variable(1.0, name="v")
    saver = tf.train.Saver()
    sd = saver.saver_def
    assert sd.filename_tensor_name == "save/Const:0"
    assert sd.save_tensor_name == "save/control_dependency:0"
    assert sd.restore_op_name == "save/restore_all"
    assert sd.max_to_keep == 5 and not sd.sharded and sd.version == tf.train.SaverDef.V2
    assert sd.keep_checkpoint_every_n_hours == 10000.0
    types = {o.name: o.type for o in g.get_operations() if o.name.startswith("save/")}
    assert types["save/SaveV2"] == "SaveV2" and types["save/RestoreV2"] == "RestoreV2"
    assert types["save/Assign"] == "Assign" and types["save/restore_all"] == "NoOp"
    assert types["save/Const"] == "PlaceholderWithDefault"
    save = g.get_operation_by_name("save/SaveV2")
    assert [t.op.name for t in save.inputs] == ["save/Const", "save/SaveV2/tensor_names",
                                                 "save/SaveV2/shape_and_slices", "v"]
    assert saver.as_saver_def() is sd and isinstance(sd, tf.train.SaverDef)
    tf.train.Saver()
    assert "save_1/SaveV2" in {o.name for o in g.get_operations()}


# -- global steps, max_to_keep, state -----------------------------------------------------
def test_global_step_suffix(g, tmp_path):
    v = tf.Variable(1.0)
    step = tf.Variable(42, name="global_step")
    saver = tf.train.Saver()
    padded = tf.train.Saver(pad_step_number=True)
    base = str(tmp_path / "model.ckpt")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert saver.save(sess, base, global_step=100) == base + "-100"
        assert saver.save(sess, base, global_step=np.int64(101)) == base + "-101"
        assert saver.save(sess, base, global_step=step) == base + "-42"
        assert saver.save(sess, base, global_step=tf.constant(7)) == base + "-7"
        assert padded.save(sess, base, global_step=3) == base + "-00000003"
        del v
    for s in ("100", "101", "42", "7", "00000003"):
        assert os.path.exists(f"{base}-{s}.index") and os.path.exists(f"{base}-{s}.meta")
    assert tf.train.latest_checkpoint(str(tmp_path)) == base + "-00000003"


def test_max_to_keep_deletes_old_checkpoints(g, tmp_path):
    v = tf.Variable(0)
    saver = tf.train.Saver(max_to_keep=2)
    base = str(tmp_path / "m")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for i in range(5):
            sess.run(v.assign(i))
            saver.save(sess, base, global_step=i)
    assert saver.last_checkpoints == [base + "-3", base + "-4"]
    assert files(tmp_path) == ["checkpoint", "m-3.data-00000-of-00001", "m-3.index",
                               "m-3.meta", "m-4.data-00000-of-00001", "m-4.index",
                               "m-4.meta"]
    st = tf.train.get_checkpoint_state(str(tmp_path))
    assert st.model_checkpoint_path == base + "-4"
    assert list(st.all_model_checkpoint_paths) == [base + "-3", base + "-4"]
    text = (tmp_path / "checkpoint").read_text()
    assert text == (f'model_checkpoint_path: "{base}-4"\n'
                    f'all_model_checkpoint_paths: "{base}-3"\n'
                    f'all_model_checkpoint_paths: "{base}-4"\n')
    assert tf.train.load_variable(str(tmp_path), "Variable") == 4
    assert tf.train.load_variable(base + "-3", "Variable:0") == 3


def test_max_to_keep_zero_keeps_everything_and_resaving_dedups(g, tmp_path):
    tf.Variable(0)
    keep_all = tf.train.Saver(max_to_keep=0)
    saver = tf.train.Saver(max_to_keep=3)
    base = str(tmp_path / "m")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for i in range(4):
            keep_all.save(sess, base, global_step=i)
        assert keep_all.last_checkpoints == []
        assert all(tf.train.checkpoint_exists(f"{base}-{i}") for i in range(4))
        st = tf.train.get_checkpoint_state(str(tmp_path))
        assert list(st.all_model_checkpoint_paths) == [base + "-3"]
        saver.save(sess, base, global_step=1)
        saver.save(sess, base, global_step=2)
        saver.save(sess, base, global_step=1)
        assert saver.last_checkpoints == [base + "-2", base + "-1"]


def test_keep_checkpoint_every_n_hours(g, tmp_path):
    tf.Variable(0)
    saver = tf.train.Saver(max_to_keep=1, keep_checkpoint_every_n_hours=1e-9)
    base = str(tmp_path / "m")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for i in range(3):
            time.sleep(0.001)
            saver.save(sess, base, global_step=i)
    # checkpoints pushed out of the window are preserved (their time passed the mark)
    assert all(tf.train.checkpoint_exists(f"{base}-{i}") for i in range(3))


def test_set_and_recover_last_checkpoints(g, tmp_path):
    tf.Variable(0)
    saver = tf.train.Saver(max_to_keep=2)
    base = str(tmp_path / "m")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for i in range(2):
            saver.save(sess, base, global_step=i)
        other = tf.train.Saver(max_to_keep=2)
        other.recover_last_checkpoints([base + "-0", base + "-1", base + "-9"])
        assert other.last_checkpoints == [base + "-0", base + "-1"]
        other.save(sess, base, global_step=2)  # pushes out -0, which is deleted
        assert not tf.train.checkpoint_exists(base + "-0")
        assert other.last_checkpoints == [base + "-1", base + "-2"]
        other.set_last_checkpoints_with_time([(base + "-2", 1.0)])
        assert other.last_checkpoints == [base + "-2"]
        with pytest.raises(AssertionError):
            other.set_last_checkpoints_with_time((base, 1.0))
    mt = tf.train.get_checkpoint_mtimes([base + "-1", base + "-0"])
    assert len(mt) == 1 and abs(mt[0] - time.time()) < 60


def test_state_file_helpers(tmp_path):
    d = str(tmp_path)
    assert tf.train.get_checkpoint_state(d) is None
    assert tf.train.latest_checkpoint(d) is None
    tf.train.update_checkpoint_state(d, os.path.join(d, "b"), [os.path.join(d, "a")])
    st = tf.train.get_checkpoint_state(d)
    assert list(st.all_model_checkpoint_paths) == [os.path.join(d, "a"), os.path.join(d, "b")]
    assert tf.train.latest_checkpoint(d) is None  # "b" has no index
    ck.write_checkpoint(os.path.join(d, "b"), ["x"], [np.zeros(1)], [tf.float64])
    assert tf.train.latest_checkpoint(d) == os.path.join(d, "b")
    # relative paths are resolved against the directory
    tf.train.update_checkpoint_state(d, "b", ["b"], latest_filename="other")
    assert "model_checkpoint_path: \"b\"" in (tmp_path / "other").read_text()
    assert tf.train.latest_checkpoint(d, "other") == os.path.join(d, "b")
    (tmp_path / "checkpoint").write_text("this is { not a proto")
    assert tf.train.get_checkpoint_state(d) is None
    (tmp_path / "checkpoint").write_text('all_model_checkpoint_paths: "b"\n')
    with pytest.raises(ValueError, match="Invalid checkpoint state"):
        tf.train.get_checkpoint_state(d)
    with pytest.raises(RuntimeError, match="conflicts with path used for checkpoint state"):
        tf.train.update_checkpoint_state(d, os.path.join(d, "checkpoint"))


def test_save_relative_paths_and_custom_latest_filename(g, tmp_path):
    tf.Variable(0)
    saver = tf.train.Saver(save_relative_paths=True)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saver.save(sess, str(tmp_path / "m"), global_step=1, latest_filename="mystate")
        with pytest.raises(ValueError, match="must not contain path components"):
            saver.save(sess, str(tmp_path / "m"), latest_filename="a/b")
        with pytest.raises(ValueError, match="collides with 'save_path'"):
            saver.save(sess, str(tmp_path / "checkpoint"))
    assert (tmp_path / "mystate").read_text() == ('model_checkpoint_path: "m-1"\n'
                                                  'all_model_checkpoint_paths: "m-1"\n')
    assert tf.train.latest_checkpoint(str(tmp_path), "mystate") == str(tmp_path / "m-1")


def test_save_creates_the_directory_and_write_flags(g, tmp_path):
    tf.Variable(0)
    saver = tf.train.Saver()
    d = tmp_path / "new" / "dir"
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saver.save(sess, str(d / "m"), write_meta_graph=False, write_state=False)
    assert files(d) == ["m.data-00000-of-00001", "m.index"]


def test_overwriting_the_same_prefix(g, tmp_path):
    v = tf.Variable(0)
    saver = tf.train.Saver()
    prefix = str(tmp_path / "m")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for i in range(3):
            sess.run(v.assign(i))
            saver.save(sess, prefix)
            assert tf.train.load_variable(prefix, "Variable") == i
            assert files(tmp_path) == ["checkpoint", "m.data-00000-of-00001", "m.index",
                                       "m.meta"]
    assert saver.last_checkpoints == [prefix]


# -- saving again to the same prefix: TF's file names (issue 14) --------------------------
def _saved_values(sess, vs) -> list:
    return [np.asarray(x).tolist() for x in sess.run(vs)]


def test_saving_twice_to_the_same_step_keeps_tf_names(g, tmp_path):
    v = tf.Variable(np.zeros(4, np.float32), name="v")
    s = tf.Variable([b"a", b"bb"], name="s")
    saver = tf.train.Saver()
    base = str(tmp_path / "d" / "model.ckpt")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        assert saver.save(sess, base, global_step=2) == base + "-2"
        sess.run([v.assign(np.full(4, 3, np.float32)), s.assign([b"x", b"yy"])])
        assert saver.save(sess, base, global_step=2) == base + "-2"
        assert files(tmp_path / "d") == ["checkpoint", "model.ckpt-2.data-00000-of-00001",
                                         "model.ckpt-2.index", "model.ckpt-2.meta"]
        sess.run([v.assign(np.zeros(4, np.float32)), s.assign([b"", b""])])
        saver.restore(sess, tf.train.latest_checkpoint(str(tmp_path / "d")))
        assert _saved_values(sess, [v, s]) == [[3.0] * 4, [b"x", b"yy"]]
    assert saver.last_checkpoints == [base + "-2"]


def test_overwrites_with_max_to_keep_rotation(g, tmp_path):
    v = tf.Variable(0)
    saver = tf.train.Saver(max_to_keep=2)
    base = str(tmp_path / "m")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for i, step in enumerate([1, 2, 2, 3, 3, 3, 4, 4]):
            sess.run(v.assign(i))
            saver.save(sess, base, global_step=step)
        assert files(tmp_path) == ["checkpoint", "m-3.data-00000-of-00001", "m-3.index",
                                   "m-3.meta", "m-4.data-00000-of-00001", "m-4.index",
                                   "m-4.meta"]
    assert saver.last_checkpoints == [base + "-3", base + "-4"]
    assert tf.train.load_variable(base + "-3", "Variable") == 5
    assert tf.train.load_variable(str(tmp_path), "Variable") == 7


def _three_device_graph():
    g = tf.Graph()
    with g.as_default():
        vs = []
        for d in (1, 2, 0):
            with tf.device(f"/cpu:{d}"):
                vs.append(tf.Variable(np.full([4], d, np.float32), name=f"v{d}"))
    return g, vs


def test_sharded_saves_to_the_same_prefix_keep_tf_names(tmp_path):
    g, vs = _three_device_graph()
    with g.as_default():
        saver = tf.train.Saver(sharded=True)
    prefix = str(tmp_path / "model")
    want = ["checkpoint", "model.data-00000-of-00003", "model.data-00001-of-00003",
            "model.data-00002-of-00003", "model.index", "model.meta"]
    with tf.Session(graph=g, config=tf.ConfigProto(device_count={"CPU": 3})) as sess:
        sess.run([v.initializer for v in vs])
        for k in range(3):
            sess.run([v.assign(np.full([4], 10 * k + i, np.float32))
                      for i, v in enumerate(vs)])
            assert saver.save(sess, prefix) == prefix
            assert files(tmp_path) == want
        sess.run([v.assign(np.zeros(4, np.float32)) for v in vs])
        saver.restore(sess, prefix)
        assert _saved_values(sess, vs) == [[20.0 + i] * 4 for i in range(3)]


def _snapshot_renames(monkeypatch, src: str, images: str) -> list[str]:
    """Make every ``os.replace`` first copy directory ``src``: each copy is what a
    process killed just before that rename would leave on disk. (A sharded save runs
    its SaveV2 ops on several threads: the lock keeps copy and rename together.)"""
    real = os.replace
    out: list[str] = []
    lock = threading.Lock()

    def replace(a, b):
        with lock:
            img = os.path.join(images, f"img{len(out):03d}")
            try:
                shutil.copytree(src, img, symlinks=True)
            except shutil.Error:
                pass  # a file another thread deleted while copying: gone anyway
            out.append(img)
            return real(a, b)

    monkeypatch.setattr(os, "replace", replace)
    return out


@pytest.mark.parametrize("sharded", [False, True], ids=["single", "sharded"])
def test_a_save_killed_anywhere_leaves_a_restorable_checkpoint(tmp_path, monkeypatch,
                                                                sharded):
    """Saving step 2 again, killed before any of its renames (a copy of the directory
    stands for each moment): ``latest_checkpoint`` restores either save's values, and
    the next save's clean-up leaves TF's names only, restoring the same values."""
    monkeypatch.chdir(tmp_path)  # relative paths: the state file stays valid in copies
    g, vs = _three_device_graph()
    with g.as_default():
        saver = tf.train.Saver(sharded=sharded)
    cfg = tf.ConfigProto(device_count={"CPU": 3})
    os.mkdir("d")
    with tf.Session(graph=g, config=cfg) as sess:
        sess.run([v.initializer for v in vs])
        saver.save(sess, "d/model.ckpt", global_step=2)
        want_names = files("d")
        sess.run([v.assign(v + 100) for v in vs])
        with monkeypatch.context() as m:  # undoing it all would undo the chdir too
            images = _snapshot_renames(m, "d", "images")
            saver.save(sess, "d/model.ckpt", global_step=2)
        assert files("d") == want_names
        old = [[float(i)] * 4 for i in (1, 2, 0)]
        new = [[100.0 + i] * 4 for i in (1, 2, 0)]
        seen = set()
        for img in images:
            latest = tf.train.latest_checkpoint(img)
            assert latest == os.path.join(img, "model.ckpt-2"), img
            sess.run([v.assign(np.full(4, -1, np.float32)) for v in vs])
            saver.restore(sess, latest)
            got = _saved_values(sess, vs)
            assert got in (old, new), (img, files(img))
            seen.add(got == new)
            ck.cleanup_stale_files(img, "model.ckpt")
            assert files(img) == want_names, img  # TF's names only, no temporaries
            sess.run([v.assign(np.full(4, -1, np.float32)) for v in vs])
            saver.restore(sess, latest)
            assert _saved_values(sess, vs) == got, img
        # the copies run from "nothing renamed yet" (old values) to "data renamed, index
        # not yet" (new values, through the save's temporary index) and beyond
        assert seen == {False, True}


def test_a_failed_save_removes_its_temporaries(g, tmp_path, monkeypatch):
    v = tf.Variable([1.0, 2.0], name="v")
    saver = tf.train.Saver()
    prefix = str(tmp_path / "m")
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        saver.save(sess, prefix, global_step=2)
        before = files(tmp_path)
        sess.run(v.assign([5.0, 6.0]))
        real = os.replace

        def replace(a, b):
            if ".data-" in str(b):
                raise OSError(28, "No space left on device")
            return real(a, b)

        monkeypatch.setattr(os, "replace", replace)
        with pytest.raises(errors.ResourceExhaustedError, match="No space left"):
            saver.save(sess, prefix, global_step=2)
        monkeypatch.undo()
        assert files(tmp_path) == before
        saver.restore(sess, tf.train.latest_checkpoint(str(tmp_path)))
        assert sess.run(v).tolist() == [1.0, 2.0]


# -- var_list forms -----------------------------------------------------------------------
def test_var_list_dict_renames(tmp_path):
    prefix = str(tmp_path / "m")
    with tf.Graph().as_default():
        v = tf.Variable([1, 2], name="v")
        w = tf.Variable(3.0, name="w")
        saver = tf.train.Saver({"renamed/v": v, "other": w})
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            saver.save(sess, prefix)
    assert [n for n, _ in tf.train.list_variables(prefix)] == ["other", "renamed/v"]
    with tf.Graph().as_default():
        x = tf.Variable([0, 0], name="x")
        saver = tf.train.Saver({"renamed/v": x})  # restore a subset under another name
        with tf.Session() as sess:
            saver.restore(sess, prefix)
            assert sess.run(x).tolist() == [1, 2]


def test_var_list_list_and_errors(g):
    a = tf.Variable(1, name="a")
    b = tf.Variable(2, name="b")
    saver = tf.train.Saver([b, a])
    op = g.get_operation_by_name("save/SaveV2/tensor_names")
    assert op.get_attr("value").tolist() == [b"a", b"b"]  # sorted by name
    assert saver.saver_def.save_tensor_name.startswith("save/")
    with pytest.raises(TypeError, match="not a Variable"):
        tf.train.Saver([tf.constant(1.0)])
    with pytest.raises(TypeError, match="Variables to save should be passed in a dict or "
                       "a list"):
        tf.train.Saver(a)
    with pytest.raises(ValueError, match="same saveable will be restored with two names"):
        tf.train.Saver({"x": a, "y": a})
    tf.train.Saver([a._ref()])  # a reference tensor is a variable too


def test_no_variables(g, tmp_path):
    with pytest.raises(ValueError, match="No variables to save"):
        tf.train.Saver()
    saver = tf.train.Saver(allow_empty=True)
    with tf.Session() as sess:
        assert saver.save(sess, str(tmp_path / "m"), write_meta_graph=False) is None
        saver.restore(sess, str(tmp_path / "m"))  # a no-op
    assert files(tmp_path) == []


def test_defer_build(g, tmp_path):
    tf.Variable(5)
    saver = tf.train.Saver(defer_build=True)
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        with pytest.raises(RuntimeError, match="build"):
            saver.save(sess, str(tmp_path / "m"))
        saver.build()
        saver.save(sess, str(tmp_path / "m"))
    assert tf.train.load_variable(str(tmp_path / "m"), "Variable") == 5


def test_reshape(tmp_path):
    prefix = str(tmp_path / "m")
    with tf.Graph().as_default():
        v = tf.Variable(np.arange(6.0).reshape(2, 3), name="v")
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(v.initializer)
            saver.save(sess, prefix)
    with tf.Graph().as_default():
        v = tf.Variable(np.zeros([3, 2]), name="v")
        with tf.Session() as sess:
            with pytest.raises(errors.InvalidArgumentError):
                tf.train.Saver().restore(sess, prefix)
            tf.train.Saver(reshape=True).restore(sess, prefix)
            np.testing.assert_array_equal(sess.run(v), np.arange(6.0).reshape(3, 2))


def test_custom_saveable_object(tmp_path):
    from flowrt.saver import SaveableObject, SaveSpec

    class Pair(SaveableObject):
        """Saves two variables under one name, as "<name>/first" and "<name>/second"."""

        def __init__(self, a, b, name):
            specs = [SaveSpec(a.value(), "", name + "/first"),
                     SaveSpec(b.value(), "", name + "/second")]
            super().__init__(a, specs, name)
            self.a, self.b = a, b

        def restore(self, restored_tensors, restored_shapes):
            return tf.group(self.a.assign(restored_tensors[0]),
                            self.b.assign(restored_tensors[1]))

    prefix = str(tmp_path / "m")
    for step in ("save", "restore"):
        with tf.Graph().as_default():
            a = tf.Variable([1.0, 2.0] if step == "save" else [0.0, 0.0], name="a")
            b = tf.Variable(3 if step == "save" else 0, name="b")
            tf.add_to_collection(tf.GraphKeys.SAVEABLE_OBJECTS, Pair(a, b, "pair"))
            c = tf.Variable(4 if step == "save" else 0, name="c", collections=[])
            saver = tf.train.Saver()  # global variables + saveable objects
            with tf.Session() as sess:
                if step == "save":
                    sess.run(tf.global_variables_initializer())
                    saver.save(sess, prefix)
                    assert tf.train.list_variables(prefix) == [
                        ("a", [2]), ("b", []), ("pair/first", [2]), ("pair/second", [])]
                else:
                    saver.restore(sess, prefix)
                    assert sess.run([a, b]) == [pytest.approx([1.0, 2.0]), 3]
                    del c


# -- devices ------------------------------------------------------------------------------
def _types(graph: tf.Graph, placement: dict[str, str], op_type: str) -> dict[str, str]:
    out = {}
    for name, dev in placement.items():
        op = graph._get_operation_by_name_unsafe(name)
        if op is not None and op.type == op_type:
            out[name] = dev
    return out


@pytest.mark.parametrize("sharded", [True, False])
def test_save_ops_sit_on_the_variables_devices(tmp_path, sharded):
    g = tf.Graph()
    cfg = tf.ConfigProto(device_count={"CPU": 3})
    with g.as_default():
        vs = []
        for d in (1, 2, 0):
            with tf.device(f"/cpu:{d}"):
                vs.append(tf.Variable(np.full([4], d, np.float32), name=f"v{d}"))
                vs.append(tf.Variable([b"on", str(d).encode()], name=f"s{d}"))
        saver = tf.train.Saver(sharded=sharded)
    prefix = str(tmp_path / "model")
    with tf.Session(graph=g, config=cfg) as sess:
        sess.run([v.initializer for v in vs])
        assert saver.save(sess, prefix) == prefix
        sd = saver.saver_def
        feeds = [sd.filename_tensor_name]
        place_save = sess.placement(sd.save_tensor_name, feeds)
        place_restore = sess.placement(sd.restore_op_name, feeds)
        sess.run([v.assign(v.initial_value) for v in vs[::2]])
        sess.run([vs[0].assign(np.zeros(4, np.float32)), vs[3].assign([b"", b""])])
        saver.restore(sess, prefix)
        got = sess.run(vs)
    dev = "/job:localhost/replica:0/task:0/device:CPU:{}".format
    saves = _types(g, place_save, "SaveV2")
    restores = _types(g, place_restore, "RestoreV2")
    if sharded:
        assert sorted(saves.values()) == [dev(0), dev(1), dev(2)]
        assert sorted(restores.values()) == [dev(0), dev(1), dev(2)]
        # each shard's save op reads only the variables of its own device
        for name in saves:
            op = g.get_operation_by_name(name)
            assert {t.op.device for t in op.inputs[3:]} == {op.device}
        assert list(_types(g, place_save, "MergeV2Checkpoints").values()) == [dev(2)]
        assert files(tmp_path) == ["checkpoint", "model.data-00000-of-00003",
                                   "model.data-00001-of-00003", "model.data-00002-of-00003",
                                   "model.index", "model.meta"]
    else:  # one save op, on the first variable's device (variables sort by name)
        assert list(saves.values()) == [dev(0)]
        assert list(restores.values()) == [dev(0)]
        assert files(tmp_path) == ["checkpoint", "model.data-00000-of-00001",
                                   "model.index", "model.meta"]
    for v, x in zip(vs, got):
        if v.dtype.base_dtype is tf.string:
            assert x.tolist() == [b"on", v.op.name[1:].encode()]
        else:
            assert x.tolist() == [float(v.op.name[1:])] * 4
    assert all(place_restore[a.name] == dev(int(a.inputs[0].op.name[1:]))
               for a in g.get_operations() if a.type == "Assign" and
               a.name.startswith("save"))


def test_unsharded_save_op_follows_the_first_variable(g):
    cfg = tf.ConfigProto(device_count={"CPU": 2})
    with tf.device("/cpu:1"):
        a = tf.Variable(1.0, name="a")
    b = tf.Variable(2.0, name="b")
    saver = tf.train.Saver([a, b])
    with tf.Session(config=cfg) as sess:
        p = sess.placement(saver.saver_def.save_tensor_name,
                           [saver.saver_def.filename_tensor_name])
    assert p["save/SaveV2"].endswith("CPU:1") and p["b"].endswith("CPU:0")


# -- readers ------------------------------------------------------------------------------
def test_checkpoint_readers(g, tmp_path):
    tf.Variable(np.ones([2, 2], np.float64), name="layer/w")
    tf.Variable(3, name="step")
    saver = tf.train.Saver()
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        prefix = saver.save(sess, str(tmp_path / "m"), global_step=9)
    assert tf.train.checkpoint_exists(prefix) and not tf.train.checkpoint_exists(
        str(tmp_path / "m"))
    r = tf.train.NewCheckpointReader(prefix)
    assert r.get_variable_to_shape_map() == {"layer/w": [2, 2], "step": []}
    assert r.get_variable_to_dtype_map() == {"layer/w": tf.float64, "step": tf.int32}
    assert r.has_tensor("step") and not r.has_tensor("nope")
    np.testing.assert_array_equal(r.get_tensor("layer/w"), np.ones([2, 2]))
    assert r.get_tensor("step") == 3
    with pytest.raises(errors.NotFoundError, match="Key nope not found in checkpoint"):
        r.get_tensor("nope")
    assert tf.train.list_variables(str(tmp_path)) == [("layer/w", [2, 2]), ("step", [])]
    assert tf.train.load_checkpoint(str(tmp_path)).get_tensor("step") == 3
    os.makedirs(tmp_path / "sub")
    with pytest.raises(ValueError, match="Couldn't find 'checkpoint' file"):
        tf.train.load_checkpoint(str(tmp_path / "sub"))
    with pytest.raises(errors.NotFoundError):
        tf.train.NewCheckpointReader(str(tmp_path / "absent"))
    tf.train.remove_checkpoint(prefix)
    assert files(tmp_path) == ["checkpoint", "sub"]


# -- errors -------------------------------------------------------------------------------
@pytest.fixture
def saved_model(tmp_path):
    prefix = str(tmp_path / "m")
    with tf.Graph().as_default():
        tf.Variable(np.arange(1000, dtype=np.float32), name="v")
        tf.Variable([b"abc", b"de"], name="names")
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            saver.save(sess, prefix)
    return prefix


def _restore(prefix: str, extra: bool = False, shape: int = 1000) -> None:
    with tf.Graph().as_default():
        v = tf.Variable(np.zeros(shape, np.float32), name="v")
        tf.Variable([b"", b""], name="names")
        if extra:
            tf.Variable(0, name="v2")
        saver = tf.train.Saver()
        with tf.Session() as sess:
            saver.restore(sess, prefix)
            assert sess.run(v)[999] == 999.0


def test_missing_variable(saved_model):
    with pytest.raises(errors.NotFoundError, match="Key v2 not found in checkpoint") as e:
        _restore(saved_model, extra=True)
    assert "Restoring from checkpoint failed" in str(e.value)


def test_shape_mismatch_names_the_variable(saved_model):
    with pytest.raises(errors.InvalidArgumentError, match=r"variable v\b.*lhs shape= \[999\] "
                       r"rhs shape= \[1000\]"):
        _restore(saved_model, shape=999)


def test_dtype_mismatch(saved_model):
    with tf.Graph().as_default():
        tf.Variable(np.zeros(1000, np.float64), name="v")
        saver = tf.train.Saver()
        with tf.Session() as sess:
            with pytest.raises(errors.InvalidArgumentError, match="expected dtype double|"
                               "expected dtype float64"):
                saver.restore(sess, saved_model)


def test_missing_checkpoint(saved_model):
    with pytest.raises(ValueError, match="The passed save_path is not a valid checkpoint: "
                       + re.escape(saved_model + "x")):
        _restore(saved_model + "x")
    with tf.Graph().as_default():
        tf.Variable(1.0)
        saver = tf.train.Saver()
        with tf.Session() as sess:
            with pytest.raises(ValueError, match="Can't load save_path when it is None"):
                saver.restore(sess, None)


def test_uninitialized_variable_cannot_be_saved(g, tmp_path):
    tf.Variable(1.0, name="u")
    saver = tf.train.Saver()
    with tf.Session() as sess:
        with pytest.raises(errors.FailedPreconditionError, match="uninitialized value u"):
            saver.save(sess, str(tmp_path / "m"))
    assert not tf.train.checkpoint_exists(str(tmp_path / "m"))


def test_truncated_data_file(saved_model):
    data = saved_model + ".data-00000-of-00001"
    with open(data, "r+b") as f:
        f.truncate(os.path.getsize(data) // 2)
    with pytest.raises(errors.DataLossError, match=re.escape(data)):
        _restore(saved_model)


def test_flipped_byte_in_data_file(saved_model):
    data = saved_model + ".data-00000-of-00001"
    b = bytearray(open(data, "rb").read())
    b[len(b) // 2] ^= 0x10
    open(data, "wb").write(bytes(b))
    with pytest.raises(errors.DataLossError, match=re.escape(data) + ".*checksum"):
        _restore(saved_model)


def test_flipped_byte_in_index_file(saved_model):
    index = saved_model + ".index"
    b = bytearray(open(index, "rb").read())
    b[len(b) // 2] ^= 0x01
    open(index, "wb").write(bytes(b))
    with pytest.raises(errors.DataLossError, match=re.escape(index)):
        _restore(saved_model)


def test_deleted_data_file(saved_model):
    data = saved_model + ".data-00000-of-00001"
    os.unlink(data)
    with pytest.raises(errors.NotFoundError, match=re.escape(data) + " is missing"):
        _restore(saved_model)


# -- meta graphs --------------------------------------------------------------------------
def test_meta_graph_round_trip(tmp_path):
    prefix = str(tmp_path / "m")
    with tf.Graph().as_default():
        with tf.device("/cpu:0"):
            w = tf.Variable([[1.0, 2.0]], name="w")
        steps = tf.Variable(5, name="steps", trainable=False)
        x = tf.placeholder(tf.float32, [None, 2], name="x")
        y = tf.reduce_sum(x * w, name="y")
        tf.add_to_collection("outputs", y)
        tf.add_to_collection("numbers", 3)
        tf.add_to_collection("names", "hello")
        saver = tf.train.Saver()
        with tf.Session() as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(steps.assign(11))
            saver.save(sess, prefix)
    mg = meta_graph_pb2.MetaGraphDef()
    mg.ParseFromString(open(prefix + ".meta", "rb").read())
    assert mg.saver_def.restore_op_name == "save/restore_all"
    assert {n.name for n in mg.graph_def.node} >= {"w", "steps", "x", "y", "save/SaveV2"}
    assert set(mg.collection_def) >= {"variables", "trainable_variables", "outputs",
                                      "numbers", "names"}
    with tf.Graph().as_default() as g2:
        saver = tf.train.import_meta_graph(prefix + ".meta")
        assert [v.op.name for v in tf.global_variables()] == ["w", "steps"]
        assert [v.op.name for v in tf.trainable_variables()] == ["w"]
        assert tf.get_collection("numbers") == [3]
        assert tf.get_collection("names") == [b"hello"]
        (y2,) = tf.get_collection("outputs")
        with tf.Session() as sess:
            saver.restore(sess, prefix)
            assert sess.run(tf.global_variables()[1]) == 11
            assert sess.run(y2, {g2.get_tensor_by_name("x:0"): [[1.0, 1.0]]}) == 3.0
            # the imported saver saves again
            out = saver.save(sess, str(tmp_path / "again"), global_step=1)
        assert tf.train.load_variable(out, "steps") == 11


def test_import_meta_graph_keeps_shape_checks(tmp_path):
    prefix = str(tmp_path / "m")
    with tf.Graph().as_default():
        tf.Variable(np.zeros(3), name="v")
        with tf.Session() as sess:
            tf.global_variables_initializer().run()
            tf.train.Saver().save(sess, prefix)
    other = str(tmp_path / "o")
    with tf.Graph().as_default():
        tf.Variable(np.zeros(4), name="v")
        with tf.Session() as sess:
            tf.global_variables_initializer().run()
            tf.train.Saver().save(sess, other, write_meta_graph=False)
    with tf.Graph().as_default():
        saver = tf.train.import_meta_graph(prefix + ".meta", clear_devices=True)
        with tf.Session() as sess:
            with pytest.raises(errors.InvalidArgumentError, match="lhs shape= \\[3\\]"):
                saver.restore(sess, other)


def test_export_meta_graph_as_text(g, tmp_path):
    tf.Variable(1.0, name="v")
    saver = tf.train.Saver()
    path = str(tmp_path / "g.pbtxt")
    mg = saver.export_meta_graph(path, as_text=True)
    assert 'restore_op_name: "save/restore_all"' in open(path).read()
    with tf.Graph().as_default():
        s2 = tf.train.import_meta_graph(path, import_scope="imported")
        assert s2.saver_def.restore_op_name == "imported/save/restore_all"
        assert [v.op.name for v in tf.global_variables()] == ["imported/v"]
    info = mg.meta_info_def  # TF's version string, or flowrt's (meta_graph.py decides)
    assert "flowrt" in info.tensorflow_version + info.tensorflow_git_version


# -- crash safety ---------------------------------------------------------------------------
# A process that imports flowrt once and then, per request "<dir> <mode> <first step>",
# forks a child saving in a loop (printing each finished step); the test SIGKILLs the
# child at a random moment. Forking saves the ~1 s start-up of a fresh interpreter.
_ZYGOTE = textwrap.dedent("""
    import os
    import sys
    import numpy as np
    import flowrt as tf

    tf.train.Saver  # build the runtime once, before forking

    def run(d, mode, k):
        vs = []
        for i in range(4):  # 4 MB of float32 over two devices
            with tf.device("/cpu:%d" % (i % 2)):
                vs.append(tf.Variable(tf.zeros([256, 1024]), name="v%d" % i))
        tag = tf.Variable(b"", name="tag")
        val = tf.placeholder(tf.float32, [])
        tag_in = tf.placeholder(tf.string, [])
        ups = [tf.assign(v, tf.fill([256, 1024], val)) for v in vs]
        ups.append(tf.assign(tag, tag_in))
        saver = tf.train.Saver(max_to_keep=3, sharded=(mode == "sharded"))
        state = tf.train.get_checkpoint_state(d)
        if state is not None:  # keep deleting what earlier processes saved
            saver.recover_last_checkpoints(list(state.all_model_checkpoint_paths))
        with tf.Session(config=tf.ConfigProto(device_count={"CPU": 2})) as sess:
            sess.run(tf.global_variables_initializer())
            while True:
                sess.run(ups, {val: float(k), tag_in: str(k)})
                if mode == "fixed":
                    saver.save(sess, d + "/fixed.ckpt")
                else:
                    saver.save(sess, d + "/model.ckpt", global_step=k)
                print(k, flush=True)
                k += 1

    for line in sys.stdin:
        d, mode, k = line.split()
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            try:
                print("pid", os.getpid(), flush=True)
                run(d, mode, int(k))
            finally:
                os._exit(1)
        os.waitpid(pid, 0)
        print("dead", flush=True)
""")


def _consistent_dir(d: str) -> None:
    names = os.listdir(d)
    assert not [n for n in names if ck.is_temp_name(n)], names
    for n in names:
        if ".data-" in n:
            prefix = os.path.join(d, n[:n.index(".data-")])
            r = ck.CheckpointReader(prefix)  # every data file belongs to a complete one
            assert n in {os.path.basename(p) for p, _ in r._shards}, n


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_killed_saves_leave_the_previous_checkpoint_intact(tmp_path):
    d = str(tmp_path)
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    g = tf.Graph()
    with g.as_default():
        vs = []
        for i in range(4):
            with tf.device("/cpu:%d" % (i % 2)):
                vs.append(tf.Variable(tf.zeros([256, 1024]), name="v%d" % i))
        tag = tf.Variable(b"", name="tag")
        saver = tf.train.Saver()
    sess = tf.Session(graph=g, config=tf.ConfigProto(device_count={"CPU": 2}))
    zygote = subprocess.Popen([sys.executable, "-c", _ZYGOTE], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    watchdog = threading.Timer(120, zygote.kill)  # a hang fails the test, never blocks it
    watchdog.start()
    k = 0
    modes = ["step", "sharded", "fixed"]
    try:
        for rnd in range(10):
            mode = modes[rnd % 3]
            zygote.stdin.write(f"{d} {mode} {k}\n")
            zygote.stdin.flush()
            head = zygote.stdout.readline().split()
            assert head[:1] == ["pid"], (rnd, head)
            first = zygote.stdout.readline()
            assert first.strip() == str(k), (rnd, first)
            time.sleep(rng.uniform(0.0, 0.3))
            os.kill(int(head[1]), signal.SIGKILL)
            printed = [int(first)]
            for line in iter(zygote.stdout.readline, ""):
                if line.strip() == "dead":
                    break
                printed.append(int(line))
            last = printed[-1]
            latest = tf.train.latest_checkpoint(d)
            assert latest is not None, f"round {rnd} (seed {seed}): no complete checkpoint"
            saver.restore(sess, latest)
            values = sess.run(vs + [tag])
            got = int(values[-1])
            # the newest save that finished, or the one being made when the process died
            assert got in (last, last + 1), (rnd, seed, got, last)
            for x in values[:-1]:
                assert x.shape == (256, 1024) and (x == float(got)).all(), (rnd, seed)
            want = d + ("/fixed.ckpt" if mode == "fixed" else f"/model.ckpt-{got}")
            assert latest == want, (rnd, seed)
            k = last + 2
        # what the killed saves left behind is cleaned by the next save
        with g.as_default():
            for prefix in ("fixed.ckpt", "model.ckpt"):
                tf.train.Saver(max_to_keep=3).save(sess, os.path.join(d, prefix))
        _consistent_dir(d)
    finally:
        watchdog.cancel()
        zygote.stdin.close()
        zygote.wait(timeout=30)
        zygote.stdout.close()
        sess.close()
