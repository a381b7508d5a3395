"""``tf.train.Saver`` and the checkpoint helpers of TF 1.15's ``tf.train``.

A :class:`Saver` adds save and restore ops to the graph, beside the variables they
touch: a ``SaveV2`` op on the first variable's device (``sharded=False``), or one
``SaveV2`` per device holding variables followed by a ``MergeV2Checkpoints``
(``sharded=True``); ``RestoreV2`` ops feeding ``Assign`` ops. ``save`` runs the save
tensor with the checkpoint prefix fed, as TensorFlow does, then maintains the
``checkpoint`` state file, deletes checkpoints beyond ``max_to_keep`` and writes the
meta graph. The file format is in :mod:`flowrt.checkpoint` and docs/checkpoints.md.

Also here: ``latest_checkpoint``, ``get_checkpoint_state``, ``update_checkpoint_state``,
``checkpoint_exists``, ``get_checkpoint_mtimes``, ``remove_checkpoint``,
``NewCheckpointReader``, ``load_checkpoint``, ``load_variable``, ``list_variables``,
``export_meta_graph`` and ``import_meta_graph``. These are exported as ``tf.train.*`` by
the standard kernel set (``io_ops``).
"""
from __future__ import annotations

import collections
import contextlib
import logging
import os
import time
import uuid
import warnings
from typing import Any, Sequence

import numpy as np

from . import checkpoint as _ckpt
from ..base import dtypes as _dt
from ..base import errors
from ..framework.graph import (GraphKeys, Operation, Tensor, api_function, apply_op, convert_to_tensor,
                               get_default_graph, name_scope)
from .variables import Variable
import importlib
from ..base.device_spec import DeviceSpec
from google.protobuf import text_format
import re
from .meta_graph import export_meta_graph, import_meta_graph, read_meta_graph_file

__all__ = [
    "Saver", "SaveSpec", "SaveableObject", "BaseSaverBuilder", "BulkSaverBuilder",
    "latest_checkpoint", "get_checkpoint_state", "update_checkpoint_state",
    "generate_checkpoint_state_proto", "checkpoint_exists", "get_checkpoint_mtimes",
    "remove_checkpoint", "meta_graph_filename", "NewCheckpointReader", "load_checkpoint",
    "load_variable", "list_variables", "export_meta_graph", "import_meta_graph",
    "read_meta_graph_file",
]

_log = logging.getLogger("flowrt.saver")

_VARIABLE_OPS = ("Variable", "VariableV2", "AutoReloadVariable", "VarHandleOp")
#: Collections whose members are tf.Variables (serialized as VariableDef).
_VARIABLE_COLLECTIONS = frozenset({
    GraphKeys.GLOBAL_VARIABLES, GraphKeys.LOCAL_VARIABLES, GraphKeys.MODEL_VARIABLES,
    GraphKeys.TRAINABLE_VARIABLES, GraphKeys.MOVING_AVERAGE_VARIABLES,
    GraphKeys.METRIC_VARIABLES, GraphKeys.CONCATENATED_VARIABLES,
})


def _pb(name: str) -> Any:

    return importlib.import_module(f"flowrt.proto.{name}_pb2")


def _as_str(x: Any) -> str:
    if isinstance(x, bytes):
        return x.decode()
    return os.fspath(x) if isinstance(x, os.PathLike) else str(x)


# =========================================================================================
# saveables
# =========================================================================================
class SaveSpec:
    """One tensor a :class:`SaveableObject` saves (TF's ``SaveSpec``).

    :param tensor: the tensor to save, or a callable returning it
    :param slice_spec: ``""`` for a whole tensor, else TF's spec of the slice of the
        tensor ``name`` this one is (``"4 2 0,2:0,2"``)
    :param name: the key in the checkpoint
    :param dtype: required when ``tensor`` is a callable
    :param device: defaults to the tensor's device
    """

    def __init__(self, tensor: Any, slice_spec: str, name: str, dtype: Any = None,
                 device: Any = None):
        self._tensor = tensor
        self.slice_spec = slice_spec
        self.name = name
        if callable(tensor):
            if dtype is None or device is None:
                raise AssertionError("When passing a callable `tensor` to a SaveSpec, an "
                                     "explicit dtype and device must be provided.")
            self.dtype = _dt.as_dtype(dtype)
            self.device = device
        else:
            self.dtype = _dt.as_dtype(tensor.dtype).base_dtype if dtype is None else \
                _dt.as_dtype(dtype)
            self.device = tensor.device if device is None else device

    @property
    def tensor(self) -> Any:
        return self._tensor() if callable(self._tensor) else self._tensor


class SaveableObject:
    """Something a Saver saves as one or more tensors and restores from them.

    :param op: the object restored (a variable's reference tensor for variables)
    :param specs: the :class:`SaveSpec` list
    :param name: the name of the object (prefix of its specs' names)
    """

    def __init__(self, op: Any, specs: Sequence[SaveSpec], name: str):
        self.op = op
        self.specs = list(specs)
        self.name = name

    @property
    def device(self) -> str:
        return self.specs[0].device

    def restore(self, restored_tensors: Sequence[Tensor], restored_shapes: Any) -> Any:
        """Build the op restoring this object from ``restored_tensors``."""
        raise ValueError(f"Calling an abstract method: {type(self).__name__}.restore")


class ReferenceVariableSaveable(SaveableObject):
    """A TF1 reference variable: saved from its value, restored with ``Assign``."""

    def __init__(self, var: Tensor, slice_spec: str, name: str):
        spec = SaveSpec(var, slice_spec, name, dtype=var.dtype.base_dtype)
        super().__init__(var, [spec], name)

    def restore(self, restored_tensors: Sequence[Tensor], restored_shapes: Any) -> Any:
        restored = restored_tensors[0]
        if restored_shapes is not None:
            restored = api_function("reshape")(restored, restored_shapes[0])
        return apply_op("Assign", ref=self.op, value=restored,
                        validate_shape=restored_shapes is None and
                        self.op.get_shape().is_fully_defined())


def _tensor_comes_from_variable(v: Any) -> bool:
    return isinstance(v, Tensor) and v.op.type in _VARIABLE_OPS


def op_list_to_dict(op_list: Any) -> dict[str, Any]:
    """Name each variable of a list by its op name (TF's ``op_list_to_dict``): a
    PartitionedVariable under its name (as the list of its parts), and variables that
    are slices of a larger one (a save-slice info) gathered under its full name.

    :raises TypeError: for something that is not a variable
    :raises ValueError: when two variables have the same name, or slices and a whole
        variable share one
    """
    if not isinstance(op_list, (list, tuple, set)):
        raise TypeError(f"Variables to save should be passed in a dict or a list: {op_list}")
    flat: list[Any] = []
    stack = list(op_list)[::-1]
    while stack:
        x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend(reversed(x))
        else:
            flat.append(x)
    flat.sort(key=lambda x: x.name)
    out: dict[str, Any] = {}
    for var in flat:
        if isinstance(var, SaveableObject):
            out[var.name] = var
            continue
        if hasattr(var, "_get_variable_list"):  # a PartitionedVariable
            if var.name in out:
                raise ValueError(f"At least two variables have the same name: {var.name}")
            out[var.name] = list(var._get_variable_list())
            continue
        info = var._get_save_slice_info() if isinstance(var, Variable) else None
        if info is not None:
            have = out.setdefault(info.full_name, [])
            if not isinstance(have, list):
                raise ValueError("Mixing slices and non-slices with the same name: "
                                 f"{info.full_name}")
            have.append(var)
            continue
        if not isinstance(var, Variable):
            if isinstance(var, Tensor) or hasattr(var, "_as_graph_element"):
                var = convert_to_tensor(var, as_ref=True)
            if not _tensor_comes_from_variable(var):
                raise TypeError(f"Variable to save is not a Variable: {var}")
        name = var.op.name
        if name in out:
            raise ValueError(f"At least two variables have the same name: {name}")
        out[name] = var
    return out


def saveable_objects_for_op(op: Any, name: str) -> list[SaveableObject]:
    """The saveables for one entry of a Saver's name map: one per part, with its slice
    spec, for a list of slices or a PartitionedVariable.

    :raises ValueError: a list whose members are not slices of one variable
    :raises TypeError: for something that is not a variable
    """
    if isinstance(op, SaveableObject):
        return [op]
    if hasattr(op, "_get_variable_list"):
        op = list(op._get_variable_list())
    if isinstance(op, (list, tuple)):
        out: list[SaveableObject] = []
        slice_name = None
        for variable in op:
            if not isinstance(variable, Variable):
                raise ValueError(f"Slices must all be Variables: {variable}")
            info = variable._get_save_slice_info()
            if info is None:
                raise ValueError(f"Slices must all be slices: {variable}")
            if slice_name is None:
                slice_name = info.full_name
            elif slice_name != info.full_name:
                raise ValueError(f"Slices must all be from the same tensor: {slice_name} "
                                 f"!= {info.full_name}")
            out.append(ReferenceVariableSaveable(variable._ref(), info.spec, name))
        return out
    if isinstance(op, Variable):
        variable = op._ref()
    else:
        try:
            variable = convert_to_tensor(op, as_ref=True)
        except (TypeError, ValueError):
            variable = op
    if not _tensor_comes_from_variable(variable):
        raise TypeError("names_to_saveables must be a dict mapping string names to "
                        f"Tensors/Variables. Not a variable: {variable}")
    return [ReferenceVariableSaveable(variable, "", name)]


def validate_and_slice_inputs(names_to_saveables: Any) -> list[SaveableObject]:
    """The saveables of a Saver's ``var_list``, sorted by name."""
    if not isinstance(names_to_saveables, dict):
        names_to_saveables = op_list_to_dict(names_to_saveables)
    saveables: list[SaveableObject] = []
    seen: set[Any] = set()
    for name, op in sorted(names_to_saveables.items(), key=lambda x: x[0]):
        for s in saveable_objects_for_op(op, name):
            key = s.op if not isinstance(s.op, Tensor) else s.op.op
            if key in seen:
                raise ValueError(f"The same saveable will be restored with two names: "
                                 f"{s.name}")
            seen.add(key)
            saveables.append(s)
    return saveables


# =========================================================================================
# builders
# =========================================================================================
def _device_scope(device: str) -> Any:
    return get_default_graph().device(device) if device else contextlib.nullcontext()


def _on_host(devices: Sequence[str]) -> Any:
    """The CPU of the task (TF's ``set_cpu0``) when one of ``devices`` is no CPU: file
    I/O runs there, and variables on other devices cross through their ``to_host`` /
    ``from_host``. Otherwise the enclosing scope is kept (a variable on ``CPU:1`` is
    saved there)."""
    off = any(d and DeviceSpec.from_string(d).device_type not in (None, "CPU")
              for d in devices)
    return get_default_graph().device("/device:CPU:0") if off else contextlib.nullcontext()


def _group(ops: Sequence[Any], name: str) -> Operation:
    g = get_default_graph()
    deps = [o.op if isinstance(o, Tensor) else o for o in ops]
    with g.control_dependencies(deps):
        return apply_op("NoOp", name=name)


class BaseSaverBuilder:
    """Builds the save and restore subgraphs of a :class:`Saver` (one RestoreV2 per
    saveable; :class:`BulkSaverBuilder`, the default, uses one per device)."""

    SaveSpec = SaveSpec
    SaveableObject = SaveableObject

    def __init__(self, write_version: int = 2):
        self._write_version = write_version

    # -- primitive ops ----------------------------------------------------------------
    def save_op(self, filename_tensor: Tensor, saveables: Sequence[SaveableObject]) -> Any:
        """One ``SaveV2`` writing every spec of ``saveables`` to ``filename_tensor``."""
        names, slices, tensors = [], [], []
        host = _on_host([s.device for s in saveables])
        for s in saveables:
            for spec in s.specs:
                names.append(spec.name)
                slices.append(spec.slice_spec)
                tensors.append(spec.tensor)
        with host:
            if self._write_version == 1:  # TF's V1 layout: one file, SavedTensorSlices
                return apply_op("SaveSlices", name="save", filename=filename_tensor,
                                tensor_names=names, shapes_and_slices=slices, data=tensors)
            return apply_op("SaveV2", name="SaveV2", prefix=filename_tensor,
                            tensor_names=names, shape_and_slices=slices, tensors=tensors)

    def bulk_restore(self, filename_tensor: Tensor, saveables: Sequence[SaveableObject],
                     preferred_shard: int, restore_sequentially: bool) -> list[Tensor]:
        """The restored tensors of every spec of ``saveables``, in order."""
        del restore_sequentially
        out: list[Tensor] = []
        for s in saveables:
            with _device_scope(s.device):
                out.extend(self.restore_op(filename_tensor, s, preferred_shard))
        return out

    def restore_op(self, filename_tensor: Tensor, saveable: SaveableObject,
                   preferred_shard: int) -> list[Tensor]:
        return _restore_v2(filename_tensor, [(sp.name, sp.slice_spec, sp.dtype)
                                             for sp in saveable.specs], [saveable.device])

    def sharded_filename(self, filename_tensor: Tensor, shard: int,
                         num_shards: Tensor) -> Tensor:
        return apply_op("ShardedFilename", basename=filename_tensor, shard=shard,
                        num_shards=num_shards)

    # -- subgraphs --------------------------------------------------------------------
    def _AddSaveOps(self, filename_tensor: Tensor, saveables: Sequence[SaveableObject]
                    ) -> Tensor:
        save = self.save_op(filename_tensor, saveables)
        return _with_dependencies([save], filename_tensor)

    def _AddShardedSaveOpsForV2(self, checkpoint_prefix: Tensor,
                                per_device: Sequence[tuple[str, list[SaveableObject]]]
                                ) -> Tensor:
        """The sharded save (TF's ``_AddShardedSaveOpsForV2``): one ``SaveV2`` per device.

        :param per_device: ``(device, saveables)`` pairs, one shard each
        :returns: ``checkpoint_prefix``, passed through an Identity that runs after the
            shards are saved and merged by ``MergeV2Checkpoints``
        """
        # Each device writes a complete checkpoint of its own under a temporary
        # directory next to the final prefix; MergeV2Checkpoints then moves the data
        # files into place and writes the merged index (docs/checkpoints.md).
        suffix = convert_to_tensor(f"_temp_{uuid.uuid4().hex}/part")
        tmp_prefix = _string_join(checkpoint_prefix, suffix)
        num_shards = len(per_device)
        num_shards_t = convert_to_tensor(num_shards, name="num_shards")
        sharded_saves, prefixes = [], []
        last_device = ""
        for shard, (device, saveables) in enumerate(per_device):
            last_device = device
            with _device_scope(device), _on_host([device]):
                fname = self.sharded_filename(tmp_prefix, shard, num_shards_t)
                prefixes.append(fname)
                sharded_saves.append(self._AddSaveOps(fname, saveables))
        g = get_default_graph()
        with g.control_dependencies([t.op for t in sharded_saves]):
            with _device_scope(last_device), _on_host([last_device]):
                packed = api_function("stack")(prefixes, name="checkpoint_prefixes")
                merge = apply_op("MergeV2Checkpoints", checkpoint_prefixes=packed,
                                 destination_prefix=checkpoint_prefix,
                                 delete_old_dirs=True)
                with g.control_dependencies([merge]):
                    return apply_op("Identity", name="Identity", input=checkpoint_prefix)

    def _AddRestoreOps(self, filename_tensor: Tensor, saveables: Sequence[SaveableObject],
                       restore_sequentially: bool, reshape: bool, preferred_shard: int = -1,
                       name: str = "restore_all") -> Operation:
        """Build the op restoring ``saveables`` from the checkpoint ``filename_tensor``.

        With ``reshape`` each saveable is restored into the shape of its variable; otherwise
        the restored tensors take the static shapes they were saved from.

        :returns: a grouping op named ``name`` of the saveables' restore ops
        """
        tensors = self.bulk_restore(filename_tensor, saveables, preferred_shard,
                                    restore_sequentially)
        assign_ops = []
        idx = 0
        for s in saveables:
            shapes = None
            part = tensors[idx:idx + len(s.specs)]
            idx += len(s.specs)
            if reshape:
                shapes = []
                for spec in s.specs:
                    v = spec.tensor
                    shp = v.get_shape()
                    shapes.append(shp if shp.is_fully_defined() else api_function("shape")(v))
            else:
                # The restored tensors must have the shapes that were saved from; the
                # RestoreV2 kernel checks its outputs against these static shapes.
                for t, spec in zip(part, s.specs):
                    if not callable(spec._tensor):
                        try:
                            t.set_shape(spec._tensor.get_shape())
                        except ValueError:
                            pass
            assign_ops.append(s.restore(part, shapes))
        return _group(assign_ops, name)

    def _AddShardedRestoreOps(self, filename_tensor: Tensor,
                              per_device: Sequence[tuple[str, list[SaveableObject]]],
                              restore_sequentially: bool, reshape: bool) -> Operation:
        restores = []
        for shard, (device, saveables) in enumerate(per_device):
            with _device_scope(device):
                restores.append(self._AddRestoreOps(filename_tensor, saveables,
                                                    restore_sequentially, reshape,
                                                    preferred_shard=shard,
                                                    name="restore_shard"))
        return _group(restores, "restore_all")

    @staticmethod
    def _GroupByDevices(saveables: Sequence[SaveableObject]
                        ) -> list[tuple[str, list[SaveableObject]]]:
        per_device: dict[str, list[SaveableObject]] = collections.defaultdict(list)
        for s in saveables:
            devices = {_canonical_device(sp.device) for sp in s.specs}
            if len(devices) != 1:
                raise ValueError(f"All tensors of a saveable object must be on the same "
                                 f"device: {s.name}")
            per_device[devices.pop()].append(s)
        return sorted(per_device.items(), key=lambda t: t[0])

    # -- the whole thing --------------------------------------------------------------
    def build(self, names_to_saveables: Any, reshape: bool = False, sharded: bool = False,
              max_to_keep: int = 5, keep_checkpoint_every_n_hours: float = 10000.0,
              name: str | None = None, restore_sequentially: bool = False,
              filename: str = "model") -> Any:
        return self._build_internal(names_to_saveables, reshape, sharded, max_to_keep,
                                    keep_checkpoint_every_n_hours, name,
                                    restore_sequentially, filename)

    def _build_internal(self, names_to_saveables: Any, reshape: bool = False,
                        sharded: bool = False, max_to_keep: int = 5,
                        keep_checkpoint_every_n_hours: float = 10000.0,
                        name: str | None = None, restore_sequentially: bool = False,
                        filename: str = "model", build_save: bool = True,
                        build_restore: bool = True) -> Any:
        """Add the save and restore ops for ``names_to_saveables`` under a name scope.

        :param sharded: one save per device (see :meth:`_AddShardedSaveOpsForV2`)
        :returns: the ``SaverDef`` naming the filename tensor, save tensor and restore op
        :raises ValueError: if save or restore is not to be built (TF allows that only in
            eager mode), or the saveables are invalid
        """
        if not build_save or not build_restore:
            raise ValueError("save and restore operations need to be built together "
                             "when eager execution is not enabled.")
        saveables = validate_and_slice_inputs(names_to_saveables)
        if max_to_keep is None:
            max_to_keep = 0
        values = [s.op for s in saveables if isinstance(s.op, (Tensor, Operation))]
        with name_scope(name, "save", values) as scope:
            fname = apply_op("PlaceholderWithDefault", name="filename",
                             input=filename or "model", shape=[])
            # TF keeps the name "Const" for the tensor fed with the prefix
            filename_tensor = apply_op("PlaceholderWithDefault", name="Const", input=fname,
                                       shape=[])
            if sharded:
                per_device = self._GroupByDevices(saveables)
                save_tensor = self._AddShardedSaveOpsForV2(filename_tensor, per_device)
                restore_op = self._AddShardedRestoreOps(filename_tensor, per_device,
                                                        restore_sequentially, reshape)
            else:
                device = saveables[0].device if saveables else ""
                with _device_scope(device):
                    save_tensor = self._AddSaveOps(filename_tensor, saveables)
                    restore_op = self._AddRestoreOps(filename_tensor, saveables,
                                                     restore_sequentially, reshape)
        del scope
        sd = _pb("saver").SaverDef(
            filename_tensor_name=filename_tensor.name, save_tensor_name=save_tensor.name,
            restore_op_name=restore_op.name, max_to_keep=int(max_to_keep), sharded=sharded,
            keep_checkpoint_every_n_hours=keep_checkpoint_every_n_hours,
            version=self._write_version)
        return sd


class BulkSaverBuilder(BaseSaverBuilder):
    """The default builder: one ``RestoreV2`` for all the saveables of a device."""

    def bulk_restore(self, filename_tensor: Tensor, saveables: Sequence[SaveableObject],
                     preferred_shard: int, restore_sequentially: bool) -> list[Tensor]:
        del restore_sequentially
        specs = [(sp.name, sp.slice_spec, sp.dtype) for s in saveables for sp in s.specs]
        if not specs:
            return []
        return _restore_v2(filename_tensor, specs, [s.device for s in saveables])


def _restore_v2(filename_tensor: Tensor, specs: Sequence[tuple[str, str, Any]],
                devices: Sequence[str]) -> list[Tensor]:
    names, slices, dts = zip(*specs)
    with _on_host(devices):
        out = apply_op("RestoreV2", name="RestoreV2", prefix=filename_tensor,
                       tensor_names=list(names), shape_and_slices=list(slices),
                       dtypes=[_dt.as_dtype(d).base_dtype for d in dts])
    return list(out)


def _with_dependencies(deps: Sequence[Any], output: Tensor) -> Tensor:
    g = get_default_graph()
    with name_scope(None, "control_dependency", [output]) as nm:
        with g.colocate_with(output), g.control_dependencies(deps):
            return apply_op("Identity", name=nm, input=output)


def _string_join(a: Tensor, b: Tensor) -> Tensor:
    rt = get_default_graph()._runtime
    if "StringJoin" in rt.op_defs:
        return apply_op("StringJoin", name="StringJoin", inputs=[a, b])
    return apply_op("Add", name="StringJoin", x=a, y=b)  # Add concatenates strings


def _canonical_device(device: str) -> str:
    if not device:
        return ""

    try:
        return DeviceSpec.from_string(device).to_string()
    except ValueError:
        return device


# =========================================================================================
# Saver
# =========================================================================================
class Saver:
    """Saves and restores variables (``tf.train.Saver``, TF 1.15 semantics).

    :param var_list: variables to save: a list (named by their op names), a dict
        ``{name: variable}``, or None for every global variable and saveable object
    :param reshape: restore into variables of a different shape with the same number
        of elements
    :param sharded: one save op (and one data file) per device holding variables
    :param max_to_keep: how many recent checkpoints to keep (0 or None: all)
    :param keep_checkpoint_every_n_hours: additionally keep one checkpoint per this
        many hours
    :param name: name scope of the added ops (default ``save``)
    :param restore_sequentially: accepted; restores run as one op per device
    :param saver_def: use the ops an existing ``SaverDef`` names instead of building
    :param builder: a :class:`BaseSaverBuilder` (default :class:`BulkSaverBuilder`)
    :param defer_build: build the ops later, with :meth:`build`
    :param allow_empty: with no variables, do nothing instead of raising ValueError
    :param write_version: 2, or 1 for TF's V1 layout (one file; unsharded only)
    :param pad_step_number: write the global step as 8 digits
    :param save_relative_paths: store paths relative to the directory in the state file
    :param filename: default prefix of the filename tensor
    """

    def __init__(self, var_list: Any = None, reshape: bool = False, sharded: bool = False,
                 max_to_keep: int | None = 5, keep_checkpoint_every_n_hours: float = 10000.0,
                 name: str | None = None, restore_sequentially: bool = False,
                 saver_def: Any = None, builder: Any = None, defer_build: bool = False,
                 allow_empty: bool = False, write_version: int = 2,
                 pad_step_number: bool = False, save_relative_paths: bool = False,
                 filename: str | None = None):
        """Keep the options and, unless ``defer_build``, build the save and restore ops.

        :raises ValueError: if ``defer_build`` is given with a ``var_list``, there are no
            variables to save (unless ``allow_empty``), or ``saver_def`` lacks the names
            of its ops
        """
        if defer_build and var_list:
            raise ValueError("If `var_list` is provided then build cannot be deferred. "
                             "Either set defer_build=False or var_list=None.")
        self._var_list = var_list
        self._reshape = reshape
        self._sharded = sharded
        self._max_to_keep = max_to_keep
        self._keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
        self._name = name
        self._restore_sequentially = restore_sequentially
        self.saver_def = saver_def
        self._builder = builder
        self._is_built = False
        self._allow_empty = allow_empty
        self._is_empty: bool | None = None
        if write_version != 2 and (write_version != 1 or sharded):
            warnings.warn("flowrt writes V1 checkpoints only unsharded; write_version="
                          f"{write_version} is ignored", stacklevel=2)
            write_version = 2
        self._write_version = write_version
        self._pad_step_number = pad_step_number
        self._filename = filename
        self._last_checkpoints: list[tuple[str, float]] = []
        self._checkpoints_to_be_deleted: list[tuple[str, float]] = []
        self._save_relative_paths = save_relative_paths
        self._next_checkpoint_time = time.time() + keep_checkpoint_every_n_hours * 3600
        self._graph = get_default_graph()
        if not defer_build:
            self.build()
        if self.saver_def is not None:
            self._check_saver_def()
            self._write_version = self.saver_def.version

    # -- building ---------------------------------------------------------------------
    def build(self) -> None:
        """Add the save and restore ops (once)."""
        if self._is_built:
            return
        self._is_built = True
        if self.saver_def is None:
            if self._builder is None:
                self._builder = BulkSaverBuilder(self._write_version)
            if self._var_list is None:
                g = get_default_graph()
                self._var_list = (g.get_collection(GraphKeys.GLOBAL_VARIABLES) +
                                  g.get_collection(GraphKeys.SAVEABLE_OBJECTS))
            if isinstance(self._var_list, (list, tuple, set, dict)) and not self._var_list:
                if self._allow_empty:
                    self._is_empty = True
                    return
                raise ValueError("No variables to save")
            self._is_empty = False
            self.saver_def = self._builder._build_internal(
                self._var_list, reshape=self._reshape, sharded=self._sharded,
                max_to_keep=self._max_to_keep,
                keep_checkpoint_every_n_hours=self._keep_checkpoint_every_n_hours,
                name=self._name, restore_sequentially=self._restore_sequentially,
                filename=self._filename or "model")
        elif self._name:
            sd = self.saver_def
            sd.filename_tensor_name = _prepend(sd.filename_tensor_name, self._name)
            sd.save_tensor_name = _prepend(sd.save_tensor_name, self._name)
            sd.restore_op_name = _prepend(sd.restore_op_name, self._name)
        self._is_empty = False
        self._check_saver_def()
        self._write_version = self.saver_def.version

    def _check_saver_def(self) -> None:
        sd = self.saver_def
        if not hasattr(sd, "filename_tensor_name"):
            raise ValueError(f"saver_def must be a saver_pb2.SaverDef: {sd}")
        if not sd.save_tensor_name:
            raise ValueError(f"saver_def must specify the save_tensor_name: {sd}")
        if not sd.restore_op_name:
            raise ValueError(f"saver_def must specify the restore_op_name: {sd}")

    def as_saver_def(self) -> Any:
        """The ``SaverDef`` naming this saver's ops."""
        return self.saver_def

    def to_proto(self, export_scope: str | None = None) -> Any:
        """The ``SaverDef``, names made relative to ``export_scope``."""
        if export_scope is None:
            return self.saver_def
        sd = self.saver_def
        if not (sd.filename_tensor_name.startswith(export_scope) and
                sd.save_tensor_name.startswith(export_scope) and
                sd.restore_op_name.startswith(export_scope)):
            return None
        out = _pb("saver").SaverDef()
        out.CopyFrom(sd)
        out.filename_tensor_name = _strip(sd.filename_tensor_name, export_scope)
        out.save_tensor_name = _strip(sd.save_tensor_name, export_scope)
        out.restore_op_name = _strip(sd.restore_op_name, export_scope)
        return out

    @staticmethod
    def from_proto(saver_def: Any, import_scope: str | None = None) -> "Saver":
        """A Saver using the ops ``saver_def`` names (prefixed by ``import_scope``)."""
        return Saver(saver_def=saver_def, name=import_scope)

    # -- checkpoint bookkeeping -------------------------------------------------------
    @property
    def last_checkpoints(self) -> list[str]:
        """Prefixes of the checkpoints not yet deleted, oldest first."""
        return [p for p, _ in self._last_checkpoints]

    def set_last_checkpoints(self, last_checkpoints: Sequence[str]) -> None:
        """Deprecated: use :meth:`set_last_checkpoints_with_time`."""
        if not isinstance(last_checkpoints, list):
            raise AssertionError(f"last_checkpoints must be a list: {last_checkpoints}")
        self._last_checkpoints = [(s, float("inf")) for s in last_checkpoints]

    def set_last_checkpoints_with_time(self, last_checkpoints_with_time: Sequence[Any]
                                       ) -> None:
        """Set the ``[(prefix, timestamp)]`` list of kept checkpoints."""
        if not isinstance(last_checkpoints_with_time, list):
            raise AssertionError(f"last_checkpoints_with_time must be a list: "
                                 f"{last_checkpoints_with_time}")
        self._last_checkpoints = [(p, t) for p, t in last_checkpoints_with_time]

    def recover_last_checkpoints(self, checkpoint_paths: Sequence[str]) -> None:
        """Take over checkpoints a previous saver wrote (e.g. after a crash): the ones
        that still exist, with their index files' mtimes."""
        with_times = []
        for p in checkpoint_paths:
            mtime = get_checkpoint_mtimes([p])
            if mtime:
                with_times.append((p, mtime[0]))
        self.set_last_checkpoints_with_time(with_times)

    def _RecordLastCheckpoint(self, latest_save_path: str) -> None:
        if not self.saver_def.max_to_keep:
            return
        self._last_checkpoints = [p for p in self._last_checkpoints
                                  if p[0] != latest_save_path]
        self._last_checkpoints.append((latest_save_path, time.time()))
        if len(self._last_checkpoints) > self.saver_def.max_to_keep:
            self._checkpoints_to_be_deleted.append(self._last_checkpoints.pop(0))

    def _MaybeDeleteOldCheckpoints(self, meta_graph_suffix: str = "meta") -> None:
        if self._checkpoints_to_be_deleted:
            p = self._checkpoints_to_be_deleted.pop(0)
            if p[1] > self._next_checkpoint_time:
                self._next_checkpoint_time += \
                    self.saver_def.keep_checkpoint_every_n_hours * 3600
                return
            try:
                remove_checkpoint(p[0], self.saver_def.version, meta_graph_suffix)
            except Exception as e:  # as TF: a failed deletion never fails the save
                _log.warning("Ignoring: %s", e)

    # -- save / restore ---------------------------------------------------------------
    def save(self, sess: Any, save_path: Any, global_step: Any = None,
             latest_filename: str | None = None, meta_graph_suffix: str = "meta",
             write_meta_graph: bool = True, write_state: bool = True,
             strip_default_attrs: bool = False, save_debug_info: bool = False
             ) -> str | None:
        """Save the variables; returns the checkpoint prefix written
        (``save_path-<global_step>`` with a global step), or None for an empty saver.

        The save op runs in ``sess`` with the prefix fed; then the ``checkpoint`` state
        file in the prefix's directory is updated (``write_state``), checkpoints beyond
        ``max_to_keep`` are deleted and ``<prefix>.<meta_graph_suffix>`` is written
        (``write_meta_graph``). Files a killed save left behind are removed first,
        after completing a save to the same prefix killed between its data and index
        renames (``checkpoint.cleanup_stale_files``). Saving to an existing prefix
        (the same ``global_step`` again) replaces its files under TF's names.
        """
        del save_debug_info
        if not self._is_built:
            raise RuntimeError("`build()` should be called before save if defer_build==True")
        if latest_filename is None:
            latest_filename = "checkpoint"
        if os.path.split(latest_filename)[0]:
            raise ValueError("'latest_filename' must not contain path components")
        save_path = _as_str(save_path)
        if global_step is not None:
            if not isinstance(global_step, (int, np.integer)):
                global_step = int(sess.run(global_step))
            if self._pad_step_number:
                checkpoint_file = f"{save_path}-{global_step:08d}"
            else:
                checkpoint_file = f"{save_path}-{int(global_step)}"
        else:
            checkpoint_file = save_path
            if os.path.basename(save_path) == latest_filename and not self._sharded:
                raise ValueError(f"'latest_filename' collides with 'save_path': "
                                 f"'{latest_filename}' and '{save_path}'")
        if not hasattr(sess, "run") or not hasattr(sess, "graph"):
            raise TypeError(f"'sess' must be a Session; {sess}")
        save_path_parent = os.path.dirname(save_path)
        model_checkpoint_path = None
        if not self._is_empty:
            if os.path.isdir(save_path_parent or "."):
                _ckpt.cleanup_stale_files(save_path_parent, os.path.basename(save_path))
            try:
                model_checkpoint_path = _as_str(sess.run(
                    self.saver_def.save_tensor_name,
                    {self.saver_def.filename_tensor_name: checkpoint_file}))
            except (errors.FailedPreconditionError, errors.NotFoundError) as exc:
                if save_path_parent and not os.path.isdir(save_path_parent):
                    raise ValueError(f"Parent directory of {save_path} doesn't exist, "
                                     "can't save.") from exc
                raise
            if write_state:
                self._RecordLastCheckpoint(model_checkpoint_path)
                update_checkpoint_state_internal(
                    save_dir=save_path_parent, model_checkpoint_path=model_checkpoint_path,
                    all_model_checkpoint_paths=self.last_checkpoints,
                    latest_filename=latest_filename,
                    save_relative_paths=self._save_relative_paths)
                self._MaybeDeleteOldCheckpoints(meta_graph_suffix=meta_graph_suffix)
        if write_meta_graph:
            meta_file = meta_graph_filename(checkpoint_file, meta_graph_suffix)
            with sess.graph.as_default():
                self.export_meta_graph(meta_file, strip_default_attrs=strip_default_attrs)
        if self._is_empty:
            return None
        return model_checkpoint_path

    def restore(self, sess: Any, save_path: Any) -> None:
        """Restore the variables from the checkpoint ``save_path`` (a prefix).

        :raises ValueError: ``save_path`` is None or names no checkpoint
        :raises NotFoundError: a variable is missing from the checkpoint
        :raises InvalidArgumentError: a dtype or shape differs from the variable's
        :raises DataLossError: a checkpoint file is truncated or corrupted
        """
        if self._is_empty:
            return
        if save_path is None:
            raise ValueError("Can't load save_path when it is None.")
        prefix = _as_str(save_path)
        if not checkpoint_exists(prefix):
            raise ValueError("The passed save_path is not a valid checkpoint: " + prefix)
        _log.info("Restoring parameters from %s", prefix)
        try:
            sess.run(self.saver_def.restore_op_name,
                     {self.saver_def.filename_tensor_name: prefix})
        except errors.NotFoundError as err:
            raise _wrap_restore_error(err, "a Variable name or other graph key that is "
                                      "missing") from err
        except errors.InvalidArgumentError as err:
            raise _wrap_restore_error(err, "a mismatch between the current graph and the "
                                      "graph") from err

    def export_meta_graph(self, filename: str | None = None, collection_list: Any = None,
                          as_text: bool = False, export_scope: str | None = None,
                          clear_devices: bool = False, clear_extraneous_savers: bool = False,
                          strip_default_attrs: bool = False, save_debug_info: bool = False
                          ) -> Any:
        """Write (and return) a ``MetaGraphDef`` of the default graph with this saver."""
        return export_meta_graph(
            filename=filename, saver_def=self.saver_def, collection_list=collection_list,
            as_text=as_text, export_scope=export_scope, clear_devices=clear_devices,
            clear_extraneous_savers=clear_extraneous_savers,
            strip_default_attrs=strip_default_attrs)


def _wrap_restore_error(err: errors.OpError, what: str) -> errors.OpError:
    msg = ("Restoring from checkpoint failed. This is most likely due to {} from the "
           "checkpoint. Please ensure that you have not altered the graph expected based "
           "on the checkpoint. Original error:\n\n{}").format(what, err.message)
    return type(err)(err.node_def, err.op, msg)


def _prepend(name: str, scope: str | None) -> str:
    if not scope:
        return name
    scope = scope.rstrip("/")
    if name.startswith("^"):
        return "^" + scope + "/" + name[1:]
    return scope + "/" + name


def _strip(name: str, scope: str | None) -> str:
    if not scope:
        return name
    p = scope.rstrip("/") + "/"
    if name.startswith("^" + p):
        return "^" + name[len(p) + 1:]
    return name[len(p):] if name.startswith(p) else name


# =========================================================================================
# the checkpoint state file
# =========================================================================================
def _state_filename(save_dir: str, latest_filename: str | None) -> str:
    return os.path.join(save_dir, latest_filename or "checkpoint")


def generate_checkpoint_state_proto(save_dir: str, model_checkpoint_path: str,
                                    all_model_checkpoint_paths: list[str] | None = None,
                                    all_model_checkpoint_timestamps: Any = None,
                                    last_preserved_timestamp: float | None = None) -> Any:
    """A ``CheckpointState``: the path list always ends with ``model_checkpoint_path``;
    relative paths are made relative to a relative ``save_dir``."""
    if all_model_checkpoint_paths is None:
        all_model_checkpoint_paths = []
    if not all_model_checkpoint_paths or \
            all_model_checkpoint_paths[-1] != model_checkpoint_path:
        all_model_checkpoint_paths.append(model_checkpoint_path)
    if all_model_checkpoint_timestamps and \
            len(all_model_checkpoint_timestamps) != len(all_model_checkpoint_paths):
        raise ValueError(f"Checkpoint timestamps, if provided, must match checkpoint paths "
                         f"(got paths {all_model_checkpoint_paths} and timestamps "
                         f"{all_model_checkpoint_timestamps})")
    if not os.path.isabs(save_dir):
        if not os.path.isabs(model_checkpoint_path):
            model_checkpoint_path = os.path.relpath(model_checkpoint_path, save_dir)
        for i, p in enumerate(all_model_checkpoint_paths):
            if not os.path.isabs(p):
                all_model_checkpoint_paths[i] = os.path.relpath(p, save_dir)
    st = _pb("checkpoint_state").CheckpointState(
        model_checkpoint_path=model_checkpoint_path,
        all_model_checkpoint_paths=all_model_checkpoint_paths,
        all_model_checkpoint_timestamps=all_model_checkpoint_timestamps or [])
    if last_preserved_timestamp is not None:
        st.last_preserved_timestamp = last_preserved_timestamp
    return st


def update_checkpoint_state(save_dir: str, model_checkpoint_path: str,
                            all_model_checkpoint_paths: list[str] | None = None,
                            latest_filename: str | None = None,
                            all_model_checkpoint_timestamps: Any = None,
                            last_preserved_timestamp: float | None = None) -> None:
    """Write the ``checkpoint`` state file of ``save_dir`` (text-format
    ``CheckpointState``), atomically."""
    update_checkpoint_state_internal(
        save_dir=save_dir, model_checkpoint_path=model_checkpoint_path,
        all_model_checkpoint_paths=all_model_checkpoint_paths,
        latest_filename=latest_filename, save_relative_paths=False,
        all_model_checkpoint_timestamps=all_model_checkpoint_timestamps,
        last_preserved_timestamp=last_preserved_timestamp)


def update_checkpoint_state_internal(save_dir: str, model_checkpoint_path: str,
                                     all_model_checkpoint_paths: list[str] | None = None,
                                     latest_filename: str | None = None,
                                     save_relative_paths: bool = False,
                                     all_model_checkpoint_timestamps: Any = None,
                                     last_preserved_timestamp: float | None = None) -> None:
    """Write the ``checkpoint`` state file of ``save_dir`` (TF's
    ``update_checkpoint_state_internal``), atomically.

    With ``save_relative_paths`` absolute paths are stored relative to ``save_dir``.

    :raises RuntimeError: if the checkpoint path is the state file's own path
    """

    state_file = _state_filename(save_dir, latest_filename)
    if save_relative_paths:
        rel = (os.path.relpath(model_checkpoint_path, save_dir)
               if os.path.isabs(model_checkpoint_path) else model_checkpoint_path)
        rel_all = [os.path.relpath(p, save_dir) if os.path.isabs(p) else p
                   for p in all_model_checkpoint_paths or []]
        st = generate_checkpoint_state_proto(save_dir, rel, rel_all,
                                             all_model_checkpoint_timestamps,
                                             last_preserved_timestamp)
    else:
        st = generate_checkpoint_state_proto(save_dir, model_checkpoint_path,
                                             list(all_model_checkpoint_paths or []),
                                             all_model_checkpoint_timestamps,
                                             last_preserved_timestamp)
    if state_file == st.model_checkpoint_path:
        raise RuntimeError(f"Save path '{model_checkpoint_path}' conflicts with path used "
                           "for checkpoint state.  Please use a different save path.")
    if save_dir:
        os.makedirs(save_dir, exist_ok=True)
    _ckpt.atomic_write(state_file, text_format.MessageToString(st))


def get_checkpoint_state(checkpoint_dir: Any, latest_filename: str | None = None) -> Any:
    """The ``CheckpointState`` of ``checkpoint_dir`` (relative paths made absolute
    against it), or None when there is no readable state file.

    :raises ValueError: the state file names no checkpoint
    """

    checkpoint_dir = _as_str(checkpoint_dir)
    path = _state_filename(checkpoint_dir, latest_filename)
    try:
        if not os.path.isfile(path):
            return None
        with open(path, encoding="utf-8") as f:
            content = f.read()
        st = _pb("checkpoint_state").CheckpointState()
        text_format.Merge(content, st)
    except (OSError, UnicodeDecodeError, text_format.ParseError) as e:
        _log.warning("%s: %s", type(e).__name__, e)
        _log.warning("%s: Checkpoint ignored", path)
        return None
    if not st.model_checkpoint_path:
        raise ValueError("Invalid checkpoint state loaded from " + checkpoint_dir)
    if not os.path.isabs(st.model_checkpoint_path):
        st.model_checkpoint_path = os.path.join(checkpoint_dir, st.model_checkpoint_path)
    for i, p in enumerate(st.all_model_checkpoint_paths):
        if not os.path.isabs(p):
            st.all_model_checkpoint_paths[i] = os.path.join(checkpoint_dir, p)
    return st


def latest_checkpoint(checkpoint_dir: Any, latest_filename: str | None = None
                      ) -> str | None:
    """The prefix of the newest checkpoint recorded in ``checkpoint_dir``'s state file,
    if that checkpoint is complete; None otherwise."""
    st = get_checkpoint_state(checkpoint_dir, latest_filename)
    if st and st.model_checkpoint_path:
        if checkpoint_exists(st.model_checkpoint_path):
            return st.model_checkpoint_path
        _log.error("Couldn't match files for checkpoint %s", st.model_checkpoint_path)
    return None


def checkpoint_exists(checkpoint_prefix: Any) -> bool:
    """Whether a complete checkpoint exists at ``checkpoint_prefix``."""
    return _ckpt.checkpoint_exists(_as_str(checkpoint_prefix))


def get_checkpoint_mtimes(checkpoint_prefixes: Sequence[Any]) -> list[float]:
    """The modification times of the checkpoints that exist (their index files)."""
    out = []
    for p in checkpoint_prefixes:
        try:
            out.append(os.stat(_ckpt.index_filename(_as_str(p))).st_mtime)
        except OSError:
            continue
    return out


def remove_checkpoint(checkpoint_prefix: Any, checkpoint_format_version: int = 2,
                      meta_graph_suffix: str = "meta") -> None:
    """Delete a checkpoint's files (index first, then data files, then meta graph)."""
    del checkpoint_format_version
    _ckpt.remove_checkpoint_files(_as_str(checkpoint_prefix), meta_graph_suffix)


def meta_graph_filename(checkpoint_filename: str, meta_graph_suffix: str = "meta") -> str:
    """``<prefix>.<suffix>``, dropping a ``-?????-of-?????`` shard suffix."""

    basename = re.sub(r"-[\d\?]+-of-\d+$", "", checkpoint_filename)
    return ".".join([basename, meta_graph_suffix])


# =========================================================================================
# reading checkpoints
# =========================================================================================
def NewCheckpointReader(filepattern: Any) -> _ckpt.CheckpointReader:  # noqa: N802 - TF name
    """A reader of the checkpoint with prefix ``filepattern``."""
    return _ckpt.CheckpointReader(_as_str(filepattern))


def _checkpoint_filename(ckpt_dir_or_file: Any) -> str:
    p = _as_str(ckpt_dir_or_file)
    if os.path.isdir(p):
        latest = latest_checkpoint(p)
        if latest is None:
            raise ValueError(f"Couldn't find 'checkpoint' file or checkpoints in given "
                             f"directory {p}")
        return latest
    return p


def load_checkpoint(ckpt_dir_or_file: Any) -> _ckpt.CheckpointReader:
    """A reader of a checkpoint prefix, or of the latest checkpoint of a directory."""
    return NewCheckpointReader(_checkpoint_filename(ckpt_dir_or_file))


def load_variable(ckpt_dir_or_file: Any, name: str) -> Any:
    """The saved value of ``name`` (a trailing ``:0`` is ignored)."""
    if name.endswith(":0"):
        name = name[:-2]
    return load_checkpoint(ckpt_dir_or_file).get_tensor(name)


def list_variables(ckpt_dir_or_file: Any) -> list[tuple[str, list[int]]]:
    """``[(name, shape)]`` of every tensor in the checkpoint, sorted by name."""
    reader = load_checkpoint(ckpt_dir_or_file)
    shapes = reader.get_variable_to_shape_map()
    return [(n, shapes[n]) for n in sorted(shapes)]
