"""``tf.saved_model`` of TF 1.15: SavedModels written by :class:`SavedModelBuilder` and
read by :func:`load`, TensorFlow's own directory layout and protos::

    export_dir/
        saved_model.pb            a flowrt.SavedModel (= tensorflow.SavedModel), or .pbtxt
        variables/variables.*     the variables, one checkpoint shared by every meta graph
        assets/                   the asset files the graphs read (vocabularies)

Each meta graph carries its tags (``meta_info_def.tags``), its signatures
(``signature_def``) and, as TF 1.x writes them, its assets as ``AssetFileDef`` protos
packed in the ``saved_model_assets`` collection and its main op in the
``saved_model_main_op`` collection. Variables go through ``tf.train.Saver`` (sharded,
as TF's builder makes it) and graphs through ``tf.train.export_meta_graph`` /
``import_meta_graph``, so the checkpoint and meta graph formats are theirs.

Also here: :func:`simple_save`, the ``signature_def_utils`` and ``utils`` functions,
the constants of ``constants``, ``tag_constants`` and ``signature_constants``,
``main_op``, and :class:`MethodNameUpdater`. :data:`API` lists what the standard
plugin publishes (``tf.saved_model.*`` with its TF1 sub-modules).
"""
from __future__ import annotations

import filecmp
import logging
import os
import shutil
import types
from typing import Any, Iterable, Mapping, Sequence

from google.protobuf import any_pb2, text_format

from ..base import dtypes as _dt
from ..base import errors
from ..base.tensor_shape import unknown_shape
from ..framework.graph import (GraphKeys, Operation, Tensor, api_function,
                               add_to_collection, control_dependencies, get_collection,
                               get_default_graph)
from ..framework.sparse_tensor import SparseTensor
from ..plugin.runtime import require_api
from ..proto import meta_graph_pb2, saved_model_pb2, types_pb2
from ..training import checkpoint as _ckpt
from ..training.saver import Saver, import_meta_graph
from ..training.variables import global_variables_initializer, local_variables_initializer

__all__ = ["SavedModelBuilder", "load", "maybe_saved_model_directory",
           "contains_saved_model", "parse_saved_model", "simple_save",
           "build_signature_def", "predict_signature_def", "classification_signature_def",
           "regression_signature_def", "is_valid_signature", "build_tensor_info",
           "get_tensor_from_tensor_info", "main_op", "main_op_with_restore",
           "MethodNameUpdater", "get_asset_tensors", "get_init_op"]

REQUIRED_API_NAMES = frozenset({"group", "tables_initializer"})
require_api(REQUIRED_API_NAMES)

_log = logging.getLogger("flowrt.saved_model")

# -- constants (tensorflow/python/saved_model/constants.py) --------------------------------
ASSETS_DIRECTORY = "assets"
EXTRA_ASSETS_DIRECTORY = "assets.extra"
ASSETS_KEY = "saved_model_assets"
DEBUG_DIRECTORY = "debug"
DEBUG_INFO_FILENAME_PB = "saved_model_debug_info.pb"
LEGACY_INIT_OP_KEY = "legacy_init_op"
MAIN_OP_KEY = "saved_model_main_op"
TRAIN_OP_KEY = "saved_model_train_op"
SAVED_MODEL_SCHEMA_VERSION = 1
SAVED_MODEL_FILENAME_PB = "saved_model.pb"
SAVED_MODEL_FILENAME_PBTXT = "saved_model.pbtxt"
VARIABLES_DIRECTORY = "variables"
VARIABLES_FILENAME = "variables"
INIT_OP_SIGNATURE_KEY = "__saved_model_init_op"
TRAIN_OP_SIGNATURE_KEY = "__saved_model_train_op"

# -- tag_constants -------------------------------------------------------------------------
SERVING = "serve"
TRAINING = "train"
EVAL = "eval"
GPU = "gpu"
TPU = "tpu"

# -- signature_constants -------------------------------------------------------------------
DEFAULT_SERVING_SIGNATURE_DEF_KEY = "serving_default"
CLASSIFY_INPUTS = "inputs"
CLASSIFY_METHOD_NAME = "tensorflow/serving/classify"
CLASSIFY_OUTPUT_CLASSES = "classes"
CLASSIFY_OUTPUT_SCORES = "scores"
PREDICT_INPUTS = "inputs"
PREDICT_METHOD_NAME = "tensorflow/serving/predict"
PREDICT_OUTPUTS = "outputs"
REGRESS_INPUTS = "inputs"
REGRESS_METHOD_NAME = "tensorflow/serving/regress"
REGRESS_OUTPUTS = "outputs"
DEFAULT_TRAIN_SIGNATURE_DEF_KEY = "train"
DEFAULT_EVAL_SIGNATURE_DEF_KEY = "eval"
SUPERVISED_TRAIN_METHOD_NAME = "tensorflow/supervised/training"
SUPERVISED_EVAL_METHOD_NAME = "tensorflow/supervised/eval"

#: the type URL TF packs an AssetFileDef under (TF's loader unpacks only this name)
_ASSET_TYPE_URL = "type.googleapis.com/tensorflow.AssetFileDef"


def _as_str(x: Any) -> str:
    if isinstance(x, bytes):
        return x.decode()
    return os.fspath(x) if isinstance(x, os.PathLike) else str(x)


def _prepend_scope(name: str, import_scope: str | None) -> str:
    if not import_scope:
        return name
    return import_scope.rstrip("/") + "/" + name


# =========================================================================================
# utils: TensorInfo
# =========================================================================================
def build_tensor_info(tensor: Any) -> Any:
    """A ``TensorInfo`` naming ``tensor`` (a Tensor, or for a SparseTensor its three
    component tensors) with its dtype and static shape (``tf.saved_model.utils``)."""
    tensor_info = meta_graph_pb2.TensorInfo(
        dtype=_dt.as_dtype(tensor.dtype).as_datatype_enum)
    tensor_info.tensor_shape.CopyFrom(tensor.get_shape().as_proto())
    if isinstance(tensor, SparseTensor):
        tensor_info.coo_sparse.values_tensor_name = tensor.values.name
        tensor_info.coo_sparse.indices_tensor_name = tensor.indices.name
        tensor_info.coo_sparse.dense_shape_tensor_name = tensor.dense_shape.name
    else:
        tensor_info.name = tensor.name
    return tensor_info


def build_tensor_info_from_op(op: Operation) -> Any:
    """A ``TensorInfo`` naming an op (dtype DT_INVALID, unknown shape): how an init or
    train op is recorded in a signature."""
    ti = meta_graph_pb2.TensorInfo(dtype=types_pb2.DT_INVALID, name=op.name)
    ti.tensor_shape.CopyFrom(unknown_shape().as_proto())
    return ti


def get_tensor_from_tensor_info(tensor_info: Any, graph: Any = None,
                                import_scope: str | None = None) -> Any:
    """The Tensor (or SparseTensor) of ``graph`` a ``TensorInfo`` names, its names
    prefixed by ``import_scope``.

    :raises KeyError: no such tensor in the graph
    :raises ValueError: the TensorInfo names nothing
    """
    graph = graph or get_default_graph()

    def _get(name: str) -> Tensor:
        return graph.get_tensor_by_name(_prepend_scope(name, import_scope))

    encoding = tensor_info.WhichOneof("encoding")
    if encoding == "name":
        return _get(tensor_info.name)
    if encoding == "coo_sparse":
        cs = tensor_info.coo_sparse
        return SparseTensor(_get(cs.indices_tensor_name), _get(cs.values_tensor_name),
                            _get(cs.dense_shape_tensor_name))
    raise ValueError(f"Invalid TensorInfo.encoding: {encoding}")


def get_element_from_tensor_info(tensor_info: Any, graph: Any = None,
                                 import_scope: str | None = None) -> Any:
    """The op or tensor of ``graph`` a ``TensorInfo``'s name names."""
    graph = graph or get_default_graph()
    return graph.as_graph_element(_prepend_scope(tensor_info.name, import_scope))


# =========================================================================================
# signature_def_utils
# =========================================================================================
def build_signature_def(inputs: Mapping[str, Any] | None = None,
                        outputs: Mapping[str, Any] | None = None,
                        method_name: str | None = None) -> Any:
    """A ``SignatureDef`` of the given input and output ``TensorInfo`` maps."""
    signature_def = meta_graph_pb2.SignatureDef()
    for key in inputs or {}:
        signature_def.inputs[key].CopyFrom(inputs[key])  # type: ignore[index]
    for key in outputs or {}:
        signature_def.outputs[key].CopyFrom(outputs[key])  # type: ignore[index]
    if method_name is not None:
        signature_def.method_name = method_name
    return signature_def


def regression_signature_def(examples: Tensor, predictions: Tensor) -> Any:
    """A Regress-API signature: string ``examples`` in, float ``predictions`` out.

    :raises ValueError: an argument is None, not a Tensor or of the wrong dtype
    """
    if examples is None:
        raise ValueError("Regression examples cannot be None.")
    if not isinstance(examples, Tensor):
        raise ValueError("Regression examples must be a string Tensor.")
    if predictions is None:
        raise ValueError("Regression predictions cannot be None.")
    input_info = build_tensor_info(examples)
    if input_info.dtype != types_pb2.DT_STRING:
        raise ValueError("Regression examples must be a string Tensor.")
    output_info = build_tensor_info(predictions)
    if output_info.dtype != types_pb2.DT_FLOAT:
        raise ValueError("Regression output must be a float Tensor.")
    return build_signature_def({REGRESS_INPUTS: input_info},
                               {REGRESS_OUTPUTS: output_info}, REGRESS_METHOD_NAME)


def classification_signature_def(examples: Tensor, classes: Tensor | None,
                                 scores: Tensor | None) -> Any:
    """A Classify-API signature: string ``examples`` in, string ``classes`` and/or float
    ``scores`` out.

    :raises ValueError: a missing argument, a non-Tensor or a wrong dtype
    """
    if examples is None:
        raise ValueError("Classification examples cannot be None.")
    if not isinstance(examples, Tensor):
        raise ValueError("Classification examples must be a string Tensor.")
    if classes is None and scores is None:
        raise ValueError("Classification classes and scores cannot both be None.")
    input_info = build_tensor_info(examples)
    if input_info.dtype != types_pb2.DT_STRING:
        raise ValueError("Classification examples must be a string Tensor.")
    outputs = {}
    if classes is not None:
        classes_info = build_tensor_info(classes)
        if classes_info.dtype != types_pb2.DT_STRING:
            raise ValueError("Classification classes must be a string Tensor.")
        outputs[CLASSIFY_OUTPUT_CLASSES] = classes_info
    if scores is not None:
        scores_info = build_tensor_info(scores)
        if scores_info.dtype != types_pb2.DT_FLOAT:
            raise ValueError("Classification scores must be a float Tensor.")
        outputs[CLASSIFY_OUTPUT_SCORES] = scores_info
    return build_signature_def({CLASSIFY_INPUTS: input_info}, outputs,
                               CLASSIFY_METHOD_NAME)


def predict_signature_def(inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> Any:
    """A Predict-API signature of ``{key: tensor}`` inputs and outputs, any dtypes.

    :raises ValueError: ``inputs`` or ``outputs`` is None or empty
    """
    if inputs is None or not inputs:
        raise ValueError("Prediction inputs cannot be None or empty.")
    if outputs is None or not outputs:
        raise ValueError("Prediction outputs cannot be None or empty.")
    return build_signature_def({k: build_tensor_info(t) for k, t in inputs.items()},
                               {k: build_tensor_info(t) for k, t in outputs.items()},
                               PREDICT_METHOD_NAME)


def _supervised_signature_def(method_name: str, inputs: Mapping[str, Any],
                              loss: Mapping[str, Any] | None = None,
                              predictions: Mapping[str, Any] | None = None,
                              metrics: Mapping[str, Any] | None = None) -> Any:
    if inputs is None or not inputs:
        raise ValueError(f"{method_name} inputs cannot be None or empty.")
    outputs: dict[str, Any] = {}
    for output_set in (loss, predictions, metrics):
        if output_set is not None:
            outputs.update({k: build_tensor_info(t) for k, t in output_set.items()})
    return build_signature_def({k: build_tensor_info(t) for k, t in inputs.items()},
                               outputs, method_name)


def supervised_train_signature_def(inputs: Mapping[str, Any], loss: Mapping[str, Any],
                                   predictions: Any = None, metrics: Any = None) -> Any:
    """A training signature: inputs in; loss, predictions and metrics out."""
    return _supervised_signature_def(SUPERVISED_TRAIN_METHOD_NAME, inputs, loss,
                                     predictions, metrics)


def supervised_eval_signature_def(inputs: Mapping[str, Any], loss: Mapping[str, Any],
                                  predictions: Any = None, metrics: Any = None) -> Any:
    """An evaluation signature: inputs in; loss, predictions and metrics out."""
    return _supervised_signature_def(SUPERVISED_EVAL_METHOD_NAME, inputs, loss,
                                     predictions, metrics)


def _valid_predict(sd: Any) -> bool:
    return sd.method_name == PREDICT_METHOD_NAME and bool(sd.inputs) and bool(sd.outputs)


def _valid_regress(sd: Any) -> bool:
    return (sd.method_name == REGRESS_METHOD_NAME
            and set(sd.inputs) == {REGRESS_INPUTS}
            and sd.inputs[REGRESS_INPUTS].dtype == types_pb2.DT_STRING
            and set(sd.outputs) == {REGRESS_OUTPUTS}
            and sd.outputs[REGRESS_OUTPUTS].dtype == types_pb2.DT_FLOAT)


def _valid_classify(sd: Any) -> bool:
    allowed = {CLASSIFY_OUTPUT_CLASSES: types_pb2.DT_STRING,
               CLASSIFY_OUTPUT_SCORES: types_pb2.DT_FLOAT}
    return (sd.method_name == CLASSIFY_METHOD_NAME
            and set(sd.inputs) == {CLASSIFY_INPUTS}
            and sd.inputs[CLASSIFY_INPUTS].dtype == types_pb2.DT_STRING
            and bool(sd.outputs) and not set(sd.outputs) - set(allowed)
            and all(sd.outputs[k].dtype == allowed[k] for k in sd.outputs))


def is_valid_signature(signature_def: Any) -> bool:
    """Whether TensorFlow Serving can serve the signature: a well-formed predict,
    classify or regress signature."""
    if signature_def is None:
        return False
    return (_valid_classify(signature_def) or _valid_regress(signature_def)
            or _valid_predict(signature_def))


def op_signature_def(op: Any, key: str) -> Any:
    """A signature whose one output, ``key``, names ``op``."""
    return build_signature_def(outputs={key: build_tensor_info_from_op(op)})


def load_op_from_signature_def(signature_def: Any, key: str,
                               import_scope: str | None = None) -> Any:
    """The op a signature made by :func:`op_signature_def` names.

    :raises NotFoundError: the op is not in the default graph
    """
    try:
        return get_element_from_tensor_info(signature_def.outputs[key],
                                            import_scope=import_scope)
    except (KeyError, ValueError):
        raise errors.NotFoundError(
            None, None, f'The key "{key}" could not be found in the graph. Please make '
            "sure the SavedModel was created by the internal _SavedModelBuilder. If you "
            "are using the public API, please make sure the SignatureDef in the "
            f'SavedModel does not contain the key "{key}".') from None


# =========================================================================================
# main_op
# =========================================================================================
def main_op() -> Operation:
    """A group of the global and local variable initializers and the table
    initializers: the usual main op of a SavedModel."""
    init = global_variables_initializer()
    init_local = local_variables_initializer()
    init_tables = api_function("tables_initializer")()
    return api_function("group")(init, init_local, init_tables)


def main_op_with_restore(restore_op_name: Any) -> Operation:
    """:func:`main_op` followed by ``restore_op_name`` (run after it)."""
    with control_dependencies([main_op()]):
        return api_function("group")(restore_op_name)


# =========================================================================================
# the builder
# =========================================================================================
def _asset_path_from_tensor(path_tensor: Any) -> str:
    """The file path a scalar string ``Const`` asset tensor holds."""
    if not isinstance(path_tensor, Tensor):
        raise TypeError("Asset path tensor must be a Tensor.")
    if path_tensor.op.type != "Const":
        raise TypeError("Asset path tensor must be of type constant.")
    if path_tensor.dtype.base_dtype != _dt.string:
        raise TypeError("Asset path tensor must be of dtype string.")
    value = path_tensor.op.get_attr("value")
    flat = list(getattr(value, "flat", [value]))
    if getattr(value, "ndim", 0) != 0 or len(flat) != 1:
        raise TypeError("Asset path tensor must be a scalar.")
    return _as_str(flat[0])


def _asset_filename_to_add(path: str, filename_map: dict[str, str]) -> str:
    """The name ``path`` gets under assets/: its basename, suffixed ``_1``, ``_2`` ...
    when another file with different contents already took it."""
    name = os.path.basename(path)
    if name not in filename_map or filename_map[name] == path:
        return name
    if filecmp.cmp(path, filename_map[name], shallow=False):
        return name
    i, unique = 1, name
    while unique in filename_map:
        unique = f"{name}_{i}"
        i += 1
    return unique


def _pack_asset(asset_file_def: Any) -> Any:
    """An ``Any`` holding an AssetFileDef under TensorFlow's type name."""
    return any_pb2.Any(type_url=_ASSET_TYPE_URL, value=asset_file_def.SerializeToString())


def _unpack_asset(any_proto: Any) -> Any:
    """The AssetFileDef an ``Any`` of the assets collection packs."""
    if not any_proto.type_url.endswith(".AssetFileDef"):
        raise ValueError(f"an entry of the {ASSETS_KEY!r} collection holds "
                         f"{any_proto.type_url!r}, not an AssetFileDef")
    return meta_graph_pb2.AssetFileDef.FromString(any_proto.value)


class SavedModelBuilder:
    """Builds a SavedModel: one or more meta graphs sharing one set of variables and
    assets (``tf.saved_model.builder.SavedModelBuilder`` = ``tf.saved_model.Builder``).

    The first meta graph comes with the variables (:meth:`add_meta_graph_and_variables`),
    later ones with their graph only (:meth:`add_meta_graph`); :meth:`save` writes
    ``saved_model.pb``. Each meta graph is identified by its tags.

    :raises AssertionError: ``export_dir`` exists and is not empty
    """

    def __init__(self, export_dir: Any):
        self._saved_model = saved_model_pb2.SavedModel()
        self._saved_model.saved_model_schema_version = SAVED_MODEL_SCHEMA_VERSION
        self._export_dir = _as_str(export_dir)
        if os.path.exists(self._export_dir):
            if not os.path.isdir(self._export_dir) or os.listdir(self._export_dir):
                raise AssertionError(
                    "Export directory already exists, and isn't empty. Please choose a "
                    "different export directory, or delete all the contents of the "
                    f"specified directory: {self._export_dir}")
        else:
            os.makedirs(self._export_dir)
        self._has_saved_variables = False
        self._saved_asset_files: set[str] = set()

    # -- validation -------------------------------------------------------------------
    @staticmethod
    def _validate_tensor_info(tensor_info: Any) -> None:
        if tensor_info is None:
            raise AssertionError("All TensorInfo protos used in the SignatureDefs must "
                                 "have the name and dtype fields set.")
        if tensor_info.WhichOneof("encoding") is None:
            raise AssertionError(
                "All TensorInfo protos used in the SignatureDefs must have one of the "
                f"'encoding' fields (e.g., name or coo_sparse) set: {tensor_info}")
        if tensor_info.dtype == types_pb2.DT_INVALID:
            raise AssertionError("All TensorInfo protos used in the SignatureDefs must "
                                 f"have the dtype field set: {tensor_info}")

    def _validate_signature_def_map(self, signature_def_map: Mapping[str, Any]) -> None:
        for sd in signature_def_map.values():
            for ti in list(sd.inputs.values()) + list(sd.outputs.values()):
                self._validate_tensor_info(ti)
        for key, what in ((INIT_OP_SIGNATURE_KEY, "initialization"),
                          (TRAIN_OP_SIGNATURE_KEY, "the train op")):
            if key in signature_def_map:
                raise KeyError(f'SignatureDef map key "{key}" is reserved for {what}. '
                               "Please use a different key.")

    # -- collections ------------------------------------------------------------------
    def _save_and_write_assets(self, assets_collection: Iterable[Any] | None) -> None:
        """Record each asset tensor in the ``saved_model_assets`` collection and copy
        its file into assets/."""
        if assets_collection is None:
            _log.info("No assets to save.")
            return
        filename_map: dict[str, str] = {}
        for asset_tensor in assets_collection:
            source = _asset_path_from_tensor(asset_tensor)
            if not source:
                raise ValueError("Invalid asset filepath tensor.")
            name = _asset_filename_to_add(source, filename_map)
            afd = meta_graph_pb2.AssetFileDef(filename=name)
            afd.tensor_info.name = asset_tensor.name
            add_to_collection(ASSETS_KEY, _pack_asset(afd))
            filename_map[name] = source
        if not filename_map:
            _log.info("No assets to write.")
            return
        assets_dir = os.path.join(self._export_dir, ASSETS_DIRECTORY)
        os.makedirs(assets_dir, exist_ok=True)
        for name, source in filename_map.items():
            dest = os.path.join(assets_dir, name)
            if (os.path.exists(source) and source != dest
                    and dest not in self._saved_asset_files):
                shutil.copyfile(source, dest)
                self._saved_asset_files.add(dest)

    @staticmethod
    def _maybe_add_main_op(main_op: Any) -> None:
        if main_op is None:
            return
        if not isinstance(main_op, Operation):
            raise TypeError(f"main_op needs to be an Operation: {main_op!r}")
        for key in (MAIN_OP_KEY, LEGACY_INIT_OP_KEY):
            if get_collection(key):
                raise ValueError("Graph already contains one or more main ops under the "
                                 f"collection {key}.")
        add_to_collection(MAIN_OP_KEY, main_op)

    @staticmethod
    def _maybe_create_saver(saver: Any = None) -> Saver:
        if saver:
            return saver
        g = get_default_graph()
        var_list = (g.get_collection(GraphKeys.GLOBAL_VARIABLES)
                    + g.get_collection(GraphKeys.SAVEABLE_OBJECTS))
        return Saver(var_list, sharded=True, write_version=2, allow_empty=True)

    @staticmethod
    def _export(saver: Saver, clear_devices: bool, strip_default_attrs: bool) -> Any:
        """The default graph's MetaGraphDef with ``saver``; the packed assets collection
        is added by :meth:`_tag_and_add_meta_graph`."""
        keys = [k for k in get_default_graph().get_all_collection_keys()
                if isinstance(k, str) and k != ASSETS_KEY]
        return saver.export_meta_graph(collection_list=keys, clear_devices=clear_devices,
                                       strip_default_attrs=strip_default_attrs)

    def _tag_and_add_meta_graph(self, meta_graph_def: Any, tags: Sequence[str],
                                signature_def_map: Mapping[str, Any]) -> None:
        """Tag the meta graph, add its signatures and the graph's packed assets
        collection (``any_list``), and append it to the SavedModel."""
        for tag in tags:
            meta_graph_def.meta_info_def.tags.append(tag)
        for key, sd in signature_def_map.items():
            meta_graph_def.signature_def[key].CopyFrom(sd)
        assets = [a for a in get_collection(ASSETS_KEY) if isinstance(a, any_pb2.Any)]
        if assets:
            cd = meta_graph_def.collection_def[ASSETS_KEY]
            cd.Clear()
            cd.any_list.value.extend(assets)
        self._saved_model.meta_graphs.add().CopyFrom(meta_graph_def)

    # -- the public API ---------------------------------------------------------------
    def add_meta_graph(self, tags: Sequence[str], signature_def_map: Mapping[str, Any] | None
                       = None, assets_collection: Iterable[Any] | None = None,
                       legacy_init_op: Any = None, clear_devices: bool = False,
                       main_op: Any = None, strip_default_attrs: bool = False,
                       saver: Any = None) -> None:
        """Add the default graph as one more meta graph (no variables saved).

        :raises AssertionError: :meth:`add_meta_graph_and_variables` was not called yet
        """
        if not self._has_saved_variables:
            raise AssertionError(
                "Graph state including variables and assets has not been saved yet. "
                "Please invoke `add_meta_graph_and_variables()` first.")
        signature_def_map = dict(signature_def_map or {})
        self._validate_signature_def_map(signature_def_map)
        main_op = main_op if main_op is not None else legacy_init_op
        self._save_and_write_assets(assets_collection)
        self._maybe_add_main_op(main_op)
        saver = self._maybe_create_saver(saver)
        meta_graph_def = self._export(saver, clear_devices, strip_default_attrs)
        self._tag_and_add_meta_graph(meta_graph_def, tags, signature_def_map)

    def add_meta_graph_and_variables(
            self, sess: Any, tags: Sequence[str],
            signature_def_map: Mapping[str, Any] | None = None,
            assets_collection: Iterable[Any] | None = None, legacy_init_op: Any = None,
            clear_devices: bool = False, main_op: Any = None,
            strip_default_attrs: bool = False, saver: Any = None) -> None:
        """Save the variables of ``sess`` under variables/ and add the default graph as
        the first meta graph, tagged ``tags``, with its signatures, assets (a list of
        scalar string Const tensors holding file paths; the files are copied into
        assets/) and main op (run by the loader after the restore).

        :raises AssertionError: the variables were already saved, or a signature's
            TensorInfo lacks its name or dtype
        :raises KeyError: a signature uses a reserved key
        :raises TypeError: ``main_op`` is not an Operation, or an asset tensor is not a
            scalar string constant
        :raises ValueError: the graph already has a main op
        """
        if self._has_saved_variables:
            raise AssertionError("Graph state including variables and assets has already "
                                 "been saved. Please invoke `add_meta_graph()` instead.")
        signature_def_map = dict(signature_def_map or {})
        self._validate_signature_def_map(signature_def_map)
        main_op = main_op or legacy_init_op
        self._save_and_write_assets(assets_collection)
        self._maybe_add_main_op(main_op)
        variables_dir = os.path.join(self._export_dir, VARIABLES_DIRECTORY)
        os.makedirs(variables_dir, exist_ok=True)
        saver = self._maybe_create_saver(saver)
        saver.save(sess, os.path.join(variables_dir, VARIABLES_FILENAME),
                   write_meta_graph=False, write_state=False)
        meta_graph_def = self._export(saver, clear_devices, strip_default_attrs)
        self._tag_and_add_meta_graph(meta_graph_def, tags, signature_def_map)
        self._has_saved_variables = True

    def save(self, as_text: bool = False) -> bytes:
        """Write ``saved_model.pb`` (or ``saved_model.pbtxt`` with ``as_text``)
        atomically into the export directory; returns its path (bytes, as TF does)."""
        os.makedirs(self._export_dir, exist_ok=True)
        if as_text:
            path = os.path.join(self._export_dir, SAVED_MODEL_FILENAME_PBTXT)
            _ckpt.atomic_write(path, text_format.MessageToString(self._saved_model))
        else:
            path = os.path.join(self._export_dir, SAVED_MODEL_FILENAME_PB)
            _ckpt.atomic_write(path, self._saved_model.SerializeToString(deterministic=True))
        _log.info("SavedModel written to: %s", path)
        return path.encode()


# =========================================================================================
# the loader
# =========================================================================================
def parse_saved_model(export_dir: Any) -> Any:
    """The ``SavedModel`` proto of ``export_dir`` (saved_model.pb, else .pbtxt).

    :raises IOError: neither file exists, or the one found does not parse
    """
    export_dir = _as_str(export_dir)
    path_pb = os.path.join(export_dir, SAVED_MODEL_FILENAME_PB)
    path_pbtxt = os.path.join(export_dir, SAVED_MODEL_FILENAME_PBTXT)
    saved_model = saved_model_pb2.SavedModel()
    if os.path.isfile(path_pb):
        with open(path_pb, "rb") as f:
            content = f.read()
        try:
            saved_model.ParseFromString(content)
        except Exception as e:  # protobuf's DecodeError, reported as TF does
            raise IOError(f"Cannot parse file {path_pb}: {e}.") from None
    elif os.path.isfile(path_pbtxt):
        with open(path_pbtxt, "rb") as f:
            content = f.read()
        try:
            text_format.Parse(content.decode("utf-8"), saved_model)
        except (text_format.ParseError, UnicodeDecodeError) as e:
            raise IOError(f"Cannot parse file {path_pbtxt}: {e}.") from None
    else:
        raise IOError(f"SavedModel file does not exist at: {export_dir}/"
                      f"{{{SAVED_MODEL_FILENAME_PBTXT}|{SAVED_MODEL_FILENAME_PB}}}")
    return saved_model


def maybe_saved_model_directory(export_dir: Any) -> bool:
    """Whether ``export_dir`` has a saved_model.pb or .pbtxt (it may still not load)."""
    export_dir = _as_str(export_dir)
    return (os.path.isfile(os.path.join(export_dir, SAVED_MODEL_FILENAME_PBTXT))
            or os.path.isfile(os.path.join(export_dir, SAVED_MODEL_FILENAME_PB)))


contains_saved_model = maybe_saved_model_directory


def get_meta_graph_def_from_tags(saved_model: Any, tags: Iterable[str]) -> Any:
    """The meta graph of ``saved_model`` whose tag set is exactly ``tags``.

    :raises RuntimeError: none has those tags (the message lists the tag sets there are)
    """
    wanted = {tags} if isinstance(tags, str) else set(tags)
    available_tags = []
    for mg in saved_model.meta_graphs:
        available_tags.append(set(mg.meta_info_def.tags))
        if set(mg.meta_info_def.tags) == wanted:
            return mg
    raise RuntimeError(
        "MetaGraphDef associated with tags " + str(tags).strip("[]") + " could not be "
        "found in SavedModel. To inspect available tag-sets in the SavedModel, please "
        "use the SavedModel CLI: `saved_model_cli`\navailable_tags: " + str(available_tags))


def get_asset_tensors(export_dir: Any, meta_graph_def: Any,
                      import_scope: str | None = None) -> dict[str, str]:
    """``{asset tensor name: path of its file under export_dir/assets}`` for a meta
    graph (``asset_file_def``, else the packed ``saved_model_assets`` collection)."""
    if meta_graph_def.asset_file_def:
        protos = list(meta_graph_def.asset_file_def)
    elif ASSETS_KEY in meta_graph_def.collection_def:
        protos = [_unpack_asset(a)
                  for a in meta_graph_def.collection_def[ASSETS_KEY].any_list.value]
    else:
        protos = []
    assets_dir = os.path.join(_as_str(export_dir), ASSETS_DIRECTORY)
    return {_prepend_scope(p.tensor_info.name, import_scope):
            os.path.join(assets_dir, p.filename) for p in protos}


def _op_from_collection(meta_graph_def: Any, key: str, import_scope: str | None) -> Any:
    """The one op the meta graph's collection ``key`` names (None if absent).

    :raises RuntimeError: the collection names more than one op
    """
    cd = meta_graph_def.collection_def
    if key not in cd:
        return None
    names = list(cd[key].node_list.value)
    if len(names) != 1:
        raise RuntimeError(f"Expected exactly one SavedModel init op. Found {len(names)}: "
                           f"{names}.")
    return get_default_graph().as_graph_element(_prepend_scope(names[0], import_scope))


def get_init_op(meta_graph_def: Any, import_scope: str | None = None) -> Any:
    """The op a loader runs after restoring: the ``__saved_model_init_op`` signature's,
    else the main op collection's, else the legacy init op collection's (or None)."""
    if INIT_OP_SIGNATURE_KEY in meta_graph_def.signature_def:
        return load_op_from_signature_def(
            meta_graph_def.signature_def[INIT_OP_SIGNATURE_KEY], INIT_OP_SIGNATURE_KEY,
            import_scope)
    return (_op_from_collection(meta_graph_def, MAIN_OP_KEY, import_scope)
            or _op_from_collection(meta_graph_def, LEGACY_INIT_OP_KEY, import_scope))


def get_train_op(meta_graph_def: Any, import_scope: str | None = None) -> Any:
    """The train op a meta graph records (signature, else collection), or None."""
    if TRAIN_OP_SIGNATURE_KEY in meta_graph_def.signature_def:
        return load_op_from_signature_def(
            meta_graph_def.signature_def[TRAIN_OP_SIGNATURE_KEY], TRAIN_OP_SIGNATURE_KEY,
            import_scope)
    return _op_from_collection(meta_graph_def, TRAIN_OP_KEY, import_scope)


class SavedModelLoader:
    """Loads a SavedModel step by step: pick a meta graph by tags, import it, restore
    the variables, run the init op. :func:`load` does all of it."""

    def __init__(self, export_dir: Any):
        self._export_dir = _as_str(export_dir)
        self._variables_path = os.path.join(self._export_dir, VARIABLES_DIRECTORY,
                                            VARIABLES_FILENAME)
        self._saved_model = parse_saved_model(self._export_dir)

    @property
    def export_dir(self) -> str:
        """The SavedModel's directory."""
        return self._export_dir

    @property
    def variables_path(self) -> str:
        """The prefix of the variables' checkpoint."""
        return self._variables_path

    @property
    def saved_model(self) -> Any:
        """The parsed ``SavedModel`` proto."""
        return self._saved_model

    def get_meta_graph_def_from_tags(self, tags: Iterable[str]) -> Any:
        """The meta graph tagged exactly ``tags`` (RuntimeError if none)."""
        return get_meta_graph_def_from_tags(self._saved_model, tags)

    def load_graph(self, graph: Any, tags: Iterable[str], import_scope: str | None = None,
                   **saver_kwargs: Any) -> Any:
        """Import the meta graph tagged ``tags`` into ``graph``; returns its Saver (None
        when it has no variables)."""
        mg = self.get_meta_graph_def_from_tags(tags)
        with graph.as_default():
            return import_meta_graph(mg, import_scope=import_scope, **saver_kwargs)

    def restore_variables(self, sess: Any, saver: Any, import_scope: str | None = None
                          ) -> None:
        """Restore the variables from variables/ with ``saver``.

        :raises ValueError: no saver while the graph has variables
        """
        with sess.graph.as_default():
            if saver is None and not (
                    get_collection(GraphKeys.GLOBAL_VARIABLES, scope=import_scope)
                    or get_collection(GraphKeys.SAVEABLE_OBJECTS, scope=import_scope)):
                _log.info("The specified SavedModel has no variables; no checkpoints "
                          "were restored.")
            elif isinstance(saver, Saver):
                saver.restore(sess, self._variables_path)
            else:
                raise ValueError(
                    "No tf.train.Saver object was passed to the function "
                    "SavedModelLoader.restore_variables. Since there are variables in "
                    "the graph, a saver is required.")

    def run_init_ops(self, sess: Any, tags: Iterable[str], import_scope: str | None = None
                     ) -> None:
        """Run the meta graph's init op, its asset tensors fed their files' paths."""
        mg = self.get_meta_graph_def_from_tags(tags)
        with sess.graph.as_default():
            assets = get_asset_tensors(self._export_dir, mg, import_scope=import_scope)
            init_op = get_init_op(mg, import_scope)
            if init_op is not None:
                sess.run(fetches=[init_op], feed_dict=assets)

    def load(self, sess: Any, tags: Iterable[str], import_scope: str | None = None,
             **saver_kwargs: Any) -> Any:
        """Import, restore and initialize into ``sess``; returns the MetaGraphDef
        (unscoped, as stored)."""
        with sess.graph.as_default():
            saver = self.load_graph(sess.graph, tags, import_scope, **saver_kwargs)
            self.restore_variables(sess, saver, import_scope)
            self.run_init_ops(sess, tags, import_scope)
        return self.get_meta_graph_def_from_tags(tags)


def load(sess: Any, tags: Iterable[str], export_dir: Any, import_scope: str | None = None,
         **saver_kwargs: Any) -> Any:
    """Load the meta graph of ``export_dir`` tagged exactly ``tags`` into ``sess``'s
    graph (names prefixed by ``import_scope``), restore its variables and run its main
    op (its asset tensors fed their paths under assets/); returns its ``MetaGraphDef``.
    ``saver_kwargs`` go to ``tf.train.import_meta_graph`` (``clear_devices`` ...).

    :raises IOError: there is no saved_model.pb(txt) or it does not parse
    :raises RuntimeError: no meta graph has exactly these tags
    """
    return SavedModelLoader(export_dir).load(sess, tags, import_scope, **saver_kwargs)


# =========================================================================================
# simple_save and MethodNameUpdater
# =========================================================================================
def simple_save(session: Any, export_dir: Any, inputs: Mapping[str, Any],
                outputs: Mapping[str, Any], legacy_init_op: Any = None) -> None:
    """Save ``session``'s graph and variables as a serving SavedModel: tag ``serve``,
    one predict signature ``serving_default`` of ``inputs`` and ``outputs``, the
    ``ASSET_FILEPATHS`` collection's assets, devices cleared."""
    signature_def_map = {DEFAULT_SERVING_SIGNATURE_DEF_KEY:
                         predict_signature_def(inputs, outputs)}
    b = SavedModelBuilder(export_dir)
    b.add_meta_graph_and_variables(
        session, tags=[SERVING], signature_def_map=signature_def_map,
        assets_collection=get_collection(GraphKeys.ASSET_FILEPATHS),
        main_op=legacy_init_op, clear_devices=True)
    b.save()


class MethodNameUpdater:
    """Changes the ``method_name`` of signatures of a SavedModel on disk
    (``tf.saved_model.signature_def_utils.MethodNameUpdater``).

    :raises IOError: ``export_dir`` holds no SavedModel that parses
    """

    def __init__(self, export_dir: Any):
        self._export_dir = _as_str(export_dir)
        self._saved_model = parse_saved_model(self._export_dir)

    def replace_method_name(self, signature_key: str, method_name: str,
                            tags: Any = None) -> None:
        """Set the method name of signature ``signature_key`` in the meta graph tagged
        ``tags`` (every meta graph when None).

        :raises ValueError: a missing argument, no meta graph with these tags, or one
            without that signature
        """
        if not signature_key:
            raise ValueError("`signature_key` must be defined.")
        if not method_name:
            raise ValueError("`method_name` must be defined.")
        if tags is not None and not isinstance(tags, list):
            tags = [tags]
        found = False
        for mg in self._saved_model.meta_graphs:
            if tags is None or set(tags) == set(mg.meta_info_def.tags):
                if signature_key not in mg.signature_def:
                    raise ValueError(
                        f"MetaGraphDef associated with tags {tags} does not have a "
                        f"signature_def with key: '{signature_key}'. This means either "
                        "you specified the wrong signature key or forgot to put the "
                        "signature_def with the corresponding key in your SavedModel.")
                mg.signature_def[signature_key].method_name = method_name
                found = True
        if not found:
            raise ValueError(
                f"MetaGraphDef associated with tags {tags} could not be found in "
                "SavedModel. This means either you specified invalid tags or your "
                "SavedModel does not have a MetaGraphDef with the specified tags.")

    def save(self, new_export_dir: Any = None) -> None:
        """Write the updated SavedModel (over the original when no new directory), in
        the format (binary or text) it was read in."""
        as_text = os.path.isfile(os.path.join(self._export_dir, SAVED_MODEL_FILENAME_PBTXT))
        out = _as_str(new_export_dir) if new_export_dir else self._export_dir
        os.makedirs(out, exist_ok=True)
        if as_text:
            _ckpt.atomic_write(os.path.join(out, SAVED_MODEL_FILENAME_PBTXT),
                               text_format.MessageToString(self._saved_model))
        else:
            _ckpt.atomic_write(os.path.join(out, SAVED_MODEL_FILENAME_PB),
                               self._saved_model.SerializeToString(deterministic=True))


# =========================================================================================
# the published names
# =========================================================================================
def _module(name: str, members: Mapping[str, Any]) -> types.ModuleType:
    mod = types.ModuleType(f"flowrt.saved_model.{name}")
    mod.__dict__.update(members)
    mod.__all__ = sorted(members)  # type: ignore[attr-defined]
    return mod


_CONSTANTS = {n: globals()[n] for n in (
    "ASSETS_DIRECTORY", "ASSETS_KEY", "DEBUG_DIRECTORY", "DEBUG_INFO_FILENAME_PB",
    "LEGACY_INIT_OP_KEY", "MAIN_OP_KEY", "SAVED_MODEL_FILENAME_PB",
    "SAVED_MODEL_FILENAME_PBTXT", "SAVED_MODEL_SCHEMA_VERSION", "VARIABLES_DIRECTORY",
    "VARIABLES_FILENAME")}
_TAGS = {"SERVING": SERVING, "TRAINING": TRAINING, "GPU": GPU, "TPU": TPU}
_SIGNATURE_CONSTANTS = {n: globals()[n] for n in (
    "CLASSIFY_INPUTS", "CLASSIFY_METHOD_NAME", "CLASSIFY_OUTPUT_CLASSES",
    "CLASSIFY_OUTPUT_SCORES", "DEFAULT_SERVING_SIGNATURE_DEF_KEY", "PREDICT_INPUTS",
    "PREDICT_METHOD_NAME", "PREDICT_OUTPUTS", "REGRESS_INPUTS", "REGRESS_METHOD_NAME",
    "REGRESS_OUTPUTS")}
_SIGNATURE_UTILS = {
    "build_signature_def": build_signature_def,
    "predict_signature_def": predict_signature_def,
    "classification_signature_def": classification_signature_def,
    "regression_signature_def": regression_signature_def,
    "is_valid_signature": is_valid_signature, "MethodNameUpdater": MethodNameUpdater}
_UTILS = {"build_tensor_info": build_tensor_info,
          "get_tensor_from_tensor_info": get_tensor_from_tensor_info}
_MAIN_OP = {"main_op": main_op, "main_op_with_restore": main_op_with_restore}
_LOADER = {"load": load, "maybe_saved_model_directory": maybe_saved_model_directory}
_BUILDER = {"SavedModelBuilder": SavedModelBuilder}

#: ``tf.saved_model.*`` (TF1 names; TF2's save/load_v2/Asset/SaveOptions are not here)
API: dict[str, Any] = {
    **{f"saved_model.{k}": v for k, v in {
        **_CONSTANTS, **_TAGS, **_SIGNATURE_CONSTANTS, **_UTILS,
        "main_op_with_restore": main_op_with_restore,
        **{k: v for k, v in _SIGNATURE_UTILS.items() if k != "MethodNameUpdater"},
        "Builder": SavedModelBuilder, "load": load, "simple_save": simple_save,
        "contains_saved_model": contains_saved_model,
        "maybe_saved_model_directory": maybe_saved_model_directory}.items()},
}
for _sub, _members in (("builder", _BUILDER), ("loader", _LOADER),
                       ("constants", _CONSTANTS), ("tag_constants", _TAGS),
                       ("signature_constants", _SIGNATURE_CONSTANTS),
                       ("signature_def_utils", _SIGNATURE_UTILS), ("utils", _UTILS),
                       ("main_op", _MAIN_OP)):
    API[f"saved_model.{_sub}"] = _module(_sub, _members)
#: the proto messages TF 1.15 exports at the top level too
API["TensorInfo"] = meta_graph_pb2.TensorInfo
