"""``flowrt inspect PATH``: what a checkpoint, a SavedModel or a graph file holds.

- a checkpoint (a prefix, its ``.index`` or a data file, or a directory whose
  ``checkpoint`` state file names one): one line per variable, ``name (DT_FLOAT) [3,3]``,
  as TF's ``inspect_checkpoint`` prints them; ``--tensor NAME`` prints that value;
- a SavedModel directory: each tag set and its signatures' inputs and outputs with dtype,
  shape and tensor name, as ``saved_model_cli show --all`` prints them;
- a ``.pb`` / ``.pbtxt`` GraphDef or a ``.meta`` MetaGraphDef: the op types with their
  counts, the placeholders (dtype, shape) and the outputs (nodes nothing consumes,
  other than NoOp, Const, Assert and Assign);
  a meta graph also its tags, collections and signatures.

Anything else raises ``NotFoundError`` naming the path.
"""
from __future__ import annotations

import collections
import os
from typing import Any, TextIO

import numpy as np
from google.protobuf import message as _message
from google.protobuf import text_format

from ..base import dtypes as _dt
from ..base import errors
from ..modeling.saved_model import SAVED_MODEL_FILENAME_PB, SAVED_MODEL_FILENAME_PBTXT
from ..modeling.saved_model import maybe_saved_model_directory, parse_saved_model
from ..proto import graph_def_pb2, meta_graph_pb2, types_pb2
from ..training.saver import NewCheckpointReader, checkpoint_exists, latest_checkpoint

__all__ = ["inspect_path", "describe_checkpoint", "describe_saved_model",
           "describe_graph_file"]



def _dt_name(enum: int) -> str:
    try:
        return types_pb2.DataType.Name(enum)
    except ValueError:
        return str(enum)


def _checkpoint_prefix(path: str) -> str | None:
    """The checkpoint prefix ``path`` stands for, or None if it is not one."""
    if os.path.isdir(path):
        return latest_checkpoint(path)
    if path.endswith(".index"):
        path = path[:-len(".index")]
    elif ".data-" in os.path.basename(path):
        path = path[:path.rindex(".data-")]
    return path if checkpoint_exists(path) else None


# -- checkpoints -----------------------------------------------------------------------------
def describe_checkpoint(prefix: str, out: TextIO, tensor: str | None = None) -> None:
    """Print a checkpoint's variables (``name (DT_X) [dims]``, sorted), or with
    ``tensor`` that tensor's name and value.

    :raises NotFoundError: ``tensor`` is not in the checkpoint
    """
    reader = NewCheckpointReader(prefix)
    if tensor is not None:
        if not reader.has_tensor(tensor):
            raise errors.NotFoundError(None, None,
                                       f"Key {tensor} not found in checkpoint {prefix}")
        value = reader.get_tensor(tensor)
        print("tensor_name: ", tensor, file=out)
        with np.printoptions(threshold=1000):
            print(value, file=out)
        return
    shapes = reader.get_variable_to_shape_map()
    dtypes = reader.get_variable_to_dtype_map()
    for name in sorted(shapes):
        dt = _dt_name(_dt.as_dtype(dtypes[name]).as_datatype_enum)
        print(f"{name} ({dt}) [{','.join(str(d) for d in shapes[name])}]", file=out)


# -- SavedModels ----------------------------------------------------------------------------
def _shape_text(tensor_info: Any) -> str:
    if tensor_info.tensor_shape.unknown_rank:
        return "unknown_rank"
    return "(" + ", ".join(str(d.size) for d in tensor_info.tensor_shape.dim) + ")"


def _print_tensor_info(key: str, kind: str, ti: Any, out: TextIO) -> None:
    print(f"    {kind}['{key}'] tensor_info:", file=out)
    print(f"        dtype: {_dt_name(ti.dtype)}", file=out)
    print(f"        shape: {_shape_text(ti)}", file=out)
    if ti.WhichOneof("encoding") == "coo_sparse":
        cs = ti.coo_sparse
        print(f"        indices: {cs.indices_tensor_name}", file=out)
        print(f"        values: {cs.values_tensor_name}", file=out)
        print(f"        dense_shape: {cs.dense_shape_tensor_name}", file=out)
    else:
        print(f"        name: {ti.name}", file=out)


def _print_signatures(signature_def: Any, out: TextIO) -> None:
    for key in sorted(signature_def):
        sd = signature_def[key]
        print(file=out)
        print(f"signature_def['{key}']:", file=out)
        print("  The given SavedModel SignatureDef contains the following input(s):",
              file=out)
        for k in sorted(sd.inputs):
            _print_tensor_info(k, "inputs", sd.inputs[k], out)
        print("  The given SavedModel SignatureDef contains the following output(s):",
              file=out)
        for k in sorted(sd.outputs):
            _print_tensor_info(k, "outputs", sd.outputs[k], out)
        print(f"  Method name is: {sd.method_name}", file=out)


def describe_saved_model(export_dir: str, out: TextIO) -> None:
    """Print each meta graph's tag set and its signatures (``saved_model_cli show
    --all``; meta graphs sorted by their tags, as it sorts them), then the variables of
    ``variables/``."""
    sm = parse_saved_model(export_dir)
    graphs = sorted(sm.meta_graphs, key=lambda mg: list(mg.meta_info_def.tags))
    for i, mg in enumerate(graphs):
        if i:
            print(file=out)
        tags = ", ".join(mg.meta_info_def.tags)
        print(f"MetaGraphDef with tag-set: '{tags}' contains the following SignatureDefs:",
              file=out)
        _print_signatures(mg.signature_def, out)
    prefix = os.path.join(export_dir, "variables", "variables")
    if checkpoint_exists(prefix):
        print(file=out)
        print("variables:", file=out)
        describe_checkpoint(prefix, _Indented(out), None)


class _Indented:
    """A text stream writing each line indented by two spaces."""

    def __init__(self, out: TextIO):
        self._out = out

    def write(self, s: str) -> int:
        return self._out.write("".join("  " + line if line.strip() else line
                                       for line in s.splitlines(keepends=True)))

    def flush(self) -> None:
        self._out.flush()


# -- graphs ---------------------------------------------------------------------------------
def _parse(path: str, msg: Any) -> Any:
    """Parse ``path`` into ``msg`` as binary, else as text; None if neither."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        msg.ParseFromString(data)
        if msg.ListFields() or not data:
            return msg
    except _message.DecodeError:
        pass
    msg.Clear()
    try:
        text_format.Parse(data.decode("utf-8"), msg)
        return msg
    except (text_format.ParseError, UnicodeDecodeError):
        return None


def _describe_graph_def(gd: Any, out: TextIO) -> None:
    """Op types with counts, placeholders and outputs of a GraphDef."""
    counts = collections.Counter(n.op for n in gd.node)
    print(f"nodes: {len(gd.node)}", file=out)
    print("op types:", file=out)
    width = max((len(op) for op in counts), default=0)
    for op, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {op:<{width}}  {n}", file=out)
    print("placeholders:", file=out)
    for n in gd.node:
        if n.op in ("Placeholder", "PlaceholderV2", "PlaceholderWithDefault"):
            dt = _dt_name(n.attr["dtype"].type) if "dtype" in n.attr else "?"
            shape = "unknown_rank"
            if "shape" in n.attr and not n.attr["shape"].shape.unknown_rank:
                shape = "(" + ", ".join(str(d.size) for d in n.attr["shape"].shape.dim) + ")"
            print(f"  {n.name}: {dt} {shape}", file=out)
    consumed = {i.lstrip("^").split(":")[0] for n in gd.node for i in n.input}
    print("outputs:", file=out)
    for n in gd.node:
        # initializers (Assign), groups (NoOp) and checks are sinks too, not results
        if n.name not in consumed and n.op not in ("NoOp", "Const", "Assert", "Assign"):
            print(f"  {n.name} ({n.op})", file=out)


def describe_graph_file(path: str, out: TextIO) -> None:
    """Print a ``.meta`` MetaGraphDef or a ``.pb`` / ``.pbtxt`` GraphDef.

    :raises NotFoundError: the file parses as neither
    """
    is_meta = path.endswith(".meta")
    mg = _parse(path, meta_graph_pb2.MetaGraphDef()) if is_meta else None
    if mg is not None:
        print(f"MetaGraphDef: {path}", file=out)
        print(f"tags: {', '.join(mg.meta_info_def.tags) or '(none)'}", file=out)
        info = mg.meta_info_def
        if info.tensorflow_git_version.startswith("flowrt"):
            print(f"written by: {info.tensorflow_git_version}", file=out)
        elif info.tensorflow_version:
            print(f"written by: TensorFlow {info.tensorflow_version}", file=out)
        print(f"collections: {', '.join(sorted(mg.collection_def)) or '(none)'}", file=out)
        _describe_graph_def(mg.graph_def, out)
        if mg.signature_def:
            _print_signatures(mg.signature_def, out)
        return
    gd = _parse(path, graph_def_pb2.GraphDef())
    if gd is None or not gd.node:
        raise errors.NotFoundError(None, None, f"{path} is not a GraphDef, a MetaGraphDef, "
                                   "a checkpoint or a SavedModel")
    print(f"GraphDef: {path}", file=out)
    _describe_graph_def(gd, out)


# -- dispatch -------------------------------------------------------------------------------
def inspect_path(path: str, out: TextIO, tensor: str | None = None) -> None:
    """Print what ``path`` holds: a checkpoint's variables (or ``tensor``'s value), a
    SavedModel's signatures, or a graph file's ops.

    :raises NotFoundError: ``path`` does not exist or is none of these
    """
    path = os.fspath(path)
    base = os.path.basename(path)
    if not os.path.isdir(path) and base in (SAVED_MODEL_FILENAME_PB,
                                            SAVED_MODEL_FILENAME_PBTXT):
        path = os.path.dirname(path) or "."
    if os.path.isdir(path) and maybe_saved_model_directory(path):
        if tensor is not None:
            describe_checkpoint(os.path.join(path, "variables", "variables"), out, tensor)
        else:
            describe_saved_model(path, out)
        return
    prefix = _checkpoint_prefix(path)
    if prefix is not None:
        describe_checkpoint(prefix, out, tensor)
        return
    if os.path.isfile(path):
        if tensor is not None:
            raise errors.NotFoundError(None, None, f"{path} is not a checkpoint: --tensor "
                                       "needs a checkpoint or a SavedModel")
        describe_graph_file(path, out)
        return
    if os.path.isdir(path):
        raise errors.NotFoundError(None, None, f"{path} holds no SavedModel "
                                   "(saved_model.pb) and no checkpoint state file naming "
                                   "a checkpoint")
    raise errors.NotFoundError(None, None, f"{path}: no such file, directory or checkpoint "
                               "prefix")
