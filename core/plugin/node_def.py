"""A ``NodeDef``'s attrs as Python values, checked against the node's op definition.

The one decoder of a GraphDef's node attrs: :func:`flowrt.graph_def.import_graph_def`
(a client's or TensorFlow's graph) and :func:`flowrt.ir_wire.ir_from_graph_def` (a
partition a master registers over the wire) both use :func:`decode_node_attrs`, so an
attr reads the same wherever the GraphDef came from:

- an attr the OpDef declares decodes as its kind (a ``tensor`` as a numpy array; one
  value filling a bigger shape stays that one value viewed as the shape) and must meet
  the OpDef's constraints (allowed types and strings, minimum value or length);
- an attr the OpDef does not declare is an error, unless it holds a zero value (false,
  0, empty string or list: an attr a newer TensorFlow added with its default, dropped)
  or its name starts with ``_``;
- ``_`` attrs are internal: TensorFlow's own (``_class``, ``_output_shapes``) decode as
  their kind, any other as whatever it holds; a caller may reserve a prefix
  (``_flowrt_`` on the wire): attrs with it are left to the caller, and an unknown
  name with it is an error;
- an attr the NodeDef lacks takes the OpDef's default, and is an error without one.
"""
from __future__ import annotations

from typing import Any, Container, Mapping

import numpy as np

from ..base import dtypes as _dt
from ..base.tensor_codec import (INTERNAL_ATTR_KINDS, TensorProto, VAL_FIELD,
                                 check_attr_constraints, make_ndarray, python_attr_of)

__all__ = ["decode_node_attrs", "tensor_attr_array", "is_default_like"]


def tensor_attr_array(tp: TensorProto) -> np.ndarray:
    """make_ndarray, but a single value filling a bigger shape stays one value viewed
    as that shape (read-only), so writing the node back gives the same compact proto."""
    arr = make_ndarray(tp)
    if not tp.tensor_content and arr.size > 1:
        field = VAL_FIELD.get(_dt.as_dtype(tp.dtype).base_dtype)
        per_value = 2 if field in ("scomplex_val", "dcomplex_val") else 1
        if field is not None and len(getattr(tp, field)) == per_value:
            arr = np.broadcast_to(arr.reshape(-1)[:1].reshape(()), arr.shape)
    return arr


def is_default_like(av: Any) -> bool:
    """An AttrValue holding a zero value (false, 0, empty string or list)."""
    which = av.WhichOneof("value")
    if which is None:
        return True
    if which == "list":
        lv = av.list
        return not any(len(getattr(lv, f)) for f in ("s", "i", "f", "b", "type", "shape",
                                                     "tensor", "func"))
    if which in ("s", "i", "f", "b"):
        return not getattr(av, which)
    return False


def _decode(av: Any, kind: str | None) -> Any:
    if kind == "tensor" and av.WhichOneof("value") == "tensor":
        return tensor_attr_array(av.tensor)
    return python_attr_of(av, kind)  # (a tensor kind holding anything else: an error)


#: attrs newer TensorFlow versions write, whatever their value, that only hint at an
#: optimisation (grad_a: this MatMul computes a gradient): dropped where the op
#: definition lacks them
HINT_ATTRS: dict[str, tuple[str, ...]] = {
    "MatMul": ("grad_a", "grad_b"), "BatchMatMulV2": ("grad_x", "grad_y"),
    "BatchMatMulV3": ("grad_x", "grad_y")}


def decode_node_attrs(attrs: Mapping[str, Any], op_def: Any, where: str | None = None,
                      reserved_prefix: str | None = None,
                      reserved: Container[str] = ()) -> dict[str, Any]:
    """``{name: Python value}`` of a NodeDef's ``attr`` map, checked against ``op_def``
    and with the OpDef's defaults filled in (the rules are in the module's docstring).

    :param where: names the node in error messages (``"Node 'a' (op 'Add')"``); the
        caller adds it otherwise
    :param reserved_prefix: attrs whose names start with it are the caller's: those
        named in ``reserved`` are skipped, any other is an error
    :raises ValueError: an attr of the wrong kind, outside its constraints, unknown to
        the OpDef or missing without a default
    """
    pre = f"{where}: " if where else ""
    adefs = op_def.attrs
    out: dict[str, Any] = {}
    for key in attrs:
        av = attrs[key]
        if reserved_prefix and key.startswith(reserved_prefix):
            if key not in reserved:
                raise ValueError(f"{pre}unknown reserved attr '{key}'")
            continue
        adef = adefs.get(key)
        if adef is None:
            if not key.startswith("_"):
                if is_default_like(av) or key in HINT_ATTRS.get(op_def.name, ()):
                    # an attr a newer TF added with its default value (MaxPool's
                    # explicit_paddings ...), or one that only hints at an optimisation
                    # (the MatMuls of a gradient): dropping it keeps the meaning
                    continue
                raise ValueError(f"{pre}NodeDef mentions attr '{key}' not in the op "
                                 f"definition of '{op_def.name}' (attrs: "
                                 f"{', '.join(sorted(adefs)) or 'none'})")
            kind = INTERNAL_ATTR_KINDS.get(key)
        else:
            kind = adef.kind
        try:
            value = _decode(av, kind)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{pre}attr '{key}': {e}") from None
        if adef is not None:
            check_attr_constraints(adef, value, where or f"attr '{key}'")
        out[key] = value
    for key, adef in adefs.items():
        if key in out:
            continue
        if not adef.has_default:
            raise ValueError(f"{pre}NodeDef is missing attr '{key}', which the op "
                             f"definition of '{op_def.name}' requires (no default)")
        d = adef.default
        out[key] = list(d) if isinstance(d, list) else d
    return out
