"""SavedModels written by TensorFlow (tests/data/tf_saved_model, made by
compat/make_tf_saved_model_fixtures.py) load and serve in flowrt with TF's values."""
from __future__ import annotations

import base64
import json
import os
import shutil

import numpy as np
import pytest

import flowrt as tf
from flowrt.modeling import saved_model as sm

DATA = os.path.join(os.path.dirname(__file__), "data", "tf_saved_model")
CLASSIFIER = os.path.join(DATA, "classifier")
HALF = os.path.join(DATA, "half_plus_two")

with open(os.path.join(DATA, "expected.json"), encoding="utf-8") as _f:
    EXPECTED = json.load(_f)


def _examples():
    return [base64.b64decode(e) for e in EXPECTED["classifier"]["examples_b64"]]


def _serve(sess, signature, feeds):
    """Run a signature: {input key: value} -> {output key: value}."""
    return sess.run({k: v.name for k, v in signature.outputs.items()},
                    {signature.inputs[k].name: v for k, v in feeds.items()})


def test_both_signatures_serve_tf_values():
    want = EXPECTED["classifier"]
    with tf.Graph().as_default(), tf.Session() as sess:
        mg = tf.saved_model.loader.load(sess, [tf.saved_model.tag_constants.SERVING],
                                        CLASSIFIER)
        assert sorted(mg.signature_def) == ["classify", "serving_default"]
        pred = mg.signature_def[tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY]
        assert pred.method_name == tf.saved_model.PREDICT_METHOD_NAME
        out = _serve(sess, pred, {"x": np.array(want["x"], np.float32)})
        np.testing.assert_allclose(out["logits"], want["logits"], rtol=1e-6)
        np.testing.assert_allclose(out["probabilities"], want["probabilities"], rtol=1e-6)
        cls = mg.signature_def["classify"]
        assert tf.saved_model.is_valid_signature(cls)
        out = _serve(sess, cls, {"inputs": _examples()})
        # the class names come from the asset file, read by the main op at load time
        assert [c.decode() for c in out["classes"]] == want["classes"]
        np.testing.assert_allclose(out["scores"], want["scores"], rtol=1e-6)


def test_main_op_read_the_asset_copied_into_the_saved_model(tmp_path):
    """The asset tensor's constant is TF's temporary path (gone); the loader feeds it
    the copy under assets/, wherever the SavedModel now is."""
    moved = str(tmp_path / "moved")
    shutil.copytree(CLASSIFIER, moved)
    mg = sm.parse_saved_model(moved).meta_graphs[0]
    assets = sm.get_asset_tensors(moved, mg)
    assert assets == {"labels_path:0": os.path.join(moved, "assets", "labels.txt")}
    with tf.Graph().as_default() as g, tf.Session() as sess:
        tf.saved_model.load(sess, ["serve"], moved)
        labels = g.get_tensor_by_name("class_labels:0")
        assert list(sess.run(labels)) == [b"cat", b"dog", b"bird"]


def test_train_meta_graph_and_its_loss():
    want = EXPECTED["classifier"]
    with tf.Graph().as_default(), tf.Session() as sess:
        mg = tf.saved_model.loader.load(sess, ["train"], CLASSIFIER)
        assert list(mg.meta_info_def.tags) == ["train"]
        out = _serve(sess, mg.signature_def["loss"],
                     {"x": np.array(want["x"], np.float32), "y": want["y"]})
        np.testing.assert_allclose(out["loss"], want["loss"], rtol=1e-6)


def test_import_scope_prefixes_every_name():
    want = EXPECTED["classifier"]
    with tf.Graph().as_default() as g, tf.Session() as sess:
        mg = tf.saved_model.loader.load(sess, ["serve"], CLASSIFIER, import_scope="m")
        sig = mg.signature_def["serving_default"]
        assert sig.inputs["x"].name == "x:0"  # the returned proto is not scoped
        x = tf.saved_model.utils.get_tensor_from_tensor_info(sig.inputs["x"],
                                                             import_scope="m")
        assert x.name == "m/x:0"
        p = tf.saved_model.get_tensor_from_tensor_info(sig.outputs["probabilities"],
                                                        graph=g, import_scope="m")
        np.testing.assert_allclose(sess.run(p, {x: want["x"]}), want["probabilities"],
                                   rtol=1e-6)


def test_text_saved_model_half_plus_two():
    want = EXPECTED["half_plus_two"]
    assert os.path.exists(os.path.join(HALF, "saved_model.pbtxt"))
    assert tf.saved_model.contains_saved_model(HALF)
    assert tf.saved_model.loader.maybe_saved_model_directory(HALF)
    with tf.Graph().as_default(), tf.Session() as sess:
        mg = tf.saved_model.load(sess, ["serve"], HALF)
        out = _serve(sess, mg.signature_def["serving_default"], {"x": want["x"]})
        np.testing.assert_allclose(out["y"], want["y"])


def test_wrong_tags_raise_tf_runtime_error():
    with tf.Graph().as_default(), tf.Session() as sess:
        with pytest.raises(RuntimeError) as e:
            tf.saved_model.loader.load(sess, ["serve", "gpu"], CLASSIFIER)
    msg = str(e.value)
    assert msg.startswith("MetaGraphDef associated with tags 'serve', 'gpu' could not be "
                          "found in SavedModel. To inspect available tag-sets in the "
                          "SavedModel, please use the SavedModel CLI: `saved_model_cli`")
    assert "available_tags: [{'serve'}, {'train'}]" in msg


def test_tf_assets_collection_is_packed_as_tf_writes_it():
    mg = sm.parse_saved_model(CLASSIFIER).meta_graphs[0]
    (packed,) = mg.collection_def[sm.ASSETS_KEY].any_list.value
    assert packed.type_url == "type.googleapis.com/tensorflow.AssetFileDef"
    assert list(mg.collection_def[sm.MAIN_OP_KEY].node_list.value) == ["main_op"]


def test_reencoding_tf_saved_model_keeps_its_bytes():
    """flowrt's SavedModel proto is wire-compatible: parse and re-serialize TF's file."""
    with open(os.path.join(CLASSIFIER, "saved_model.pb"), "rb") as f:
        data = f.read()
    parsed = sm.parse_saved_model(CLASSIFIER)
    assert parsed.saved_model_schema_version == 1
    again = sm.saved_model_pb2.SavedModel.FromString(parsed.SerializeToString())
    assert again == parsed
    assert len(parsed.SerializeToString(deterministic=True)) == len(data)
