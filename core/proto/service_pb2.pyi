from flowrt.proto import config_pb2 as _config_pb2
from flowrt.proto import graph_def_pb2 as _graph_def_pb2
from flowrt.proto import tensor_pb2 as _tensor_pb2
from flowrt.proto import types_pb2 as _types_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Status(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class TensorMeta(_message.Message):
    __slots__ = ("dtype", "shape", "buffer", "is_dead", "proto", "shm")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    BUFFER_FIELD_NUMBER: _ClassVar[int]
    IS_DEAD_FIELD_NUMBER: _ClassVar[int]
    PROTO_FIELD_NUMBER: _ClassVar[int]
    SHM_FIELD_NUMBER: _ClassVar[int]
    dtype: _types_pb2.DataType
    shape: _containers.RepeatedScalarFieldContainer[int]
    buffer: int
    is_dead: bool
    proto: _tensor_pb2.TensorProto
    shm: str
    def __init__(self, dtype: _Optional[_Union[_types_pb2.DataType, str]] = ..., shape: _Optional[_Iterable[int]] = ..., buffer: _Optional[int] = ..., is_dead: _Optional[bool] = ..., proto: _Optional[_Union[_tensor_pb2.TensorProto, _Mapping]] = ..., shm: _Optional[str] = ...) -> None: ...

class Envelope(_message.Message):
    __slots__ = ("status", "body", "tensors", "host", "token")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    TENSORS_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    status: Status
    body: bytes
    tensors: _containers.RepeatedCompositeFieldContainer[TensorMeta]
    host: str
    token: bytes
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., body: _Optional[bytes] = ..., tensors: _Optional[_Iterable[_Union[TensorMeta, _Mapping]]] = ..., host: _Optional[str] = ..., token: _Optional[bytes] = ...) -> None: ...

class DeviceAttributes(_message.Message):
    __slots__ = ("name", "device_type", "memory_limit", "incarnation")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DEVICE_TYPE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_LIMIT_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    name: str
    device_type: str
    memory_limit: int
    incarnation: int
    def __init__(self, name: _Optional[str] = ..., device_type: _Optional[str] = ..., memory_limit: _Optional[int] = ..., incarnation: _Optional[int] = ...) -> None: ...

class NodeStatProto(_message.Message):
    __slots__ = ("node_name", "op", "device", "start", "end", "thread_id", "label")
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    node_name: str
    op: str
    device: str
    start: float
    end: float
    thread_id: int
    label: str
    def __init__(self, node_name: _Optional[str] = ..., op: _Optional[str] = ..., device: _Optional[str] = ..., start: _Optional[float] = ..., end: _Optional[float] = ..., thread_id: _Optional[int] = ..., label: _Optional[str] = ...) -> None: ...

class CreateSessionRequest(_message.Message):
    __slots__ = ("graph_def", "config", "graph_version")
    GRAPH_DEF_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    GRAPH_VERSION_FIELD_NUMBER: _ClassVar[int]
    graph_def: _graph_def_pb2.GraphDef
    config: _config_pb2.ConfigProto
    graph_version: int
    def __init__(self, graph_def: _Optional[_Union[_graph_def_pb2.GraphDef, _Mapping]] = ..., config: _Optional[_Union[_config_pb2.ConfigProto, _Mapping]] = ..., graph_version: _Optional[int] = ...) -> None: ...

class CreateSessionResponse(_message.Message):
    __slots__ = ("session_handle",)
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    def __init__(self, session_handle: _Optional[str] = ...) -> None: ...

class ExtendSessionRequest(_message.Message):
    __slots__ = ("session_handle", "graph_def", "graph_version")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    GRAPH_DEF_FIELD_NUMBER: _ClassVar[int]
    GRAPH_VERSION_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    graph_def: _graph_def_pb2.GraphDef
    graph_version: int
    def __init__(self, session_handle: _Optional[str] = ..., graph_def: _Optional[_Union[_graph_def_pb2.GraphDef, _Mapping]] = ..., graph_version: _Optional[int] = ...) -> None: ...

class ExtendSessionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class MakeCallableRequest(_message.Message):
    __slots__ = ("session_handle", "feed", "fetch", "target", "graph_version")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    FEED_FIELD_NUMBER: _ClassVar[int]
    FETCH_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    GRAPH_VERSION_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    feed: _containers.RepeatedScalarFieldContainer[str]
    fetch: _containers.RepeatedScalarFieldContainer[str]
    target: _containers.RepeatedScalarFieldContainer[str]
    graph_version: int
    def __init__(self, session_handle: _Optional[str] = ..., feed: _Optional[_Iterable[str]] = ..., fetch: _Optional[_Iterable[str]] = ..., target: _Optional[_Iterable[str]] = ..., graph_version: _Optional[int] = ...) -> None: ...

class MakeCallableResponse(_message.Message):
    __slots__ = ("handle",)
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    handle: int
    def __init__(self, handle: _Optional[int] = ...) -> None: ...

class RunCallableRequest(_message.Message):
    __slots__ = ("session_handle", "handle", "trace", "timeout_in_ms", "graph_version")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    TRACE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_IN_MS_FIELD_NUMBER: _ClassVar[int]
    GRAPH_VERSION_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    handle: int
    trace: bool
    timeout_in_ms: int
    graph_version: int
    def __init__(self, session_handle: _Optional[str] = ..., handle: _Optional[int] = ..., trace: _Optional[bool] = ..., timeout_in_ms: _Optional[int] = ..., graph_version: _Optional[int] = ...) -> None: ...

class RunCallableResponse(_message.Message):
    __slots__ = ("stats", "clock_offset")
    STATS_FIELD_NUMBER: _ClassVar[int]
    CLOCK_OFFSET_FIELD_NUMBER: _ClassVar[int]
    stats: _containers.RepeatedCompositeFieldContainer[NodeStatProto]
    clock_offset: float
    def __init__(self, stats: _Optional[_Iterable[_Union[NodeStatProto, _Mapping]]] = ..., clock_offset: _Optional[float] = ...) -> None: ...

class CallableRequest(_message.Message):
    __slots__ = ("session_handle", "handle")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    HANDLE_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    handle: int
    def __init__(self, session_handle: _Optional[str] = ..., handle: _Optional[int] = ...) -> None: ...

class PartitionGraphsResponse(_message.Message):
    __slots__ = ("partition_graph",)
    PARTITION_GRAPH_FIELD_NUMBER: _ClassVar[int]
    partition_graph: _containers.RepeatedCompositeFieldContainer[_graph_def_pb2.GraphDef]
    def __init__(self, partition_graph: _Optional[_Iterable[_Union[_graph_def_pb2.GraphDef, _Mapping]]] = ...) -> None: ...

class PlacementResponse(_message.Message):
    __slots__ = ("placement",)
    class PlacementEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    placement: _containers.ScalarMap[str, str]
    def __init__(self, placement: _Optional[_Mapping[str, str]] = ...) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ("session_handle",)
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    def __init__(self, session_handle: _Optional[str] = ...) -> None: ...

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListDevicesResponse(_message.Message):
    __slots__ = ("device",)
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    device: _containers.RepeatedCompositeFieldContainer[DeviceAttributes]
    def __init__(self, device: _Optional[_Iterable[_Union[DeviceAttributes, _Mapping]]] = ...) -> None: ...

class ResetRequest(_message.Message):
    __slots__ = ("container",)
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    container: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, container: _Optional[_Iterable[str]] = ...) -> None: ...

class ShutdownRequest(_message.Message):
    __slots__ = ("reason",)
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class GetStatusResponse(_message.Message):
    __slots__ = ("device", "incarnation", "job", "task")
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    device: _containers.RepeatedCompositeFieldContainer[DeviceAttributes]
    incarnation: int
    job: str
    task: int
    def __init__(self, device: _Optional[_Iterable[_Union[DeviceAttributes, _Mapping]]] = ..., incarnation: _Optional[int] = ..., job: _Optional[str] = ..., task: _Optional[int] = ...) -> None: ...

class PartitionDef(_message.Message):
    __slots__ = ("device", "graph_def", "fetch", "fetch_position", "target", "feed", "feed_arg")
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    GRAPH_DEF_FIELD_NUMBER: _ClassVar[int]
    FETCH_FIELD_NUMBER: _ClassVar[int]
    FETCH_POSITION_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    FEED_FIELD_NUMBER: _ClassVar[int]
    FEED_ARG_FIELD_NUMBER: _ClassVar[int]
    device: str
    graph_def: _graph_def_pb2.GraphDef
    fetch: _containers.RepeatedScalarFieldContainer[str]
    fetch_position: _containers.RepeatedScalarFieldContainer[int]
    target: _containers.RepeatedScalarFieldContainer[str]
    feed: _containers.RepeatedScalarFieldContainer[str]
    feed_arg: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, device: _Optional[str] = ..., graph_def: _Optional[_Union[_graph_def_pb2.GraphDef, _Mapping]] = ..., fetch: _Optional[_Iterable[str]] = ..., fetch_position: _Optional[_Iterable[int]] = ..., target: _Optional[_Iterable[str]] = ..., feed: _Optional[_Iterable[str]] = ..., feed_arg: _Optional[_Iterable[str]] = ...) -> None: ...

class RegisterGraphRequest(_message.Message):
    __slots__ = ("session_handle", "partition", "n_fetches", "inter_op_threads", "pull_together")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    N_FETCHES_FIELD_NUMBER: _ClassVar[int]
    INTER_OP_THREADS_FIELD_NUMBER: _ClassVar[int]
    PULL_TOGETHER_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    partition: _containers.RepeatedCompositeFieldContainer[PartitionDef]
    n_fetches: int
    inter_op_threads: int
    pull_together: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, session_handle: _Optional[str] = ..., partition: _Optional[_Iterable[_Union[PartitionDef, _Mapping]]] = ..., n_fetches: _Optional[int] = ..., inter_op_threads: _Optional[int] = ..., pull_together: _Optional[_Iterable[str]] = ...) -> None: ...

class RegisterGraphResponse(_message.Message):
    __slots__ = ("graph_handle",)
    GRAPH_HANDLE_FIELD_NUMBER: _ClassVar[int]
    graph_handle: str
    def __init__(self, graph_handle: _Optional[str] = ...) -> None: ...

class DeregisterGraphRequest(_message.Message):
    __slots__ = ("graph_handle",)
    GRAPH_HANDLE_FIELD_NUMBER: _ClassVar[int]
    graph_handle: str
    def __init__(self, graph_handle: _Optional[str] = ...) -> None: ...

class RunGraphRequest(_message.Message):
    __slots__ = ("graph_handle", "step_id", "arg_index", "trace", "timeout_in_ms", "push_job", "push_task", "pushed_key", "pushed_job", "pushed_task")
    GRAPH_HANDLE_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    ARG_INDEX_FIELD_NUMBER: _ClassVar[int]
    TRACE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_IN_MS_FIELD_NUMBER: _ClassVar[int]
    PUSH_JOB_FIELD_NUMBER: _ClassVar[int]
    PUSH_TASK_FIELD_NUMBER: _ClassVar[int]
    PUSHED_KEY_FIELD_NUMBER: _ClassVar[int]
    PUSHED_JOB_FIELD_NUMBER: _ClassVar[int]
    PUSHED_TASK_FIELD_NUMBER: _ClassVar[int]
    graph_handle: str
    step_id: int
    arg_index: _containers.RepeatedScalarFieldContainer[int]
    trace: bool
    timeout_in_ms: int
    push_job: str
    push_task: int
    pushed_key: _containers.RepeatedScalarFieldContainer[str]
    pushed_job: str
    pushed_task: int
    def __init__(self, graph_handle: _Optional[str] = ..., step_id: _Optional[int] = ..., arg_index: _Optional[_Iterable[int]] = ..., trace: _Optional[bool] = ..., timeout_in_ms: _Optional[int] = ..., push_job: _Optional[str] = ..., push_task: _Optional[int] = ..., pushed_key: _Optional[_Iterable[str]] = ..., pushed_job: _Optional[str] = ..., pushed_task: _Optional[int] = ...) -> None: ...

class RunGraphResponse(_message.Message):
    __slots__ = ("fetch_position", "stats", "clock", "pushed_key")
    FETCH_POSITION_FIELD_NUMBER: _ClassVar[int]
    STATS_FIELD_NUMBER: _ClassVar[int]
    CLOCK_FIELD_NUMBER: _ClassVar[int]
    PUSHED_KEY_FIELD_NUMBER: _ClassVar[int]
    fetch_position: _containers.RepeatedScalarFieldContainer[int]
    stats: _containers.RepeatedCompositeFieldContainer[NodeStatProto]
    clock: float
    pushed_key: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, fetch_position: _Optional[_Iterable[int]] = ..., stats: _Optional[_Iterable[_Union[NodeStatProto, _Mapping]]] = ..., clock: _Optional[float] = ..., pushed_key: _Optional[_Iterable[str]] = ...) -> None: ...

class RecvTensorRequest(_message.Message):
    __slots__ = ("step_id", "key", "timeout_in_ms")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_IN_MS_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    key: str
    timeout_in_ms: int
    def __init__(self, step_id: _Optional[int] = ..., key: _Optional[str] = ..., timeout_in_ms: _Optional[int] = ...) -> None: ...

class RecvTensorResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RecvTensorsRequest(_message.Message):
    __slots__ = ("step_id", "key", "timeout_in_ms", "wait_all")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_IN_MS_FIELD_NUMBER: _ClassVar[int]
    WAIT_ALL_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    key: _containers.RepeatedScalarFieldContainer[str]
    timeout_in_ms: int
    wait_all: bool
    def __init__(self, step_id: _Optional[int] = ..., key: _Optional[_Iterable[str]] = ..., timeout_in_ms: _Optional[int] = ..., wait_all: _Optional[bool] = ...) -> None: ...

class RecvTensorsResponse(_message.Message):
    __slots__ = ("index",)
    INDEX_FIELD_NUMBER: _ClassVar[int]
    index: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, index: _Optional[_Iterable[int]] = ...) -> None: ...

class AbortStepRequest(_message.Message):
    __slots__ = ("step_id", "session_handle", "status")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    session_handle: str
    status: Status
    def __init__(self, step_id: _Optional[int] = ..., session_handle: _Optional[str] = ..., status: _Optional[_Union[Status, _Mapping]] = ...) -> None: ...

class CleanupSessionRequest(_message.Message):
    __slots__ = ("session_handle",)
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    def __init__(self, session_handle: _Optional[str] = ...) -> None: ...
