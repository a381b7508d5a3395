"""Graph-level programs: op and tensor naming, name scopes, graph queries, GraphDef
export/import (also across the two implementations), TensorShape/Dimension behaviour and
build-time error classes."""
from __future__ import annotations

import numpy as np
import pytest

from compat_harness import execute, module, run_both, run_custom

# NodeDef attrs that TF 2.x added (with defaults) after 1.15; GraphDefs written by TF 1.15
# do not have them, so they are left out of attr-key comparisons.
TF2_ONLY_ATTRS = {"grad_a", "grad_b", "explicit_paddings"}


# -- naming -----------------------------------------------------------------------------------------
def _names(tf):
    a = tf.constant(1.0)
    b = tf.constant(2.0)
    c = tf.add(a, b)
    d = a + b
    e = tf.multiply(a, b, name="prod")
    f = tf.multiply(a, b, name="prod")
    g = tf.identity(c, name="prod_1")
    h = tf.identity(c, name="prod_1")
    with tf.name_scope("outer"):
        i = tf.constant(3.0)
        with tf.name_scope("inner"):
            j = tf.constant(4.0, name="named")
            k = tf.negative(j)
        with tf.name_scope("inner"):
            m = tf.constant(5.0)
        with tf.name_scope(None):
            n = tf.constant(6.0)
    with tf.name_scope("outer/inner/"):
        o = tf.constant(7.0)
    with tf.name_scope("outer"):
        p = tf.constant(8.0)
    q = tf.constant(9.0, name="outer")
    with tf.name_scope("weird name-ok.x"):
        r = tf.constant(10.0)
    s = tf.placeholder(tf.float32, name="in")
    t = tf.reduce_sum(tf.ones([2, 2]), name=None)
    u = tf.reduce_mean(tf.ones([2, 2]))
    return [x.name for x in (a, b, c, d, e, f, g, h, i, j, k, m, n, o, p, q, r, s, t, u)]


def _composite_names(tf):
    x = tf.placeholder(tf.float32, [None, 4], name="x")
    outs = {
        "softmax": tf.nn.softmax(x), "log_softmax": tf.nn.log_softmax(x),
        "moments": [t.name for t in tf.nn.moments(x, [0])],
        "l2_normalize": tf.nn.l2_normalize(x, 1), "l2_loss": tf.nn.l2_loss(x),
        "sigmoid_xent": tf.nn.sigmoid_cross_entropy_with_logits(labels=x, logits=x),
        "softmax_xent": tf.nn.softmax_cross_entropy_with_logits_v2(labels=x, logits=x),
        "sparse_xent": tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.constant([1]), logits=x),
        "reduce_mean": tf.reduce_mean(x), "reduce_std": tf.math.reduce_std(x),
        "reduce_logsumexp": tf.reduce_logsumexp(x), "count_nonzero": tf.count_nonzero(x),
        "argmax": tf.argmax(x, 1), "cast": tf.cast(x, tf.int32), "cast_noop": tf.cast(x, tf.float32),
        "truediv": tf.constant(1) / tf.constant(2), "floordiv_op": x // 2.0, "mod_op": x % 2.0,
        "sub_op": x - 1.0, "mul_op": x * 2.0, "neg_op": -x, "div_op": x / 2.0, "pow_op": x ** 2.0,
        "matmul": tf.matmul(x, tf.ones([4, 2])), "matmul_op": x @ tf.ones([4, 2]),
        "getitem": x[:, 1], "getitem_int": x[0], "concat": tf.concat([x, x], 1),
        "stack": tf.stack([x, x]), "unstack": [t.name for t in tf.unstack(tf.ones([2, 3]))],
        "reshape": tf.reshape(x, [-1]),
        "transpose": tf.transpose(x), "squeeze": tf.squeeze(tf.ones([1, 2])),
        "expand_dims": tf.expand_dims(x, 0), "shape": tf.shape(x), "size": tf.size(x),
        "rank": tf.rank(x), "zeros": tf.zeros([2]), "zeros_big": tf.zeros([100, 100]),
        "ones": tf.ones([2]), "zeros_like": tf.zeros_like(x), "ones_like": tf.ones_like(x),
        "fill": tf.fill([2], 1.0), "range": tf.range(3), "one_hot": tf.one_hot([1], 2),
        "where": tf.where(tf.constant([True])), "gather": tf.gather(x, [0]),
        "boolean_mask": tf.boolean_mask(tf.ones([2]), [True, False]),
        "pad": tf.pad(x, [[1, 1], [0, 0]]), "tile": tf.tile(x, [1, 2]),
        "clip": tf.clip_by_value(x, 0.0, 1.0), "add_n": tf.add_n([x, x]),
        "relu": tf.nn.relu(x), "leaky_relu": tf.nn.leaky_relu(x), "elu": tf.nn.elu(x),
        "bias_add": tf.nn.bias_add(x, tf.ones([4])), "sigmoid": tf.sigmoid(x),
        "tanh": tf.tanh(x), "square": tf.square(x), "sqrt": tf.sqrt(x),
        "random_normal": tf.random_normal([2]), "truncated_normal": tf.truncated_normal([2]),
        "random_uniform_int": tf.random_uniform([2], 0, 5, dtype=tf.int32),
        "dropout": tf.nn.dropout(x, 0.5), "tensordot": tf.tensordot(x, tf.ones([4]), 1),
        "einsum": tf.einsum("ij,j->i", x, tf.ones([4])),
        "conv2d": tf.nn.conv2d(tf.ones([1, 3, 3, 1]), tf.ones([2, 2, 1, 1]), [1, 1, 1, 1],
                               "SAME"),
        "max_pool": tf.nn.max_pool(tf.ones([1, 2, 2, 1]), [1, 2, 2, 1], [1, 1, 1, 1], "SAME"),
        "avg_pool": tf.nn.avg_pool(tf.ones([1, 2, 2, 1]), [1, 2, 2, 1], [1, 1, 1, 1], "SAME"),
        "variable": tf.Variable(1.0).name, "variable_named": tf.Variable(1.0, name="w").name,
        "convert_to_tensor": tf.convert_to_tensor([1, 2]), "linspace": tf.linspace(0.0, 1.0, 3),
        "eye": tf.eye(2), "reverse": tf.reverse(x, [1]), "string_join_add": tf.constant("a") + "b",
        "assert": tf.Assert(tf.constant(True), [x]).name, "group": tf.group(x).name,
        "no_op": tf.no_op().name, "print": tf.Print(x, [x]),
        # last: TF 1.15's split converted num_or_size_splits to a tensor before looking at
        # its type, so an int split leaves one unused Const that shifts the numbering of
        # later Consts; TF 2.x checks the type first (test_split_int_leaves_const_tf115)
        "split": [t.name for t in tf.split(x, 2, 1)],
    }
    return {k: v if isinstance(v, (str, list)) else (v.name, v.op.type) for k, v in outs.items()}


def _auto_names_with_scope(tf):
    with tf.name_scope("layer") as scope:
        w = tf.constant(1.0)
    return [scope, w.name, tf.get_default_graph().get_name_scope(),
            tf.get_default_graph().unique_name("foo"), tf.get_default_graph().unique_name("foo"),
            tf.get_default_graph().unique_name("foo", mark_as_used=False)]


def _op_facts(tf):
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    y = tf.matmul(x, tf.ones([3, 2]), transpose_b=False, name="mm")
    op = y.op
    return {
        "type": op.type, "name": op.name, "inputs": [t.name for t in op.inputs],
        "outputs": [t.name for t in op.outputs], "value_index": y.value_index,
        "attr_transpose_a": op.get_attr("transpose_a"), "attr_T": op.get_attr("T").name,
        "node_def_op": op.node_def.op, "node_def_inputs": list(op.node_def.input),
        "node_def_attr_keys": sorted(set(op.node_def.attr.keys()) - TF2_ONLY_ATTRS),
        "consumers_of_x": [o.name for o in x.consumers()],
        "graph_is_default": y.graph is tf.get_default_graph(),
        "op_def_name": op.op_def.name if op.op_def is not None else None,
        "device": op.device, "colocation": op.colocation_groups(),
        "tensor_by_name": tf.get_default_graph().get_tensor_by_name("mm:0").name,
        "op_by_name": tf.get_default_graph().get_operation_by_name("mm").type,
        "as_graph_element": tf.get_default_graph().as_graph_element("mm:0").name,
        "str_tensor": str(y), "repr_tensor": repr(y), "str_dtype": str(y.dtype),
        "repr_dtype": repr(y.dtype),
    }


def _graph_queries(tf):
    g = tf.get_default_graph()
    a = tf.constant(1, name="a")
    tf.identity(a, name="b")
    out = {"ops": [o.name for o in g.get_operations()], "version_positive": g.version > 0}
    for bad in ("a:1", "zzz:0", "a", "zzz"):
        for fn in (g.get_tensor_by_name, g.get_operation_by_name):
            try:
                fn(bad)
                out[f"{fn.__name__}({bad})"] = "ok"
            except Exception as e:  # noqa: BLE001
                out[f"{fn.__name__}({bad})"] = type(e).__name__
    return out


def _collections(tf):
    tf.add_to_collection("mine", tf.constant(1, name="c1"))
    tf.add_to_collections(["mine", "yours"], tf.constant(2, name="c2"))
    tf.Variable(1.0, name="gv")
    tf.Variable(1.0, name="lv", collections=[tf.GraphKeys.LOCAL_VARIABLES])
    g = tf.get_default_graph()
    ref = tf.get_collection_ref("mine")
    ref.append(tf.constant(3, name="c3"))
    return {
        "mine": [t.name for t in tf.get_collection("mine")],
        "yours": [t.name for t in tf.get_collection("yours")],
        "scoped": [t.name for t in tf.get_collection("mine", scope="c2")],
        "globals": [v.name for v in tf.global_variables()],
        "locals": [v.name for v in tf.local_variables()],
        "keys": sorted(g.get_all_collection_keys()),
        "graphkeys": [tf.GraphKeys.GLOBAL_VARIABLES, tf.GraphKeys.TRAINABLE_VARIABLES,
                      tf.GraphKeys.LOCAL_VARIABLES, tf.GraphKeys.UPDATE_OPS,
                      tf.GraphKeys.LOSSES, tf.GraphKeys.SUMMARIES],
    }


def _finalized_graph(tf):
    g = tf.get_default_graph()
    tf.constant(1)
    g.finalize()
    try:
        tf.constant(2)
    except Exception as e:  # noqa: BLE001
        return [g.finalized, type(e).__name__]
    return [g.finalized, "no error"]


def _device_scopes(tf):
    with tf.device("/cpu:0"):
        a = tf.constant(1)
        with tf.device(None):
            b = tf.constant(2)
        with tf.device("/job:w/task:1"):
            c = tf.constant(3)
    with tf.device("/device:CPU:0"):
        d = tf.constant(4)
    return [a.device, b.device, c.device, d.device, a.op.device]


def _colocate(tf):
    a = tf.constant(1, name="a")
    with tf.colocate_with(a):
        b = tf.identity(a, name="b")
    return [b.op.colocation_groups(), b.op.node_def.attr["_class"].list.s[:]
            if "_class" in b.op.node_def.attr else []]


GRAPH_FNS = {
    "names": _names,
    "auto_names_with_scope": _auto_names_with_scope, "op_facts": _op_facts,
    "graph_queries": _graph_queries, "collections": _collections,
    "finalized_graph": _finalized_graph, "device_scopes": _device_scopes,
    "colocate": _colocate,
}


@pytest.mark.parametrize("name", sorted(GRAPH_FNS))
def test_graph_facts(name):
    run_custom(GRAPH_FNS[name])


def test_composite_names():
    """Names (and op types) of the tensors that ~80 API calls return, built one after the
    other in one graph (so automatic numbering is compared too); TF 2.x renames listed in
    the harness's TF115_STATIC_REWRITES are accepted."""
    from compat_harness import _same_op_type, _tf115_static

    out = {}
    for impl in ("tf", "flowrt"):
        tf = module(impl)
        with tf.Graph().as_default():
            try:
                out[impl] = _composite_names(tf)
            except Exception as e:  # noqa: BLE001
                out[impl] = {"<error>": f"{type(e).__name__}: {e}"}
    diffs = []
    for k in sorted(set(out["tf"]) | set(out["flowrt"])):
        t, f = out["tf"].get(k), out["flowrt"].get(k)
        if isinstance(t, tuple) and isinstance(f, tuple):
            alt = _tf115_static({"name": t[0], "op_type": t[1]})
            if alt is not None and (alt["name"], alt["op_type"]) == f:
                continue
            if t[0] == f[0] and _same_op_type(t[1], f[1]):
                continue
        if t != f:
            diffs.append(f"{k}: tf={t!r} flowrt={f!r}")
    assert not diffs, "names differ:\n  " + "\n  ".join(diffs)


def test_split_int_leaves_const_tf115():
    # array_ops.split in TF 1.15: ``size_splits = ops.convert_to_tensor(num_or_size_splits)``
    # came before the integer check, so tf.split(x, 2) also made an (unused) Const
    tf = module("flowrt")
    with tf.Graph().as_default() as g:
        tf.split(tf.ones([4], name="x"), 2)
        assert [(o.name, o.type) for o in g.get_operations()] == [
            ("x", "Const"), ("Const", "Const"), ("split/split_dim", "Const"),
            ("split", "Split")]


# -- TensorShape / Dimension --------------------------------------------------------------------------
def _shape_facts(tf):
    s = tf.TensorShape([None, 3])
    u = tf.TensorShape(None)
    x = tf.placeholder(tf.float32, [None, 3])
    d = x.shape[1]
    out = {
        "str": str(s), "repr": repr(s), "str_unknown": str(u), "repr_unknown": repr(u),
        "ndims": s.ndims, "ndims_unknown": u.ndims, "as_list": s.as_list(),
        "dims_type": type(s.dims[1]).__name__, "getitem_type": type(d).__name__,
        "dim_value": d.value, "dim_eq_int": d == 3, "dim_none_value": x.shape[0].value,
        "dim_none_eq": x.shape[0] == 3, "dim_str": str(d), "dim_repr": repr(d),
        "dim_none_str": str(x.shape[0]), "dim_int": int(d), "dim_mul": str(d * 2),
        "dimension_value": tf.dimension_value(d),
        "is_fully_defined": s.is_fully_defined(), "compatible": s.is_compatible_with([2, 3]),
        "merge": tf.TensorShape([None, 3]).merge_with([2, None]).as_list(),
        "concatenate": s.concatenate([4]).as_list(),
        "slice": s[1:].as_list(), "num_elements": tf.TensorShape([2, 3]).num_elements(),
        "num_elements_unknown": s.num_elements(),
        "eq_known": tf.TensorShape([2, 3]) == tf.TensorShape([2, 3]),
        "len": len(s), "with_rank": s.with_rank(2).as_list(),
        "proto_dims": [dd.size for dd in s.as_proto().dim],
        "scalar_str": str(tf.TensorShape([])), "get_shape_eq_shape": x.get_shape() == x.shape,
        "tensor_shape_str": str(tf.constant([[1, 2]]).shape),
    }
    for bad in (lambda: s.as_list() and u.as_list(), lambda: s.merge_with([2, 4]),
                lambda: s.with_rank(3), lambda: len(u), lambda: tf.Dimension(3).merge_with(4),
                lambda: x.set_shape([2, 4]), lambda: s.assert_is_fully_defined()):
        try:
            bad()
            out.setdefault("errors", []).append("ok")
        except Exception as e:  # noqa: BLE001
            out.setdefault("errors", []).append(type(e).__name__)
    x.set_shape([5, 3])
    out["after_set_shape"] = x.shape.as_list()
    return out


def _dtype_facts(tf):
    out = {}
    for name in ("float32", "float16", "bfloat16", "float64", "int8", "uint8", "int32",
                 "int64", "bool", "string", "complex64", "complex128"):
        d = getattr(tf, name)
        out[name] = {
            "name": d.name, "size": d.size if name != "string" else None,
            "is_floating": d.is_floating, "is_integer": d.is_integer,
            "is_complex": d.is_complex, "is_bool": d.is_bool, "is_unsigned": d.is_unsigned,
            "is_quantized": d.is_quantized, "ref": d._as_ref.name,
            "base": d._as_ref.base_dtype.name, "enum": d.as_datatype_enum,
            "real": d.real_dtype.name, "np": np.dtype(d.as_numpy_dtype).name,
            "min": str(d.min) if d.is_floating or d.is_integer else None,
            "max": str(d.max) if d.is_floating or d.is_integer else None,
        }
    out["as_dtype"] = [tf.as_dtype(v).name for v in (np.float32, "int64", np.dtype("bool"),
                                                     tf.float16, 1, np.complex64)]
    out["eq"] = [tf.float32 == np.float32, tf.float32 == "float32", tf.int32 == tf.int64]
    out["aliases"] = [tf.double.name, tf.half.name]
    return out


@pytest.mark.parametrize("fn", [_shape_facts, _dtype_facts], ids=["shapes", "dtypes"])
def test_shape_dtype_facts(fn):
    run_custom(fn)


def test_tensorshape_eq_with_unknown_dims_tf115():
    # TF 1.15 kept Dimension objects in TensorShape and compared the lists, so shapes with
    # unknown dimensions never compared equal (Dimension(None) == Dimension(None) is None);
    # TF 2.x (even with v2 behaviour disabled) stores ints and says True.
    import flowrt as tf

    assert (tf.TensorShape([None, 3]) == tf.TensorShape([None, 3])) is False
    assert (tf.TensorShape([2, 3]) == tf.TensorShape([2, 3])) is True
    assert (tf.Dimension(None) == tf.Dimension(None)) is None


def test_static_shape_inference_table():
    def fn(tf):
        x = tf.placeholder(tf.float32, [None, 4, None])
        u = tf.placeholder(tf.float32)
        i = tf.placeholder(tf.int32, [None])
        outs = {
            "add_bcast": x + tf.ones([1, 4, 1]), "add_unknown_rank": u + x,
            "reduce_keep": tf.reduce_sum(x, 1, keepdims=True), "reduce_unknown": tf.reduce_sum(u, 0),
            "transpose": tf.transpose(x, [2, 0, 1]), "reshape": tf.reshape(x, [-1, 2]),
            "reshape_known": tf.reshape(tf.ones([4, 6]), [-1, 3]),
            "reshape_fed_shape": tf.reshape(x, i), "concat": tf.concat([x, x], 2),
            "stack": tf.stack([x, x], 1), "slice": x[1:, :2], "tile": tf.tile(x, [2, 1, 3]),
            "expand": tf.expand_dims(u, 0), "gather": tf.gather(x, i),
            "gather_axis": tf.gather(x, [0, 1], axis=1), "shape": tf.shape(x), "shape_u": tf.shape(u),
            "matmul": tf.matmul(tf.placeholder(tf.float32, [None, 5]), tf.ones([5, 7])),
            "squeeze_u": tf.squeeze(u), "pad": tf.pad(x, [[1, 1], [0, 0], [2, 2]]),
            "one_hot": tf.one_hot(i, 3), "where": tf.where(tf.cast(x, tf.bool)),
            "argmax": tf.argmax(x, 2), "fill": tf.fill(i, 1.0), "range": tf.range(tf.size(i)),
            "split": tf.split(x, 2, 1)[0], "boolean_mask": tf.boolean_mask(x, tf.ones([2, 4],
                                                                                  tf.bool)),
            "conv": tf.nn.conv2d(tf.placeholder(tf.float32, [None, 7, None, 2]),
                                 tf.ones([3, 3, 2, 5]), [1, 2, 2, 1], "VALID"),
            "pool": tf.nn.max_pool(tf.placeholder(tf.float32, [None, 7, 8, 2]), [1, 2, 2, 1],
                                   [1, 2, 2, 1], "SAME"),
            "strided_shrink": x[..., 0], "strided_newaxis": x[:, None],
            "cast": tf.cast(u, tf.int32), "softmax_u": tf.nn.softmax(u),
            "zeros_of_shape": tf.zeros(tf.shape(x)),
            "set_shape_via_ensure": tf.reshape(i, [-1, 1]),
        }
        res = {}
        for k, t in outs.items():
            res[k] = None if t.shape.ndims is None else t.shape.as_list()
        return res

    run_custom(fn)


# -- GraphDef export / import ---------------------------------------------------------------------------
def _sample_graph(tf):
    x = tf.placeholder(tf.float32, [None, 3], name="x")
    w = tf.constant(np.arange(6, dtype=np.float32).reshape(3, 2), name="w")
    with tf.name_scope("layer"):
        y = tf.nn.relu(tf.matmul(x, w) + tf.constant([0.5, -4.0]), name="act")
    z = tf.reduce_sum(y, axis=1, name="total")
    s = tf.constant(["a", "b"], name="strs")
    return x, [y, z, s]


def _graph_def_facts(tf):
    _sample_graph(tf)
    gd = tf.get_default_graph().as_graph_def()
    return {
        "nodes": [(n.name, n.op, list(n.input)) for n in gd.node],
        "attrs": {n.name: sorted(set(n.attr) - TF2_ONLY_ATTRS) for n in gd.node},
        "placeholder_shape": [d.size for d in gd.node[0].attr["shape"].shape.dim],
        "w_value": tf.make_ndarray(gd.node[1].attr["value"].tensor).tolist(),
        "has_versions": gd.versions.producer > 0,
    }


def _round_trip(tf):
    _, _ = _sample_graph(tf)
    gd = tf.get_default_graph().as_graph_def()
    data = gd.SerializeToString()
    g2 = tf.Graph()
    with g2.as_default():
        gd2 = tf.GraphDef()
        gd2.ParseFromString(data)
        y, z, s = tf.import_graph_def(gd2, return_elements=["layer/act:0", "total:0", "strs:0"],
                                      name="imp")
        ops = [o.name for o in g2.get_operations()]
    with tf.Session(graph=g2) as sess:
        vals = sess.run([y, z, s], {"imp/x:0": np.array([[1, 2, 3], [-1, 0, 1]], np.float32)})
    return {"ops": ops, "names": [y.name, z.name, s.name], "vals": vals,
            "shapes": [None if t.shape.ndims is None else t.shape.as_list() for t in (y, z)]}


def _import_input_map(tf):
    _sample_graph(tf)
    gd = tf.get_default_graph().as_graph_def()
    g2 = tf.Graph()
    with g2.as_default():
        feed = tf.constant([[1.0, 1.0, 1.0]], name="feed")
        (z,) = tf.import_graph_def(gd, input_map={"x:0": feed}, return_elements=["total:0"])
        ops = [o.name for o in g2.get_operations()]
        op_el = tf.import_graph_def(gd, return_elements=["total"], name="again")
    with tf.Session(graph=g2) as sess:
        val = sess.run(z)
    return {"name": z.name, "ops": ops, "val": val, "op_el": [o.name for o in op_el]}


def _import_errors(tf):
    _sample_graph(tf)
    gd = tf.get_default_graph().as_graph_def()
    out = []
    with tf.Graph().as_default():
        for kw in ({"return_elements": ["missing:0"]}, {"input_map": {"nope:0": tf.constant(1.0)}},
                   {"input_map": {"x:0": tf.constant([1, 2])}}):
            try:
                tf.import_graph_def(gd, **kw)
                out.append("ok")
            except Exception as e:  # noqa: BLE001
                out.append(type(e).__name__)
    return out


@pytest.mark.parametrize("fn", [_graph_def_facts, _round_trip, _import_input_map,
                                _import_errors],
                         ids=["graph_def_facts", "round_trip", "input_map", "import_errors"])
def test_graph_def(fn):
    run_custom(fn)


CROSS_PROGRAMS = {
    "dense": lambda tf: _sample_graph(tf),
    "arith_dtypes": lambda tf: (tf.placeholder(tf.int32, [None], name="x"),
                                [tf.floordiv(tf.placeholder(tf.int32, [None], name="x2"), 3),
                                 tf.cast(tf.constant([1.5, -1.5]), tf.int32),
                                 tf.constant([1, 2], tf.int64) * 3]),
    "array": lambda tf: (tf.placeholder(tf.float32, [None, 3], name="x"),
                         [tf.concat([tf.ones([1, 3]), tf.zeros([2, 3])], 0),
                          tf.reshape(tf.range(6), [2, 3]), tf.transpose(tf.ones([2, 3])),
                          tf.strided_slice(tf.range(10), [1], [8], [3]),
                          tf.gather(tf.range(5), [4, 1]), tf.one_hot([1, 0], 3),
                          tf.pad(tf.ones([1, 1]), [[1, 0], [0, 2]], mode="CONSTANT")]),
    "nn": lambda tf: (tf.placeholder(tf.float32, [None, 3], name="x"),
                      [tf.nn.softmax(tf.constant([[1.0, 2.0, 3.0]])),
                       tf.nn.conv2d(tf.ones([1, 4, 4, 2]), tf.ones([2, 2, 2, 3]), [1, 2, 2, 1],
                                    "SAME"),
                       tf.nn.max_pool(tf.reshape(tf.range(16.0), [1, 4, 4, 1]), [1, 2, 2, 1],
                                      [1, 2, 2, 1], "VALID"),
                       tf.nn.bias_add(tf.ones([2, 3]), tf.constant([1.0, 2.0, 3.0])),
                       tf.nn.sparse_softmax_cross_entropy_with_logits(
                           labels=tf.constant([0]), logits=tf.constant([[1.0, 2.0]]))]),
}


def _export(impl: str, build) -> tuple[bytes, list[str]]:
    tf = module(impl)
    g = tf.Graph()
    with g.as_default():
        _, outs = build(tf)
    return g.as_graph_def().SerializeToString(), [t.name for t in outs]


def _import_and_run(impl: str, data: bytes, names: list[str], feed_names: list[str]):
    tf = module(impl)
    g = tf.Graph()
    with g.as_default():
        gd = tf.GraphDef()
        gd.ParseFromString(data)
        outs = tf.import_graph_def(gd, return_elements=names, name="")
    feeds = {}
    for fname in feed_names:
        t = g.get_tensor_by_name(fname)
        shape = [2 if d is None else d for d in t.shape.as_list()]
        feeds[t] = np.arange(int(np.prod(shape))).reshape(shape).astype(t.dtype.as_numpy_dtype)
    with tf.Session(graph=g) as sess:
        return sess.run(outs, feeds)


def _strip_tf2_attrs(data: bytes) -> bytes:
    gd = _parse(data)
    for node in gd.node:
        for key in TF2_ONLY_ATTRS & set(node.attr):
            del node.attr[key]
    return gd.SerializeToString()


@pytest.mark.parametrize("direction", ["tf_to_flowrt", "tf_to_flowrt_stripped",
                                       "flowrt_to_tf"])
@pytest.mark.parametrize("name", sorted(CROSS_PROGRAMS))
def test_graph_def_interchange(name, direction):
    """A GraphDef exported by one implementation imports into and runs on the other, with
    the same results as running it where it came from. ``tf_to_flowrt`` uses TF 2.x's
    GraphDef as written; ``_stripped`` first drops the default-valued attrs TF added after
    1.15 (what a TF 1.15 GraphDef looks like)."""
    src, dst = ("flowrt", "tf") if direction == "flowrt_to_tf" else ("tf", "flowrt")
    data, names = _export(src, CROSS_PROGRAMS[name])
    if direction.endswith("_stripped"):
        data = _strip_tf2_attrs(data)
    feed_names = [n for n in ("x:0", "x2:0")
                  if n.split(":")[0] in {nd.name for nd in _parse(data).node}]
    expected = _import_and_run(src, data, names, feed_names)
    try:
        got = _import_and_run(dst, data, names, feed_names)
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"{dst} cannot import/run {src}'s GraphDef: "
                             f"{type(e).__name__}: {str(e)[:500]}") from e
    from compat_harness import compare_struct
    diffs: list[str] = []
    compare_struct(expected, got, "result", None, None, diffs)
    assert not diffs, f"{src} -> {dst}:\n  " + "\n  ".join(diffs)


def _parse(data: bytes):
    gd = module("tf").GraphDef()
    gd.ParseFromString(data)
    return gd


# -- build-time error classes -----------------------------------------------------------------------------
BUILD_ERRORS = {
    "add_dtype_mismatch": lambda tf: tf.add(tf.constant(1), tf.constant(1.0)),
    "add_shape_mismatch": lambda tf: tf.add(tf.ones([2]), tf.ones([3])),
    "matmul_inner_mismatch": lambda tf: tf.matmul(tf.ones([2, 3]), tf.ones([4, 2])),
    "matmul_rank1": lambda tf: tf.matmul(tf.ones([2]), tf.ones([2])),
    "reshape_size": lambda tf: tf.reshape(tf.ones([2, 3]), [4]),
    "reshape_bad_shape_dtype": lambda tf: tf.reshape(tf.ones([2]), [2.0]),
    "concat_rank": lambda tf: tf.concat([tf.ones([2]), tf.ones([2, 2])], 0),
    "concat_shape": lambda tf: tf.concat([tf.ones([2, 2]), tf.ones([2, 3])], 0),
    "placeholder_bad_dtype": lambda tf: tf.placeholder("notatype"),
    "constant_bad_value": lambda tf: tf.constant(object()),
    "constant_string_as_int": lambda tf: tf.constant("a", dtype=tf.int32),
    "cast_bad_target": lambda tf: tf.cast(tf.constant(1), "xyz"),
    "reduce_bad_axis_dtype": lambda tf: tf.reduce_sum(tf.ones([2]), axis=0.5),
    "transpose_bad_perm_len": lambda tf: tf.transpose(tf.ones([2, 3]), [0]),
    "gather_bad_axis": lambda tf: tf.gather(tf.ones([2]), [0], axis=3),
    "slice_bad_begin_len": lambda tf: tf.slice(tf.ones([2, 2]), [0], [1, 1]),
    "conv_bad_rank": lambda tf: tf.nn.conv2d(tf.ones([3, 3]), tf.ones([2, 2, 1, 1]),
                                             [1, 1, 1, 1], "SAME"),
    "unstack_unknown_num": lambda tf: tf.unstack(tf.placeholder(tf.float32)),
    "split_not_divisible": lambda tf: tf.split(tf.ones([5]), 2),
    "tensor_as_bool": lambda tf: bool(tf.constant(True)),
    "tensor_iter": lambda tf: list(tf.placeholder(tf.float32, [None])),
    "tensor_len": lambda tf: len(tf.constant([1, 2])),
    "tensor_hash_eq": lambda tf: (lambda c: [c == c, c != c, {c: 1}[c]] and c)(tf.constant(1)),
    "op_from_other_graph": lambda tf: (lambda g: tf.add(tf.constant(1), g))(
        _constant_in_new_graph(tf)),
    "session_run_in_build_missing_feed_type": lambda tf: tf.placeholder(tf.float32,
                                                                        [2]) + "a",
    "numpy_array_of_tensors": lambda tf: tf.constant([tf.constant(1)]),
    "stack_of_tensor_and_list": lambda tf: tf.stack([tf.constant([1, 2]), [3, 4]]),
    "name_with_bad_chars": lambda tf: tf.constant(1, name="bad name!"),
    "name_scope_bad_chars": lambda tf: _in_scope(tf, "bad scope!"),
    "variable_no_initial_value": lambda tf: tf.Variable(),
    "variable_bad_initial": lambda tf: tf.Variable("a") + 1,
}


def _constant_in_new_graph(tf):
    with tf.Graph().as_default():
        return tf.constant(2)


def _in_scope(tf, name):
    with tf.name_scope(name):
        return tf.constant(1)


_BUILD_TF115 = {
    # TF 1.15 raised plain TypeError; 2.x raises its subclass OperatorNotAllowedInGraphError
    k: dict(was="OperatorNotAllowedInGraphError", error_class="TypeError", error_phase="build",
            reason="Tensor.__bool__/__iter__ raised TypeError in TF 1.15")
    for k in ("tensor_as_bool", "tensor_iter")
}


@pytest.mark.parametrize("name", sorted(BUILD_ERRORS))
def test_build_errors(name):
    run_both(BUILD_ERRORS[name], tf115=_BUILD_TF115.get(name))


def test_shape_facts_of_fetches_match_runtime():
    """The static shapes flowrt infers must agree with what it then computes."""
    from test_compat_array import CONCAT_PROGRAMS, SHAPE_PROGRAMS

    bad = []
    for table in (SHAPE_PROGRAMS, CONCAT_PROGRAMS):
        for key, prog in sorted(table.items()):
            out = execute("flowrt", prog)
            if out.error_class or not out.results:
                continue
            leaves = [r for r in _flatten(out.results[0])]
            for (path, info), val in zip(out.static, leaves):
                shape = info.get("shape")
                if isinstance(shape, list) and val is not None:
                    got = list(np.shape(val))
                    if len(shape) != len(got) or any(s is not None and s != g
                                                     for s, g in zip(shape, got)):
                        bad.append(f"{key}{path}: static {shape} vs computed {got}")
    assert not bad, "\n".join(bad)


def _flatten(x):
    if isinstance(x, dict):
        for k in sorted(x, key=repr):
            yield from _flatten(x[k])
    elif isinstance(x, (list, tuple)):
        for v in x:
            yield from _flatten(v)
    else:
        yield x
