"""``tf.train.write_graph`` (also ``tf.io.write_graph``) and
``tf.train.checkpoints_iterator``, as in TF 1.15.

``write_graph`` writes a ``GraphDef`` as protobuf text (``as_text``, the default) or
binary wire format, atomically (a temporary file renamed over the target), creating
``logdir`` first. ``checkpoints_iterator`` polls ``latest_checkpoint(checkpoint_dir)``
once a second and yields each new checkpoint prefix; ``timeout`` (seconds without a new
one) ends it, unless ``timeout_fn`` returns False, which keeps it waiting.
"""
from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable, Iterator

from google.protobuf import text_format

from ..framework import gfile
from ..framework.graph import Graph
from .saver import latest_checkpoint

__all__ = ["write_graph", "wait_for_new_checkpoint", "checkpoints_iterator", "API"]

_log = logging.getLogger("tensorflow")


def write_graph(graph_or_graph_def: Any, logdir: Any, name: str,
                as_text: bool = True) -> str:
    """Write a graph (a :class:`~flowrt.Graph` or a ``GraphDef``) to
    ``<logdir>/<name>`` and return that path."""
    graph_def = graph_or_graph_def.as_graph_def() if isinstance(graph_or_graph_def, Graph) \
        else graph_or_graph_def
    logdir = os.fspath(logdir) if isinstance(logdir, os.PathLike) else logdir
    logdir = logdir.decode("utf-8") if isinstance(logdir, bytes) else logdir
    if not gfile.exists(logdir):
        gfile.makedirs(logdir)
    path = os.path.join(logdir, name)
    if as_text:
        data: bytes | str = text_format.MessageToString(graph_def)
    else:
        data = graph_def.SerializeToString(deterministic=True)
    gfile.atomic_write_string_to_file(path, data)
    return path


def wait_for_new_checkpoint(checkpoint_dir: Any, last_checkpoint: str | None = None,
                            seconds_to_sleep: float = 1, timeout: float | None = None
                            ) -> str | None:
    """The newest checkpoint of ``checkpoint_dir`` once it differs from
    ``last_checkpoint``; None if ``timeout`` seconds pass first."""
    _log.info("Waiting for new checkpoint at %s", checkpoint_dir)
    stop_time = time.time() + timeout if timeout is not None else None
    while True:
        path = latest_checkpoint(checkpoint_dir)
        if path is None or path == last_checkpoint:
            if stop_time is not None and time.time() + seconds_to_sleep > stop_time:
                return None
            time.sleep(seconds_to_sleep)
        else:
            _log.info("Found new checkpoint at %s", path)
            return path


def checkpoints_iterator(checkpoint_dir: Any, min_interval_secs: float = 0,
                         timeout: float | None = None,
                         timeout_fn: Callable[[], bool] | None = None) -> Iterator[str]:
    """Yield each new checkpoint path of ``checkpoint_dir`` as it appears, at most one
    per ``min_interval_secs``; stop after ``timeout`` seconds without one unless
    ``timeout_fn`` is given and returns False (then wait on)."""
    checkpoint_path = None
    while True:
        new_path = wait_for_new_checkpoint(checkpoint_dir, checkpoint_path, timeout=timeout)
        if new_path is None:
            if not timeout_fn:
                _log.info("Timed-out waiting for a checkpoint.")
                return
            if timeout_fn():
                return
            continue
        start = time.time()
        checkpoint_path = new_path
        yield checkpoint_path
        time_to_next = start + min_interval_secs - time.time()
        if time_to_next > 0:
            time.sleep(time_to_next)


#: published as ``tf.train.*`` and ``tf.io.write_graph``
API: dict[str, Any] = {
    "train.write_graph": write_graph, "io.write_graph": write_graph,
    "train.checkpoints_iterator": checkpoints_iterator,
}
