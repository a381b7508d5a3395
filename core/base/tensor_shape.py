"""Static shapes with unknown dimensions (``tf.TensorShape``, ``tf.Dimension``)."""
from __future__ import annotations

from typing import Any, Iterable, Iterator
from ..proto import tensor_shape_pb2

__all__ = ["Dimension", "TensorShape", "as_dimension", "as_shape", "unknown_shape", "scalar",
           "vector", "matrix", "dimension_value", "dimension_at_index"]


class Dimension:
    """One dimension of a static shape: a non-negative int, or unknown (``value is None``)."""

    __slots__ = ("_value",)

    def __init__(self, value: Any):
        if isinstance(value, Dimension):
            value = value._value
        if value is None:
            self._value = None
            return
        if hasattr(value, "as_datatype_enum"):  # a DType
            raise TypeError(f"Cannot convert {value} to Dimension")
        try:
            v = int(value)
        except (TypeError, ValueError, OverflowError) as e:
            raise TypeError(f"Dimension value must be integer or None, got {value!r} "
                            f"of type {type(value).__name__}") from e
        if not isinstance(value, (str, bytes)) and v != value:
            raise ValueError(f"Ambiguous dimension: {value}")
        if v < 0:
            raise ValueError(f"Dimension {v} must be >= 0")
        self._value = v

    @property
    def value(self) -> int | None:
        return self._value

    def __repr__(self) -> str:
        return f"Dimension({self._value!r})"

    def __str__(self) -> str:
        return "?" if self._value is None else str(self._value)

    def __int__(self) -> int:
        if self._value is None:
            raise TypeError("Cannot convert an unknown Dimension to int")
        return self._value

    __index__ = __int__

    def __eq__(self, other: Any) -> Any:
        try:
            other = as_dimension(other)
        except (TypeError, ValueError):
            return NotImplemented
        if self._value is None or other._value is None:
            return None
        return self._value == other._value

    def __ne__(self, other: Any) -> Any:
        eq = self.__eq__(other)
        return eq if eq is None or eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash(self._value)

    def __bool__(self) -> bool:
        return self._value is not None and self._value != 0

    def is_compatible_with(self, other: Any) -> bool:
        other = as_dimension(other)
        return self._value is None or other._value is None or self._value == other._value

    def assert_is_compatible_with(self, other: Any) -> None:
        if not self.is_compatible_with(other):
            raise ValueError(f"Dimensions {self} and {other} are not compatible")

    def merge_with(self, other: Any) -> "Dimension":
        other = as_dimension(other)
        self.assert_is_compatible_with(other)
        return Dimension(self._value if self._value is not None else other._value)

    def _arith(self, other: Any, fn: Any) -> "Dimension":
        other = as_dimension(other)
        if self._value is None or other._value is None:
            return Dimension(None)
        return Dimension(fn(self._value, other._value))

    def __add__(self, o: Any) -> "Dimension":
        return self._arith(o, lambda a, b: a + b)

    __radd__ = __add__

    def __sub__(self, o: Any) -> "Dimension":
        return self._arith(o, lambda a, b: a - b)

    def __rsub__(self, o: Any) -> "Dimension":
        return as_dimension(o)._arith(self, lambda a, b: a - b)

    def __mul__(self, o: Any) -> "Dimension":
        return self._arith(o, lambda a, b: a * b)

    __rmul__ = __mul__

    def __floordiv__(self, o: Any) -> "Dimension":
        return self._arith(o, lambda a, b: a // b)

    def __rfloordiv__(self, o: Any) -> "Dimension":
        return as_dimension(o)._arith(self, lambda a, b: a // b)

    def __truediv__(self, o: Any) -> "Dimension":
        raise TypeError(f"unsupported operand type(s) for /: 'Dimension' and "
                        f"'{type(o).__name__}', please use // instead")

    def __rtruediv__(self, o: Any) -> "Dimension":
        raise TypeError(f"unsupported operand type(s) for /: '{type(o).__name__}' and "
                        "'Dimension', please use // instead")

    def __mod__(self, o: Any) -> "Dimension":
        return self._arith(o, lambda a, b: a % b)

    def __rmod__(self, o: Any) -> "Dimension":
        return as_dimension(o)._arith(self, lambda a, b: a % b)

    def __lt__(self, o: Any) -> Any:
        o = as_dimension(o)
        return None if self._value is None or o._value is None else self._value < o._value

    def __le__(self, o: Any) -> Any:
        o = as_dimension(o)
        return None if self._value is None or o._value is None else self._value <= o._value

    def __gt__(self, o: Any) -> Any:
        o = as_dimension(o)
        return None if self._value is None or o._value is None else self._value > o._value

    def __ge__(self, o: Any) -> Any:
        o = as_dimension(o)
        return None if self._value is None or o._value is None else self._value >= o._value


def as_dimension(value: Any) -> Dimension:
    return value if isinstance(value, Dimension) else Dimension(value)


def dimension_value(dim: Any) -> int | None:
    """The int value of a Dimension or int (None if unknown)."""
    return dim._value if isinstance(dim, Dimension) else dim


def dimension_at_index(shape: Any, index: int) -> Dimension:
    """``shape[index]`` as a Dimension (unknown if the rank is unknown)."""
    shape = as_shape(shape)
    if shape._dims is None:
        return Dimension(None)
    return Dimension(shape._dims[index])


class TensorShape:
    """A possibly partially known shape (``tf.TensorShape``).

    ``dims is None`` means unknown rank. Indexing gives :class:`Dimension` objects (TF1
    behaviour); they compare equal to ints and have ``.value``.
    """

    __slots__ = ("_dims",)

    def __init__(self, dims: Any):
        if dims is None:
            self._dims: tuple[int | None, ...] | None = None
        elif isinstance(dims, TensorShape):
            self._dims = dims._dims
        elif hasattr(dims, "dim") and hasattr(dims, "unknown_rank"):  # TensorShapeProto
            self._dims = None if dims.unknown_rank else tuple(
                None if d.size < 0 else int(d.size) for d in dims.dim)
        else:
            try:
                it = iter(dims)
            except TypeError:  # a single int is a rank-1 shape, as in TF
                it = iter([dims])
            self._dims = tuple(Dimension(d)._value for d in it)

    @property
    def dims(self) -> list[Dimension] | None:
        return None if self._dims is None else [Dimension(d) for d in self._dims]

    @property
    def ndims(self) -> int | None:
        return None if self._dims is None else len(self._dims)

    rank = ndims

    def __len__(self) -> int:
        if self._dims is None:
            raise ValueError("Cannot take the length of shape with unknown rank.")
        return len(self._dims)

    def __bool__(self) -> bool:
        return self._dims is not None

    def __iter__(self) -> Iterator[Dimension]:
        if self._dims is None:
            raise ValueError("Cannot iterate over a shape with unknown rank.")
        return iter([Dimension(d) for d in self._dims])

    def __getitem__(self, key: Any) -> Any:
        if self._dims is None:
            if isinstance(key, slice):
                start = 0 if key.start is None else key.start
                stop = key.stop
                if key.step is not None:
                    raise ValueError("Steps are not yet handled")
                if stop is None or start < 0 or stop < 0:
                    return unknown_shape()
                return unknown_shape(max(0, stop - start))
            return Dimension(None)
        if isinstance(key, slice):
            return TensorShape(self._dims[key])
        return Dimension(self._dims[key])

    def num_elements(self) -> int | None:
        if not self.is_fully_defined():
            return None
        n = 1
        for d in self._dims:  # type: ignore[union-attr]
            n *= d  # type: ignore[operator]
        return n

    def is_fully_defined(self) -> bool:
        return self._dims is not None and all(d is not None for d in self._dims)

    def assert_is_fully_defined(self) -> None:
        if not self.is_fully_defined():
            raise ValueError(f"Shape {self} is not fully defined")

    def as_list(self) -> list[int | None]:
        if self._dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape.")
        return list(self._dims)

    def as_tuple(self) -> tuple[int | None, ...] | None:
        """The dims as a tuple of ints/None (None for unknown rank); cheap, for kernels."""
        return self._dims

    def is_compatible_with(self, other: Any) -> bool:
        other = as_shape(other)
        if self._dims is None or other._dims is None:
            return True
        if len(self._dims) != len(other._dims):
            return False
        return all(a is None or b is None or a == b for a, b in zip(self._dims, other._dims))

    def assert_is_compatible_with(self, other: Any) -> None:
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {as_shape(other)} are incompatible")

    def merge_with(self, other: Any) -> "TensorShape":
        other = as_shape(other)
        if self._dims is None:
            return other
        if other._dims is None:
            return self
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {other} are not compatible")
        return TensorShape([a if a is not None else b for a, b in zip(self._dims, other._dims)])

    def concatenate(self, other: Any) -> "TensorShape":
        other = as_shape(other)
        if self._dims is None or other._dims is None:
            return unknown_shape()
        return TensorShape(self._dims + other._dims)

    def most_specific_compatible_shape(self, other: Any) -> "TensorShape":
        """The most specific shape compatible with both (unknown where they differ)."""
        other = as_shape(other)
        if self._dims is None or other._dims is None or len(self._dims) != len(other._dims):
            return unknown_shape()
        return TensorShape([a if a == b else None for a, b in zip(self._dims, other._dims)])

    def assert_same_rank(self, other: Any) -> None:
        other = as_shape(other)
        if self._dims is not None and other._dims is not None and \
                len(self._dims) != len(other._dims):
            raise ValueError(f"Shapes {self} and {other} must have the same rank")

    def assert_has_rank(self, rank: int) -> None:
        if self._dims is not None and len(self._dims) != rank:
            raise ValueError(f"Shape {self} must have rank {rank}")

    def __add__(self, other: Any) -> "TensorShape":
        return self.concatenate(other)

    def __radd__(self, other: Any) -> "TensorShape":
        return as_shape(other).concatenate(self)

    def with_rank(self, rank: int) -> "TensorShape":
        if self._dims is None:
            return unknown_shape(rank)
        if len(self._dims) != rank:
            raise ValueError(f"Shape {self} must have rank {rank}")
        return self

    def with_rank_at_least(self, rank: int) -> "TensorShape":
        if self._dims is not None and len(self._dims) < rank:
            raise ValueError(f"Shape {self} must have rank at least {rank}")
        return self

    def with_rank_at_most(self, rank: int) -> "TensorShape":
        if self._dims is not None and len(self._dims) > rank:
            raise ValueError(f"Shape {self} must have rank at most {rank}")
        return self

    def as_proto(self) -> Any:

        p = tensor_shape_pb2.TensorShapeProto()
        if self._dims is None:
            p.unknown_rank = True
        else:
            for d in self._dims:
                p.dim.add(size=-1 if d is None else d)
        return p

    def __eq__(self, other: Any) -> bool:
        """TF1: equal ranks and equal *known* dims; an unknown dim equals nothing (so
        ``(?, 3) == (?, 3)`` is False), two unknown-rank shapes are equal."""
        if other is self:
            return True
        try:
            other = as_shape(other)
        except (TypeError, ValueError):
            return NotImplemented
        a, b = self._dims, other._dims
        if a is None or b is None:
            return a is None and b is None
        return len(a) == len(b) and all(x is not None and x == y for x, y in zip(a, b))

    def __ne__(self, other: Any) -> bool:
        """TF1: undefined (ValueError) for unknown ranks; True when ranks or known dims
        differ, else False."""
        try:
            other = as_shape(other)
        except (TypeError, ValueError):
            return NotImplemented
        a, b = self._dims, other._dims
        if a is None or b is None:
            raise ValueError("The inequality of unknown TensorShapes is undefined.")
        if len(a) != len(b):
            return True
        return any(x is not None and y is not None and x != y for x, y in zip(a, b))

    def __hash__(self) -> int:
        return hash(self._dims)

    def __repr__(self) -> str:
        if self._dims is None:
            return "TensorShape(None)"
        return "TensorShape([%s])" % ", ".join("Dimension(%s)" % d for d in self._dims)

    def __str__(self) -> str:
        if self._dims is None:
            return "<unknown>"
        if len(self._dims) == 1:
            return "(%s,)" % ("?" if self._dims[0] is None else self._dims[0])
        return "(%s)" % ", ".join("?" if d is None else str(d) for d in self._dims)


def as_shape(shape: Any) -> TensorShape:
    return shape if isinstance(shape, TensorShape) else TensorShape(shape)


def unknown_shape(rank: int | None = None, **_: Any) -> TensorShape:
    return TensorShape(None if rank is None else [None] * rank)


def scalar() -> TensorShape:
    return TensorShape([])


def vector(length: Any) -> TensorShape:
    return TensorShape([length])


def matrix(rows: Any, cols: Any) -> TensorShape:
    return TensorShape([rows, cols])


def _iter_dims(dims: Iterable[Any]) -> list[int | None]:  # pragma: no cover - helper
    return [dimension_value(d) for d in dims]
