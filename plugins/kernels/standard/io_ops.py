"""Checkpoint ops (SaveV2, RestoreV2, MergeV2Checkpoints, ShardedFilename,
ShardedFilespec; V1's Save, SaveSlices, Restore, RestoreSlice) and the ``tf.train``
checkpoint API (Saver, latest_checkpoint ...).

The kernels read and write TensorFlow's checkpoint layout, which is flowrt's
(:mod:`flowrt.checkpoint`, docs/checkpoints.md); RestoreV2 also reads V1 files. They run on the device the op is placed on, which the Saver
chooses beside the variables, so each shard is written where its variables live.
Every path is checked against the worker's file roots (``check_path``) before anything
is read, created or written.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import flowrt.checkpoint as _ckpt
import flowrt.modeling.warm_start as _warm_start
import flowrt.saver as _saver
from flowrt import errors
from flowrt.op_registry import OpDef
from flowrt.plugin.file_policy import check_glob, check_path
from flowrt.proto import saver_pb2
from flowrt.tensor_shape import TensorShape, unknown_shape

from ._common import ks

__all__ = ["Saver"]


# -- shape functions ----------------------------------------------------------------------
def _rank(op: Any, i: int, want: int, what: str) -> int | None:
    """Check input ``i`` has rank ``want``; returns its first dim (rank 1) or None."""
    d = op.inputs[i].shape.as_tuple()
    if d is None:
        return None
    if len(d) != want:
        raise ValueError(f"Shape must be rank {want} but is rank {len(d)} for '{op.name}' "
                         f"(op: '{op.type}'): input '{what}' has shape "
                         f"{op.inputs[i].shape}")
    return d[0] if want == 1 else None


def _save_shape(op: Any) -> list[TensorShape]:
    _rank(op, 0, 0, "prefix")
    n = len(op.inputs) - 3
    for i, what in ((1, "tensor_names"), (2, "shape_and_slices")):
        k = _rank(op, i, 1, what)
        if k is not None and k != n:
            raise ValueError(f"Dimension must be {n} but is {k} for '{op.name}' (op: "
                             f"'{op.type}'): {what} must have one entry per tensor")
    return []


def _restore_shape(op: Any) -> list[TensorShape]:
    _rank(op, 0, 0, "prefix")
    n = len(op.outputs)
    for i, what in ((1, "tensor_names"), (2, "shape_and_slices")):
        k = _rank(op, i, 1, what)
        if k is not None and k != n:
            raise ValueError(f"Dimension must be {n} but is {k} for '{op.name}' (op: "
                             f"'{op.type}'): {what} must have one entry per dtype")
    return [unknown_shape()] * n


def _merge_shape(op: Any) -> list[TensorShape]:
    _rank(op, 0, 1, "checkpoint_prefixes")
    _rank(op, 1, 0, "destination_prefix")
    return []


def _scalars_shape(op: Any) -> list[TensorShape]:
    for i, t in enumerate(op.inputs):
        _rank(op, i, 0, f"input {i}")
    return [TensorShape([])]


ks.op(
    OpDef("SaveV2",
          inputs=["prefix: string", "tensor_names: string", "shape_and_slices: string",
                  "tensors: dtypes"],
          attrs=["dtypes: list(type)"], shape_fn=_save_shape, is_stateful=True,
          doc="Saves tensors as a checkpoint at prefix."),
    OpDef("RestoreV2",
          inputs=["prefix: string", "tensor_names: string", "shape_and_slices: string"],
          outputs=["tensors: dtypes"], attrs=["dtypes: list(type) >= 1"],
          shape_fn=_restore_shape, is_stateful=True,
          doc="Reads tensors from the checkpoint at prefix."),
    OpDef("MergeV2Checkpoints",
          inputs=["checkpoint_prefixes: string", "destination_prefix: string"],
          attrs=["delete_old_dirs: bool = true"], shape_fn=_merge_shape, is_stateful=True,
          doc="Merges complete checkpoints into one."),
    OpDef("ShardedFilename", inputs=["basename: string", "shard: int32", "num_shards: int32"],
          outputs=["filename: string"], shape_fn=_scalars_shape,
          doc="basename-SSSSS-of-NNNNN."),
    OpDef("ShardedFilespec", inputs=["basename: string", "num_shards: int32"],
          outputs=["filename: string"], shape_fn=_scalars_shape,
          doc="basename-?????-of-NNNNN."),
)


# -- kernels ------------------------------------------------------------------------------
def _scalar_str(x: Any, what: str) -> str:
    a = np.asarray(x, dtype=object)
    if a.ndim != 0:
        raise errors.InvalidArgumentError(None, None, f"{what} must be a scalar, got shape "
                                          f"{list(a.shape)}")
    v = a.item()
    return v.decode() if isinstance(v, bytes) else str(v)


def _str_list(x: Any, what: str) -> list[str]:
    a = np.asarray(x, dtype=object)
    if a.ndim != 1:
        raise errors.InvalidArgumentError(None, None, f"{what} must be a vector, got shape "
                                          f"{list(a.shape)}")
    return [v.decode() if isinstance(v, bytes) else str(v) for v in a]


def _check_slices(slices: list[str], n: int) -> list[str]:
    if len(slices) != n:
        raise errors.InvalidArgumentError(None, None, f"Expected {n} shape_and_slices "
                                          f"entries, got {len(slices)}")
    return slices


@ks.kernel("SaveV2", expensive=True)
def _save_v2_kernel(ctx: Any) -> Any:
    dtypes = [d.base_dtype for d in ctx.attrs["dtypes"]]
    to_host = None if ctx.xp is np else ctx.device.to_host

    def save(prefix: Any, tensor_names: Any, shape_and_slices: Any, *tensors: Any) -> None:
        p = check_path(ctx, _scalar_str(prefix, "prefix"), write=True)
        names = _str_list(tensor_names, "tensor_names")
        if len(names) != len(tensors):
            raise errors.InvalidArgumentError(None, None, f"Got {len(names)} tensor names "
                                              f"but {len(tensors)} tensors")
        slices = _check_slices(_str_list(shape_and_slices, "shape_and_slices"), len(names))
        values = list(tensors) if to_host is None else [to_host(t) for t in tensors]
        _ckpt.write_checkpoint(p, names, values, dtypes, slices)
        return None

    return save


def _restore_targets(ctx: Any) -> list[str]:
    """For each output, the variables it is assigned to (for error messages)."""
    op = ctx.op
    out = []
    for t in getattr(op, "outputs", ()):
        names = []
        for c in t.consumers():
            if c.type == "Assign" and c.inputs and c.inputs[0].op is not None:
                names.append(c.inputs[0].op.name)
        out.append(", ".join(names))
    return out


@ks.kernel("RestoreV2", expensive=True)
def _restore_v2_kernel(ctx: Any) -> Any:
    dtypes = [d.base_dtype for d in ctx.attrs["dtypes"]]
    shapes = [s.as_tuple() if s is not None else None for s in ctx.output_shapes]
    targets = _restore_targets(ctx)
    targets += [""] * (len(dtypes) - len(targets))
    from_host = None if ctx.xp is np else ctx.device.from_host
    single = len(dtypes) == 1

    def restore(prefix: Any, tensor_names: Any, shape_and_slices: Any) -> Any:
        p = check_glob(ctx, _scalar_str(prefix, "prefix"))  # (a V1 pattern is read too)
        names = _str_list(tensor_names, "tensor_names")
        if len(names) != len(dtypes):
            raise errors.InvalidArgumentError(None, None, f"Got {len(names)} tensor names "
                                              f"but {len(dtypes)} dtypes")
        slices = _check_slices(_str_list(shape_and_slices, "shape_and_slices"), len(names))
        reader = _ckpt.CheckpointReader(p)
        for i, name in enumerate(names):
            have = reader.dtype(name)
            if have is not dtypes[i]:
                raise errors.InvalidArgumentError(
                    None, None, f"tensor_name = {name}; expected dtype {dtypes[i].name} does "
                    f"not equal restored dtype {have.name}" + _into(targets[i]))
            want = shapes[i]
            if want is not None:
                got = _restored_shape(reader, name, slices[i])
                if len(got) != len(want) or any(w is not None and w != g
                                                 for w, g in zip(want, got)):
                    ws = "[" + ",".join("?" if w is None else str(w) for w in want) + "]"
                    raise errors.InvalidArgumentError(
                        None, None, f"Restoring '{name}' from checkpoint {p}"
                        f"{_into(targets[i])}: Assign requires shapes of both tensors to "
                        f"match. lhs shape= {ws} rhs shape= {list(got)}")
        values = reader.read(names, slices)
        if from_host is not None:
            values = [from_host(v) for v in values]
        return values[0] if single else tuple(values)

    return restore


def _restored_shape(reader: Any, name: str, spec: str) -> tuple[int, ...]:
    """The shape RestoreV2 gives ``name`` restored with ``spec`` (its slice's shape)."""
    if not spec:
        return reader.shape(name)
    full, extents = _ckpt.parse_shape_and_slice(spec, name)
    if tuple(full) != tuple(reader.shape(name)):
        raise errors.InvalidArgumentError(
            None, None, f"tensor_name = {name}; shape in shape_and_slice spec {full} does "
            f"not match the shape stored in checkpoint: {list(reader.shape(name))}")
    return tuple(n for _, n in extents)


def _into(target: str) -> str:
    return f" (restoring into variable {target})" if target else ""


@ks.kernel("MergeV2Checkpoints", expensive=True)
def _merge_kernel(ctx: Any) -> Any:
    delete_old_dirs = bool(ctx.attrs.get("delete_old_dirs", True))

    def merge(checkpoint_prefixes: Any, destination_prefix: Any) -> None:
        sources = _str_list(checkpoint_prefixes, "checkpoint_prefixes")
        dest = _scalar_str(destination_prefix, "destination_prefix")
        for path in (*sources, dest):  # the sources' files are moved, their dirs removed
            check_path(ctx, path, write=True)
        _ckpt.merge_checkpoints(sources, dest, delete_old_dirs)
        return None

    return merge


def _int_scalar(x: Any, what: str) -> int:
    a = np.asarray(x)
    if a.ndim != 0:
        raise errors.InvalidArgumentError(None, None, f"{what} must be a scalar")
    return int(a)


@ks.kernel("ShardedFilename")
def _sharded_filename_kernel(ctx: Any) -> Any:
    def fn(basename: Any, shard: Any, num_shards: Any) -> Any:
        s = _ckpt.sharded_filename(_scalar_str(basename, "basename"),
                                   _int_scalar(shard, "shard"),
                                   _int_scalar(num_shards, "num_shards"))
        return np.array(s.encode(), dtype=object)

    return fn


@ks.kernel("ShardedFilespec")
def _sharded_filespec_kernel(ctx: Any) -> Any:
    def fn(basename: Any, num_shards: Any) -> Any:
        s = _ckpt.sharded_filespec(_scalar_str(basename, "basename"),
                                   _int_scalar(num_shards, "num_shards"))
        return np.array(s.encode(), dtype=object)

    return fn


# -- V1 checkpoints: Save / SaveSlices write one table, Restore / RestoreSlice read it ---------
def _v1_save_shape(op: Any) -> list[TensorShape]:
    _rank(op, 0, 0, "filename")
    return []


def _v1_restore_shape(op: Any) -> list[TensorShape]:
    _rank(op, 0, 0, "file_pattern")
    _rank(op, 1, 0, "tensor_name")
    return [unknown_shape()]


ks.op(
    OpDef("Save", inputs=["filename: string", "tensor_names: string", "data: T"],
          attrs=["T: list(type)"], shape_fn=_v1_save_shape, is_stateful=True,
          doc="Saves tensors as a V1 checkpoint (one file)."),
    OpDef("SaveSlices",
          inputs=["filename: string", "tensor_names: string", "shapes_and_slices: string",
                  "data: T"],
          attrs=["T: list(type)"], shape_fn=_v1_save_shape, is_stateful=True,
          doc="Saves tensors or slices of them as a V1 checkpoint (one file)."),
    OpDef("Restore", inputs=["file_pattern: string", "tensor_name: string"],
          outputs=["tensor: dt"], attrs=["dt: type", "preferred_shard: int = -1"],
          shape_fn=_v1_restore_shape, is_stateful=True,
          doc="Reads a tensor from a checkpoint (V1 or V2)."),
    OpDef("RestoreSlice",
          inputs=["file_pattern: string", "tensor_name: string", "shape_and_slice: string"],
          outputs=["tensor: dt"], attrs=["dt: type", "preferred_shard: int = -1"],
          shape_fn=_v1_restore_shape, is_stateful=True,
          doc="Reads a slice of a tensor from a checkpoint (V1 or V2)."),
)


def _v1_save(ctx: Any, sliced: bool) -> Any:
    dtypes = [d.base_dtype for d in ctx.attrs["T"]]
    to_host = None if ctx.xp is np else ctx.device.to_host

    def save(filename: Any, tensor_names: Any, *rest: Any) -> None:
        p = check_path(ctx, _scalar_str(filename, "filename"), write=True)
        names = _str_list(tensor_names, "tensor_names")
        specs = _str_list(rest[0], "shapes_and_slices") if sliced else [""] * len(names)
        tensors = list(rest[1:] if sliced else rest)
        if not len(names) == len(specs) == len(tensors):
            raise errors.InvalidArgumentError(None, None, f"Got {len(names)} tensor names, "
                                              f"{len(specs)} slices and {len(tensors)} "
                                              "tensors")
        if to_host is not None:
            tensors = [to_host(t) for t in tensors]
        _ckpt.write_v1_checkpoint(p, names, tensors, dtypes, specs)
        return None

    return save


@ks.kernel("Save", expensive=True)
def _save_kernel(ctx: Any) -> Any:
    return _v1_save(ctx, False)


@ks.kernel("SaveSlices", expensive=True)
def _save_slices_kernel(ctx: Any) -> Any:
    return _v1_save(ctx, True)


def _v1_restore(ctx: Any, sliced: bool) -> Any:
    dt = ctx.attrs["dt"].base_dtype
    from_host = None if ctx.xp is np else ctx.device.from_host

    def restore(file_pattern: Any, tensor_name: Any, *spec: Any) -> Any:
        p = _scalar_str(file_pattern, "file_pattern")
        check_glob(ctx, p)  # the pattern and every file it matches
        name = _scalar_str(tensor_name, "tensor_name")
        sl = _scalar_str(spec[0], "shape_and_slice") if sliced else ""
        reader = _ckpt.CheckpointReader(p)
        if reader.dtype(name) is not dt:
            raise errors.InvalidArgumentError(
                None, None, f"tensor_name = {name}; expected dtype {dt.name} does not "
                f"equal restored dtype {reader.dtype(name).name} (checkpoint {p})")
        (value,) = reader.read([name], [sl])
        return value if from_host is None else from_host(value)

    return restore


@ks.kernel("Restore", expensive=True)
def _restore_kernel(ctx: Any) -> Any:
    return _v1_restore(ctx, False)


@ks.kernel("RestoreSlice", expensive=True)
def _restore_slice_kernel(ctx: Any) -> Any:
    return _v1_restore(ctx, True)


ks.not_differentiable("SaveV2", "RestoreV2", "MergeV2Checkpoints", "ShardedFilename",
                      "ShardedFilespec", "Save", "SaveSlices", "Restore", "RestoreSlice")

# -- the tf.train API ---------------------------------------------------------------------
Saver = _saver.Saver
for _name, _value in (
        ("train.Saver", _saver.Saver),
        ("train.SaverDef", saver_pb2.SaverDef),
        ("train.latest_checkpoint", _saver.latest_checkpoint),
        ("train.get_checkpoint_state", _saver.get_checkpoint_state),
        ("train.update_checkpoint_state", _saver.update_checkpoint_state),
        ("train.generate_checkpoint_state_proto", _saver.generate_checkpoint_state_proto),
        ("train.checkpoint_exists", _saver.checkpoint_exists),
        ("train.get_checkpoint_mtimes", _saver.get_checkpoint_mtimes),
        ("train.remove_checkpoint", _saver.remove_checkpoint),
        ("train.NewCheckpointReader", _saver.NewCheckpointReader),
        ("train.load_checkpoint", _saver.load_checkpoint),
        ("train.load_variable", _saver.load_variable),
        ("train.list_variables", _saver.list_variables),
        ("train.export_meta_graph", _saver.export_meta_graph),
        ("train.import_meta_graph", _saver.import_meta_graph),
):
    ks.export(_name, _value)
for _name, _value in _warm_start.API.items():
    ks.export(_name, _value)
