"""One decoder of NodeDef attrs (flowrt.plugin.node_def.decode_node_attrs): a GraphDef
imported by a client (import_graph_def) and one registered on a worker
(ir_from_graph_def) read their attrs by the same rules."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import flowrt as tf
from flowrt import errors
from flowrt.ir_wire import RESERVED_PREFIX, ir_from_graph_def, ir_to_graph_def
from flowrt.plugin.node_def import decode_node_attrs, is_default_like, tensor_attr_array
from flowrt.runtime import default_runtime


def _graph_def() -> Any:
    g = tf.Graph()
    with g.as_default():
        a = tf.placeholder(tf.float32, [2, 2], name="a")
        k = tf.constant(np.full((2, 2), 3.0, np.float32), name="k")
        tf.matmul(a, k, name="mm")
    return g.as_graph_def()


def _node(gd: Any, name: str) -> Any:
    return next(n for n in gd.node if n.name == name)


def _imported(gd: Any) -> dict[str, dict[str, Any]]:
    g = tf.Graph()
    with g.as_default():
        tf.import_graph_def(gd, name="")
    return {op.name: op.node_attrs for op in g.get_operations()}


def _wired(gd: Any) -> dict[str, dict[str, Any]]:
    ir = ir_from_graph_def(gd, default_runtime())
    return {n.name: n.node_attrs for n in ir.nodes.values()}


def _both(gd: Any) -> list[dict[str, dict[str, Any]]]:
    return [_imported(gd), _wired(gd)]


def _both_fail(gd: Any, piece: str) -> None:
    with pytest.raises(ValueError, match=piece):
        _imported(gd)
    with pytest.raises(errors.InvalidArgumentError, match=piece):
        _wired(gd)


def test_defaults_fill_in_alike():
    gd = _graph_def()
    mm = _node(gd, "mm")
    for key in ("transpose_a", "transpose_b"):
        if key in mm.attr:
            del mm.attr[key]
    for attrs in _both(gd):
        assert attrs["mm"]["transpose_a"] is False and attrs["mm"]["transpose_b"] is False
        assert attrs["mm"]["T"] is tf.float32


def test_unknown_attrs_alike():
    gd = _graph_def()
    # an attr a newer TF added with its default value: dropped by both
    _node(gd, "mm").attr["grad_a"].b = False
    for attrs in _both(gd):
        assert "grad_a" not in attrs["mm"]
    # a hint attr (a gradient's MatMul in a TF 2.x graph) is dropped whatever its value
    _node(gd, "mm").attr["grad_a"].b = True
    for attrs in _both(gd):
        assert "grad_a" not in attrs["mm"]
    # an unknown attr with another value than its kind's default: an error in both
    _node(gd, "mm").attr["fancy"].b = True
    _both_fail(gd, "attr 'fancy' not in the op definition of 'MatMul'")


def test_allowed_values_and_missing_attrs_alike():
    gd = _graph_def()
    _node(gd, "mm").attr["T"].type = tf.string.as_datatype_enum
    _both_fail(gd, "attr 'T' of string is not in the list of allowed values")
    gd = _graph_def()
    del _node(gd, "k").attr["dtype"]
    _both_fail(gd, "missing attr 'dtype'")
    gd = _graph_def()
    _node(gd, "mm").attr["transpose_a"].i = 1
    _both_fail(gd, "attr 'transpose_a'.*'int' when 'bool' expected")


def test_internal_attrs_alike():
    gd = _graph_def()
    mm = _node(gd, "mm")
    mm.attr["_class"].list.s.append(b"loc:@k")
    mm.attr["_output_shapes"].list.shape.add().dim.add(size=2)
    mm.attr["_something"].i = 7
    for attrs in _both(gd):
        assert attrs["mm"]["_class"] == ["loc:@k"]
        assert attrs["mm"]["_output_shapes"][0].as_list() == [2]
        assert attrs["mm"]["_something"] == 7
    # TensorFlow's own internal attrs must have their kind
    gd = _graph_def()
    _node(gd, "mm").attr["_class"].i = 3
    _both_fail(gd, "attr '_class'.*'list\\(string\\)' expected")


def test_reserved_attrs_are_the_wire_format_s_own():
    gd = _graph_def()
    ir = ir_from_graph_def(gd, default_runtime())
    for n in ir.nodes.values():
        n.assigned_device = "/job:localhost/replica:0/task:0/device:CPU:0"
    ir.fetches = [("mm", 0)]
    wire = ir_to_graph_def(ir)
    assert any(k.startswith(RESERVED_PREFIX) for k in _node(wire, "mm").attr)
    # the worker reads them itself: not among the node's attrs
    assert not any(k.startswith(RESERVED_PREFIX) for k in _wired(wire)["mm"])
    _node(wire, "mm").attr[RESERVED_PREFIX + "nonsense"].b = True
    with pytest.raises(errors.InvalidArgumentError, match="unknown reserved attr"):
        _wired(wire)
    # to import_graph_def they are internal attrs like any other
    assert _imported(wire)["mm"][RESERVED_PREFIX + "nonsense"] is True


def test_a_filled_tensor_stays_compact_in_both():
    gd = _graph_def()
    tp = _node(gd, "k").attr["value"].tensor
    tp.tensor_content = b""
    tp.float_val.append(3.0)  # TensorFlow's compact form: one value for the shape
    for attrs in _both(gd):
        v = attrs["k"]["value"]
        np.testing.assert_array_equal(v, np.full((2, 2), 3.0, np.float32))
        assert v.strides == (0, 0)  # one value viewed as the shape
    assert tensor_attr_array(_node(gd, "k").attr["value"].tensor).strides == (0, 0)


def test_decoder_direct():
    rt = default_runtime()
    gd = _graph_def()
    attrs = decode_node_attrs(_node(gd, "mm").attr, rt.op_def("MatMul"), "Node 'mm'")
    assert attrs["T"] is tf.float32 and attrs["transpose_a"] is False
    gd.node[0].attr["zzz"].i = 1
    with pytest.raises(ValueError, match="^Node 'a': NodeDef mentions attr 'zzz'"):
        decode_node_attrs(gd.node[0].attr, rt.op_def("Placeholder"), "Node 'a'")
    from flowrt.proto.attr_value_pb2 import AttrValue

    assert is_default_like(AttrValue()) and is_default_like(AttrValue(s=b""))
    assert not is_default_like(AttrValue(i=1)) and not is_default_like(AttrValue(type=1))
