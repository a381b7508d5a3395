"""Which directories the file ops of a step may touch: a server's ``file_roots``.

A server runs whatever graph a client sends it, and file ops (``SaveV2``, ``ReadFile``,
the readers ...) take their paths from that graph. A :class:`FilePolicy` names the
directories those paths must lie in. Every kernel that opens a path chosen by the graph
asks its context first, before it creates, writes or reads anything::

    path = check_path(ctx, path, write=True)      # PermissionDeniedError if outside

A path is resolved (made absolute against the process's working directory, ``..`` and
symbolic links followed, :func:`os.path.realpath`) before it is compared with the roots,
which are resolved the same way once. A worker of a ``tf.train.Server`` built with
``file_roots`` (``flowrt server`` always has some) gives its policy to every session
state it makes; :class:`~flowrt.plugin.op_registry.KernelContext` hands it to kernels as
``ctx.file_policy``. A local session's worker has none: unrestricted, as in TensorFlow.
A kernel made outside a step (a graph pass folding constants, static shape inference)
gets :data:`OUTSIDE_STEP`, which refuses every path: file ops run only in steps, where
the worker's policy applies.
"""
from __future__ import annotations

import glob
import os
from typing import Any, Iterable

from ..base import errors

__all__ = ["FilePolicy", "UNRESTRICTED", "OUTSIDE_STEP", "check_path", "check_pattern",
           "inside_roots", "check_glob"]

_GLOB_CHARS = frozenset("*?[")


def _absolute(path: str) -> str:
    """``path`` joined to the working directory, ``..`` left in place: dropping it
    before symbolic links are resolved (``os.path.abspath`` does) would take
    ``ROOT/link/..`` for ``ROOT`` where the OS goes to the link target's parent."""
    return path if os.path.isabs(path) else os.path.join(os.getcwd(), path)


def _resolve(path: str) -> str:
    """The path the OS opens for ``path`` (no ``~`` expansion: ``open`` does none)."""
    return os.path.realpath(_absolute(path))


def _forms(path: str) -> tuple[str, ...]:
    """What ``path`` resolves to, and (for a plain last component) the resolved
    directory beside which files named after it are written, joined with that name.
    One ``realpath`` of the directory: the last component is resolved only when it is
    a symbolic link."""
    head, base = os.path.split(_absolute(path))
    if base in ("", ".", ".."):
        return (_resolve(path),)
    beside = os.path.join(os.path.realpath(head), base)
    return (os.path.realpath(beside) if os.path.islink(beside) else beside, beside)


class FilePolicy:
    """The directories file ops may touch (``None``: anywhere).

    :param roots: directories (absolute, ``~/...``, or relative to the working directory
        now; they need not exist yet), or None for no restriction
    :param why: what the refusal says when ``roots`` is empty
    """

    __slots__ = ("roots", "restricted", "_why")

    def __init__(self, roots: Iterable[str] | None = None, why: str = ""):
        self.restricted = roots is not None
        resolved: list[str] = []
        for r in roots or ():
            if not isinstance(r, (str, os.PathLike)) or not str(r):
                raise ValueError(f"file_roots must be directory names, got {r!r}")
            p = _resolve(os.path.expanduser(str(r)))
            if p not in resolved:
                resolved.append(p)
        #: the resolved root directories (empty when unrestricted, or nothing is allowed)
        self.roots: tuple[str, ...] = tuple(resolved)
        self._why = why

    def allows(self, path: str) -> bool:
        """Whether ``path`` (resolved), and the place beside it where files named after
        it are written (its resolved directory), lie inside a root."""
        return not self.restricted or self._outside(path) is None

    def _outside(self, path: str) -> str | None:
        """The resolved form of ``path`` that lies outside every root, or None."""
        for p in _forms(path):
            if not any(p == r or p.startswith(r.rstrip(os.sep) + os.sep)
                       for r in self.roots):
                return p
        return None

    def check(self, path: str, *, write: bool = False, node: str = "", op: str = "") -> str:
        """``path`` unchanged when :meth:`allows` it.

        :param write: the op writes (or deletes) there, else it reads
        :param node: the node asking (for the message)
        :param op: its op type (for the message)
        :raises PermissionDeniedError: naming the node and op, the path (and what it
            resolves to) and the roots
        """
        real = self._outside(path) if self.restricted else None
        if real is None:
            return path
        who = f"{op} node {node}" if node else (op or "a file op")
        verb = "write" if write else "read"
        shown = path if real == path else f"{path} (resolved: {real})"
        why = (f"it is outside the directories this server lets file ops touch: "
               f"{', '.join(self.roots)} (Server(file_roots=...), flowrt server "
               f"--file-root DIR)") if self.roots else \
            (self._why or "this server lets file ops touch no directory")
        raise errors.PermissionDeniedError(None, None, f"{who} may not {verb} {shown}: {why}")

    def __repr__(self) -> str:
        return f"FilePolicy({list(self.roots) if self.restricted else None})"


#: no restriction: local sessions, and servers built without ``file_roots``
UNRESTRICTED = FilePolicy(None)
#: what a kernel made outside a step gets: no file may be touched
OUTSIDE_STEP = FilePolicy((), why="file ops run only in a step, not while a graph is "
                          "compiled (a graph pass folding constants, shape inference)")


def check_path(ctx: Any, path: str, *, write: bool = False) -> str:
    """``ctx.file_policy.check`` naming ``ctx``'s node and op (``ctx``: a
    :class:`~flowrt.plugin.op_registry.KernelContext`); returns ``path``.

    :raises PermissionDeniedError: when the path lies outside the roots"""
    policy = getattr(ctx, "file_policy", None) or UNRESTRICTED
    if not policy.restricted:
        return path
    return policy.check(path, write=write, node=ctx.node_name, op=ctx.op_type)


def check_pattern(ctx: Any, pattern: str) -> str:
    """Check a glob pattern read by ``ctx``'s op: the directory it names before its
    first wildcard must be inside the roots (with a ``..`` after a wildcard, the whole
    pattern, so that it cannot climb out); returns ``pattern``. The matches are
    checked apart (:func:`inside_roots`, :func:`check_glob`): one may be a link out.

    :raises PermissionDeniedError: as :func:`check_path`"""
    policy = getattr(ctx, "file_policy", None) or UNRESTRICTED
    if not policy.restricted:
        return pattern
    parts = pattern.split(os.sep)
    first = next((i for i, p in enumerate(parts) if _GLOB_CHARS & set(p)), len(parts))
    fixed = os.sep.join(parts[:first]) if first else "."
    if first < len(parts) and ".." in parts[first:]:
        fixed = pattern  # checked whole: resolves outside unless it really is inside
    policy.check(fixed or os.sep, node=ctx.node_name, op=ctx.op_type)
    return pattern


def inside_roots(ctx: Any, names: Iterable[str]) -> list[str]:
    """The ``names`` (matches of a pattern) that ``ctx``'s policy allows: a match that
    resolves outside the roots (a symbolic link out) is left out."""
    policy = getattr(ctx, "file_policy", None) or UNRESTRICTED
    return list(names) if not policy.restricted else [n for n in names if policy.allows(n)]


def check_glob(ctx: Any, pattern: str) -> str:
    """:func:`check_pattern`, then every file ``pattern`` matches now checked as a read
    (for ops that open every match, such as a V1 checkpoint's ``file_pattern``);
    returns ``pattern``.

    :raises PermissionDeniedError: when the pattern, or a match, is outside the roots"""
    policy = getattr(ctx, "file_policy", None) or UNRESTRICTED
    if not policy.restricted:
        return pattern
    check_pattern(ctx, pattern)
    for m in glob.glob(pattern):
        check_path(ctx, m)
    return pattern
