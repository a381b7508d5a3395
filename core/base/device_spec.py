"""Device names: parsing, merging and the one canonical form.

Every device name in flowrt goes through :func:`canonical_device` or :class:`DeviceSpec`:
``/job:localhost/replica:0/task:0/device:CPU:0``, ``/cpu:0``, ``CPU:0``, ``cpu``,
``/device:GPU:1``, ``cuda:0`` and ``/gpu:0`` are all understood.
"""
from __future__ import annotations

import re
from typing import Any

__all__ = ["DeviceSpec", "canonical_device", "canonical_type"]

_TYPE_ALIASES = {"cpu": "CPU", "gpu": "GPU", "cuda": "GPU"}


def canonical_type(t: str) -> str:
    """``cpu``/``CPU`` -> ``CPU``; ``gpu``/``cuda`` -> ``GPU``; other names upper-cased."""
    return _TYPE_ALIASES.get(t.lower(), t.upper())


class DeviceSpec:
    """A possibly partial device name (``tf.DeviceSpec``); unset fields are None."""

    __slots__ = ("job", "replica", "task", "device_type", "device_index")

    def __init__(self, job: str | None = None, replica: int | None = None,
                 task: int | None = None, device_type: str | None = None,
                 device_index: int | None = None):
        self.job = job
        self.replica = None if replica is None else int(replica)
        self.task = None if task is None else int(task)
        self.device_type = None if device_type is None else canonical_type(device_type)
        self.device_index = None if device_index is None else int(device_index)

    @classmethod
    def from_string(cls, spec: str | None) -> "DeviceSpec":
        """Parse a full or partial device name.

        :raises ValueError: naming the unparseable part.
        """
        d = cls()
        if not spec:
            return d
        s = spec.strip()
        if not s.startswith("/") and ":" not in s.split("/")[0] and "/" not in s:
            # bare "cpu" / "GPU"
            d.device_type = canonical_type(s)
            return d
        typed = False
        for part in [p for p in s.split("/") if p]:
            bits = part.split(":")
            key = bits[0].lower()
            if key == "device" or (key not in ("job", "replica", "task") and
                                   len(bits) in (1, 2)):
                if typed:
                    raise ValueError(f"Cannot specify multiple device types: {spec}")
                typed = True
            if key == "job" and len(bits) == 2:
                d.job = bits[1]
            elif key == "replica" and len(bits) == 2:
                d.replica = int(bits[1])
            elif key == "task" and len(bits) == 2:
                d.task = int(bits[1])
            elif key == "device" and len(bits) in (2, 3):
                d.device_type = canonical_type(bits[1])
                if len(bits) == 3 and bits[2] != "*":
                    d.device_index = int(bits[2])
            elif len(bits) in (1, 2) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", bits[0]):
                d.device_type = canonical_type(bits[0])
                if len(bits) == 2 and bits[1] != "*":
                    if not bits[1].isdigit():
                        raise ValueError(f"Unknown attribute: '{part}' in '{spec}'")
                    d.device_index = int(bits[1])
            else:
                raise ValueError(f"Unknown attribute: '{part}' in '{spec}'")
        return d

    def make_merged_spec(self, other: "DeviceSpec") -> "DeviceSpec":
        """A new spec: this one with the fields set in ``other`` overriding."""
        return DeviceSpec(
            other.job if other.job is not None else self.job,
            other.replica if other.replica is not None else self.replica,
            other.task if other.task is not None else self.task,
            other.device_type if other.device_type is not None else self.device_type,
            other.device_index if other.device_index is not None else self.device_index)

    def merge_from(self, other: "DeviceSpec") -> None:
        """Merge ``other`` into this spec in place: its set fields override (TF1)."""
        m = self.make_merged_spec(other)
        self.job, self.replica, self.task = m.job, m.replica, m.task
        self.device_type, self.device_index = m.device_type, m.device_index

    def parse_from_string(self, spec: str) -> "DeviceSpec":
        """Replace this spec's fields by those parsed from ``spec`` (TF1); returns self."""
        d = DeviceSpec.from_string(spec)
        self.job, self.replica, self.task = d.job, d.replica, d.task
        self.device_type, self.device_index = d.device_type, d.device_index
        return self

    def replace(self, **kwargs: Any) -> "DeviceSpec":
        """A copy with the given fields replaced."""
        fields = {f: getattr(self, f) for f in self.__slots__}
        for k, v in kwargs.items():
            if k not in fields:
                raise TypeError(f"replace() got an unexpected keyword argument {k!r}")
            fields[k] = v
        return DeviceSpec(**fields)

    def to_string(self) -> str:
        out = []
        if self.job is not None:
            out.append(f"/job:{self.job}")
        if self.replica is not None:
            out.append(f"/replica:{self.replica}")
        if self.task is not None:
            out.append(f"/task:{self.task}")
        if self.device_type is not None:
            idx = "*" if self.device_index is None else str(self.device_index)
            out.append(f"/device:{self.device_type}:{idx}")
        return "".join(out)

    def is_compatible_with(self, full: "DeviceSpec") -> bool:
        """True if every field set here equals the same field of ``full``."""
        return all(getattr(self, f) is None or getattr(self, f) == getattr(full, f)
                   for f in self.__slots__)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, DeviceSpec) and self.to_string() == other.to_string()

    def __hash__(self) -> int:
        return hash(self.to_string())

    def __repr__(self) -> str:
        return f"DeviceSpec({self.to_string()!r})"

    def __str__(self) -> str:
        return self.to_string()


_CACHE: dict[tuple[str, str, int], str] = {}


def canonical_device(name: str | None, job: str = "localhost", task: int = 0) -> str:
    """The full canonical name ``/job:J/replica:0/task:T/device:TYPE:N``.

    Missing job/task are filled from the arguments, a missing index with 0 and a missing
    type with CPU. ``canonical_device("cuda:0") == "/job:localhost/replica:0/task:0/device:GPU:0"``.
    """
    key = (name or "", job, task)
    r = _CACHE.get(key)
    if r is None:
        d = DeviceSpec.from_string(name)
        r = (f"/job:{d.job or job}/replica:{d.replica or 0}/task:"
             f"{task if d.task is None else d.task}/device:{d.device_type or 'CPU'}:"
             f"{d.device_index or 0}")
        _CACHE[key] = r
    return r
