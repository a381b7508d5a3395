from flowrt.proto import tensor_shape_pb2 as _tensor_shape_pb2
from flowrt.proto import types_pb2 as _types_pb2
from flowrt.proto import tensor_pb2 as _tensor_pb2
from flowrt.proto import graph_def_pb2 as _graph_def_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CheckpointShard(_message.Message):
    __slots__ = ("filename", "size")
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    filename: str
    size: int
    def __init__(self, filename: _Optional[str] = ..., size: _Optional[int] = ...) -> None: ...

class CheckpointEntry(_message.Message):
    __slots__ = ("name", "dtype", "shape", "shard", "offset", "size", "crc32")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    CRC32_FIELD_NUMBER: _ClassVar[int]
    name: str
    dtype: _types_pb2.DataType
    shape: _tensor_shape_pb2.TensorShapeProto
    shard: int
    offset: int
    size: int
    crc32: int
    def __init__(self, name: _Optional[str] = ..., dtype: _Optional[_Union[_types_pb2.DataType, str]] = ..., shape: _Optional[_Union[_tensor_shape_pb2.TensorShapeProto, _Mapping]] = ..., shard: _Optional[int] = ..., offset: _Optional[int] = ..., size: _Optional[int] = ..., crc32: _Optional[int] = ...) -> None: ...

class CheckpointIndex(_message.Message):
    __slots__ = ("shards", "entries")
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    shards: _containers.RepeatedCompositeFieldContainer[CheckpointShard]
    entries: _containers.RepeatedCompositeFieldContainer[CheckpointEntry]
    def __init__(self, shards: _Optional[_Iterable[_Union[CheckpointShard, _Mapping]]] = ..., entries: _Optional[_Iterable[_Union[CheckpointEntry, _Mapping]]] = ...) -> None: ...

class TensorSliceProto(_message.Message):
    __slots__ = ("extent",)
    class Extent(_message.Message):
        __slots__ = ("start", "length")
        START_FIELD_NUMBER: _ClassVar[int]
        LENGTH_FIELD_NUMBER: _ClassVar[int]
        start: int
        length: int
        def __init__(self, start: _Optional[int] = ..., length: _Optional[int] = ...) -> None: ...
    EXTENT_FIELD_NUMBER: _ClassVar[int]
    extent: _containers.RepeatedCompositeFieldContainer[TensorSliceProto.Extent]
    def __init__(self, extent: _Optional[_Iterable[_Union[TensorSliceProto.Extent, _Mapping]]] = ...) -> None: ...

class BundleHeaderProto(_message.Message):
    __slots__ = ("num_shards", "endianness", "version")
    class Endianness(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        LITTLE: _ClassVar[BundleHeaderProto.Endianness]
        BIG: _ClassVar[BundleHeaderProto.Endianness]
    LITTLE: BundleHeaderProto.Endianness
    BIG: BundleHeaderProto.Endianness
    NUM_SHARDS_FIELD_NUMBER: _ClassVar[int]
    ENDIANNESS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    num_shards: int
    endianness: BundleHeaderProto.Endianness
    version: _graph_def_pb2.VersionDef
    def __init__(self, num_shards: _Optional[int] = ..., endianness: _Optional[_Union[BundleHeaderProto.Endianness, str]] = ..., version: _Optional[_Union[_graph_def_pb2.VersionDef, _Mapping]] = ...) -> None: ...

class BundleEntryProto(_message.Message):
    __slots__ = ("dtype", "shape", "shard_id", "offset", "size", "crc32c", "slices")
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    SHARD_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    CRC32C_FIELD_NUMBER: _ClassVar[int]
    SLICES_FIELD_NUMBER: _ClassVar[int]
    dtype: _types_pb2.DataType
    shape: _tensor_shape_pb2.TensorShapeProto
    shard_id: int
    offset: int
    size: int
    crc32c: int
    slices: _containers.RepeatedCompositeFieldContainer[TensorSliceProto]
    def __init__(self, dtype: _Optional[_Union[_types_pb2.DataType, str]] = ..., shape: _Optional[_Union[_tensor_shape_pb2.TensorShapeProto, _Mapping]] = ..., shard_id: _Optional[int] = ..., offset: _Optional[int] = ..., size: _Optional[int] = ..., crc32c: _Optional[int] = ..., slices: _Optional[_Iterable[_Union[TensorSliceProto, _Mapping]]] = ...) -> None: ...

class SavedSliceMeta(_message.Message):
    __slots__ = ("name", "shape", "type", "slice")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SHAPE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SLICE_FIELD_NUMBER: _ClassVar[int]
    name: str
    shape: _tensor_shape_pb2.TensorShapeProto
    type: _types_pb2.DataType
    slice: _containers.RepeatedCompositeFieldContainer[TensorSliceProto]
    def __init__(self, name: _Optional[str] = ..., shape: _Optional[_Union[_tensor_shape_pb2.TensorShapeProto, _Mapping]] = ..., type: _Optional[_Union[_types_pb2.DataType, str]] = ..., slice: _Optional[_Iterable[_Union[TensorSliceProto, _Mapping]]] = ...) -> None: ...

class SavedTensorSliceMeta(_message.Message):
    __slots__ = ("tensor", "versions")
    TENSOR_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    tensor: _containers.RepeatedCompositeFieldContainer[SavedSliceMeta]
    versions: _graph_def_pb2.VersionDef
    def __init__(self, tensor: _Optional[_Iterable[_Union[SavedSliceMeta, _Mapping]]] = ..., versions: _Optional[_Union[_graph_def_pb2.VersionDef, _Mapping]] = ...) -> None: ...

class SavedSlice(_message.Message):
    __slots__ = ("name", "slice", "data")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SLICE_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    name: str
    slice: TensorSliceProto
    data: _tensor_pb2.TensorProto
    def __init__(self, name: _Optional[str] = ..., slice: _Optional[_Union[TensorSliceProto, _Mapping]] = ..., data: _Optional[_Union[_tensor_pb2.TensorProto, _Mapping]] = ...) -> None: ...

class SavedTensorSlices(_message.Message):
    __slots__ = ("meta", "data")
    META_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    meta: SavedTensorSliceMeta
    data: SavedSlice
    def __init__(self, meta: _Optional[_Union[SavedTensorSliceMeta, _Mapping]] = ..., data: _Optional[_Union[SavedSlice, _Mapping]] = ...) -> None: ...
