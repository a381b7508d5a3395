"""Tests for the generated protobuf modules in ``flowrt.proto``.

The schema promises TensorFlow 1.x wire compatibility: same message names,
field names, field numbers and enum values. The expected numbers below were
taken from TensorFlow's own .proto files (tensorflow/core/framework and
tensorflow/core/protobuf).
"""

import importlib
import math
import subprocess
import sys
from pathlib import Path

import pytest

MODULES = [
    "allocation_description",
    "attr_value",
    "checkpoint_state",
    "cluster",
    "config",
    "cost_graph",
    "event",
    "example",
    "feature",
    "graph_def",
    "meta_graph",
    "node_def",
    "op_def",
    "rewriter_config",
    "saved_model",
    "saver",
    "service",
    "step_stats",
    "summary",
    "tensor",
    "tensor_bundle",
    "tensor_description",
    "tensor_shape",
    "types",
]


def _pb2(name):
    return importlib.import_module(f"flowrt.proto.{name}_pb2")


@pytest.mark.parametrize("name", MODULES)
def test_module_imports(name):
    module = _pb2(name)
    assert module.DESCRIPTOR.package == "flowrt"
    assert module.DESCRIPTOR.name == f"flowrt/proto/{name}.proto"


def test_every_proto_file_has_a_module():
    import flowrt.proto

    proto_dir = Path(flowrt.proto.__file__).parent
    shipped = sorted(p.stem for p in proto_dir.glob("*.proto"))
    if not shipped:
        pytest.skip(".proto sources are not installed alongside the package")
    assert shipped == sorted(MODULES)


# --- enum values -----------------------------------------------------------

TF_DATATYPES = {
    "DT_INVALID": 0,
    "DT_FLOAT": 1,
    "DT_DOUBLE": 2,
    "DT_INT32": 3,
    "DT_UINT8": 4,
    "DT_INT16": 5,
    "DT_INT8": 6,
    "DT_STRING": 7,
    "DT_COMPLEX64": 8,
    "DT_INT64": 9,
    "DT_BOOL": 10,
    "DT_QINT8": 11,
    "DT_QUINT8": 12,
    "DT_QINT32": 13,
    "DT_BFLOAT16": 14,
    "DT_QINT16": 15,
    "DT_QUINT16": 16,
    "DT_UINT16": 17,
    "DT_COMPLEX128": 18,
    "DT_HALF": 19,
    "DT_RESOURCE": 20,
    "DT_VARIANT": 21,
    "DT_UINT32": 22,
    "DT_UINT64": 23,
}


def test_datatype_values_match_tensorflow():
    types_pb2 = _pb2("types")
    assert types_pb2.DT_FLOAT == 1
    assert types_pb2.DT_BFLOAT16 == 14
    assert types_pb2.DT_HALF == 19
    assert types_pb2.DT_UINT64 == 23
    assert types_pb2.DT_FLOAT_REF == 101
    for name, value in TF_DATATYPES.items():
        assert types_pb2.DataType.Value(name) == value
        if value:
            assert types_pb2.DataType.Value(name + "_REF") == value + 100
    # Exactly the base types and their _REF twins, nothing else.
    assert len(types_pb2.DataType.keys()) == 2 * len(TF_DATATYPES) - 1


def test_run_options_trace_level_constants():
    config_pb2 = _pb2("config")
    # Class-level constants, as used in tf.RunOptions(trace_level=...).
    assert config_pb2.RunOptions.NO_TRACE == 0
    assert config_pb2.RunOptions.SOFTWARE_TRACE == 1
    assert config_pb2.RunOptions.HARDWARE_TRACE == 2
    assert config_pb2.RunOptions.FULL_TRACE == 3
    opts = config_pb2.RunOptions(trace_level=config_pb2.RunOptions.FULL_TRACE)
    assert opts.trace_level == config_pb2.RunOptions.TraceLevel.Value("FULL_TRACE")


def test_other_enum_values_match_tensorflow():
    config_pb2 = _pb2("config")
    rewriter_pb2 = _pb2("rewriter_config")
    assert config_pb2.OptimizerOptions.L1 == 0
    assert config_pb2.OptimizerOptions.L0 == -1
    assert config_pb2.OptimizerOptions.OFF == -1
    assert config_pb2.OptimizerOptions.ON_2 == 2
    rc = rewriter_pb2.RewriterConfig
    assert (rc.DEFAULT, rc.ON, rc.OFF, rc.AGGRESSIVE) == (0, 1, 2, 3)
    assert rc.NO_MEM_OPT == 1 and rc.HEURISTICS == 3 and rc.MANUAL == 2
    assert rc.ONE == 1 and rc.TWO == 2


# --- field numbers -----------------------------------------------------------

# (module, dotted message name, field name, TensorFlow's field number)
TF_FIELD_NUMBERS = [
    ("tensor_shape", "TensorShapeProto", "dim", 2),
    ("tensor_shape", "TensorShapeProto", "unknown_rank", 3),
    ("tensor_shape", "TensorShapeProto.Dim", "size", 1),
    ("tensor_shape", "TensorShapeProto.Dim", "name", 2),
    ("tensor", "TensorProto", "dtype", 1),
    ("tensor", "TensorProto", "tensor_shape", 2),
    ("tensor", "TensorProto", "version_number", 3),
    ("tensor", "TensorProto", "tensor_content", 4),
    ("tensor", "TensorProto", "float_val", 5),
    ("tensor", "TensorProto", "double_val", 6),
    ("tensor", "TensorProto", "int_val", 7),
    ("tensor", "TensorProto", "string_val", 8),
    ("tensor", "TensorProto", "scomplex_val", 9),
    ("tensor", "TensorProto", "int64_val", 10),
    ("tensor", "TensorProto", "bool_val", 11),
    ("tensor", "TensorProto", "dcomplex_val", 12),
    ("tensor", "TensorProto", "half_val", 13),
    ("tensor", "TensorProto", "uint32_val", 16),
    ("tensor", "TensorProto", "uint64_val", 17),
    ("attr_value", "AttrValue", "list", 1),
    ("attr_value", "AttrValue", "s", 2),
    ("attr_value", "AttrValue", "i", 3),
    ("attr_value", "AttrValue", "f", 4),
    ("attr_value", "AttrValue", "b", 5),
    ("attr_value", "AttrValue", "type", 6),
    ("attr_value", "AttrValue", "shape", 7),
    ("attr_value", "AttrValue", "tensor", 8),
    ("attr_value", "AttrValue", "placeholder", 9),
    ("attr_value", "AttrValue", "func", 10),
    ("attr_value", "AttrValue.ListValue", "s", 2),
    ("attr_value", "AttrValue.ListValue", "func", 9),
    ("attr_value", "NameAttrList", "name", 1),
    ("attr_value", "NameAttrList", "attr", 2),
    ("node_def", "NodeDef", "name", 1),
    ("node_def", "NodeDef", "op", 2),
    ("node_def", "NodeDef", "input", 3),
    ("node_def", "NodeDef", "device", 4),
    ("node_def", "NodeDef", "attr", 5),
    ("graph_def", "GraphDef", "node", 1),
    ("graph_def", "GraphDef", "library", 2),
    ("graph_def", "GraphDef", "version", 3),
    ("graph_def", "GraphDef", "versions", 4),
    ("graph_def", "VersionDef", "producer", 1),
    ("graph_def", "VersionDef", "min_consumer", 2),
    ("graph_def", "VersionDef", "bad_consumers", 3),
    ("op_def", "OpDef", "name", 1),
    ("op_def", "OpDef", "input_arg", 2),
    ("op_def", "OpDef", "output_arg", 3),
    ("op_def", "OpDef", "attr", 4),
    ("op_def", "OpDef", "summary", 5),
    ("op_def", "OpDef", "description", 6),
    ("op_def", "OpDef", "deprecation", 8),
    ("op_def", "OpDef", "is_aggregate", 16),
    ("op_def", "OpDef", "is_stateful", 17),
    ("op_def", "OpDef", "is_commutative", 18),
    ("op_def", "OpDef", "allows_uninitialized_input", 19),
    ("op_def", "OpDef.ArgDef", "type_list_attr", 6),
    ("op_def", "OpDef.ArgDef", "is_ref", 16),
    ("op_def", "OpDef.AttrDef", "allowed_values", 7),
    ("op_def", "OpList", "op", 1),
    ("step_stats", "NodeExecStats", "node_name", 1),
    ("step_stats", "NodeExecStats", "all_start_micros", 2),
    ("step_stats", "NodeExecStats", "op_start_rel_micros", 3),
    ("step_stats", "NodeExecStats", "op_end_rel_micros", 4),
    ("step_stats", "NodeExecStats", "all_end_rel_micros", 5),
    ("step_stats", "NodeExecStats", "memory", 6),
    ("step_stats", "NodeExecStats", "output", 7),
    ("step_stats", "NodeExecStats", "timeline_label", 8),
    ("step_stats", "NodeExecStats", "scheduled_micros", 9),
    ("step_stats", "NodeExecStats", "thread_id", 10),
    ("step_stats", "NodeExecStats", "all_start_nanos", 13),
    ("step_stats", "NodeExecStats", "all_end_rel_nanos", 16),
    ("step_stats", "NodeExecStats", "scheduled_nanos", 17),
    ("step_stats", "NodeOutput", "tensor_description", 3),
    ("step_stats", "AllocatorMemoryUsed", "allocator_bytes_in_use", 5),
    ("step_stats", "AllocatorMemoryUsed", "allocation_records", 6),
    ("step_stats", "DeviceStepStats", "device", 1),
    ("step_stats", "DeviceStepStats", "node_stats", 2),
    ("step_stats", "DeviceStepStats", "thread_names", 3),
    ("step_stats", "StepStats", "dev_stats", 1),
    ("tensor_description", "TensorDescription", "allocation_description", 4),
    ("cluster", "JobDef", "name", 1),
    ("cluster", "JobDef", "tasks", 2),
    ("cluster", "ClusterDef", "job", 1),
    ("rewriter_config", "RewriterConfig", "layout_optimizer", 1),
    ("rewriter_config", "RewriterConfig", "constant_folding", 3),
    ("rewriter_config", "RewriterConfig", "arithmetic_optimization", 7),
    ("rewriter_config", "RewriterConfig", "disable_meta_optimizer", 19),
    ("rewriter_config", "RewriterConfig", "optimizers", 100),
    ("config", "ConfigProto", "device_count", 1),
    ("config", "ConfigProto", "intra_op_parallelism_threads", 2),
    ("config", "ConfigProto", "placement_period", 3),
    ("config", "ConfigProto", "device_filters", 4),
    ("config", "ConfigProto", "inter_op_parallelism_threads", 5),
    ("config", "ConfigProto", "gpu_options", 6),
    ("config", "ConfigProto", "allow_soft_placement", 7),
    ("config", "ConfigProto", "log_device_placement", 8),
    ("config", "ConfigProto", "use_per_session_threads", 9),
    ("config", "ConfigProto", "graph_options", 10),
    ("config", "ConfigProto", "operation_timeout_in_ms", 11),
    ("config", "ConfigProto", "session_inter_op_thread_pool", 12),
    ("config", "ConfigProto", "rpc_options", 13),
    ("config", "ConfigProto", "cluster_def", 14),
    ("config", "ConfigProto", "isolate_session_state", 15),
    ("config", "ConfigProto", "experimental", 16),
    ("config", "GPUOptions", "per_process_gpu_memory_fraction", 1),
    ("config", "GPUOptions", "allow_growth", 4),
    ("config", "GPUOptions", "visible_device_list", 5),
    ("config", "OptimizerOptions", "do_common_subexpression_elimination", 1),
    ("config", "OptimizerOptions", "do_constant_folding", 2),
    ("config", "OptimizerOptions", "opt_level", 3),
    ("config", "OptimizerOptions", "do_function_inlining", 4),
    ("config", "OptimizerOptions", "global_jit_level", 5),
    ("config", "GraphOptions", "optimizer_options", 3),
    ("config", "GraphOptions", "build_cost_model", 4),
    ("config", "GraphOptions", "infer_shapes", 5),
    ("config", "GraphOptions", "place_pruned_graph", 6),
    ("config", "GraphOptions", "timeline_step", 8),
    ("config", "GraphOptions", "rewrite_options", 10),
    ("config", "RunOptions", "trace_level", 1),
    ("config", "RunOptions", "timeout_in_ms", 2),
    ("config", "RunOptions", "inter_op_thread_pool", 3),
    ("config", "RunOptions", "output_partition_graphs", 5),
    ("config", "RunOptions", "report_tensor_allocations_upon_oom", 7),
    ("config", "RunMetadata", "step_stats", 1),
    ("config", "RunMetadata", "cost_graph", 2),
    ("config", "RunMetadata", "partition_graphs", 3),
    ("config", "CallableOptions", "fetch_skip_sync", 8),
]


def _message_class(module_name, dotted):
    obj = _pb2(module_name)
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize(
    "module_name,message,field,number",
    TF_FIELD_NUMBERS,
    ids=[f"{m}.{f}" for _, m, f, _ in TF_FIELD_NUMBERS],
)
def test_field_numbers_match_tensorflow(module_name, message, field, number):
    cls = _message_class(module_name, message)
    assert cls.DESCRIPTOR.fields_by_name[field].number == number


def test_wire_bytes_match_tensorflow_encoding():
    """Hand-encoded bytes, independent of our descriptors."""
    step_stats_pb2 = _pb2("step_stats")
    graph_def_pb2 = _pb2("graph_def")

    # field 2 (all_start_micros), varint 5
    stats = step_stats_pb2.NodeExecStats(all_start_micros=5)
    assert stats.SerializeToString() == b"\x10\x05"

    # GraphDef { node { name: "a" op: "Const" } versions { producer: 27 } }
    node = b"\x0a\x01a" + b"\x12\x05Const"
    versions = b"\x08\x1b"
    wire = b"\x0a" + bytes([len(node)]) + node + b"\x22" + bytes([len(versions)]) + versions
    graph = graph_def_pb2.GraphDef.FromString(wire)
    assert graph.node[0].name == "a"
    assert graph.node[0].op == "Const"
    assert graph.versions.producer == 27
    assert graph.SerializeToString() == wire


# --- behaviour -----------------------------------------------------------


def test_config_proto_device_count():
    config_pb2 = _pb2("config")
    config = config_pb2.ConfigProto(device_count={"CPU": 4})
    assert dict(config.device_count) == {"CPU": 4}
    config.device_count["GPU"] = 0
    config.gpu_options.allow_growth = True
    config.graph_options.optimizer_options.opt_level = config_pb2.OptimizerOptions.L0
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    config.cluster_def.job.add(name="worker", tasks={0: "localhost:2222"})
    again = config_pb2.ConfigProto.FromString(config.SerializeToString())
    assert again == config
    assert dict(again.device_count) == {"CPU": 4, "GPU": 0}
    assert again.cluster_def.job[0].tasks[0] == "localhost:2222"


def _all_kinds_graph():
    types_pb2 = _pb2("types")
    tensor_pb2 = _pb2("tensor")
    shape_pb2 = _pb2("tensor_shape")
    attr_pb2 = _pb2("attr_value")
    graph_def_pb2 = _pb2("graph_def")

    shape = shape_pb2.TensorShapeProto(
        dim=[shape_pb2.TensorShapeProto.Dim(size=2), shape_pb2.TensorShapeProto.Dim(size=-1, name="batch")]
    )
    tensor = tensor_pb2.TensorProto(
        dtype=types_pb2.DT_FLOAT,
        tensor_shape=shape_pb2.TensorShapeProto(dim=[shape_pb2.TensorShapeProto.Dim(size=3)]),
        float_val=[1.0, 2.5, -3.0],
    )
    func = attr_pb2.NameAttrList(name="MyFunc", attr={"T": attr_pb2.AttrValue(type=types_pb2.DT_INT32)})
    attrs = {
        "s": attr_pb2.AttrValue(s=b"hello"),
        "i": attr_pb2.AttrValue(i=-(2**40)),
        "f": attr_pb2.AttrValue(f=0.5),
        "b": attr_pb2.AttrValue(b=True),
        "type": attr_pb2.AttrValue(type=types_pb2.DT_HALF),
        "shape": attr_pb2.AttrValue(shape=shape),
        "unknown_shape": attr_pb2.AttrValue(shape=shape_pb2.TensorShapeProto(unknown_rank=True)),
        "tensor": attr_pb2.AttrValue(tensor=tensor),
        "list": attr_pb2.AttrValue(
            list=attr_pb2.AttrValue.ListValue(
                s=[b"a", b"b"],
                i=[1, 2, 3],
                f=[0.25],
                b=[True, False],
                type=[types_pb2.DT_FLOAT, types_pb2.DT_UINT64],
                shape=[shape],
                tensor=[tensor],
                func=[func],
            )
        ),
        "empty_list": attr_pb2.AttrValue(list=attr_pb2.AttrValue.ListValue()),
        "func": attr_pb2.AttrValue(func=func),
        "placeholder": attr_pb2.AttrValue(placeholder="outer_attr"),
    }
    graph = graph_def_pb2.GraphDef()
    graph.versions.producer = 27
    graph.node.add(name="x", op="Placeholder", device="/device:CPU:0")
    graph.node.add(name="y", op="Kitchen", input=["x", "x:1", "^x"], attr=attrs)
    return graph


def test_graph_def_round_trip_with_every_attr_kind():
    graph_def_pb2 = _pb2("graph_def")
    graph = _all_kinds_graph()
    # Map entries have no defined order on the wire unless deterministic.
    data = graph.SerializeToString(deterministic=True)
    again = graph_def_pb2.GraphDef.FromString(data)
    assert again == graph
    assert again.SerializeToString(deterministic=True) == data

    attr = again.node[1].attr
    expected_kinds = {
        "s": "s",
        "i": "i",
        "f": "f",
        "b": "b",
        "type": "type",
        "shape": "shape",
        "unknown_shape": "shape",
        "tensor": "tensor",
        "list": "list",
        "empty_list": "list",
        "func": "func",
        "placeholder": "placeholder",
    }
    for key, kind in expected_kinds.items():
        assert attr[key].WhichOneof("value") == kind, key
    assert attr["s"].s == b"hello"
    assert attr["i"].i == -(2**40)
    assert math.isclose(attr["f"].f, 0.5)
    assert attr["shape"].shape.dim[1].name == "batch"
    assert attr["unknown_shape"].shape.unknown_rank
    assert list(attr["tensor"].tensor.float_val) == [1.0, 2.5, -3.0]
    assert list(attr["list"].list.type) == [1, 23]
    assert attr["list"].list.func[0].attr["T"].type == 3
    assert attr["func"].func.name == "MyFunc"
    assert attr["placeholder"].placeholder == "outer_attr"
    assert list(again.node[1].input) == ["x", "x:1", "^x"]


def test_unmodeled_fields_survive_round_trip():
    """Fields flowrt does not model (e.g. a TF function library) are kept."""
    graph_def_pb2 = _pb2("graph_def")
    # GraphDef.library (field 2) holding FunctionDefLibrary.function (field 1)
    # with an opaque payload.
    library = b"\x0a\x03abc"
    wire = b"\x12" + bytes([len(library)]) + library
    graph = graph_def_pb2.GraphDef.FromString(wire)
    assert graph.HasField("library")
    assert graph.SerializeToString() == wire


def test_run_metadata_holds_step_stats_and_partition_graphs():
    config_pb2 = _pb2("config")
    meta = config_pb2.RunMetadata()
    dev = meta.step_stats.dev_stats.add(device="/job:localhost/replica:0/task:0/device:CPU:0")
    dev.thread_names[7] = "worker-7"
    node = dev.node_stats.add(node_name="MatMul", all_start_micros=100, op_end_rel_micros=3)
    node.memory.add(allocator_name="cpu", peak_bytes=64)
    node.output.add(slot=0).tensor_description.allocation_description.requested_bytes = 64
    meta.partition_graphs.add().node.add(name="MatMul", op="MatMul")
    again = config_pb2.RunMetadata.FromString(meta.SerializeToString())
    assert again == meta
    assert again.step_stats.dev_stats[0].node_stats[0].node_name == "MatMul"


def test_generated_modules_are_up_to_date():
    pytest.importorskip("grpc_tools")
    script = Path(__file__).resolve().parent.parent / "tools" / "gen_protos.py"
    if not script.exists():
        pytest.skip("tools/gen_protos.py is not available")
    result = subprocess.run(
        [sys.executable, str(script), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
