"""flowrt: an embeddable dataflow runtime in the model of TensorFlow 1.x graph mode.

``import flowrt as tf`` gives TF 1.15's graph-mode API (as ``tensorflow.compat.v1``).
Core names (graphs, sessions, variables, dtypes, errors) live here; op functions
(``tf.add``, ``tf.nn.relu`` ...) come from kernel-set plugins and are resolved on first
access through the default :class:`~flowrt.runtime.Runtime`. Importing flowrt builds no
plugin manager and imports no device or transport library.
"""
from __future__ import annotations

import sys as _sys
from typing import Any as _Any

# old import paths (flowrt.graph ...) resolve to the layer packages' modules
from . import _paths

_paths.install(__name__)
from .base import VERSION as _VERSION
from .base import dtypes
from .base import errors
from .framework._namespace import install_namespaces as _install_namespaces
from .base.device_spec import DeviceSpec
from .base.dtypes import (DType, as_dtype, bfloat16, bool, complex64, complex128, double,
                          float16, float32, float64, half, int8, int16, int32, int64, qint8,
                          qint16, qint32, quint8, quint16, resource, string, uint8, uint16,
                          uint32, uint64, variant)
from .framework.graph import (Graph, GraphKeys, Operation, Tensor, add_to_collection,
                              add_to_collections, colocate_with, container, control_dependencies,
                              convert_to_tensor, device, get_collection, get_collection_ref,
                              get_default_graph, get_seed, is_tensor, name_scope,
                              register_tensor_conversion_function, reset_default_graph,
                              set_random_seed)
from .framework.gradients import NoGradient, NotDifferentiable, RegisterGradient, gradients, hessians
from .plugin.hookspecs import hookimpl
from .plugin.runtime import Runtime, default_runtime
from .framework.session import (InteractiveSession, Session, get_default_session)
from .base.tensor_shape import Dimension, TensorShape, dimension_value
from .training.variable_scope import (AUTO_REUSE, VariableScope, get_local_variable, get_variable,
                                      get_variable_scope, no_regularizer, variable_scope)
from .training.variables import (Variable, all_variables, assert_variables_initialized,
                                 global_variables, global_variables_initializer,
                                 initialize_all_variables, initialize_local_variables,
                                 initialize_variables, is_variable_initialized, local_variables,
                                 local_variables_initializer, model_variables,
                                 report_uninitialized_variables, trainable_variables,
                                 variables_initializer)

__version__ = _VERSION

_PROTO_NAMES = {
    "ConfigProto": "config_pb2", "GPUOptions": "config_pb2", "GraphOptions": "config_pb2",
    "OptimizerOptions": "config_pb2", "RunOptions": "config_pb2",
    "RunMetadata": "config_pb2", "GraphDef": "graph_def_pb2", "NodeDef": "node_def_pb2",
    "AttrValue": "attr_value_pb2", "TensorProto": "tensor_pb2",
    "TensorShapeProto": "tensor_shape_pb2", "OpDef": "op_def_pb2",
    "NameAttrList": "attr_value_pb2", "MetaGraphDef": "meta_graph_pb2",
}
_LAZY_CORE = {
    "import_graph_def": ("framework.graph_def", "import_graph_def"),
    "make_tensor_proto": ("framework.graph_def", "make_tensor_proto"),
    "make_ndarray": ("framework.graph_def", "make_ndarray"),
    "testing": ("tools.testing", None),
    "compat": ("framework.compat", None),
}

__all__ = [
    # graph
    "Graph", "Operation", "Tensor", "GraphKeys", "get_default_graph", "reset_default_graph",
    "name_scope", "device", "control_dependencies", "colocate_with", "container",
    "convert_to_tensor", "register_tensor_conversion_function", "is_tensor",
    "add_to_collection", "add_to_collections", "get_collection", "get_collection_ref",
    "set_random_seed", "get_seed", "import_graph_def", "DeviceSpec",
    # shapes and dtypes
    "TensorShape", "Dimension", "dimension_value", "DType", "as_dtype", "dtypes",
    "float16", "half", "bfloat16", "float32", "float64", "double", "int8", "int16", "int32",
    "int64", "uint8", "uint16", "uint32", "uint64", "bool", "string", "complex64",
    "complex128", "qint8", "qint16", "qint32", "quint8", "quint16", "resource", "variant",
    # sessions
    "Session", "InteractiveSession", "get_default_session", "ConfigProto", "GPUOptions",
    "GraphOptions", "OptimizerOptions", "RunOptions", "RunMetadata", "GraphDef", "NodeDef",
    "AttrValue", "TensorProto", "TensorShapeProto", "MetaGraphDef", "make_tensor_proto",
    "make_ndarray",
    # variables
    "Variable", "global_variables", "trainable_variables", "local_variables",
    "model_variables", "all_variables", "global_variables_initializer",
    "local_variables_initializer", "variables_initializer", "initialize_all_variables",
    "initialize_local_variables", "initialize_variables", "is_variable_initialized",
    "report_uninitialized_variables", "assert_variables_initialized",
    "get_variable", "get_local_variable", "variable_scope", "VariableScope",
    "get_variable_scope", "AUTO_REUSE", "no_regularizer",
    # differentiation
    "gradients", "hessians", "RegisterGradient", "NotDifferentiable", "NoGradient",
    # runtime
    "errors", "Runtime", "default_runtime", "hookimpl", "testing", "compat",
]

_namespaces = _install_namespaces(__name__, _sys.modules[__name__])
_paths.register_loaded(__name__)


def __getattr__(name: str) -> _Any:
    """Resolve a module attribute on first use (PEP 562) and cache it in the module.

    Proto message classes and the lazily imported core names are loaded on demand; a
    core submodule name imports that submodule; anything else is looked up in the
    default runtime's API table (which builds the runtime).

    :raises AttributeError: if ``name`` is none of these, or its module fails to import
    """
    mod = _PROTO_NAMES.get(name)
    if mod:
        import importlib

        value = getattr(importlib.import_module(f".proto.{mod}", __name__), name)
        globals()[name] = value
        return value
    lazy = _LAZY_CORE.get(name)
    if lazy is not None:
        import importlib

        # A lazy attribute that cannot be loaded is a missing attribute, so that
        # ``hasattr`` and ``getattr(flowrt, name, default)`` work as on any module.
        try:
            m = importlib.import_module(f".{lazy[0]}", __name__)
            value = m if lazy[1] is None else getattr(m, lazy[1])
        except ImportError as e:
            raise AttributeError(f"module 'flowrt' has no attribute {name!r} "
                                 f"({type(e).__name__}: {e})") from e
        globals()[name] = value
        return value
    if name.startswith("__"):
        raise AttributeError(name)
    # A core submodule (``from flowrt import checkpoint``) is imported, never looked up
    # in the API table: that would build the runtime, perhaps from inside a plugin
    # that is still being imported.
    if name in _submodules():
        import importlib

        return importlib.import_module(f".{name}", __name__)
    api = default_runtime().api
    if name in api:
        value = api[name]
        return value
    raise AttributeError(f"module 'flowrt' has no attribute {name!r}"
                         f"{default_runtime().missing_api_note(name)}")


_SUBMODULES: list[frozenset[str]] = []


def _submodules() -> frozenset[str]:
    if not _SUBMODULES:
        import pkgutil  # only when a submodule name is asked for: keeps the import cheap

        _SUBMODULES.append(frozenset(m.name for m in pkgutil.iter_modules(__path__)) |
                           frozenset(_paths.MOVED))
    return _SUBMODULES[0]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PROTO_NAMES) | set(_LAZY_CORE) |
                  {k for k in default_runtime().api if "." not in k})
