"""Straight-line steps: a plan without control flow, blocking kernels or a second
expensive kernel to overlap is emitted as one generated Python function, a call per node
in topological order, so a step does no scheduling work at all.

The generated function keeps a table of which node each of its lines runs, so that an
error raised inside it can still name its node (:func:`failing_node`).
"""
from __future__ import annotations

import threading
from typing import Any, Callable

from ..base import errors
from .plan import DEAD, Plan, StepContext, _CNode

__all__ = ["generate", "failing_node", "RECV_WAIT_S"]

#: how long a straight-line receive waits for a value it was told is there
RECV_WAIT_S = 60.0


def generate(plan: Plan, recvs_ready: bool = False
             ) -> tuple[Callable[..., list[Any]], Any, list[int]]:
    """Emit the straight-line step function of ``plan``: ``step(args, step_ctx)``
    returns the fetched values. With ``recvs_ready``, the variant in which each
    ``_Recv`` takes a value already in the rendezvous.

    Returns the function, its code object and, per line after the ``def``, the index
    of the node the line runs.
    """
    lines = ["def step(args, step_ctx):"]
    env: dict[str, Any] = {"_take_now": _take_now}
    node_of_line: list[int] = []
    for c in plan.nodes:
        outs = [f"v{c.out_base + k}" for k in range(c.n_out)]
        if c.kind == "arg":
            lines.append(f"    {outs[0]} = args[{c.arg_index}]")
            node_of_line.append(c.index)
            continue
        kname = f"k{c.index}"
        if c.kind == "alias":
            lines.append(f"    {outs[0]} = v{c.in_slots[0]}")
            node_of_line.append(c.index)
            continue
        if c.kind == "const":  # computed once, here: the step only names the value
            env[kname] = c.compute()
            lines.append(f"    {outs[0]} = {kname}")
            node_of_line.append(c.index)
            continue
        env[kname] = c.compute
        if c.kind == "async":  # a _Recv (recvs_ready): its value is waiting
            lines.append(f"    {outs[0]} = _take_now({kname}, step_ctx)")
            node_of_line.append(c.index)
            continue
        ins = [f"v{s}.read()" if d else f"v{s}" for s, d in zip(c.in_slots, c.deref)]
        if c.kind == "step":
            ins.insert(0, "step_ctx")
        call = f"{kname}({', '.join(ins)})"
        if c.n_out == 0:
            lines.append(f"    {call}")
        elif c.n_out == 1:
            lines.append(f"    {outs[0]} = {call}")
        else:
            lines.append(f"    {', '.join(outs)}, = {call}")
        node_of_line.append(c.index)
    lines.append("    return [" + ", ".join(f"v{s}" for s in plan.fetch_slots) + "]")
    src = "\n".join(lines) + "\n"
    tag = " ready" if recvs_ready else ""
    # a file name of its own per plan: how failing_node finds the function's frames
    code = compile(src, f"<flowrt step {id(plan):x}{tag}>", "exec")
    exec(code, env)
    return env["step"], code, node_of_line


def failing_node(nodes: list[_CNode], tb: Any, code: Any, node_of_line: list[int]
                 ) -> _CNode | None:
    """The node whose line of the generated step function ``code`` the traceback ``tb``
    passes through (``node_of_line[i]``: the node of the function's line ``i + 2``)."""
    name = code.co_filename if code is not None else None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == name:
            line = tb.tb_lineno - 2  # line 1 is the def
            if 0 <= line < len(node_of_line):
                return nodes[node_of_line[line]]
        tb = tb.tb_next
    return None


def _take_now(recv: Callable[..., Any], step: StepContext) -> Any:
    """Run a ``_Recv`` kernel whose value is already in the step's rendezvous: its
    callback fires before ``recv`` returns. (Should it not, wait for it.)"""
    box: list[Any] = []
    ev: list[threading.Event] = []

    def done(value: Any, err: BaseException | None = None) -> None:
        box.append((value, err))
        if ev:
            ev[0].set()

    recv(step, done)
    if not box:
        e = threading.Event()
        ev.append(e)
        if not box and not e.wait(RECV_WAIT_S):
            raise errors.DeadlineExceededError(
                None, None, f"a receive of step {step.step_id:x} expected to be ready "
                f"was not delivered within {RECV_WAIT_S} s")
    value, err = box[0]
    if err is not None:
        raise err
    if value is DEAD:  # the caller checked: a dead value here is a bug
        raise errors.InternalError(None, None, "a dead tensor reached a straight-line step")
    return value
