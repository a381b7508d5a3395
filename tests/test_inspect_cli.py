"""``flowrt inspect PATH``: checkpoints, SavedModels and graph files (the TF-written
fixtures of tests/data/tf_saved_model and files flowrt writes)."""
from __future__ import annotations

import os
import shutil

import pytest

import flowrt as tf
from flowrt.cli import main

DATA = os.path.join(os.path.dirname(__file__), "data", "tf_saved_model")
CLASSIFIER = os.path.join(DATA, "classifier")


def _inspect(capsys, *args):
    rc = main(["inspect", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_saved_model_signatures_as_saved_model_cli_prints_them(capsys):
    rc, out, err = _inspect(capsys, CLASSIFIER)
    assert rc == 0, err
    assert out.startswith("MetaGraphDef with tag-set: 'serve' contains the following "
                          "SignatureDefs:\n\nsignature_def['classify']:\n")
    assert """signature_def['serving_default']:
  The given SavedModel SignatureDef contains the following input(s):
    inputs['x'] tensor_info:
        dtype: DT_FLOAT
        shape: (-1, 3)
        name: x:0
  The given SavedModel SignatureDef contains the following output(s):
    outputs['logits'] tensor_info:
        dtype: DT_FLOAT
        shape: (-1, 3)
        name: logits:0
    outputs['probabilities'] tensor_info:
        dtype: DT_FLOAT
        shape: (-1, 3)
        name: probabilities:0
  Method name is: tensorflow/serving/predict
""" in out
    assert """    outputs['classes'] tensor_info:
        dtype: DT_STRING
        shape: (-1)
        name: classes:0""" in out
    assert "MetaGraphDef with tag-set: 'train' contains the following SignatureDefs:" in out
    assert "        shape: ()\n        name: sparse_softmax_cross_entropy_loss/value:0" in out
    assert out.endswith("variables:\n  dense/bias (DT_FLOAT) [3]\n"
                        "  dense/kernel (DT_FLOAT) [3,3]\n")


def test_text_saved_model_and_unknown_rank(capsys):
    rc, out, _ = _inspect(capsys, os.path.join(DATA, "half_plus_two", "saved_model.pbtxt"))
    assert rc == 0
    assert "    inputs['x'] tensor_info:\n        dtype: DT_FLOAT\n" \
           "        shape: unknown_rank\n        name: x:0\n" in out


def test_checkpoint_variables_and_one_tensor(capsys):
    prefix = os.path.join(CLASSIFIER, "variables", "variables")
    for path in (prefix, prefix + ".index", prefix + ".data-00000-of-00001"):
        rc, out, _ = _inspect(capsys, path)
        assert rc == 0
        assert out == "dense/bias (DT_FLOAT) [3]\ndense/kernel (DT_FLOAT) [3,3]\n"
    rc, out, _ = _inspect(capsys, prefix, "--tensor", "dense/bias")
    assert rc == 0
    assert out == "tensor_name:  dense/bias\n[ 0.1 -0.2  0.3]\n"
    rc, out, _ = _inspect(capsys, CLASSIFIER, "--tensor", "dense/kernel")
    assert out.splitlines()[0] == "tensor_name:  dense/kernel" and len(out.splitlines()) == 4


def test_checkpoint_directory_uses_the_state_file(tmp_path, capsys):
    with tf.Graph().as_default(), tf.Session() as sess:
        tf.get_variable("emb", initializer=tf.zeros([4, 2], tf.float64))
        tf.Variable(["a", "bc"], name="words")
        gs = tf.train.get_or_create_global_step()
        sess.run(tf.global_variables_initializer())
        tf.train.Saver().save(sess, str(tmp_path / "model.ckpt"), global_step=gs)
    rc, out, _ = _inspect(capsys, str(tmp_path))
    assert rc == 0
    assert out == ("emb (DT_DOUBLE) [4,2]\nglobal_step (DT_INT64) []\n"
                   "words (DT_STRING) [2]\n")
    rc, out, _ = _inspect(capsys, str(tmp_path), "--tensor", "words")
    assert out == "tensor_name:  words\n[b'a' b'bc']\n"


def test_graph_def_and_meta_graph(tmp_path, capsys):
    with tf.Graph().as_default() as g:
        x = tf.placeholder(tf.float32, [None, 2], name="x")
        w = tf.Variable([[1.0], [2.0]], name="w")
        tf.add(tf.matmul(x, w), 1.0, name="y")
        tf.train.write_graph(g, str(tmp_path), "g.pbtxt", as_text=True)
        tf.train.write_graph(g, str(tmp_path), "g.pb", as_text=False)
        tf.train.export_meta_graph(str(tmp_path / "m.meta"))
    for name in ("g.pb", "g.pbtxt"):
        rc, out, err = _inspect(capsys, str(tmp_path / name))
        assert rc == 0, err
        lines = out.splitlines()
        assert lines[0] == f"GraphDef: {tmp_path / name}"
        assert "placeholders:\n  x: DT_FLOAT (-1, 2)\n" in out
        assert out.endswith("outputs:\n  y (AddV2)\n") or out.endswith("outputs:\n  y (Add)\n")
        assert any(l.split() == ["MatMul", "1"] for l in lines)
        assert any(l.split() == ["Const", "2"] for l in lines)
    rc, out, _ = _inspect(capsys, str(tmp_path / "m.meta"))
    assert rc == 0
    assert out.startswith(f"MetaGraphDef: {tmp_path / 'm.meta'}\ntags: (none)\n")
    assert "collections: trainable_variables, variables\n" in out
    assert "  x: DT_FLOAT (-1, 2)" in out


def test_errors_name_the_path(tmp_path, capsys):
    missing = str(tmp_path / "nope")
    rc, out, err = _inspect(capsys, missing)
    assert rc == 1 and out == ""
    assert err == f"flowrt inspect: {missing}: no such file, directory or checkpoint prefix\n"
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x00\x01 not a graph \xff")
    rc, _, err = _inspect(capsys, str(junk))
    assert rc == 1 and str(junk) in err and "is not a GraphDef" in err
    rc, _, err = _inspect(capsys, str(tmp_path))
    assert rc == 1 and "holds no SavedModel" in err and str(tmp_path) in err
    rc, _, err = _inspect(capsys, os.path.join(CLASSIFIER, "variables", "variables"),
                          "--tensor", "nope")
    assert rc == 1 and "Key nope not found in checkpoint" in err
    bad = tmp_path / "bad"
    shutil.copytree(CLASSIFIER, bad)
    (bad / "saved_model.pb").write_bytes(b"\xff\xff garbage")
    rc, _, err = _inspect(capsys, str(bad))
    assert rc == 1 and f"Cannot parse file {bad / 'saved_model.pb'}" in err


def test_inspect_path_raises_not_found_error(tmp_path):
    from flowrt.tools.inspect import inspect_path
    with pytest.raises(tf.errors.NotFoundError, match="no such file"):
        inspect_path(str(tmp_path / "x"), None)
