"""Spectral ops of the standard kernel set: TF 1.15's FFT ops and ``tf.signal``.

The twelve FFT ops (``FFT`` ... ``IRFFT3D``) follow TF's ``fft_ops.cc`` (types, the
``fft_length`` input of the real transforms, which crops an input longer than it and
rejects one shorter) and their gradients ``fft_ops.py``'s formulas. The ``tf.signal``
functions (``frame``, windows, ``stft``, ``inverse_stft``, ``overlap_and_add``, ``dct``,
mel filterbanks, MFCCs) are Python composites as in TF, built from existing ops, so
they are differentiable wherever their parts are.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from flowrt import dtypes as _dt
from flowrt.graph import Tensor, apply_op, convert_to_tensor, name_scope
from flowrt.op_registry import OpDef
from flowrt.tensor_shape import TensorShape, unknown_shape

from ._common import constant_value, ks
from ._common import invalid as _invalid
from .array_ops import _shape_error, _shape_str, _with_rank, _with_rank_at_least

__all__ = ["fft", "ifft", "fft2d", "ifft2d", "fft3d", "ifft3d", "rfft", "irfft", "rfft2d",
           "irfft2d", "rfft3d", "irfft3d", "fftshift", "ifftshift", "frame", "hann_window",
           "hamming_window", "stft", "inverse_stft", "inverse_stft_window_fn",
           "overlap_and_add", "dct", "idct", "linear_to_mel_weight_matrix",
           "mfccs_from_log_mel_spectrograms"]

_I32 = _dt.int32


def _tf() -> Any:
    # the flowrt namespace is complete only once every plugin module has loaded (a cycle)
    import flowrt
    return flowrt


# =======================================================================================
# the FFT ops
# =======================================================================================
#: op type -> (rank, forward, real)
_FFT_OPS: dict[str, tuple[int, bool, bool]] = {
    "FFT": (1, True, False), "IFFT": (1, False, False),
    "FFT2D": (2, True, False), "IFFT2D": (2, False, False),
    "FFT3D": (3, True, False), "IFFT3D": (3, False, False),
    "RFFT": (1, True, True), "IRFFT": (1, False, True),
    "RFFT2D": (2, True, True), "IRFFT2D": (2, False, True),
    "RFFT3D": (3, True, True), "IRFFT3D": (3, False, True),
}
_TC = "Tcomplex: {complex64, complex128} = DT_COMPLEX64"
_TR = "Treal: {float, double} = DT_FLOAT"


def _complex_fft_shape(op: Any) -> list[TensorShape]:
    rank = _FFT_OPS[op.type][0]
    d = _with_rank_at_least(op.inputs[0].shape.as_tuple(), rank, op)
    return [TensorShape(d)]


def _real_fft_shape(op: Any) -> list[TensorShape]:
    rank, forward, _ = _FFT_OPS[op.type]
    d = _with_rank_at_least(op.inputs[0].shape.as_tuple(), rank, op)
    n = _with_rank(op.inputs[1].shape.as_tuple(), 1, op)
    if n[0] is not None and n[0] != rank:
        raise _shape_error(op, f"Dimension 0 in both shapes must be equal, but are {n[0]} "
                               f"and {rank}. Shapes are [{n[0]}] and [{rank}].")
    if d is None:
        return [unknown_shape()]
    lengths = constant_value(op.inputs[1])
    outer = list(d[:-rank])
    if lengths is None:
        return [TensorShape(outer + [None] * rank)]
    inner = [int(v) for v in np.reshape(lengths, [-1])]
    if forward and inner[-1] != 0:
        inner[-1] = inner[-1] // 2 + 1
    return [TensorShape(outer + inner)]


for _name, (_rank, _fwd, _real) in _FFT_OPS.items():
    _what = ("inverse " if not _fwd else "") + ("real-valued " if _real else "") + \
        f"{_rank}-D fast Fourier transform over the inner-most {_rank} dimension(s)"
    if not _real:
        ks.op(OpDef(_name, inputs=["input: Tcomplex"], outputs=["output: Tcomplex"],
                    attrs=[_TC], shape_fn=_complex_fft_shape, doc=_what + "."))
    elif _fwd:
        ks.op(OpDef(_name, inputs=["input: Treal", "fft_length: int32"],
                    outputs=["output: Tcomplex"], attrs=[_TR, _TC], shape_fn=_real_fft_shape,
                    doc=_what + "."))
    else:
        ks.op(OpDef(_name, inputs=["input: Tcomplex", "fft_length: int32"],
                    outputs=["output: Treal"], attrs=[_TR, _TC], shape_fn=_real_fft_shape,
                    doc=_what + "."))


def _check_rank(shape: tuple[int, ...], rank: int) -> None:
    if len(shape) < rank:
        raise _invalid(f"Input must have rank of at least {rank} but got: "
                       f"{_shape_str(shape)}")


def _complex_fft_kernel(ctx: Any) -> Callable:
    rank, forward, _ = _FFT_OPS[ctx.op_type]
    xp = ctx.xp
    out_np = ctx.output_dtypes[0].np
    axes = tuple(range(-rank, 0))

    def fft_kernel(x: Any) -> Any:
        _check_rank(np.shape(x), rank)
        if x.size == 0:
            return xp.zeros(x.shape, dtype=out_np)
        y = xp.fft.fftn(x, axes=axes) if forward else xp.fft.ifftn(x, axes=axes)
        return y.astype(out_np, copy=False)

    return fft_kernel


def _real_fft_kernel(ctx: Any) -> Callable:
    rank, forward, _ = _FFT_OPS[ctx.op_type]
    xp = ctx.xp
    out_np = ctx.output_dtypes[0].np
    axes = tuple(range(-rank, 0))

    def real_fft_kernel(x: Any, fft_length: Any) -> Any:
        shape = tuple(np.shape(x))
        _check_rank(shape, rank)
        lengths = np.asarray(fft_length)
        if lengths.shape != (rank,):
            raise _invalid(f"fft_length must have shape [{rank}]")
        n = [int(v) for v in lengths]
        out_shape = list(shape)
        for i, v in enumerate(n):
            if v < 0:
                raise _invalid(f"fft_length[{i}] must >= 0, but got: {v}")
            inner = i == rank - 1
            need = v // 2 + 1 if (not forward and inner) else v
            idx = len(shape) - rank + i
            if shape[idx] != 0 and shape[idx] < need:
                raise _invalid(f"Input dimension {idx} must have length of at least {need} "
                               f"but got: {shape[idx]}")
            out_shape[idx] = v // 2 + 1 if (forward and inner and v != 0) else v
        if x.size == 0 or 0 in out_shape:
            return xp.zeros(tuple(out_shape), dtype=out_np)
        if forward:
            y = xp.fft.rfftn(x, s=n, axes=axes)
        else:
            y = xp.fft.irfftn(x, s=n, axes=axes)
        return y.astype(out_np, copy=False)

    return real_fft_kernel


for _name, (_rank, _fwd, _real) in _FFT_OPS.items():
    if _real:
        ks.kernel(_name, host_memory=("fft_length",))(_real_fft_kernel)
    else:
        ks.kernel(_name)(_complex_fft_kernel)


# ---------------------------------------------------------------------------------------
# gradients (TF's fft_ops.py)
# ---------------------------------------------------------------------------------------
def _inner_size(t: Tensor, rank: int, dtype: _dt.DType) -> Tensor:
    """The product of ``t``'s inner ``rank`` dims, as a scalar of ``dtype``."""
    tf = _tf()
    d = t.shape.as_tuple()
    if d is not None and all(x is not None for x in d[-rank:]):
        return tf.constant(float(np.prod(d[-rank:])), dtype=dtype)
    n = tf.reduce_prod(tf.shape(t)[-rank:])
    if dtype.is_complex:
        return tf.cast(tf.cast(n, dtype.real_dtype), dtype)
    return tf.cast(n, dtype)


def _fit_inner(t: Tensor, target: Any, rank: int, crop: bool = True) -> Tensor:
    """``t`` with its inner ``rank`` dims cropped (when ``crop``) and zero-padded at their
    ends to ``target`` (ints or an int32 vector)."""
    tf = _tf()
    d = t.shape.as_tuple()
    tv = constant_value(target) if isinstance(target, Tensor) else np.asarray(target)
    if d is not None and tv is not None and all(x is not None for x in d[-rank:]):
        tv = [int(v) for v in np.reshape(tv, [-1])]
        inner = list(d[-rank:])
        outer = len(d) - rank
        keep = [min(a, b) for a, b in zip(inner, tv)] if crop else inner
        if keep != inner:
            t = tf.slice(t, [0] * len(d), [-1] * outer + keep)
        pads = [max(b - a, 0) for a, b in zip(keep, tv)]
        if any(pads):
            t = tf.pad(t, [[0, 0]] * outer + [[0, p] for p in pads])
        return t
    target = convert_to_tensor(target, dtype=_I32)
    shp = tf.shape(t)
    outer_shape = shp[:-rank]
    inner_shape = shp[-rank:]
    if crop:
        inner_shape = tf.minimum(inner_shape, target)
        t = tf.slice(t, tf.zeros_like(shp), tf.concat([outer_shape, inner_shape], 0))
    after = tf.concat([tf.zeros_like(outer_shape), tf.maximum(target - inner_shape, 0)], 0)
    return tf.pad(t, tf.stack([tf.zeros_like(shp), after], axis=1))


def _complex_fft_grad(op: Any, grad: Tensor) -> list[Any]:
    rank, forward, _ = _FFT_OPS[op.type]
    inverse_op = ("I" + op.type) if forward else op.type[1:]
    size = _inner_size(grad, rank, grad.dtype.base_dtype)
    out = apply_op(inverse_op, input=grad)
    return [out * size if forward else out / size]


def _rfft_grad(op: Any, grad: Tensor) -> list[Any]:
    """d rfft: ``Re(A^H g)``, the zero-padded spectrum's inverse transform times its size,
    cropped and padded back to the input's shape (TF's result, for any fft_length)."""
    tf = _tf()
    rank = _FFT_OPS[op.type][0]
    x, fft_length = op.inputs
    full = _fit_inner(grad, fft_length, rank)
    cplx = apply_op("I" + op.type[1:], input=full)
    size = _inner_size(cplx, rank, cplx.dtype.base_dtype)
    dx = tf.real(cplx * size)
    d = x.shape.as_tuple()
    target = list(d[-rank:]) if d is not None and None not in d[-rank:] \
        else tf.shape(x)[-rank:]
    return [_fit_inner(dx, target, rank), None]


def _irfft_grad(op: Any, grad: Tensor) -> list[Any]:
    """d irfft: ``rfft(g) * mask / size`` with mask 1 at DC and Nyquist, 2 elsewhere."""
    tf = _tf()
    rank = _FFT_OPS[op.type][0]
    c, fft_length = op.inputs
    spec = apply_op(op.type[1:], input=grad, fft_length=fft_length,
                    Tcomplex=c.dtype.base_dtype)
    real = grad.dtype.base_dtype
    n_last = fft_length[-1]
    m = n_last // 2 + 1
    k = tf.range(m)
    is_edge = tf.logical_or(tf.equal(k, 0), tf.equal(k * 2, n_last))
    mask = tf.where(is_edge, tf.ones([m], real), tf.fill([m], tf.constant(2.0, real)))
    scale = mask / _inner_size(grad, rank, real)
    dc = spec * tf.cast(scale, c.dtype.base_dtype)
    d = c.shape.as_tuple()
    target = list(d[-rank:]) if d is not None and None not in d[-rank:] \
        else tf.shape(c)[-rank:]
    return [_fit_inner(dc, target, rank), None]


for _name, (_rank, _fwd, _real) in _FFT_OPS.items():
    if not _real:
        ks.gradient(_name)(_complex_fft_grad)
    elif _fwd:
        ks.gradient(_name)(_rfft_grad)
    else:
        ks.gradient(_name)(_irfft_grad)


# ---------------------------------------------------------------------------------------
# API functions
# ---------------------------------------------------------------------------------------
def _complex_api(op_type: str) -> Callable[..., Tensor]:
    def fn(input: Any, name: str | None = None) -> Tensor:
        with name_scope(name, op_type, [input]) as scope:
            x = convert_to_tensor(input, name="input")
            if not x.dtype.base_dtype.is_complex:
                x = convert_to_tensor(input, dtype=_dt.complex64, name="input")
            return apply_op(op_type, name=scope, input=x)

    fn.__name__ = op_type.lower()
    fn.__doc__ = f"The {_what_of(op_type)} of ``input`` (complex64 or complex128)."
    return fn


def _what_of(op_type: str) -> str:
    rank, forward, real = _FFT_OPS[op_type]
    return (("inverse " if not forward else "") + ("real " if real else "")
            + f"{rank}-D FFT over the inner-most {rank} dimension(s)")


def _static_inner(t: Tensor, rank: int) -> list[int] | None:
    d = t.shape.as_tuple()
    if d is None or any(x is None for x in d[-rank:]):
        return None
    return list(d[-rank:])


def _real_api(op_type: str) -> Callable[..., Tensor]:
    rank, forward, _ = _FFT_OPS[op_type]

    def fn(input_tensor: Any, fft_length: Any = None, name: str | None = None) -> Tensor:
        tf = _tf()
        with name_scope(name, op_type.lower(), [input_tensor, fft_length]) as scope:
            if forward:
                x = convert_to_tensor(input_tensor, name="input_tensor")
                if not x.dtype.base_dtype.is_floating:
                    x = convert_to_tensor(input_tensor, dtype=_dt.float32,
                                          name="input_tensor")
                real = x.dtype.base_dtype
                cplx = _dt.complex128 if real is _dt.float64 else _dt.complex64
            else:
                x = convert_to_tensor(input_tensor, name="input_tensor")
                if not x.dtype.base_dtype.is_complex:
                    x = convert_to_tensor(input_tensor, dtype=_dt.complex64,
                                          name="input_tensor")
                cplx = x.dtype.base_dtype
                real = cplx.real_dtype
            d = x.shape.as_tuple()
            if d is not None and len(d) < rank:
                raise ValueError(f"Shape must be at least rank {rank} but is rank {len(d)}")
            if fft_length is None:
                inner = _static_inner(x, rank)
                if inner is not None:
                    if not forward:
                        inner[-1] = max(0, 2 * (inner[-1] - 1))
                    fft_length = tf.constant(inner, dtype=_I32)
                else:
                    shp = tf.shape(x)[-rank:]
                    if not forward:
                        shp = tf.concat([shp[:-1], 2 * (shp[-1:] - 1)], 0)
                    fft_length = shp
            else:
                fft_length = convert_to_tensor(fft_length, dtype=_I32, name="fft_length")
            x = _pad_for_rfft(x, rank, fft_length, not forward)
            return apply_op(op_type, name=scope, input=x, fft_length=fft_length,
                            Treal=real, Tcomplex=cplx)

    fn.__name__ = op_type.lower()
    fn.__doc__ = (f"The {_what_of(op_type)} of ``input_tensor``; ``fft_length`` "
                  "(int32 vector) defaults to the input's inner dims.")
    return fn


def _pad_for_rfft(x: Tensor, rank: int, fft_length: Tensor, reverse: bool) -> Tensor:
    """TF's ``_maybe_pad_for_rfft``: zero-pad inner dims shorter than the FFT needs
    (for an inverse, the last one to ``fft_length // 2 + 1``)."""
    tf = _tf()
    d = x.shape.as_tuple()
    if d is not None and 0 in d:
        return x
    lv = constant_value(fft_length)
    if lv is not None:
        need: Any = [int(v) for v in np.reshape(lv, [-1])]
        if reverse:
            need[-1] = need[-1] // 2 + 1
    else:
        need = fft_length
        if reverse:
            need = tf.concat([fft_length[:-1], fft_length[-1:] // 2 + 1], 0)
    return _fit_inner(x, need, rank, crop=False)


_API_NAMES = {
    "FFT": ("fft", "spectral.fft", "signal.fft"),
    "IFFT": ("ifft", "spectral.ifft", "signal.ifft"),
    "FFT2D": ("fft2d", "spectral.fft2d", "signal.fft2d"),
    "IFFT2D": ("ifft2d", "spectral.ifft2d", "signal.ifft2d"),
    "FFT3D": ("fft3d", "spectral.fft3d", "signal.fft3d"),
    "IFFT3D": ("ifft3d", "spectral.ifft3d", "signal.ifft3d"),
    "RFFT": ("spectral.rfft", "signal.rfft"),
    "IRFFT": ("spectral.irfft", "signal.irfft"),
    "RFFT2D": ("spectral.rfft2d", "signal.rfft2d"),
    "IRFFT2D": ("spectral.irfft2d", "signal.irfft2d"),
    "RFFT3D": ("spectral.rfft3d", "signal.rfft3d"),
    "IRFFT3D": ("spectral.irfft3d", "signal.irfft3d"),
}
_FUNCS: dict[str, Callable[..., Tensor]] = {}
for _name, _names in _API_NAMES.items():
    _FUNCS[_name] = ks.api(*_names)(
        _real_api(_name) if _FFT_OPS[_name][2] else _complex_api(_name))

fft, ifft = _FUNCS["FFT"], _FUNCS["IFFT"]
fft2d, ifft2d = _FUNCS["FFT2D"], _FUNCS["IFFT2D"]
fft3d, ifft3d = _FUNCS["FFT3D"], _FUNCS["IFFT3D"]
rfft, irfft = _FUNCS["RFFT"], _FUNCS["IRFFT"]
rfft2d, irfft2d = _FUNCS["RFFT2D"], _FUNCS["IRFFT2D"]
rfft3d, irfft3d = _FUNCS["RFFT3D"], _FUNCS["IRFFT3D"]


# =======================================================================================
# fftshift, ifftshift
# =======================================================================================
def _roll(x: Tensor, shifts: Sequence[Any], axes: Sequence[int]) -> Tensor:
    """``x`` rolled by ``shifts[i]`` along ``axes[i]`` (a gather of rotated indices)."""
    tf = _tf()
    shp = tf.shape(x)
    for s, a in zip(shifts, axes):
        n = shp[a]
        idx = tf.floormod(tf.range(n) - tf.cast(s, _I32), tf.maximum(n, 1))
        x = tf.gather(x, idx, axis=a)
    return x


def _shift(x: Any, axes: Any, name: str | None, default: str, inverse: bool) -> Tensor:
    tf = _tf()
    with name_scope(name, default, [x]) as scope:
        x = convert_to_tensor(x, name="x")
        nd = x.shape.ndims
        if axes is None:
            if nd is None:
                raise ValueError(f"{default} needs the rank of its input when axes is None")
            axes_l = list(range(nd))
        elif isinstance(axes, (int, np.integer)):
            axes_l = [int(axes)]
        else:
            axes_l = [int(a) for a in axes]
        if nd is not None:
            axes_l = [a + nd if a < 0 else a for a in axes_l]
        elif any(a < 0 for a in axes_l):
            raise ValueError(f"{default} needs the rank of its input for negative axes")
        shp = tf.shape(x)
        shifts = [(-(shp[a] // 2)) if inverse else shp[a] // 2 for a in axes_l]
        return tf.identity(_roll(x, shifts, axes_l), name=scope)


@ks.api("signal.fftshift")
def fftshift(x: Any, axes: Any = None, name: str | None = None) -> Tensor:
    """Moves the zero-frequency term to the centre of ``axes`` (all by default)."""
    return _shift(x, axes, name, "fftshift", False)


@ks.api("signal.ifftshift")
def ifftshift(x: Any, axes: Any = None, name: str | None = None) -> Tensor:
    """The inverse of :func:`fftshift`."""
    return _shift(x, axes, name, "ifftshift", True)


# =======================================================================================
# frame, overlap_and_add
# =======================================================================================
def _scalar_int(v: Any, name: str) -> tuple[Tensor, int | None]:
    t = convert_to_tensor(v, name=name)
    if t.shape.ndims not in (None, 0):
        raise ValueError(f"Shape must be rank 0 but is rank {t.shape.ndims}")
    if not t.dtype.base_dtype.is_integer:
        raise ValueError(f"{name} must be an integer. Got {t.dtype.base_dtype.name}")
    c = constant_value(t)
    return t, (None if c is None else int(c))


@ks.api("signal.frame")
def frame(signal: Any, frame_length: Any, frame_step: Any, pad_end: bool = False,
          pad_value: Any = 0, axis: int = -1, name: str | None = None) -> Tensor:
    """Expands ``axis`` of ``signal`` into ``[num_frames, frame_length]`` frames taken
    every ``frame_step`` samples; ``pad_end`` pads the end with ``pad_value`` so that every
    sample lies in a frame (TF's ``tf.signal.frame``)."""
    tf = _tf()
    with name_scope(name, "frame", [signal, frame_length, frame_step, pad_value]):
        signal = convert_to_tensor(signal, name="signal")
        flen_t, flen = _scalar_int(frame_length, "frame_length")
        step_t, step = _scalar_int(frame_step, "frame_step")
        nd = signal.shape.ndims
        if nd is not None and nd < 1:
            raise ValueError("Shape must be at least rank 1 but is rank 0")
        axis = int(axis)
        if nd is None:
            if axis < 0:
                raise ValueError("frame needs the rank of signal for a negative axis")
        else:
            if not -nd <= axis < nd:
                raise ValueError(f"axis {axis} is out of range for a rank {nd} signal")
            axis = axis % nd
        d = signal.shape.as_tuple()
        length = d[axis] if d is not None else None
        flen_i = tf.cast(flen_t, _I32)
        step_i = tf.cast(step_t, _I32)
        static = length is not None and flen is not None and step is not None
        if static:
            if pad_end:
                nf = max(0, -(-length // step))
                pad = max(0, flen + step * (nf - 1) - length)
            else:
                nf = max(0, 1 + (length - flen) // step)
                pad = 0
            nframes: Any = nf
        else:
            n = tf.shape(signal)[axis]
            if pad_end:
                nframes = tf.maximum(0, -(-n // step_i))
                pad = tf.maximum(0, flen_i + step_i * (nframes - 1) - n)
            else:
                nframes = tf.maximum(0, 1 + (n - flen_i) // step_i)
                pad = 0
        if pad_end:
            pv = convert_to_tensor(pad_value, dtype=signal.dtype.base_dtype, name="pad_value")
            after = nd - axis - 1 if nd is not None else tf.rank(signal) - axis - 1
            pads = tf.concat([tf.zeros([axis, 2], _I32),
                              tf.reshape(tf.stack([0, tf.cast(pad, _I32)]), [1, 2]),
                              tf.zeros(tf.stack([after, 2]), _I32)], 0)
            signal = tf.pad(signal, pads, constant_values=pv)
        idx = (tf.expand_dims(tf.range(nframes) * step_i, 1)
               + tf.expand_dims(tf.range(flen_i), 0))
        out = tf.gather(signal, idx, axis=axis)
        if d is not None:
            known = list(d[:axis]) + [nframes if static else None, flen] + list(d[axis + 1:])
            out.set_shape(known)
        return out


@ks.api("signal.overlap_and_add")
def overlap_and_add(signal: Any, frame_step: Any, name: str | None = None) -> Tensor:
    """Sums overlapping frames ``[..., frames, frame_length]`` placed ``frame_step``
    apart into ``[..., (frames - 1) * frame_step + frame_length]``."""
    tf = _tf()
    with name_scope(name, "overlap_and_add", [signal, frame_step]) as scope:
        signal = convert_to_tensor(signal, name="signal")
        d = signal.shape.as_tuple()
        if d is None:
            raise ValueError("overlap_and_add needs the rank of signal")
        if len(d) < 2:
            raise ValueError(f"Shape must be at least rank 2 but is rank {len(d)}")
        step_t, step = _scalar_int(frame_step, "frame_step")
        step_i = tf.cast(step_t, _I32)
        r = len(d)
        shp = tf.shape(signal)
        nf, fl = shp[-2], shp[-1]
        out_len = (nf - 1) * step_i + fl
        perm = [r - 2, r - 1] + list(range(r - 2))
        flat = tf.reshape(tf.transpose(signal, perm), tf.concat([[nf * fl], shp[:-2]], 0))
        ids = tf.reshape(tf.expand_dims(tf.range(nf) * step_i, 1)
                         + tf.expand_dims(tf.range(fl), 0), [-1])
        summed = tf.math.unsorted_segment_sum(flat, ids, tf.maximum(out_len, 0))
        out = tf.transpose(summed, list(range(1, r - 1)) + [0], name=scope)
        if d[-2] is not None and d[-1] is not None and step is not None:
            out.set_shape(list(d[:-2]) + [max(0, (d[-2] - 1) * step + d[-1])])
        return out


# =======================================================================================
# windows
# =======================================================================================
def _raised_cosine(window_length: Any, periodic: Any, dtype: Any, a: float, b: float,
                   name: str | None, default: str) -> Tensor:
    tf = _tf()
    dtype = _dt.as_dtype(dtype)
    if not dtype.is_floating:
        raise ValueError(f"dtype must be a floating point type. Found {dtype}")
    with name_scope(name, default, [window_length, periodic]):
        wl = convert_to_tensor(window_length, dtype=_I32, name="window_length")
        if wl.shape.ndims not in (None, 0):
            raise ValueError(f"Shape {wl.shape} must have rank 0")
        wl_c = constant_value(wl)
        if wl_c is not None and int(wl_c) == 1:
            return tf.ones([1], dtype=dtype)
        per = tf.cast(convert_to_tensor(periodic, dtype=_dt.bool, name="periodic"), _I32)
        even = 1 - tf.math.floormod(wl, 2)
        n = tf.cast(wl + per * even - 1, dtype)
        count = tf.cast(tf.range(wl), dtype)
        cos_arg = tf.constant(2 * np.pi, dtype=dtype) * count / n
        win = tf.cast(a - b * tf.cos(cos_arg), dtype)
        if wl_c is not None:
            return win
        return tf.cond(tf.equal(wl, 1), lambda: tf.ones([1], dtype=dtype), lambda: win)


@ks.api("signal.hann_window")
def hann_window(window_length: Any, periodic: Any = True, dtype: Any = _dt.float32,
                name: str | None = None) -> Tensor:
    """A Hann window ``0.5 - 0.5 cos(2 pi n / N)`` (periodic: N = length)."""
    return _raised_cosine(window_length, periodic, dtype, 0.5, 0.5, name, "hann_window")


@ks.api("signal.hamming_window")
def hamming_window(window_length: Any, periodic: Any = True, dtype: Any = _dt.float32,
                   name: str | None = None) -> Tensor:
    """A Hamming window ``0.54 - 0.46 cos(2 pi n / N)``."""
    return _raised_cosine(window_length, periodic, dtype, 0.54, 0.46, name,
                          "hamming_window")


# =======================================================================================
# stft, inverse_stft
# =======================================================================================
def _enclosing_power_of_two(value: Tensor) -> Tensor:
    tf = _tf()
    c = constant_value(value)
    if c is not None:
        return tf.constant(int(2 ** math.ceil(math.log(float(c), 2))), dtype=value.dtype)
    return tf.cast(tf.pow(2.0, tf.ceil(tf.log(tf.cast(value, _dt.float32)) / math.log(2.0))),
                   value.dtype)


@ks.api("signal.stft")
def stft(signals: Any, frame_length: Any, frame_step: Any, fft_length: Any = None,
         window_fn: Callable[..., Any] | None = hann_window, pad_end: bool = False,
         name: str | None = None) -> Tensor:
    """Short-time Fourier transform of real ``signals`` ``[..., samples]``:
    ``[..., frames, fft_length // 2 + 1]`` complex."""
    with name_scope(name, "stft", [signals, frame_length, frame_step]):
        signals = convert_to_tensor(signals, name="signals")
        if signals.shape.ndims is not None and signals.shape.ndims < 1:
            raise ValueError("Shape must be at least rank 1 but is rank 0")
        flen, _ = _scalar_int(frame_length, "frame_length")
        step, _ = _scalar_int(frame_step, "frame_step")
        if fft_length is None:
            fft_length = _enclosing_power_of_two(flen)
        else:
            fft_length = convert_to_tensor(fft_length, name="fft_length")
        framed = frame(signals, flen, step, pad_end=pad_end)
        if window_fn is not None:
            framed = framed * window_fn(flen, dtype=framed.dtype)
        return rfft(framed, [fft_length])


@ks.api("signal.inverse_stft")
def inverse_stft(stfts: Any, frame_length: Any, frame_step: Any, fft_length: Any = None,
                 window_fn: Callable[..., Any] | None = hann_window,
                 name: str | None = None) -> Tensor:
    """Inverse of :func:`stft`: irfft each frame, window it, overlap-add (with
    :func:`inverse_stft_window_fn` as ``window_fn`` it reconstructs the signal)."""
    tf = _tf()
    with name_scope(name, "inverse_stft", [stfts]):
        stfts = convert_to_tensor(stfts, name="stfts")
        if stfts.shape.ndims is not None and stfts.shape.ndims < 2:
            raise ValueError(f"Shape must be at least rank 2 but is rank {stfts.shape.ndims}")
        flen, flen_c = _scalar_int(frame_length, "frame_length")
        step, _ = _scalar_int(frame_step, "frame_step")
        if fft_length is None:
            fft_length = _enclosing_power_of_two(flen)
        else:
            fft_length = convert_to_tensor(fft_length, name="fft_length")
            if fft_length.shape.ndims not in (None, 0):
                raise ValueError(f"Shape {fft_length.shape} must have rank 0")
        frames = irfft(stfts, [fft_length])
        target = [flen_c] if flen_c is not None else tf.reshape(tf.cast(flen, _I32), [1])
        frames = _fit_inner(frames, target, 1)
        if flen_c is not None and frames.shape.ndims is not None:
            frames.set_shape([None] * (frames.shape.ndims - 1) + [flen_c])
        if window_fn is not None:
            frames = frames * window_fn(flen, dtype=stfts.dtype.real_dtype)
        return overlap_and_add(frames, step)


@ks.api("signal.inverse_stft_window_fn")
def inverse_stft_window_fn(frame_step: Any,
                           forward_window_fn: Callable[..., Any] = hann_window,
                           name: str | None = None) -> Callable[..., Tensor]:
    """A ``window_fn`` for :func:`inverse_stft` that inverts ``forward_window_fn``'s
    windowing at ``frame_step`` (Griffin and Lim's equation 7)."""
    tf = _tf()

    def inverse_stft_window_fn_inner(frame_length: Any, dtype: Any) -> Tensor:
        with name_scope(name, "inverse_stft_window_fn", []):
            step, _ = _scalar_int(frame_step, "frame_step")
            flen, _ = _scalar_int(frame_length, "frame_length")
            step = tf.cast(step, _I32)
            flen = tf.cast(flen, _I32)
            forward = forward_window_fn(flen, dtype=dtype)
            denom = tf.square(forward)
            overlaps = -(-flen // step)
            denom = tf.pad(denom, tf.reshape(tf.stack([0, overlaps * step - flen]), [1, 2]))
            denom = tf.reshape(denom, tf.stack([overlaps, step]))
            denom = tf.reduce_sum(denom, 0, keepdims=True)
            denom = tf.tile(denom, tf.stack([overlaps, 1]))
            denom = tf.reshape(denom, tf.reshape(overlaps * step, [1]))
            return forward / denom[:flen]

    return inverse_stft_window_fn_inner


# =======================================================================================
# dct, idct, mel filterbanks, mfccs
# =======================================================================================
def _dct_matrix(n: int, dct_type: int, norm: str | None) -> np.ndarray:
    """``M`` with ``dct(x) = x @ M`` for a length-``n`` signal (float64)."""
    i = np.arange(n, dtype=np.float64)[:, None]   # input index
    k = np.arange(n, dtype=np.float64)[None, :]   # output index
    if dct_type == 1:
        m = 2.0 * np.cos(np.pi * i * k / (n - 1))
        m[0, :] = 1.0
        m[-1, :] = (-1.0) ** np.arange(n)
    elif dct_type == 2:
        m = 2.0 * np.cos(np.pi * k * (2 * i + 1) / (2 * n))
        if norm == "ortho":
            m[:, 0] *= math.sqrt(1.0 / (4 * n))
            m[:, 1:] *= math.sqrt(1.0 / (2 * n))
    else:
        m = 2.0 * np.cos(np.pi * i * (2 * k + 1) / (2 * n))
        m[0, :] = 1.0
        if norm == "ortho":
            m[0, :] = 1.0 / math.sqrt(n)
            m[1:, :] *= math.sqrt(1.0 / (2 * n))
    return m


def _validate_dct(x: Tensor, dct_type: int, n: Any, axis: int, norm: Any) -> None:
    if axis != -1:
        raise NotImplementedError(f"axis must be -1. Got: {axis}")
    if n is not None and n < 1:
        raise ValueError("n should be a positive integer or None")
    if dct_type not in (1, 2, 3):
        raise ValueError("Only Types I, II and III (I)DCT are supported.")
    if dct_type == 1:
        if norm == "ortho":
            raise ValueError("Normalization is not supported for the Type-I DCT.")
        d = x.shape.as_tuple()
        if d is not None and d and d[-1] is not None and d[-1] < 2 and n is None:
            raise ValueError("Type-I DCT requires the dimension to be greater than one.")
    if norm not in (None, "ortho"):
        raise ValueError(f"Unknown normalization. Expected None or 'ortho', got: {norm}")


@ks.api("signal.dct", "spectral.dct")
def dct(input: Any, type: int = 2, n: int | None = None, axis: int = -1,
        norm: str | None = None, name: str | None = None) -> Tensor:
    """Discrete cosine transform of types I, II and III over the last axis (scipy's
    definitions; ``norm='ortho'`` for II and III)."""
    tf = _tf()
    with name_scope(name, "dct", [input]):
        x = convert_to_tensor(input, name="input")
        if not x.dtype.base_dtype.is_floating:
            x = convert_to_tensor(input, dtype=_dt.float32, name="input")
        _validate_dct(x, type, n, axis, norm)
        if x.shape.ndims is not None and x.shape.ndims < 1:
            raise ValueError("Shape must be at least rank 1 but is rank 0")
        if n is not None:
            x = _fit_inner(x, [int(n)], 1)
        d = x.shape.as_tuple()
        length = d[-1] if d is not None and d else None
        if length is None:
            raise ValueError("dct needs the static length of the transformed axis")
        if length == 0:
            return tf.identity(x)
        mat = tf.constant(_dct_matrix(length, type, norm).astype(x.dtype.base_dtype.np))
        flat = tf.reshape(x, [-1, length])
        out = tf.reshape(tf.matmul(flat, mat), tf.shape(x))
        if d is not None:
            out.set_shape(d)
        return out


@ks.api("signal.idct", "spectral.idct")
def idct(input: Any, type: int = 2, n: int | None = None, axis: int = -1,
         norm: str | None = None, name: str | None = None) -> Tensor:
    """The inverse DCT: ``dct`` of type 3 for type 2, 2 for 3, 1 for 1 (unnormalized,
    ``idct(dct(x)) == 2 * N * x``; with ``norm='ortho'`` the exact inverse)."""
    if type not in (1, 2, 3):
        raise ValueError("Only Types I, II and III (I)DCT are supported.")
    return dct(input, type={1: 1, 2: 3, 3: 2}[type], n=n, axis=axis, norm=norm,
               name=name or "idct")


def _hz_to_mel(f: Any) -> Any:
    return 1127.0 * np.log1p(f / 700.0)


@ks.api("signal.linear_to_mel_weight_matrix")
def linear_to_mel_weight_matrix(num_mel_bins: int = 20, num_spectrogram_bins: int = 129,
                                sample_rate: Any = 8000, lower_edge_hertz: float = 125.0,
                                upper_edge_hertz: float = 3800.0, dtype: Any = _dt.float32,
                                name: str | None = None) -> Tensor:
    """``[num_spectrogram_bins, num_mel_bins]`` triangular HTK mel filters that map a
    linear spectrogram to a mel spectrogram (TF's ``linear_to_mel_weight_matrix``)."""
    tf = _tf()
    dtype = _dt.as_dtype(dtype)
    with name_scope(name, "linear_to_mel_weight_matrix") as scope:
        if isinstance(sample_rate, Tensor):
            c = constant_value(sample_rate)
            if c is None:
                raise ValueError("sample_rate must be known when the graph is built")
            sample_rate = float(c)
        if num_mel_bins <= 0:
            raise ValueError(f"num_mel_bins must be positive. Got: {num_mel_bins}")
        if lower_edge_hertz < 0.0:
            raise ValueError(f"lower_edge_hertz must be non-negative. Got: "
                             f"{lower_edge_hertz}")
        if lower_edge_hertz >= upper_edge_hertz:
            raise ValueError(f"lower_edge_hertz {lower_edge_hertz:.1f} >= upper_edge_hertz "
                             f"{upper_edge_hertz:.1f}")
        if sample_rate <= 0.0:
            raise ValueError(f"sample_rate must be positive. Got: {sample_rate}")
        if upper_edge_hertz > sample_rate / 2:
            raise ValueError(f"upper_edge_hertz must not be larger than the Nyquist "
                             f"frequency (sample_rate / 2). Got {upper_edge_hertz} for "
                             f"sample_rate: {sample_rate}")
        if not dtype.is_floating:
            raise ValueError(f"dtype must be a floating point type. Got: {dtype}")
        ft = dtype.np.type
        lin = np.linspace(ft(0.0), ft(sample_rate) / ft(2.0), num_spectrogram_bins,
                          dtype=ft)[1:]
        bins_mel = _hz_to_mel(lin).astype(ft)[:, None]
        edges = np.linspace(_hz_to_mel(ft(lower_edge_hertz)), _hz_to_mel(ft(upper_edge_hertz)),
                            num_mel_bins + 2, dtype=ft)
        lower, center, upper = edges[:-2][None, :], edges[1:-1][None, :], edges[2:][None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            lo = (bins_mel - lower) / (center - lower)
            up = (upper - bins_mel) / (upper - center)
        weights = np.maximum(ft(0), np.minimum(lo, up)).astype(ft)
        weights = np.pad(weights, [[1, 0], [0, 0]])
        return tf.constant(weights, dtype=dtype, name=scope)


@ks.api("signal.mfccs_from_log_mel_spectrograms")
def mfccs_from_log_mel_spectrograms(log_mel_spectrograms: Any,
                                    name: str | None = None) -> Tensor:
    """MFCCs of ``[..., num_mel_bins]`` log-magnitude mel spectrograms: an orthonormal-ish
    DCT-II scaled by ``1 / sqrt(2 * num_mel_bins)``, as TF computes them."""
    tf = _tf()
    with name_scope(name, "mfccs_from_log_mel_spectrograms", [log_mel_spectrograms]):
        x = convert_to_tensor(log_mel_spectrograms, name="log_mel_spectrograms")
        d = x.shape.as_tuple()
        if d and d[-1] is not None:
            if d[-1] == 0:
                raise ValueError(f"num_mel_bins must be positive. Got: {x}")
            bins: Any = d[-1]
        else:
            bins = tf.shape(x)[-1]
        dct2 = dct(x, type=2)
        return dct2 * tf.rsqrt(tf.cast(bins, dct2.dtype) * 2.0)
