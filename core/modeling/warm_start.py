"""``tf.train.init_from_checkpoint`` and ``tf.train.warm_start`` (TF 1.15 semantics).

Both replace variables' initializers: a variable's initializer becomes an ``Assign`` of
a ``RestoreV2`` reading its tensor (or its slice, for a part of a partitioned
variable) from the checkpoint, so that ``global_variables_initializer`` loads it.
"""
from __future__ import annotations

import collections
import re
from typing import Any

import numpy as np

from ..base import errors
from ..framework.graph import GraphKeys, apply_op, get_collection, get_default_graph
from ..training import saver as _saver
from ..training import variable_scope as _vs
from ..training.partitioned import PartitionedVariable
from ..training.variables import Variable

__all__ = ["init_from_checkpoint", "warm_start", "WarmStartSettings", "VocabInfo", "API"]


def _is_variable(x: Any) -> bool:
    return isinstance(x, (Variable, PartitionedVariable)) or (
        isinstance(x, (list, tuple)) and bool(x) and all(isinstance(v, Variable) for v in x))


def _parts(var: Any) -> list[Variable]:
    return list(var) if isinstance(var, (list, tuple, PartitionedVariable)) else [var]


def _set_initializer(var: Any, ckpt_file: str, tensor_name: str) -> None:
    """Make ``var`` (a variable or the parts of a partitioned one) initialize from
    ``tensor_name`` of ``ckpt_file``, each part from its slice."""
    g = get_default_graph()
    for v in _parts(var):
        info = v._get_save_slice_info()
        spec = info.spec if info is not None else ""
        with g.device(v.device):
            restored = apply_op("RestoreV2", name="checkpoint_initializer",
                                prefix=ckpt_file, tensor_names=[tensor_name],
                                shape_and_slices=[spec], dtypes=[v.dtype.base_dtype])
            restored = restored[0] if isinstance(restored, (list, tuple)) else restored
            v._initializer_op = apply_op("Assign", ref=v, value=restored).op


def _full_shape(var: Any) -> list[int]:
    parts = _parts(var)
    info = parts[0]._get_save_slice_info()
    if info is not None:
        return list(info.full_shape)
    return parts[0].get_shape().as_list()


def _collect_partitioned(name: str, store: dict[str, Any]) -> list[Variable] | None:
    if name + "/part_0" not in store:
        return None
    out, i = [], 0
    while f"{name}/part_{i}" in store:
        out.append(store[f"{name}/part_{i}"])
        i += 1
    return out


def init_from_checkpoint(ckpt_dir_or_file: Any, assignment_map: Any) -> None:
    """Initialize variables from a checkpoint instead of their initializers.

    ``assignment_map`` maps checkpoint names to current ones: ``'scope/': 'scope/'``
    (every variable of a scope), ``'/': 'new_scope/'`` (the whole checkpoint into a
    scope), ``'name': 'scope/var'`` or ``'name': variable`` (one variable, also a
    partitioned one or a list of its parts, restored slice by slice).

    :raises ValueError: a tensor not in the checkpoint, a shape mismatch, or a scope
        mapped to a variable name
    """
    ckpt_file = _saver._checkpoint_filename(ckpt_dir_or_file)
    reader = _saver.NewCheckpointReader(ckpt_file)
    shapes = reader.get_variable_to_shape_map()
    store = _vs._get_default_variable_store()._vars
    items = assignment_map.items() if isinstance(assignment_map, dict) else assignment_map
    for in_ckpt, current in sorted(items, key=lambda t: t[0]):
        var = current if _is_variable(current) else store.get(current)
        if var is None and not _is_variable(current):
            var = _collect_partitioned(current, store)
        if var is not None:
            if in_ckpt not in shapes:
                raise ValueError(f"Tensor {in_ckpt} is not found in {ckpt_file} checkpoint "
                                 f"{sorted(shapes)}")
            want = _full_shape(var)
            if list(want) != list(shapes[in_ckpt]):
                raise ValueError(f"Shape of variable {_parts(var)[0].op.name} ({want}) "
                                 f"doesn't match with shape of tensor {in_ckpt} "
                                 f"({shapes[in_ckpt]}) from checkpoint reader.")
            _set_initializer(var, ckpt_file, in_ckpt)
            continue
        scopes = current[:current.rindex("/")] if "/" in current else ""
        if not in_ckpt.endswith("/"):
            raise ValueError(f"Assignment map with scope only name {scopes} should map to "
                             "scope only {in_ckpt}. Should be 'scope/': 'other_scope/'.")
        found = set()
        for name in store:
            if not scopes or name.startswith(scopes + "/"):
                found.add(name[:name.index("/part_")] if "/part_" in name else name)
        for name in sorted(found):
            full = name[len(scopes):]
            if current != "/":
                full = full[1:]
            if in_ckpt != "/":
                full = in_ckpt + full
            full = full.rstrip("/") if full.endswith("/") else full
            if full not in shapes:
                raise ValueError(f"Tensor {full} ({name[len(scopes) + 1:]} in {in_ckpt}) "
                                 f"is not found in {ckpt_file} checkpoint")
            var = store.get(name)
            _set_initializer(var if var is not None else _collect_partitioned(name, store),
                             ckpt_file, full)


# -- warm_start ------------------------------------------------------------------------------
VocabInfo = collections.namedtuple("VocabInfo", [
    "new_vocab", "new_vocab_size", "num_oov_buckets", "old_vocab", "old_vocab_size",
    "backup_initializer", "axis"])
VocabInfo.__new__.__defaults__ = (-1, None, 0)

WarmStartSettings = collections.namedtuple("WarmStartSettings", [
    "ckpt_to_initialize_from", "vars_to_warm_start", "var_name_to_vocab_info",
    "var_name_to_prev_var_name"])
WarmStartSettings.__new__.__defaults__ = (".*", None, None)


def _read_vocab(path: str, size: int) -> list[bytes]:
    with open(path, "rb") as f:
        words = [ln.rstrip(b"\r\n") for ln in f]
    return words if size < 0 else words[:size]


def _warm_start_vocab(var: Any, ckpt_file: str, prev: str, info: Any) -> None:
    """Initialize ``var`` row by row from ``prev`` remapped through the vocabularies:
    a row of a word in the old vocabulary gets that word's old row, the others (and
    OOV buckets) keep the backup initializer's value (zeros by default)."""
    if info.axis != 0:
        raise errors.UnimplementedError(None, None, "VocabInfo axis=1 is not supported")
    old = np.asarray(_saver.NewCheckpointReader(ckpt_file).get_tensor(prev))
    new_words = _read_vocab(info.new_vocab, info.new_vocab_size)
    old_index = {w: i for i, w in enumerate(_read_vocab(info.old_vocab, info.old_vocab_size))}
    parts = _parts(var)
    full = _full_shape(var)
    value = np.zeros(full, dtype=parts[0].dtype.base_dtype.np)
    if info.backup_initializer is not None:
        value = np.asarray(info.backup_initializer(full, dtype=parts[0].dtype.base_dtype),
                           dtype=value.dtype) if callable(info.backup_initializer) else value
    for i, w in enumerate(new_words):
        j = old_index.get(w)
        if j is not None and j < old.shape[0]:
            value[i] = old[j]
    for v in parts:
        info_ = v._get_save_slice_info()
        sl = tuple(slice(o, o + n) for o, n in zip(info_.var_offset, info_.var_shape)) \
            if info_ is not None else ()
        v._initializer_op = apply_op("Assign", ref=v, value=value[sl]).op


def warm_start(ckpt_to_initialize_from: Any, vars_to_warm_start: Any = ".*",
               var_name_to_vocab_info: dict[str, Any] | None = None,
               var_name_to_prev_var_name: dict[str, str] | None = None) -> None:
    """Warm-start trainable variables (``vars_to_warm_start``: a regex, a list of
    regexes, or variables/names) from a checkpoint, optionally under other names
    (``var_name_to_prev_var_name``) and with vocabulary remapping (``VocabInfo``).

    :raises ValueError: a vocab or rename entry not used by any warm-started variable
    """
    vocab = dict(var_name_to_vocab_info or {})
    prev_names = dict(var_name_to_prev_var_name or {})
    ckpt_file = _saver._checkpoint_filename(ckpt_to_initialize_from)
    grouped = _vars_to_warm_start(vars_to_warm_start)
    used_vocab, used_prev = set(), set()
    for name in sorted(grouped):
        var = grouped[name]
        prev = prev_names.get(name, name)
        if name in prev_names:
            used_prev.add(name)
        if name in vocab:
            used_vocab.add(name)
            _warm_start_vocab(var, ckpt_file, prev, vocab[name])
        else:
            init_from_checkpoint(ckpt_file, {prev: var})
    unused = (set(vocab) - used_vocab) | (set(prev_names) - used_prev)
    if unused:
        raise ValueError(f"You provided the following variables in var_name_to_vocab_info"
                         f" or var_name_to_prev_var_name that were not used: {sorted(unused)}."
                         " Perhaps you misspelled them?")


def _vars_to_warm_start(spec: Any) -> dict[str, Any]:
    """``{name: variable or list of parts}`` of the variables ``spec`` selects."""
    if spec is None:
        return {}
    if isinstance(spec, str) or (isinstance(spec, (list, tuple)) and spec and
                                 all(isinstance(s, str) for s in spec)):
        regexes = [spec] if isinstance(spec, str) else list(spec)
        coll = GraphKeys.TRAINABLE_VARIABLES if spec == ".*" else GraphKeys.GLOBAL_VARIABLES
        vs = [v for v in get_collection(coll)
              if any(re.match(r, v.op.name) for r in regexes)]
    else:
        vs = list(spec)
    out: dict[str, Any] = {}
    for v in vs:
        info = v._get_save_slice_info()
        name = info.full_name if info is not None else v.op.name
        if info is not None:
            out.setdefault(name, []).append(v)
        else:
            out[name] = v
    return out


API = {
    "train.init_from_checkpoint": init_from_checkpoint,
    "train.warm_start": warm_start,
    "train.WarmStartSettings": WarmStartSettings,
    "train.VocabInfo": VocabInfo,
    "estimator.WarmStartSettings": WarmStartSettings,
    "estimator.VocabInfo": VocabInfo,
}
