"""``tf.compat``: TF 1.15's compatibility helpers.

``tf.compat.v1`` is the whole flowrt API, so ``import flowrt.compat.v1 as tf`` and
``tf.compat.v1.placeholder`` both work as with ``tensorflow.compat.v1``. The string
helpers convert between ``bytes`` and ``str`` as TF's ``compat`` module does (UTF-8 by
default, a ``TypeError`` naming the value otherwise).
"""

from __future__ import annotations

import contextlib
import datetime
import numbers
import os
import sys
from typing import Any, Iterator

import numpy as np

from ..base.tensor_shape import Dimension, TensorShape, as_shape, dimension_value

__all__ = ["v1", "as_bytes", "as_text", "as_str", "as_str_any", "path_to_str",
           "forward_compatible", "forward_compatibility_horizon", "bytes_or_text_types",
           "integral_types", "real_types", "complex_types", "dimension_value",
           "dimension_at_index"]

#: the whole API, as ``tensorflow.compat.v1``
v1 = sys.modules[__name__.split(".")[0]]
sys.modules[f"{__name__}.v1"] = v1
sys.modules[f"{v1.__name__}.compat.v1"] = v1  # (``import flowrt.compat.v1``: the old path)

bytes_or_text_types = (bytes, str)
integral_types = (numbers.Integral, np.integer)
real_types = (numbers.Real, np.integer, np.floating)
complex_types = (numbers.Complex, np.number)

# TF 1.15's horizon: ops newer than it are not emitted by default
_HORIZON = [datetime.date(2019, 10, 17)]


def as_bytes(bytes_or_text: bytes | bytearray | str, encoding: str = "utf-8") -> bytes:
    """``bytes_or_text`` as ``bytes``, encoding a ``str`` with ``encoding``."""
    if isinstance(bytes_or_text, bytearray):
        return bytes(bytes_or_text)
    if isinstance(bytes_or_text, str):
        return bytes_or_text.encode(encoding)
    if isinstance(bytes_or_text, bytes):
        return bytes_or_text
    raise TypeError(f"Expected binary or unicode string, got {bytes_or_text!r}")


def as_text(bytes_or_text: bytes | str, encoding: str = "utf-8") -> str:
    """``bytes_or_text`` as ``str``, decoding ``bytes`` with ``encoding``."""
    if isinstance(bytes_or_text, str):
        return bytes_or_text
    if isinstance(bytes_or_text, bytes):
        return bytes_or_text.decode(encoding)
    raise TypeError(f"Expected binary or unicode string, got {bytes_or_text!r}")


as_str = as_text


def as_str_any(value: Any) -> str:
    """``str(value)``, decoding ``bytes`` as text rather than showing ``b'...'``."""
    return as_str(value) if isinstance(value, bytes) else str(value)


def path_to_str(path: Any) -> Any:
    """A path-like object as its string; anything else unchanged."""
    return os.fspath(path) if isinstance(path, os.PathLike) else path


def forward_compatible(year: int, month: int, day: int) -> bool:
    """Whether the forward-compatibility horizon is past the given date."""
    return _HORIZON[0] > datetime.date(year, month, day)


@contextlib.contextmanager
def forward_compatibility_horizon(year: int, month: int, day: int) -> Iterator[None]:
    """Within the block, :func:`forward_compatible` uses this date as its horizon."""
    old = _HORIZON[0]
    _HORIZON[0] = datetime.date(year, month, day)
    try:
        yield
    finally:
        _HORIZON[0] = old


def dimension_at_index(shape: Any, index: int) -> Dimension:
    """The ``index``-th dimension of ``shape`` as a :class:`Dimension` (unknown when the
    rank is), as ``tf.compat.dimension_at_index`` with TF1 shapes."""
    shape = shape if isinstance(shape, TensorShape) else as_shape(shape)
    if shape.ndims is None:
        return Dimension(None)
    return shape.dims[index]
