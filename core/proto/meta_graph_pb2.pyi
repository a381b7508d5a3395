from google.protobuf import any_pb2 as _any_pb2
from flowrt.proto import graph_def_pb2 as _graph_def_pb2
from flowrt.proto import op_def_pb2 as _op_def_pb2
from flowrt.proto import saver_pb2 as _saver_pb2
from flowrt.proto import tensor_pb2 as _tensor_pb2
from flowrt.proto import tensor_shape_pb2 as _tensor_shape_pb2
from flowrt.proto import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MetaGraphDef(_message.Message):
    __slots__ = ("meta_info_def", "graph_def", "saver_def", "collection_def", "signature_def", "asset_file_def")
    class MetaInfoDef(_message.Message):
        __slots__ = ("meta_graph_version", "stripped_op_list", "tags", "tensorflow_version", "tensorflow_git_version", "stripped_default_attrs")
        META_GRAPH_VERSION_FIELD_NUMBER: _ClassVar[int]
        STRIPPED_OP_LIST_FIELD_NUMBER: _ClassVar[int]
        TAGS_FIELD_NUMBER: _ClassVar[int]
        TENSORFLOW_VERSION_FIELD_NUMBER: _ClassVar[int]
        TENSORFLOW_GIT_VERSION_FIELD_NUMBER: _ClassVar[int]
        STRIPPED_DEFAULT_ATTRS_FIELD_NUMBER: _ClassVar[int]
        meta_graph_version: str
        stripped_op_list: _op_def_pb2.OpList
        tags: _containers.RepeatedScalarFieldContainer[str]
        tensorflow_version: str
        tensorflow_git_version: str
        stripped_default_attrs: bool
        def __init__(self, meta_graph_version: _Optional[str] = ..., stripped_op_list: _Optional[_Union[_op_def_pb2.OpList, _Mapping]] = ..., tags: _Optional[_Iterable[str]] = ..., tensorflow_version: _Optional[str] = ..., tensorflow_git_version: _Optional[str] = ..., stripped_default_attrs: _Optional[bool] = ...) -> None: ...
    class CollectionDefEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: CollectionDef
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[CollectionDef, _Mapping]] = ...) -> None: ...
    class SignatureDefEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: SignatureDef
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[SignatureDef, _Mapping]] = ...) -> None: ...
    META_INFO_DEF_FIELD_NUMBER: _ClassVar[int]
    GRAPH_DEF_FIELD_NUMBER: _ClassVar[int]
    SAVER_DEF_FIELD_NUMBER: _ClassVar[int]
    COLLECTION_DEF_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_DEF_FIELD_NUMBER: _ClassVar[int]
    ASSET_FILE_DEF_FIELD_NUMBER: _ClassVar[int]
    meta_info_def: MetaGraphDef.MetaInfoDef
    graph_def: _graph_def_pb2.GraphDef
    saver_def: _saver_pb2.SaverDef
    collection_def: _containers.MessageMap[str, CollectionDef]
    signature_def: _containers.MessageMap[str, SignatureDef]
    asset_file_def: _containers.RepeatedCompositeFieldContainer[AssetFileDef]
    def __init__(self, meta_info_def: _Optional[_Union[MetaGraphDef.MetaInfoDef, _Mapping]] = ..., graph_def: _Optional[_Union[_graph_def_pb2.GraphDef, _Mapping]] = ..., saver_def: _Optional[_Union[_saver_pb2.SaverDef, _Mapping]] = ..., collection_def: _Optional[_Mapping[str, CollectionDef]] = ..., signature_def: _Optional[_Mapping[str, SignatureDef]] = ..., asset_file_def: _Optional[_Iterable[_Union[AssetFileDef, _Mapping]]] = ...) -> None: ...

class CollectionDef(_message.Message):
    __slots__ = ("node_list", "bytes_list", "int64_list", "float_list", "any_list")
    class NodeList(_message.Message):
        __slots__ = ("value",)
        VALUE_FIELD_NUMBER: _ClassVar[int]
        value: _containers.RepeatedScalarFieldContainer[str]
        def __init__(self, value: _Optional[_Iterable[str]] = ...) -> None: ...
    class BytesList(_message.Message):
        __slots__ = ("value",)
        VALUE_FIELD_NUMBER: _ClassVar[int]
        value: _containers.RepeatedScalarFieldContainer[bytes]
        def __init__(self, value: _Optional[_Iterable[bytes]] = ...) -> None: ...
    class Int64List(_message.Message):
        __slots__ = ("value",)
        VALUE_FIELD_NUMBER: _ClassVar[int]
        value: _containers.RepeatedScalarFieldContainer[int]
        def __init__(self, value: _Optional[_Iterable[int]] = ...) -> None: ...
    class FloatList(_message.Message):
        __slots__ = ("value",)
        VALUE_FIELD_NUMBER: _ClassVar[int]
        value: _containers.RepeatedScalarFieldContainer[float]
        def __init__(self, value: _Optional[_Iterable[float]] = ...) -> None: ...
    class AnyList(_message.Message):
        __slots__ = ("value",)
        VALUE_FIELD_NUMBER: _ClassVar[int]
        value: _containers.RepeatedCompositeFieldContainer[_any_pb2.Any]
        def __init__(self, value: _Optional[_Iterable[_Union[_any_pb2.Any, _Mapping]]] = ...) -> None: ...
    NODE_LIST_FIELD_NUMBER: _ClassVar[int]
    BYTES_LIST_FIELD_NUMBER: _ClassVar[int]
    INT64_LIST_FIELD_NUMBER: _ClassVar[int]
    FLOAT_LIST_FIELD_NUMBER: _ClassVar[int]
    ANY_LIST_FIELD_NUMBER: _ClassVar[int]
    node_list: CollectionDef.NodeList
    bytes_list: CollectionDef.BytesList
    int64_list: CollectionDef.Int64List
    float_list: CollectionDef.FloatList
    any_list: CollectionDef.AnyList
    def __init__(self, node_list: _Optional[_Union[CollectionDef.NodeList, _Mapping]] = ..., bytes_list: _Optional[_Union[CollectionDef.BytesList, _Mapping]] = ..., int64_list: _Optional[_Union[CollectionDef.Int64List, _Mapping]] = ..., float_list: _Optional[_Union[CollectionDef.FloatList, _Mapping]] = ..., any_list: _Optional[_Union[CollectionDef.AnyList, _Mapping]] = ...) -> None: ...

class VariableDef(_message.Message):
    __slots__ = ("variable_name", "initializer_name", "snapshot_name", "save_slice_info_def", "is_resource", "initial_value_name", "trainable", "synchronization", "aggregation")
    VARIABLE_NAME_FIELD_NUMBER: _ClassVar[int]
    INITIALIZER_NAME_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_NAME_FIELD_NUMBER: _ClassVar[int]
    SAVE_SLICE_INFO_DEF_FIELD_NUMBER: _ClassVar[int]
    IS_RESOURCE_FIELD_NUMBER: _ClassVar[int]
    INITIAL_VALUE_NAME_FIELD_NUMBER: _ClassVar[int]
    TRAINABLE_FIELD_NUMBER: _ClassVar[int]
    SYNCHRONIZATION_FIELD_NUMBER: _ClassVar[int]
    AGGREGATION_FIELD_NUMBER: _ClassVar[int]
    variable_name: str
    initializer_name: str
    snapshot_name: str
    save_slice_info_def: SaveSliceInfoDef
    is_resource: bool
    initial_value_name: str
    trainable: bool
    synchronization: int
    aggregation: int
    def __init__(self, variable_name: _Optional[str] = ..., initializer_name: _Optional[str] = ..., snapshot_name: _Optional[str] = ..., save_slice_info_def: _Optional[_Union[SaveSliceInfoDef, _Mapping]] = ..., is_resource: _Optional[bool] = ..., initial_value_name: _Optional[str] = ..., trainable: _Optional[bool] = ..., synchronization: _Optional[int] = ..., aggregation: _Optional[int] = ...) -> None: ...

class SaveSliceInfoDef(_message.Message):
    __slots__ = ("full_name", "full_shape", "var_offset", "var_shape")
    FULL_NAME_FIELD_NUMBER: _ClassVar[int]
    FULL_SHAPE_FIELD_NUMBER: _ClassVar[int]
    VAR_OFFSET_FIELD_NUMBER: _ClassVar[int]
    VAR_SHAPE_FIELD_NUMBER: _ClassVar[int]
    full_name: str
    full_shape: _containers.RepeatedScalarFieldContainer[int]
    var_offset: _containers.RepeatedScalarFieldContainer[int]
    var_shape: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, full_name: _Optional[str] = ..., full_shape: _Optional[_Iterable[int]] = ..., var_offset: _Optional[_Iterable[int]] = ..., var_shape: _Optional[_Iterable[int]] = ...) -> None: ...

class QueueRunnerDef(_message.Message):
    __slots__ = ("queue_name", "enqueue_op_name", "close_op_name", "cancel_op_name", "queue_closed_exception_types")
    QUEUE_NAME_FIELD_NUMBER: _ClassVar[int]
    ENQUEUE_OP_NAME_FIELD_NUMBER: _ClassVar[int]
    CLOSE_OP_NAME_FIELD_NUMBER: _ClassVar[int]
    CANCEL_OP_NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUE_CLOSED_EXCEPTION_TYPES_FIELD_NUMBER: _ClassVar[int]
    queue_name: str
    enqueue_op_name: _containers.RepeatedScalarFieldContainer[str]
    close_op_name: str
    cancel_op_name: str
    queue_closed_exception_types: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, queue_name: _Optional[str] = ..., enqueue_op_name: _Optional[_Iterable[str]] = ..., close_op_name: _Optional[str] = ..., cancel_op_name: _Optional[str] = ..., queue_closed_exception_types: _Optional[_Iterable[int]] = ...) -> None: ...

class ValuesDef(_message.Message):
    __slots__ = ("values", "external_values")
    class ExternalValuesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    VALUES_FIELD_NUMBER: _ClassVar[int]
    EXTERNAL_VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[str]
    external_values: _containers.ScalarMap[str, str]
    def __init__(self, values: _Optional[_Iterable[str]] = ..., external_values: _Optional[_Mapping[str, str]] = ...) -> None: ...

class CondContextDef(_message.Message):
    __slots__ = ("context_name", "pred_name", "pivot_name", "branch", "values_def", "nested_contexts")
    CONTEXT_NAME_FIELD_NUMBER: _ClassVar[int]
    PRED_NAME_FIELD_NUMBER: _ClassVar[int]
    PIVOT_NAME_FIELD_NUMBER: _ClassVar[int]
    BRANCH_FIELD_NUMBER: _ClassVar[int]
    VALUES_DEF_FIELD_NUMBER: _ClassVar[int]
    NESTED_CONTEXTS_FIELD_NUMBER: _ClassVar[int]
    context_name: str
    pred_name: str
    pivot_name: str
    branch: int
    values_def: ValuesDef
    nested_contexts: _containers.RepeatedCompositeFieldContainer[ControlFlowContextDef]
    def __init__(self, context_name: _Optional[str] = ..., pred_name: _Optional[str] = ..., pivot_name: _Optional[str] = ..., branch: _Optional[int] = ..., values_def: _Optional[_Union[ValuesDef, _Mapping]] = ..., nested_contexts: _Optional[_Iterable[_Union[ControlFlowContextDef, _Mapping]]] = ...) -> None: ...

class WhileContextDef(_message.Message):
    __slots__ = ("context_name", "parallel_iterations", "back_prop", "swap_memory", "pivot_name", "pivot_for_pred_name", "pivot_for_body_name", "loop_exit_names", "values_def", "loop_enter_names", "maximum_iterations_name", "nested_contexts")
    CONTEXT_NAME_FIELD_NUMBER: _ClassVar[int]
    PARALLEL_ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    BACK_PROP_FIELD_NUMBER: _ClassVar[int]
    SWAP_MEMORY_FIELD_NUMBER: _ClassVar[int]
    PIVOT_NAME_FIELD_NUMBER: _ClassVar[int]
    PIVOT_FOR_PRED_NAME_FIELD_NUMBER: _ClassVar[int]
    PIVOT_FOR_BODY_NAME_FIELD_NUMBER: _ClassVar[int]
    LOOP_EXIT_NAMES_FIELD_NUMBER: _ClassVar[int]
    VALUES_DEF_FIELD_NUMBER: _ClassVar[int]
    LOOP_ENTER_NAMES_FIELD_NUMBER: _ClassVar[int]
    MAXIMUM_ITERATIONS_NAME_FIELD_NUMBER: _ClassVar[int]
    NESTED_CONTEXTS_FIELD_NUMBER: _ClassVar[int]
    context_name: str
    parallel_iterations: int
    back_prop: bool
    swap_memory: bool
    pivot_name: str
    pivot_for_pred_name: str
    pivot_for_body_name: str
    loop_exit_names: _containers.RepeatedScalarFieldContainer[str]
    values_def: ValuesDef
    loop_enter_names: _containers.RepeatedScalarFieldContainer[str]
    maximum_iterations_name: str
    nested_contexts: _containers.RepeatedCompositeFieldContainer[ControlFlowContextDef]
    def __init__(self, context_name: _Optional[str] = ..., parallel_iterations: _Optional[int] = ..., back_prop: _Optional[bool] = ..., swap_memory: _Optional[bool] = ..., pivot_name: _Optional[str] = ..., pivot_for_pred_name: _Optional[str] = ..., pivot_for_body_name: _Optional[str] = ..., loop_exit_names: _Optional[_Iterable[str]] = ..., values_def: _Optional[_Union[ValuesDef, _Mapping]] = ..., loop_enter_names: _Optional[_Iterable[str]] = ..., maximum_iterations_name: _Optional[str] = ..., nested_contexts: _Optional[_Iterable[_Union[ControlFlowContextDef, _Mapping]]] = ...) -> None: ...

class ControlFlowContextDef(_message.Message):
    __slots__ = ("cond_ctxt", "while_ctxt")
    COND_CTXT_FIELD_NUMBER: _ClassVar[int]
    WHILE_CTXT_FIELD_NUMBER: _ClassVar[int]
    cond_ctxt: CondContextDef
    while_ctxt: WhileContextDef
    def __init__(self, cond_ctxt: _Optional[_Union[CondContextDef, _Mapping]] = ..., while_ctxt: _Optional[_Union[WhileContextDef, _Mapping]] = ...) -> None: ...

class TensorInfo(_message.Message):
    __slots__ = ("name", "coo_sparse", "dtype", "tensor_shape")
    class CooSparse(_message.Message):
        __slots__ = ("values_tensor_name", "indices_tensor_name", "dense_shape_tensor_name")
        VALUES_TENSOR_NAME_FIELD_NUMBER: _ClassVar[int]
        INDICES_TENSOR_NAME_FIELD_NUMBER: _ClassVar[int]
        DENSE_SHAPE_TENSOR_NAME_FIELD_NUMBER: _ClassVar[int]
        values_tensor_name: str
        indices_tensor_name: str
        dense_shape_tensor_name: str
        def __init__(self, values_tensor_name: _Optional[str] = ..., indices_tensor_name: _Optional[str] = ..., dense_shape_tensor_name: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    COO_SPARSE_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    TENSOR_SHAPE_FIELD_NUMBER: _ClassVar[int]
    name: str
    coo_sparse: TensorInfo.CooSparse
    dtype: _types_pb2.DataType
    tensor_shape: _tensor_shape_pb2.TensorShapeProto
    def __init__(self, name: _Optional[str] = ..., coo_sparse: _Optional[_Union[TensorInfo.CooSparse, _Mapping]] = ..., dtype: _Optional[_Union[_types_pb2.DataType, str]] = ..., tensor_shape: _Optional[_Union[_tensor_shape_pb2.TensorShapeProto, _Mapping]] = ...) -> None: ...

class SignatureDef(_message.Message):
    __slots__ = ("inputs", "outputs", "method_name", "defaults")
    class InputsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: TensorInfo
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[TensorInfo, _Mapping]] = ...) -> None: ...
    class OutputsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: TensorInfo
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[TensorInfo, _Mapping]] = ...) -> None: ...
    class DefaultsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: _tensor_pb2.TensorProto
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[_tensor_pb2.TensorProto, _Mapping]] = ...) -> None: ...
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    METHOD_NAME_FIELD_NUMBER: _ClassVar[int]
    DEFAULTS_FIELD_NUMBER: _ClassVar[int]
    inputs: _containers.MessageMap[str, TensorInfo]
    outputs: _containers.MessageMap[str, TensorInfo]
    method_name: str
    defaults: _containers.MessageMap[str, _tensor_pb2.TensorProto]
    def __init__(self, inputs: _Optional[_Mapping[str, TensorInfo]] = ..., outputs: _Optional[_Mapping[str, TensorInfo]] = ..., method_name: _Optional[str] = ..., defaults: _Optional[_Mapping[str, _tensor_pb2.TensorProto]] = ...) -> None: ...

class AssetFileDef(_message.Message):
    __slots__ = ("tensor_info", "filename")
    TENSOR_INFO_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    tensor_info: TensorInfo
    filename: str
    def __init__(self, tensor_info: _Optional[_Union[TensorInfo, _Mapping]] = ..., filename: _Optional[str] = ...) -> None: ...
