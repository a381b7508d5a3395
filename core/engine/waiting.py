"""Whether a step can wait: the one analysis of how a partition's kernels may block.

Several parts of the runtime decide how to run a step from the same question -- can a
step of this partition wait for something, and for what? The master stages a two-task
step only if nothing but receives can wait (:func:`flowrt.partition.split_stages`),
runs a remote part on its own thread only if nothing can wait at all
(``MasterSession._first_inline``); a worker answers a RunGraph on its I/O thread only
if the step runs straight through (``Worker.runs_without_blocking``); the executor
picks its scheduler from the same facts. They all ask :class:`WaitFacts`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

__all__ = ["WaitFacts", "LOOP_OPS", "BRANCH_KINDS"]

#: the ops of a while loop's frame: a partition with them iterates
LOOP_OPS = frozenset({"Enter", "RefEnter", "Exit", "RefExit", "NextIteration",
                      "RefNextIteration"})
#: kernel kinds that make dead tensors (an untaken branch)
BRANCH_KINDS = frozenset({"switch", "merge"})


@dataclass(frozen=True, slots=True)
class WaitFacts:
    """How a step of a partition (or of several, :meth:`merge`) can wait."""

    #: it has a while loop (frames: it iterates until a condition holds)
    loops: bool = False
    #: it has Switch/Merge kernels (dead tensors flow on an untaken branch)
    branches: bool = False
    #: it receives tensors (``_Recv``): it waits for another device or task to send
    receives: bool = False
    #: it sends tensors (``_Send``)
    sends: bool = False
    #: an asynchronous kernel other than ``_Recv`` (a blocking queue op, a barrier...):
    #: it may wait for another step
    waits: bool = False
    #: how many kernels are expensive (BLAS, convolutions: they take long)
    expensive: int = 0

    @classmethod
    def of(cls, nodes: Iterable[tuple[str, str | None, bool]]) -> "WaitFacts":
        """The facts of ``(op type, kernel kind, expensive)`` triples, one per node
        (kind None: no kernel was found, which counts as one that may wait)."""
        loops = branches = receives = sends = waits = False
        expensive = 0
        for op, kind, exp in nodes:
            if op in LOOP_OPS:
                loops = True
            if op == "_Recv":
                receives = True
            elif op == "_Send":
                sends = True
            elif kind is None or kind == "async":
                waits = True
            if kind in BRANCH_KINDS:
                branches = True
            if exp:
                expensive += 1
        return cls(loops, branches, receives, sends, waits, expensive)

    @classmethod
    def of_partition(cls, nodes: Iterable[Any], device_type: str, runtime: Any
                     ) -> "WaitFacts":
        """The facts of graph nodes (``ir.nodes.values()``) placed on a device of
        ``device_type``, from the kernels ``runtime`` would run."""
        find = runtime.find_kernel

        def triples() -> Iterable[tuple[str, str | None, bool]]:
            for n in nodes:
                if n.type == "_Arg":
                    yield n.type, "arg", False
                    continue
                k = find(n.type, device_type)
                yield n.type, None if k is None else k.kind, bool(k is not None and
                                                                 k.expensive)
        return cls.of(triples())

    def merge(self, other: "WaitFacts") -> "WaitFacts":
        """The facts of a step that runs both."""
        return WaitFacts(self.loops or other.loops, self.branches or other.branches,
                         self.receives or other.receives, self.sends or other.sends,
                         self.waits or other.waits, self.expensive + other.expensive)

    @property
    def transfers(self) -> bool:
        """It exchanges tensors with another device or task."""
        return self.receives or self.sends

    @property
    def asynchronous(self) -> bool:
        """Some kernel completes through a callback (a receive or a wait)."""
        return self.receives or self.waits

    @property
    def only_receives_wait(self) -> bool:
        """Nothing but receives can wait, and there is no loop: once its inputs from
        other tasks are there, a step runs to the end."""
        return not self.loops and not self.waits

    @property
    def never_waits(self) -> bool:
        """A step runs to the end without waiting for anything: no loop, no receive,
        no waiting kernel."""
        return not self.loops and not self.waits and not self.receives

    @property
    def brief(self) -> bool:
        """It never waits and has no expensive kernel: a step of it takes little
        time."""
        return self.never_waits and not self.expensive
