"""GPU kernels: the standard kernel set's array-module kernels, run on CuPy.

The standard kernels are written against ``ctx.xp``; on a ``GPU`` device that is
``cupy``, so the same kernel code runs there. This set registers, for each op in
:data:`GPU_OPS`, a ``GPU`` kernel that wraps the standard one:

- the kernel is built, and each call runs, with the GPU current and its compute stream
  the current stream, so every kernel of a device is queued in order on one stream and
  the host never waits for the GPU inside a step;
- inputs that the standard kernel declares ``host_memory`` (shapes, axes, sizes) are
  given to it as numpy arrays, and any other input that arrives in host memory (a feed,
  a constant, a value from the CPU) is copied to the GPU first;
- outputs declared ``host_memory`` (``Shape``'s, ``Size``'s) stay in host memory, as in
  TF, so shape arithmetic never waits for the GPU;
- ``supports`` keeps string, resource and variant tensors off the GPU: such nodes are
  placed on the CPU, and a request for the GPU is an error unless soft placement is on;
- a node whose ``T`` (or ``dtype``) is int32 runs the CPU kernel on host memory, as TF's
  int32 GPU kernels do, so shape arithmetic never waits for the GPU;
- CuPy's out-of-memory error becomes ``ResourceExhaustedError`` naming the device.

Random number generators (:data:`HOST_OPS`) have GPU kernels that run the CPU kernel in
host memory: a seeded op gives the same values on every device, and an initializer
colocated with a GPU variable does not pull the variable onto the CPU. Ops not listed
(strings, checkpoint I/O, printing and assertions) have no GPU kernel and run on the
CPU, with the partitioner's ``_Send``/``_Recv`` pairs moving tensors between host and
GPU.
``Conv2D`` and its gradients go through cuDNN when NVIDIA's cuDNN frontend is installed
(:mod:`flowrt.plugins.kernels.cudnn_conv`), falling back to the GEMM kernels above;
``MaxPool`` and ``MaxPoolGrad`` are one CUDA kernel each
(:mod:`flowrt.plugins.kernels.cuda_pool`).
``Const`` on a GPU keeps integer and boolean constants in host memory and puts floating
ones on the GPU once per compiled step. Every op of :data:`GPU_OPS` is checked against
its CPU kernel on random inputs by ``tests/test_cuda.py`` on a machine with a GPU.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from flowrt import dtypes as _dt
from flowrt import errors
from flowrt.hookspecs import hookimpl
from flowrt.op_registry import KernelContext, KernelDef, KernelSet, expand_args

from . import cuda_pool, cudnn_conv

__all__ = ["ks", "GPU_OPS", "HOST_OPS", "flowrt_kernel_sets", "gpu_supports"]

ks = KernelSet("cuda")

_UNARY = """Abs Neg Square Sqrt Exp Expm1 Log Log1p Sin Cos Tan Asin Acos Atan Sinh Cosh Tanh
Asinh Acosh Atanh Floor Ceil Rint Round IsNan IsInf IsFinite LogicalNot Sign Reciprocal Inv
Rsqrt Sigmoid Real Imag Angle ComplexAbs Conj Cast""".split()
_BINARY = """AddV2 Sub Mul Maximum Minimum Atan2 Add Div RealDiv TruncateDiv FloorDiv FloorMod
TruncateMod Mod Pow SquaredDifference DivNoNan MulNoNan Xdivy Xlogy Complex Less LessEqual
Greater GreaterEqual LogicalAnd LogicalOr Equal NotEqual AddN ClipByValue""".split()
_REDUCE = """Sum Mean Prod Max Min All Any EuclideanNorm ArgMax ArgMin Cumsum Cumprod""".split()
_LINALG = """MatMul BatchMatMulV2 BatchMatMul""".split()
_SHAPE = """Reshape Transpose ConjugateTranspose ConcatV2 Pack Unpack Split SplitV Squeeze
ExpandDims Tile Pad PadV2 MirrorPad Slice StridedSlice Gather GatherV2 GatherNd OneHot Fill
ZerosLike OnesLike Range LinSpace ReverseV2 Shape ShapeN Size Rank Select SelectV2
BroadcastTo BroadcastArgs BroadcastGradientArgs MatrixDiag MatrixDiagPart MatrixSetDiag
MatrixBandPart Diag DiagPart ScatterNd UnsortedSegmentSum StridedSliceGrad MirrorPadGrad
Where""".split()
_IDENTITY = """Identity IdentityN StopGradient PreventGradient Snapshot Placeholder
PlaceholderWithDefault""".split()
_STATE = """VariableV2 Assign AssignAdd AssignSub IsVariableInitialized ApplyGradientDescent
ApplyMomentum ApplyAdam ApplyAdagrad ApplyRMSProp ApplyCenteredRMSProp
ApplyAdadelta""".split()
_NN = """Relu Relu6 LeakyRelu Elu Selu Softplus Softsign Softmax LogSoftmax BiasAdd L2Loss
SoftmaxCrossEntropyWithLogits SparseSoftmaxCrossEntropyWithLogits Conv2D MaxPool AvgPool
SigmoidGrad TanhGrad SqrtGrad RsqrtGrad ReciprocalGrad InvGrad ReluGrad Relu6Grad EluGrad
SeluGrad SoftplusGrad SoftsignGrad LeakyReluGrad BiasAddGrad Conv2DBackpropInput
Conv2DBackpropFilter MaxPoolGrad MaxPoolGradGrad AvgPoolGrad Conv3D Conv3DBackpropInput
Conv3DBackpropFilter Conv3DBackpropInputV2 Conv3DBackpropFilterV2 DepthwiseConv2dNative
DepthwiseConv2dNativeBackpropInput DepthwiseConv2dNativeBackpropFilter MaxPool3D AvgPool3D
MaxPool3DGrad MaxPool3DGradGrad AvgPool3DGrad MaxPoolWithArgmax MaxPoolGradWithArgmax
MaxPoolGradGradWithArgmax Dilation2D Dilation2DBackpropInput Dilation2DBackpropFilter
FusedBatchNorm FusedBatchNormV2 FusedBatchNormV3 FusedBatchNormGrad FusedBatchNormGradV2
FusedBatchNormGradV3 LRN LRNGrad SpaceToBatchND BatchToSpaceND SpaceToBatch BatchToSpace
SpaceToDepth DepthToSpace""".split()

#: tf.linalg, segment reductions and special functions: kernels written against the
#: device's array module (checked by tests/test_linalg_gpu.py on a GPU). Not the
#: products (SegmentProd, UnsortedSegmentProd): CuPy has no multiply.at
_MATH_EXTRA = """BesselI1e Bincount Cholesky Cross CumulativeLogsumexp Erfinv
HistogramFixedWidth Igamma LogMatrixDeterminant Lu MatrixDeterminant MatrixExponential
MatrixInverse MatrixSolve MatrixSolveLs MatrixSquareRoot MatrixTriangularSolve NextAfter Qr
SegmentMax SegmentMean SegmentSum SelfAdjointEigV2 SparseSegmentMean Svd
TridiagonalMatMul TridiagonalSolve UnsortedSegmentMin Xlog1py""".split()

#: Ops whose GPU kernel is the CPU kernel run on host memory: random generators (so a
#: seeded op gives the CPU's values on every device type, and an initializer colocated
#: with a GPU variable stays with it).
HOST_OPS: tuple[str, ...] = ("RandomUniform", "RandomStandardNormal", "TruncatedNormal",
                             "RandomUniformInt", "RandomShuffle", "Multinomial",
                             "RandomGamma")
#: Inputs kept in host memory on the GPU beyond those the standard kernels declare.
_EXTRA_HOST = {"LinSpace": ("start", "stop")}

#: Ops with a GPU kernel (the standard array-module kernel, wrapped), plus ``Const``.
GPU_OPS: tuple[str, ...] = tuple(_UNARY + _BINARY + _REDUCE + _LINALG + _SHAPE + _IDENTITY
                                 + _STATE + _NN + _MATH_EXTRA)

_NEVER = {"string", "resource", "variant"}
_HOST_T = ("T", "dtype")


#: Type attrs of ops whose CuPy implementation handles fewer dtypes than numpy's
#: (``cupy.add.at`` has no complex, bool or 8/16-bit integer version).
_ONLY: dict[str, tuple[str, frozenset[str]]] = {
    "UnsortedSegmentSum": ("T", frozenset({"int32", "int64", "float16", "float32",
                                           "float64", "uint32", "uint64"})),
}


def gpu_supports(op_def: Any) -> Callable[[dict], bool]:
    """The ``supports(attrs)`` of a GPU kernel: no string, resource or variant tensor,
    and only the dtypes CuPy handles where it handles fewer than numpy."""
    typed = [n for a in list(op_def.inputs) + list(op_def.outputs)
             for n in (a.type_attr, a.type_list_attr) if n]
    fixed = [a.dtype.base_dtype.name for a in list(op_def.inputs) + list(op_def.outputs)
             if a.dtype is not None]
    if any(n in _NEVER for n in fixed):
        return lambda attrs: False
    only = _ONLY.get(op_def.name)

    def supports(attrs: dict[str, Any]) -> bool:
        if only is not None and only[0] in attrs and \
                _dt.as_dtype(attrs[only[0]]).base_dtype.name not in only[1]:
            return False
        for name in typed:
            v = attrs.get(name)
            if v is None:
                continue
            for t in (v if isinstance(v, (list, tuple)) else (v,)):
                if _dt.as_dtype(t).base_dtype.name in _NEVER:
                    return False
        return True

    return supports


def _int32_node(attrs: dict[str, Any]) -> bool:
    for name in _HOST_T:
        v = attrs.get(name)
        if v is not None and not isinstance(v, (list, tuple)):
            return _dt.as_dtype(v).base_dtype.name == "int32"
    return False


def _on_host(ctx: KernelContext) -> KernelContext:
    """A copy of ``ctx`` whose array module is numpy."""
    c = object.__new__(KernelContext)
    for k in KernelContext.__slots__:
        setattr(c, k, getattr(ctx, k))
    c.xp = np
    return c


def _positions(args: Any, attrs: dict[str, Any], names: set[str]) -> set[int]:
    """Positions (list arguments expanded) of the arguments named in ``names``."""
    return {i for i, a in enumerate(expand_args(args, attrs)) if a.name in names}


def _wrap(base: KernelDef, op_def: Any, on_host: bool = False) -> KernelDef:
    host = set(base.host_memory) | set(_EXTRA_HOST.get(base.op, ()))
    skip = 1 if base.kind == "step" else 0

    def factory(ctx: KernelContext) -> Callable[..., Any]:
        dev = ctx.device
        cp = dev.xp
        ndarray = cp.ndarray
        if on_host or _int32_node(ctx.attrs):
            return _host_kernel(base, ctx, ndarray)
        host_in = _positions(op_def.inputs, ctx.attrs, host)
        host_out = _positions(op_def.outputs, ctx.attrs, host)
        n_in = len(ctx.input_dtypes)
        dev_in = [i for i in range(n_in) if i not in host_in]
        host_in_l = sorted(host_in)
        active = dev.activate()
        with active:
            inner = base.factory(ctx)
        oom = cp.cuda.memory.OutOfMemoryError
        name, where = ctx.node_name, dev.name

        def convert(args: tuple) -> list:
            a = list(args)
            for i in dev_in:
                j = i + skip
                x = a[j]
                if type(x) is np.ndarray or isinstance(x, (np.generic, bool, int, float)):
                    a[j] = dev.from_host(x)
            for i in host_in_l:
                j = i + skip
                if isinstance(a[j], ndarray):
                    a[j] = a[j].get()
            return a

        def host_outputs(out: Any) -> Any:
            if not host_out:
                return out
            if isinstance(out, (list, tuple)):
                return type(out)(o.get() if i in host_out and isinstance(o, ndarray) else o
                                 for i, o in enumerate(out))
            return out.get() if 0 in host_out and isinstance(out, ndarray) else out

        def call(a: Any, finish: Callable[[Any], Any]) -> Any:
            try:
                with active:
                    return finish(inner(*a))
            except oom as e:
                raise errors.ResourceExhaustedError(
                    None, None, f"OOM when running node '{name}' (op '{ctx.op_type}') on "
                    f"{where}: {e}") from None

        def compute(*args: Any) -> Any:
            return call(convert(args), host_outputs)

        if host_in_l or host_out:
            return compute
        dev_pos = tuple(i + skip for i in dev_in)

        def compute_on_device(*args: Any) -> Any:
            # the usual case, every input already on the GPU: no conversion and no copy
            # of the argument list (per node, on the host, while the GPU waits)
            for j in dev_pos:
                if type(args[j]) is not ndarray:
                    return compute(*args)
            return call(args, _same)

        return compute_on_device

    return KernelDef(base.op, factory, "GPU", base.kind, base.expensive,
                     tuple(sorted(host)), supports=gpu_supports(op_def))


def _same(x: Any) -> Any:
    return x


def _host_kernel(base: KernelDef, ctx: KernelContext, ndarray: Any) -> Callable[..., Any]:
    """An int32 node on a GPU runs the CPU kernel on host memory, as TF's int32 GPU
    kernels do: shape arithmetic never waits for the GPU."""
    inner = base.factory(_on_host(ctx))

    def compute(*args: Any) -> Any:
        if any(isinstance(x, ndarray) for x in args):
            args = tuple(x.get() if isinstance(x, ndarray) else x for x in args)
        return inner(*args)

    return compute


_HOST_CONST = {"b", "i", "u", "O", "S", "U"}


def _const_factory(ctx: KernelContext) -> Callable[..., Any]:
    """``Const`` on a GPU: integer, boolean and string values stay in host memory (as in
    TF, where int32 lives on the host); others are copied to the GPU once, here."""
    value = np.array(ctx.attrs["value"])
    value.flags.writeable = False
    if value.dtype.kind in _HOST_CONST:
        return lambda: value
    on_gpu = ctx.device.from_host(value)
    return lambda: on_gpu


def _build() -> None:
    from flowrt.engine.essential import ks as essential_ks  # noqa: PLC0415
    from flowrt.plugins.kernels.standard import _common  # noqa: PLC0415
    from flowrt.plugins.kernels.standard import ks as std_ks  # noqa: PLC0415,F401

    # the standard set's kernels and the core's essential ones (Identity, Const ...)
    std = {(k.op, k.device_type): k for k in _common.ks.kernels + essential_ks.kernels}
    op_defs = {**_common.ks.ops, **essential_ks.ops}
    for op in GPU_OPS:
        base = std.get((op, "*"))
        if base is None:
            raise RuntimeError(f"cuda kernels: the standard set has no kernel for {op!r}")
        if op in cudnn_conv.CUDNN_OPS:  # cuDNN where it can, this GEMM kernel otherwise
            base = KernelDef(base.op, cudnn_conv.conv_factory(op, base.factory),
                             base.device_type, base.kind, base.expensive, base.host_memory)
        elif op in cuda_pool.POOL_OPS:  # one CUDA kernel where it can
            base = KernelDef(base.op, cuda_pool.pool_factory(op, base.factory),
                             base.device_type, base.kind, base.expensive, base.host_memory)
        ks.kernels.append(_wrap(base, op_defs[op]))
    for op in HOST_OPS:
        ks.kernels.append(_wrap(std[(op, "*")], op_defs[op], on_host=True))
    c = std[("Const", "*")]
    ks.kernels.append(KernelDef("Const", _const_factory, "GPU", c.kind,
                                supports=gpu_supports(op_defs["Const"])))


_built = False


@hookimpl
def flowrt_kernel_sets() -> list[KernelSet]:
    global _built
    if not _built:
        _build()
        _built = True
    return [ks]
