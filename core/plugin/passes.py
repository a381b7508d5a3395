"""Graph passes: optimisations the master runs once per step signature."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["GraphPass"]


@dataclass
class GraphPass:
    """One optimisation pass, as returned by the ``flowrt_graph_passes`` hook.

    :param name: unique name; ``ConfigProto``-level switches refer to it
    :param run: ``run(graph_ir, ctx) -> None`` rewrites the step's
        :class:`~flowrt.ir.GraphIR` in place. ``ctx`` gives ``runtime``, ``config``,
        ``fetches`` (names that must survive) and ``feeds``.
    :param order: passes run in ascending order
    :param enabled_by_default: whether the pass runs unless switched off
    :param local_only: whether what the pass makes can only run in the master's own
        process (nodes holding Python objects with no ``GraphDef`` form, such as the
        standard plugin's fused element-wise kernels). The master skips a
        ``local_only`` pass for a step that has a partition on a remote task; the
        default, ``False``, says the rewritten graph may be sent to any worker.
    """

    name: str
    run: Callable[[Any, Any], None]
    order: int = 100
    enabled_by_default: bool = True
    local_only: bool = False
    plugin: str | None = None
