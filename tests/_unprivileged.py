"""Run a check as an ordinary user, for tests of file permissions on a machine where the
tests run as root (root ignores them): a forked child drops to ``nobody`` and runs it.
The child reports through its exit status and a pipe; the parent waits a bounded time."""
from __future__ import annotations

import os
import select
import signal
import time
import traceback
from typing import Callable

NOBODY = 65534
WAIT_S = 60.0


def as_unprivileged(check: Callable[[], None]) -> None:
    """Run ``check()`` with root's permission override dropped (uid and gid ``nobody``
    in a forked child when this process is root; in this process otherwise). A failure
    in the child is raised here as an AssertionError carrying its traceback."""
    if os.geteuid() != 0:
        check()
        return
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the test runner
        code = 1
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            check()
            code = 0
        except BaseException:  # noqa: BLE001 - reported to the parent
            os.write(w, traceback.format_exc().encode()[-4000:])
        finally:
            os._exit(code)
    os.close(w)
    out = b""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([r], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(r, 4096)
        if not chunk:
            break
        out += chunk
    os.close(r)
    done, status = os.waitpid(pid, os.WNOHANG)
    while done == 0 and time.monotonic() < deadline:  # its pipe closed: it is exiting
        time.sleep(0.01)
        done, status = os.waitpid(pid, os.WNOHANG)
    if done == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise AssertionError(f"the unprivileged check did not finish in {WAIT_S:g} s")
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, out.decode(errors="replace")
