"""tf.saved_model (TF 1.15): the builder, the loader, simple_save, signature utilities,
constants; flowrt writes -> flowrt loads, and the failure paths with TF's errors."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt.modeling import saved_model as sm
from flowrt.proto import types_pb2


def _model(vocab=None):
    """x [None, 2] -> y = x @ w + b; returns (x, y, w, b, asset or None)."""
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    w = tf.get_variable("w", initializer=tf.constant([[1.0], [-2.0]]))
    b = tf.get_variable("b", initializer=tf.constant([0.5]))
    y = tf.add(tf.matmul(x, w), b, name="y")
    asset = None
    if vocab is not None:
        asset = tf.constant(vocab, name="vocab_path")
        tf.add_to_collection(tf.GraphKeys.ASSET_FILEPATHS, asset)
    return x, y, w, b, asset


def _serve(sess, signature, feeds):
    return sess.run({k: v.name for k, v in signature.outputs.items()},
                    {signature.inputs[k].name: v for k, v in feeds.items()})


# -- round trip ----------------------------------------------------------------------------
def test_builder_layout_and_round_trip(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("a\nb\n")
    export = str(tmp_path / "export")
    with tf.Graph().as_default(), tf.Session() as sess:
        x, y, w, b, asset = _model(str(vocab))
        sess.run(tf.global_variables_initializer())
        sess.run(w.assign([[3.0], [4.0]]))
        builder = tf.saved_model.builder.SavedModelBuilder(export)
        builder.add_meta_graph_and_variables(
            sess, [tf.saved_model.SERVING],
            signature_def_map={"serving_default":
                               tf.saved_model.predict_signature_def({"x": x}, {"y": y})},
            assets_collection=[asset])
        path = builder.save()
    assert path == os.path.join(export, "saved_model.pb").encode()
    assert sorted(os.listdir(export)) == ["assets", "saved_model.pb", "variables"]
    assert sorted(os.listdir(os.path.join(export, "variables"))) == [
        "variables.data-00000-of-00001", "variables.index"]
    assert (tmp_path / "export" / "assets" / "vocab.txt").read_text() == "a\nb\n"
    assert dict(tf.train.list_variables(os.path.join(export, "variables", "variables"))) \
        == {"b": [1], "w": [2, 1]}
    with tf.Graph().as_default(), tf.Session() as sess:
        mg = tf.saved_model.loader.load(sess, ["serve"], export)
        out = _serve(sess, mg.signature_def["serving_default"], {"x": [[1.0, 1.0]]})
        np.testing.assert_allclose(out["y"], [[7.5]])
        # the asset is recorded as TF 1.x records it: packed in the assets collection
        (packed,) = mg.collection_def[tf.saved_model.ASSETS_KEY].any_list.value
        afd = sm._unpack_asset(packed)
        assert (afd.filename, afd.tensor_info.name) == ("vocab.txt", "vocab_path:0")
        assert sm.get_asset_tensors(export, mg) == {
            "vocab_path:0": os.path.join(export, "assets", "vocab.txt")}
        assert len(tf.trainable_variables()) == 2


def test_two_meta_graphs_share_the_variables(tmp_path):
    export = str(tmp_path / "m")
    with tf.Graph().as_default(), tf.Session() as sess:
        x, y, *_ = _model()
        sess.run(tf.global_variables_initializer())
        builder = tf.saved_model.Builder(export)
        builder.add_meta_graph_and_variables(sess, ["serve"], {
            "pred": tf.saved_model.predict_signature_def({"x": x}, {"y": y})})
        doubled = tf.multiply(y, 2.0, name="doubled")
        builder.add_meta_graph(["serve", "gpu"], {
            "double": tf.saved_model.predict_signature_def({"x": x}, {"z": doubled})})
        builder.save(as_text=True)
    assert sorted(os.listdir(export)) == ["saved_model.pbtxt", "variables"]
    tags = [list(m.meta_info_def.tags) for m in sm.parse_saved_model(export).meta_graphs]
    assert tags == [["serve"], ["serve", "gpu"]]
    with tf.Graph().as_default(), tf.Session() as sess:
        mg = tf.saved_model.load(sess, ["gpu", "serve"], export)
        out = _serve(sess, mg.signature_def["double"], {"x": [[1.0, 0.0]]})
        np.testing.assert_allclose(out["z"], [[3.0]])
        assert "pred" not in mg.signature_def


def test_main_op_runs_after_the_restore(tmp_path):
    export = str(tmp_path / "m")
    with tf.Graph().as_default(), tf.Session() as sess:
        x, y, w, b, _ = _model()
        counter = tf.Variable(0.0, name="counter", trainable=False,
                              collections=[tf.GraphKeys.LOCAL_VARIABLES])
        with tf.control_dependencies([tf.local_variables_initializer()]):
            init = tf.group(tf.assign(counter, b[0] * 10.0), name="my_main_op")
        sess.run(tf.global_variables_initializer())
        tf.saved_model.simple_save(sess, export, {"x": x}, {"y": y}, legacy_init_op=init)
    with tf.Graph().as_default() as g, tf.Session() as sess:
        mg = tf.saved_model.loader.load(sess, ["serve"], export)
        assert list(mg.collection_def[sm.MAIN_OP_KEY].node_list.value) == ["my_main_op"]
        # b was restored (0.5) before the main op ran
        assert sess.run(g.get_tensor_by_name("counter:0")) == 5.0


def test_simple_save_clears_devices_and_uses_the_serving_signature(tmp_path):
    export = str(tmp_path / "m")
    with tf.Graph().as_default(), tf.Session() as sess:
        with tf.device("/cpu:0"):
            x, y, *_ = _model()
        sess.run(tf.global_variables_initializer())
        tf.saved_model.simple_save(sess, export, inputs={"x": x}, outputs={"y": y})
    (mg,) = sm.parse_saved_model(export).meta_graphs
    assert list(mg.meta_info_def.tags) == ["serve"]
    assert all(n.device == "" for n in mg.graph_def.node)
    sig = mg.signature_def["serving_default"]
    assert sig.method_name == "tensorflow/serving/predict"
    assert sig.inputs["x"].name == "x:0" and sig.outputs["y"].name == "y:0"


def test_model_without_variables(tmp_path):
    export = str(tmp_path / "m")
    with tf.Graph().as_default(), tf.Session() as sess:
        x = tf.placeholder(tf.float32, [2], name="x")
        y = tf.square(x, name="y")
        tf.saved_model.simple_save(sess, export, {"x": x}, {"y": y})
    with tf.Graph().as_default(), tf.Session() as sess:
        mg = tf.saved_model.load(sess, ["serve"], export)
        out = _serve(sess, mg.signature_def["serving_default"], {"x": [2.0, 3.0]})
        np.testing.assert_allclose(out["y"], [4.0, 9.0])


def test_nothing_temporary_is_left_behind(tmp_path):
    export = str(tmp_path / "m")
    with tf.Graph().as_default(), tf.Session() as sess:
        x, y, *_ = _model()
        sess.run(tf.global_variables_initializer())
        tf.saved_model.simple_save(sess, export, {"x": x}, {"y": y})
    found = [os.path.relpath(os.path.join(r, f), export)
             for r, _, fs in os.walk(export) for f in fs]
    assert sorted(found) == ["saved_model.pb", os.path.join("variables",
                             "variables.data-00000-of-00001"),
                             os.path.join("variables", "variables.index")]


def test_asset_basename_collisions_get_suffixes(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "vocab.txt").write_text("one")
    (tmp_path / "b" / "vocab.txt").write_text("two")
    export = str(tmp_path / "m")
    with tf.Graph().as_default(), tf.Session() as sess:
        a1 = tf.constant(str(tmp_path / "a" / "vocab.txt"), name="a1")
        a2 = tf.constant(str(tmp_path / "b" / "vocab.txt"), name="a2")
        b = tf.saved_model.builder.SavedModelBuilder(export)
        b.add_meta_graph_and_variables(sess, ["serve"], assets_collection=[a1, a2])
        b.save()
    assert (tmp_path / "m" / "assets" / "vocab.txt").read_text() == "one"
    assert (tmp_path / "m" / "assets" / "vocab.txt_1").read_text() == "two"
    mg = sm.parse_saved_model(export).meta_graphs[0]
    assert sorted(sm.get_asset_tensors(export, mg).items()) == [
        ("a1:0", os.path.join(export, "assets", "vocab.txt")),
        ("a2:0", os.path.join(export, "assets", "vocab.txt_1"))]


# -- builder errors ------------------------------------------------------------------------
def test_existing_nonempty_export_dir_is_refused(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(AssertionError, match=re.escape(
            "Export directory already exists, and isn't empty. Please choose a different "
            "export directory, or delete all the contents of the specified directory: "
            + str(tmp_path))):
        tf.saved_model.builder.SavedModelBuilder(str(tmp_path))
    (tmp_path / "empty").mkdir()
    tf.saved_model.builder.SavedModelBuilder(str(tmp_path / "empty"))  # empty is fine


def test_builder_call_order_errors(tmp_path):
    with tf.Graph().as_default(), tf.Session() as sess:
        _model()
        sess.run(tf.global_variables_initializer())
        b = tf.saved_model.builder.SavedModelBuilder(str(tmp_path / "m"))
        with pytest.raises(AssertionError, match="has not been saved yet"):
            b.add_meta_graph(["serve"])
        b.add_meta_graph_and_variables(sess, ["serve"])
        with pytest.raises(AssertionError, match=r"Please invoke `add_meta_graph\(\)`"):
            b.add_meta_graph_and_variables(sess, ["train"])


def test_signature_validation(tmp_path):
    with tf.Graph().as_default(), tf.Session() as sess:
        x, y, *_ = _model()
        sess.run(tf.global_variables_initializer())
        b = tf.saved_model.builder.SavedModelBuilder(str(tmp_path / "m"))
        no_name = tf.saved_model.build_signature_def(
            {"x": sm.meta_graph_pb2.TensorInfo(dtype=types_pb2.DT_FLOAT)}, {}, "m")
        with pytest.raises(AssertionError, match="'encoding' fields"):
            b.add_meta_graph_and_variables(sess, ["serve"], {"s": no_name})
        no_dtype = tf.saved_model.build_signature_def(
            {"x": sm.meta_graph_pb2.TensorInfo(name="x:0")}, {}, "m")
        with pytest.raises(AssertionError, match="must have the dtype field set"):
            b.add_meta_graph_and_variables(sess, ["serve"], {"s": no_dtype})
        good = tf.saved_model.predict_signature_def({"x": x}, {"y": y})
        with pytest.raises(KeyError, match="__saved_model_init_op"):
            b.add_meta_graph_and_variables(sess, ["serve"], {"__saved_model_init_op": good})
        with pytest.raises(TypeError, match="main_op needs to be an Operation"):
            b.add_meta_graph_and_variables(sess, ["serve"], main_op="init")
        with pytest.raises(TypeError):  # as in TF: `main_op or legacy_init_op` on a Tensor
            b.add_meta_graph_and_variables(sess, ["serve"], main_op=y)


def test_second_main_op_and_bad_assets(tmp_path):
    with tf.Graph().as_default(), tf.Session() as sess:
        x, y, *_ = _model()
        sess.run(tf.global_variables_initializer())
        tf.add_to_collection(tf.saved_model.MAIN_OP_KEY, tf.no_op(name="first"))
        b = tf.saved_model.builder.SavedModelBuilder(str(tmp_path / "m"))
        with pytest.raises(ValueError, match="already contains one or more main ops"):
            b.add_meta_graph_and_variables(sess, ["serve"], main_op=tf.no_op())
        with pytest.raises(TypeError, match="must be of type constant"):
            b.add_meta_graph_and_variables(sess, ["serve"], assets_collection=[y])
        with pytest.raises(TypeError, match="must be of dtype string"):
            b.add_meta_graph_and_variables(sess, ["serve"],
                                           assets_collection=[tf.constant(1.0)])
        with pytest.raises(TypeError, match="must be a scalar"):
            b.add_meta_graph_and_variables(sess, ["serve"],
                                           assets_collection=[tf.constant(["a", "b"])])


# -- loader errors -------------------------------------------------------------------------
def test_missing_and_corrupt_saved_model(tmp_path):
    with tf.Graph().as_default(), tf.Session() as sess:
        with pytest.raises(IOError, match=re.escape(
                f"SavedModel file does not exist at: {tmp_path}/"
                "{saved_model.pbtxt|saved_model.pb}")):
            tf.saved_model.loader.load(sess, ["serve"], str(tmp_path))
        assert not tf.saved_model.loader.maybe_saved_model_directory(str(tmp_path))
        (tmp_path / "saved_model.pb").write_bytes(b"\xff\xff\xff garbage")
        assert tf.saved_model.contains_saved_model(str(tmp_path))
        with pytest.raises(IOError, match="Cannot parse file .*saved_model.pb"):
            tf.saved_model.load(sess, ["serve"], str(tmp_path))


def test_missing_variables_file_names_the_checkpoint(tmp_path):
    export = str(tmp_path / "m")
    with tf.Graph().as_default(), tf.Session() as sess:
        x, y, *_ = _model()
        sess.run(tf.global_variables_initializer())
        tf.saved_model.simple_save(sess, export, {"x": x}, {"y": y})
    os.remove(os.path.join(export, "variables", "variables.index"))
    with tf.Graph().as_default(), tf.Session() as sess:
        with pytest.raises(ValueError, match=re.escape(os.path.join(export, "variables",
                                                                    "variables"))):
            tf.saved_model.load(sess, ["serve"], export)


# -- signature utilities -------------------------------------------------------------------
def test_signature_builders_and_validity():
    with tf.Graph().as_default():
        ex = tf.placeholder(tf.string, [None], name="ex")
        scores = tf.placeholder(tf.float32, [None, 2], name="scores")
        classes = tf.placeholder(tf.string, [None, 2], name="classes")
        cls = tf.saved_model.classification_signature_def(ex, classes, scores)
        assert cls.method_name == "tensorflow/serving/classify"
        assert sorted(cls.outputs) == ["classes", "scores"] and list(cls.inputs) == ["inputs"]
        assert tf.saved_model.is_valid_signature(cls)
        reg = tf.saved_model.regression_signature_def(ex, scores)
        assert reg.method_name == "tensorflow/serving/regress"
        assert tf.saved_model.is_valid_signature(reg)
        pred = tf.saved_model.predict_signature_def({"a": scores}, {"b": classes})
        assert tf.saved_model.is_valid_signature(pred)
        assert not tf.saved_model.is_valid_signature(None)
        assert not tf.saved_model.is_valid_signature(
            tf.saved_model.build_signature_def({}, {}, "tensorflow/serving/predict"))
        bad = tf.saved_model.build_signature_def(
            {"inputs": tf.saved_model.build_tensor_info(scores)},
            {"outputs": tf.saved_model.build_tensor_info(scores)},
            tf.saved_model.REGRESS_METHOD_NAME)
        assert not tf.saved_model.is_valid_signature(bad)
        with pytest.raises(ValueError, match="examples must be a string Tensor"):
            tf.saved_model.regression_signature_def(scores, scores)
        with pytest.raises(ValueError, match="cannot both be None"):
            tf.saved_model.classification_signature_def(ex, None, None)
        with pytest.raises(ValueError, match="scores must be a float Tensor"):
            tf.saved_model.classification_signature_def(ex, None, classes)
        with pytest.raises(ValueError, match="inputs cannot be None or empty"):
            tf.saved_model.predict_signature_def({}, {"b": classes})
        with pytest.raises(ValueError, match="outputs cannot be None or empty"):
            tf.saved_model.predict_signature_def({"a": ex}, None)


def test_sparse_tensor_info_round_trip():
    with tf.Graph().as_default() as g:
        sp = tf.sparse_placeholder(tf.float32, name="sp")
        ti = tf.saved_model.utils.build_tensor_info(sp)
        assert ti.WhichOneof("encoding") == "coo_sparse"
        assert ti.coo_sparse.values_tensor_name == sp.values.name
        back = tf.saved_model.utils.get_tensor_from_tensor_info(ti, g)
        assert isinstance(back, tf.SparseTensor)
        assert (back.indices, back.values, back.dense_shape) == (sp.indices, sp.values,
                                                                 sp.dense_shape)
        with pytest.raises(ValueError, match="Invalid TensorInfo.encoding"):
            tf.saved_model.get_tensor_from_tensor_info(sm.meta_graph_pb2.TensorInfo())
        with pytest.raises(KeyError):
            tf.saved_model.get_tensor_from_tensor_info(
                sm.meta_graph_pb2.TensorInfo(name="nope:0"))


_DTYPES = [tf.float32, tf.float64, tf.int32, tf.int64, tf.string, tf.bool, tf.uint8,
           tf.float16, tf.complex64]


@settings(max_examples=25, deadline=None)
@given(dtype=st.sampled_from(_DTYPES),
       shape=st.one_of(st.none(), st.lists(st.one_of(st.none(), st.integers(0, 9)),
                                           max_size=4)))
def test_tensor_info_records_dtype_and_static_shape(dtype, shape):
    with tf.Graph().as_default():
        p = tf.placeholder(dtype, shape, name="p")
        ti = tf.saved_model.build_tensor_info(p)
    assert ti.name == "p:0" and ti.dtype == dtype.as_datatype_enum
    again = sm.meta_graph_pb2.TensorInfo.FromString(ti.SerializeToString())
    if shape is None:
        assert again.tensor_shape.unknown_rank
    else:
        assert [d.size for d in again.tensor_shape.dim] == [-1 if d is None else d
                                                            for d in shape]


def test_method_name_updater(tmp_path):
    export = str(tmp_path / "m")
    with tf.Graph().as_default(), tf.Session() as sess:
        x, y, *_ = _model()
        sess.run(tf.global_variables_initializer())
        tf.saved_model.simple_save(sess, export, {"x": x}, {"y": y})
    upd = tf.saved_model.signature_def_utils.MethodNameUpdater(export)
    with pytest.raises(ValueError, match="does not have a signature_def with key: 'zz'"):
        upd.replace_method_name("zz", "regress")
    with pytest.raises(ValueError, match="could not be found in SavedModel"):
        upd.replace_method_name("serving_default", "regress", tags="train")
    upd.replace_method_name("serving_default", "tensorflow/serving/regress", tags="serve")
    upd.save(str(tmp_path / "new"))
    mg = sm.parse_saved_model(str(tmp_path / "new")).meta_graphs[0]
    assert mg.signature_def["serving_default"].method_name == "tensorflow/serving/regress"
    assert sm.parse_saved_model(export).meta_graphs[0].signature_def[
        "serving_default"].method_name == "tensorflow/serving/predict"


def test_main_op_helpers_initialize():
    with tf.Graph().as_default(), tf.Session() as sess:
        v = tf.Variable(3.0, name="v")
        loc = tf.Variable(4.0, name="loc", collections=[tf.GraphKeys.LOCAL_VARIABLES])
        op = tf.saved_model.main_op.main_op()
        assert op.type == "NoOp"
        sess.run(op)
        assert sess.run([v, loc]) == [3.0, 4.0]
        r = tf.saved_model.main_op_with_restore(tf.no_op(name="restore_all"))
        assert any(c.type == "NoOp" for c in r.control_inputs)
        sess.run(r)


def test_constants_and_namespaces():
    s = tf.saved_model
    assert s.builder.SavedModelBuilder is s.Builder
    assert s.loader.load is s.load
    assert s.tag_constants.SERVING == s.SERVING == "serve"
    assert (s.TRAINING, s.GPU, s.TPU) == ("train", "gpu", "tpu")
    assert s.constants.SAVED_MODEL_FILENAME_PB == "saved_model.pb"
    assert s.constants.SAVED_MODEL_FILENAME_PBTXT == "saved_model.pbtxt"
    assert (s.ASSETS_DIRECTORY, s.ASSETS_KEY) == ("assets", "saved_model_assets")
    assert (s.VARIABLES_DIRECTORY, s.VARIABLES_FILENAME) == ("variables", "variables")
    assert (s.MAIN_OP_KEY, s.LEGACY_INIT_OP_KEY) == ("saved_model_main_op",
                                                     "legacy_init_op")
    assert s.SAVED_MODEL_SCHEMA_VERSION == 1
    assert s.signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY == "serving_default"
    assert s.signature_constants.CLASSIFY_OUTPUT_SCORES == "scores"
    assert s.signature_def_utils.predict_signature_def is s.predict_signature_def
    assert s.utils.build_tensor_info is s.build_tensor_info
    assert s.main_op.main_op_with_restore is s.main_op_with_restore
    tf1_names = {"ASSETS_DIRECTORY", "ASSETS_KEY", "Builder", "CLASSIFY_INPUTS",
                 "CLASSIFY_METHOD_NAME", "CLASSIFY_OUTPUT_CLASSES", "CLASSIFY_OUTPUT_SCORES",
                 "DEBUG_DIRECTORY", "DEBUG_INFO_FILENAME_PB",
                 "DEFAULT_SERVING_SIGNATURE_DEF_KEY", "GPU", "LEGACY_INIT_OP_KEY",
                 "MAIN_OP_KEY", "PREDICT_INPUTS", "PREDICT_METHOD_NAME", "PREDICT_OUTPUTS",
                 "REGRESS_INPUTS", "REGRESS_METHOD_NAME", "REGRESS_OUTPUTS",
                 "SAVED_MODEL_FILENAME_PB", "SAVED_MODEL_FILENAME_PBTXT",
                 "SAVED_MODEL_SCHEMA_VERSION", "SERVING", "TPU", "TRAINING",
                 "VARIABLES_DIRECTORY", "VARIABLES_FILENAME", "build_signature_def",
                 "build_tensor_info", "builder", "classification_signature_def",
                 "constants", "contains_saved_model", "get_tensor_from_tensor_info",
                 "is_valid_signature", "load", "loader", "main_op", "main_op_with_restore",
                 "maybe_saved_model_directory", "predict_signature_def",
                 "regression_signature_def", "signature_constants", "signature_def_utils",
                 "simple_save", "tag_constants", "utils"}
    assert tf1_names <= set(dir(s))


def test_tensor_info_is_the_top_level_proto():
    """``tf.TensorInfo`` is the message ``build_tensor_info`` returns, as in TF 1.15."""
    with tf.Graph().as_default():
        info = tf.saved_model.utils.build_tensor_info(
            tf.placeholder(tf.float32, [None, 3], name="x"))
    assert isinstance(info, tf.TensorInfo)
    assert info.name == "x:0" and info.dtype == tf.float32.as_datatype_enum
    assert [d.size for d in info.tensor_shape.dim] == [-1, 3]
