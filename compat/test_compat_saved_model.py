"""SavedModels against TensorFlow, both ways: TF writes (SavedModelBuilder, two
signatures, an asset read by the main op, two meta graphs) and flowrt loads and serves
the same outputs; flowrt writes the same model and TF's loader serves the same outputs;
``flowrt inspect`` prints the signatures as ``saved_model_cli show --all`` does."""
from __future__ import annotations

import contextlib
import io
import json
import os

import numpy as np
import pytest

from compat_harness import flowrt_module, tf_module

X = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0], [0.25, -4.0, 1.0]], np.float32)
KERNEL = [[0.5, -1.0, 0.25], [1.5, 0.0, -0.5], [-0.75, 0.5, 1.0]]
BIAS = [0.1, -0.2, 0.3]
LABELS = b"cat\ndog\nbird\n"
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                        "tf_saved_model")


def _examples(tf):
    out = []
    for row in X:
        ex = tf.train.Example(features=tf.train.Features(feature={
            "x": tf.train.Feature(float_list=tf.train.FloatList(value=list(row)))}))
        out.append(ex.SerializeToString())
    return out


def _parse(tf, examples):
    """The "x" feature of serialized tf.Examples, by the ParseExample op TF 1.15 wrote
    (TF 2's tf.io.parse_example emits ParseExampleV2, which flowrt does not have)."""
    if tf is tf_module():
        from tensorflow.python.ops import gen_parsing_ops

        return gen_parsing_ops.parse_example(
            examples, names=[], sparse_keys=[], dense_keys=["x"],
            dense_defaults=[tf.constant([], tf.float32)], sparse_types=[],
            dense_shapes=[[3]], name="ParseExample")[3][0]
    return tf.io.parse_example(examples, {"x": tf.io.FixedLenFeature([3], tf.float32)})["x"]


def _build_and_save(tf, export_dir, vocab_path):
    """The same program under either module: build, save, return the outputs it
    computes before saving ({signature: {output: value}})."""
    with tf.Graph().as_default(), tf.Session() as sess:
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        kernel = tf.get_variable("dense/kernel", initializer=tf.constant(KERNEL))
        bias = tf.get_variable("dense/bias", initializer=tf.constant(BIAS))
        logits = tf.nn.bias_add(tf.matmul(x, kernel), bias, name="logits")
        probs = tf.nn.softmax(logits, name="probabilities")
        examples = tf.placeholder(tf.string, [None], name="tf_example")
        scores = tf.nn.softmax(tf.nn.bias_add(tf.matmul(_parse(tf, examples), kernel), bias),
                               name="scores")
        asset = tf.constant(vocab_path, name="labels_path")
        labels = tf.Variable(["", "", ""], trainable=False, name="class_labels",
                             collections=[tf.GraphKeys.LOCAL_VARIABLES])
        classes = tf.gather(labels, tf.argmax(scores, 1), name="classes")
        with tf.control_dependencies([tf.local_variables_initializer()]):
            fill = tf.assign(labels, tf.string_split([tf.read_file(asset)], "\n").values)
        main_op = tf.group(fill, name="main_op")
        sess.run(tf.global_variables_initializer())
        sess.run(kernel.assign(tf.constant(KERNEL) * 2.0))  # saved values != initial
        sigs = {"serving_default": tf.saved_model.predict_signature_def(
                    {"x": x}, {"probabilities": probs, "logits": logits}),
                "classify": tf.saved_model.classification_signature_def(
                    examples, classes, scores)}
        b = tf.saved_model.builder.SavedModelBuilder(export_dir)
        b.add_meta_graph_and_variables(sess, ["serve"], signature_def_map=sigs,
                                       assets_collection=[asset], main_op=main_op)
        doubled = tf.multiply(logits, 2.0, name="doubled")
        b.add_meta_graph(["train"], signature_def_map={
            "double": tf.saved_model.predict_signature_def({"x": x}, {"d": doubled})})
        b.save()
        sess.run(main_op)
        lg, pr, cl, sc, db = sess.run([logits, probs, classes, scores, doubled],
                                      {x: X, examples: _examples(tf)})
    return {"serving_default": {"logits": lg, "probabilities": pr},
            "classify": {"classes": cl, "scores": sc}, "double": {"d": db}}


def _load_and_serve(tf, export_dir):
    """Load both meta graphs of export_dir with ``tf`` and serve every signature."""
    got = {}
    for tags in (["serve"], ["train"]):
        with tf.Graph().as_default(), tf.Session() as sess:
            mg = tf.saved_model.loader.load(sess, tags, export_dir)
            for key, sig in mg.signature_def.items():
                feeds = {sig.inputs[k].name: (X if k == "x" else _examples(tf))
                         for k in sig.inputs}
                got[key] = sess.run({k: v.name for k, v in sig.outputs.items()}, feeds)
    return got


def _compare(want, got):
    assert sorted(want) == sorted(got)
    for key in want:
        assert sorted(want[key]) == sorted(got[key]), key
        for out in want[key]:
            w, g = np.asarray(want[key][out]), np.asarray(got[key][out])
            if w.dtype.kind in "SO":
                assert list(w) == list(g), (key, out)
            else:
                np.testing.assert_allclose(g, w, rtol=1e-6, err_msg=f"{key}/{out}")


@pytest.fixture
def vocab(tmp_path):
    p = tmp_path / "labels.txt"
    p.write_bytes(LABELS)
    return str(p)


def test_tf_writes_flowrt_loads_and_serves(tmp_path, vocab):
    export = str(tmp_path / "tf_model")
    want = _build_and_save(tf_module(), export, vocab)
    os.remove(vocab)  # the loader must feed the copy under assets/
    got = _load_and_serve(flowrt_module(), export)
    _compare(want, got)


def test_flowrt_writes_tf_loads_and_serves(tmp_path, vocab):
    export = str(tmp_path / "flowrt_model")
    want = _build_and_save(flowrt_module(), export, vocab)
    os.remove(vocab)
    got = _load_and_serve(tf_module(), export)
    _compare(want, got)


def test_checked_in_fixture_matches_tf(tmp_path):
    """The fixture tests/ serves without TF still loads in TF with the recorded values."""
    with open(os.path.join(FIXTURES, "expected.json"), encoding="utf-8") as f:
        want = json.load(f)["classifier"]
    tf = tf_module()
    with tf.Graph().as_default(), tf.Session() as sess:
        mg = tf.saved_model.loader.load(sess, ["serve"], os.path.join(FIXTURES,
                                                                      "classifier"))
        sig = mg.signature_def["serving_default"]
        got = sess.run(sig.outputs["probabilities"].name, {sig.inputs["x"].name: want["x"]})
    np.testing.assert_allclose(got, want["probabilities"], rtol=1e-6)


def _signature_lines(text):
    """The tag-set and signature lines of `saved_model_cli show --all` / flowrt inspect
    (without TF's op lists and functions, or flowrt's variables)."""
    keep = []
    for line in text.splitlines():
        if line.startswith(("variables:", "Concrete Functions", "Defined Functions")):
            break
        if line.strip() and not line.startswith("The MetaGraph with tag set"):
            keep.append(line)
    return keep


@pytest.mark.parametrize("which", ["fixture", "flowrt"])
def test_inspect_prints_signatures_as_saved_model_cli(tmp_path, vocab, which):
    from tensorflow.python.tools import saved_model_cli
    from flowrt.tools.inspect import describe_saved_model

    if which == "fixture":
        export = os.path.join(FIXTURES, "classifier")
    else:
        export = str(tmp_path / "m")
        _build_and_save(flowrt_module(), export, vocab)
    ours = io.StringIO()
    describe_saved_model(export, ours)
    theirs = io.StringIO()
    with contextlib.redirect_stdout(theirs):
        try:
            saved_model_cli._show_all(export)
        except Exception:  # TF 2's function listing after the signatures; not compared
            pass
    assert _signature_lines(ours.getvalue()) == _signature_lines(theirs.getvalue())
    assert len(_signature_lines(ours.getvalue())) > 20
