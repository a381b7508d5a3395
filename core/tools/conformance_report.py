"""What every check of the conformance kit (``flowrt.testing``) reports: a
:class:`Report` on success, an ``AssertionError`` naming the object at fault and the rule
it broke otherwise."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, NoReturn, Sequence

import numpy as np

__all__ = ["Report", "fail", "exc_text", "same"]


@dataclass
class Report:
    """What one check verified.

    :ivar subject: what was checked, e.g. ``"kernel set 'example'"``
    :ivar checked: one line per property verified
    :ivar skipped: one line per property that could not be verified here, with why
    :ivar parts: reports of the pieces checked inside this one (a plugin's kernel sets,
        a device type's devices)
    """

    subject: str
    checked: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    parts: list["Report"] = field(default_factory=list)

    def ok(self, what: str) -> None:
        self.checked.append(what)

    def skip(self, what: str, why: str) -> None:
        self.skipped.append(f"{what}: {why}")

    def walk(self) -> Iterable["Report"]:
        """This report and every nested one, depth first."""
        yield self
        for p in self.parts:
            yield from p.walk()

    def as_dict(self) -> dict[str, Any]:
        """A plain-data form (for JSON or assertions in tests)."""
        return {"subject": self.subject, "checked": list(self.checked),
                "skipped": list(self.skipped), "parts": [p.as_dict() for p in self.parts]}

    def __str__(self) -> str:
        lines: list[str] = []

        def emit(r: Report, depth: int) -> None:
            pad = "  " * depth
            lines.append(f"{pad}{r.subject}: {len(r.checked)} checks passed"
                         + (f", {len(r.skipped)} skipped" if r.skipped else ""))
            for s in r.skipped:
                lines.append(f"{pad}  skipped {s}")
            for p in r.parts:
                emit(p, depth + 1)

        emit(self, 0)
        return "\n".join(lines)


def fail(where: Sequence[str], message: str) -> NoReturn:
    """Raise the kit's AssertionError: ``flowrt conformance: <where>: <message>``."""
    raise AssertionError("flowrt conformance: " + ": ".join([*where, message]))


def exc_text(e: BaseException) -> str:
    """``"KeyError: 'T'"``: an exception's class and message, for failure messages."""
    return f"{type(e).__name__}: {e}"


def same(a: Any, b: Any) -> bool:
    """Whether two host values have the same dtype, shape and values."""
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))
