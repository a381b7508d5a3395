"""Write tests/data/tf_saved_model/ with TensorFlow (run from the checkout with
``TF_USE_LEGACY_KERAS=1 ../tf-venv/bin/python compat/make_tf_saved_model_fixtures.py``).

- ``classifier/``: a SavedModel written by ``tf.saved_model.builder.SavedModelBuilder``:
  a softmax classifier (variables ``dense/kernel`` [3, 3], ``dense/bias`` [3]) with two
  signatures on the ``serve`` meta graph, ``serving_default`` (predict: ``x`` ->
  ``probabilities``, ``logits``) and ``classify`` (classify: serialized tf.Examples ->
  ``classes``, ``scores``), an asset file ``labels.txt`` that the main op reads into the
  local variable ``class_labels``, and a second meta graph tagged ``train`` with a
  ``loss`` signature;
- ``half_plus_two/``: ``y = 0.5 * x + 2`` written by ``simple_save`` as ``saved_model.pbtxt``
  (text format);
- ``expected.json``: the feeds (the tf.Examples as base64) and what TensorFlow computed
  for each signature.

The graphs use the ops TF 1.15 wrote (ParseExample, not TF 2's ParseExampleV2).
"""
import base64
import json
import os
import shutil
import tempfile

import numpy as np
import tensorflow.compat.v1 as tf
from tensorflow.python.ops import gen_parsing_ops

tf.disable_v2_behavior()
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data",
                   "tf_saved_model")
X = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0], [0.0, 0.0, 0.0], [3.0, -2.0, 1.0]],
             np.float32)
LABELS = ["cat", "dog", "bird"]


def _examples(x):
    out = []
    for row in x:
        ex = tf.train.Example(features=tf.train.Features(feature={
            "x": tf.train.Feature(float_list=tf.train.FloatList(value=list(row)))}))
        out.append(ex.SerializeToString())
    return out


def build_classifier(export_dir, vocab_path):
    """Build, save with two meta graphs; return what TF computes for each signature."""
    with tf.Graph().as_default(), tf.Session() as sess:
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        kernel = tf.get_variable("dense/kernel", initializer=tf.constant(
            [[0.5, -1.0, 0.25], [1.5, 0.0, -0.5], [-0.75, 0.5, 1.0]]))
        bias = tf.get_variable("dense/bias", initializer=tf.constant([0.1, -0.2, 0.3]))
        logits = tf.nn.bias_add(tf.matmul(x, kernel), bias, name="logits")
        probs = tf.nn.softmax(logits, name="probabilities")

        examples = tf.placeholder(tf.string, [None], name="tf_example")
        parsed = gen_parsing_ops.parse_example(
            examples, names=[], sparse_keys=[], dense_keys=["x"],
            dense_defaults=[tf.constant([], tf.float32)], sparse_types=[],
            dense_shapes=[[3]], name="ParseExample")
        xc = parsed[3][0]
        scores = tf.nn.softmax(tf.nn.bias_add(tf.matmul(xc, kernel), bias), name="scores")

        asset = tf.constant(vocab_path, name="labels_path")
        tf.add_to_collection(tf.GraphKeys.ASSET_FILEPATHS, asset)
        class_labels = tf.Variable(["", "", ""], trainable=False, name="class_labels",
                                   collections=[tf.GraphKeys.LOCAL_VARIABLES])
        classes = tf.gather(class_labels, tf.argmax(scores, 1), name="classes")
        local_init = tf.local_variables_initializer()
        with tf.control_dependencies([local_init]):
            fill = tf.assign(class_labels, tf.string_split(
                [tf.read_file(asset)], delimiter="\n").values)
        main_op = tf.group(fill, name="main_op")

        y = tf.placeholder(tf.int64, [None], name="y")
        loss = tf.losses.sparse_softmax_cross_entropy(y, logits)

        sess.run(tf.global_variables_initializer())
        sigs = {
            "serving_default": tf.saved_model.predict_signature_def(
                {"x": x}, {"probabilities": probs, "logits": logits}),
            "classify": tf.saved_model.classification_signature_def(
                examples, classes, scores),
        }
        b = tf.saved_model.builder.SavedModelBuilder(export_dir)
        b.add_meta_graph_and_variables(sess, [tf.saved_model.tag_constants.SERVING],
                                       signature_def_map=sigs,
                                       assets_collection=[asset], main_op=main_op)
        b.add_meta_graph([tf.saved_model.tag_constants.TRAINING], signature_def_map={
            "loss": tf.saved_model.build_signature_def(
                {"x": tf.saved_model.build_tensor_info(x),
                 "y": tf.saved_model.build_tensor_info(y)},
                {"loss": tf.saved_model.build_tensor_info(loss)}, "loss")})
        b.save()
        sess.run(main_op)
        ex = _examples(X)
        lg, pr, cl, sc, ls = sess.run([logits, probs, classes, scores, loss],
                                      {x: X, examples: ex, y: [0, 1, 2, 0]})
    return {"x": X.tolist(), "examples_b64": [base64.b64encode(e).decode() for e in ex],
            "y": [0, 1, 2, 0], "logits": lg.tolist(), "probabilities": pr.tolist(),
            "classes": [c.decode() for c in cl], "scores": sc.tolist(), "loss": float(ls)}


def build_half_plus_two(export_dir):
    """y = a * x + b with a = 0.5, b = 2, written as text by a builder."""
    with tf.Graph().as_default(), tf.Session() as sess:
        a = tf.Variable(0.5, name="a")
        b = tf.Variable(2.0, name="b")
        x = tf.placeholder(tf.float32, name="x")
        y = tf.add(tf.multiply(a, x), b, name="y")
        sess.run(tf.global_variables_initializer())
        builder = tf.saved_model.builder.SavedModelBuilder(export_dir)
        builder.add_meta_graph_and_variables(
            sess, [tf.saved_model.tag_constants.SERVING], signature_def_map={
                "serving_default": tf.saved_model.predict_signature_def({"x": x},
                                                                        {"y": y})},
            clear_devices=True)
        builder.save(as_text=True)
        return {"x": [1.0, 2.0, 5.0], "y": sess.run(y, {x: [1.0, 2.0, 5.0]}).tolist()}


def main():
    if os.path.exists(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    tmp = tempfile.mkdtemp()
    # the asset is named relative to a scratch directory: the graph keeps the path it was
    # given, and the fixture must not hold a path of the machine that made it
    vocab = "labels.txt"
    here = os.getcwd()
    os.chdir(tmp)
    try:
        with open(vocab, "w") as f:
            f.write("\n".join(LABELS) + "\n")
        expected = {"classifier": build_classifier(os.path.join(OUT, "classifier"), vocab),
                    "half_plus_two": build_half_plus_two(os.path.join(OUT, "half_plus_two"))}
    finally:
        os.chdir(here)
        shutil.rmtree(tmp)
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
    for root, _, files in os.walk(OUT):
        for name in sorted(files):
            p = os.path.join(root, name)
            print(os.path.relpath(p, OUT), os.path.getsize(p))


if __name__ == "__main__":
    main()
