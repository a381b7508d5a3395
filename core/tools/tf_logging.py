"""``tf.logging``: TF 1.15's logging module, on Python's ``logging``.

Everything logs through one Python logger named ``"tensorflow"`` (:func:`get_logger`,
also ``tf.get_logger``), so ``logging.getLogger("tensorflow")`` configures it as it does
TF's. The levels are Python's (``DEBUG`` 10, ``INFO`` 20, ``WARN`` 30, ``ERROR`` 40,
``FATAL`` 50); :func:`set_verbosity` sets the logger's level and :func:`get_verbosity`
reads its effective level (``WARNING`` when never set, as in TF).

As in TF, the first :func:`get_logger` call gives the logger a stderr handler
(``logging.BASIC_FORMAT``) unless the root logger already has handlers; ``fatal`` logs
at ``FATAL`` and does not exit; ``flush`` raises ``NotImplementedError``;
``log_every_n`` and ``log_first_n`` count calls per site as TF does (the line that
called the function making the call: two counted calls in one function share a
count).
"""
from __future__ import annotations

import logging as _logging
import sys
import threading
from logging import DEBUG, ERROR, FATAL, INFO, WARN, WARNING
from typing import Any

__all__ = ["DEBUG", "INFO", "WARN", "WARNING", "ERROR", "FATAL", "get_logger", "log",
           "debug", "info", "warn", "warning", "error", "fatal", "vlog", "log_if",
           "log_every_n", "log_first_n", "flush", "TaskLevelStatusMessage",
           "get_verbosity", "set_verbosity", "API"]

_logger: _logging.Logger | None = None
_lock = threading.Lock()
_counts: dict[tuple[str, int], int] = {}


def get_logger() -> _logging.Logger:
    """The ``tensorflow`` logger; on first use, a stderr handler is added to it unless
    the root logger already has handlers (then records go there, not twice)."""
    global _logger
    if _logger is not None:
        return _logger
    with _lock:
        if _logger is None:
            logger = _logging.getLogger("tensorflow")
            if not _logging.getLogger().handlers and not logger.handlers:
                interactive = bool(getattr(sys, "ps1", None)) or bool(sys.flags.interactive)
                if interactive:
                    logger.setLevel(INFO)
                handler = _logging.StreamHandler(sys.stdout if interactive else sys.stderr)
                handler.setFormatter(_logging.Formatter(_logging.BASIC_FORMAT, None))
                logger.addHandler(handler)
            _logger = logger
    return _logger


def _emit(level: int, msg: Any, args: tuple, kwargs: dict, depth: int = 3) -> None:
    """Log through the logger, the record naming the user's calling line (``depth``
    frames up: this function, the API function, its caller)."""
    kwargs.setdefault("stacklevel", depth)
    get_logger().log(level, msg, *args, **kwargs)


def log(level: int, msg: Any, *args: Any, **kwargs: Any) -> None:
    """Log ``msg % args`` at ``level``."""
    _emit(level, msg, args, kwargs)


def debug(msg: Any, *args: Any, **kwargs: Any) -> None:
    """Log at ``DEBUG``."""
    _emit(DEBUG, msg, args, kwargs)


def info(msg: Any, *args: Any, **kwargs: Any) -> None:
    """Log at ``INFO``."""
    _emit(INFO, msg, args, kwargs)


def warning(msg: Any, *args: Any, **kwargs: Any) -> None:
    """Log at ``WARN``."""
    _emit(WARN, msg, args, kwargs)


def warn(msg: Any, *args: Any, **kwargs: Any) -> None:
    """Log at ``WARN`` (the same as :func:`warning`)."""
    _emit(WARN, msg, args, kwargs)


def error(msg: Any, *args: Any, **kwargs: Any) -> None:
    """Log at ``ERROR``."""
    _emit(ERROR, msg, args, kwargs)


def fatal(msg: Any, *args: Any, **kwargs: Any) -> None:
    """Log at ``FATAL``; the program goes on, as with TF's ``tf.logging.fatal``."""
    _emit(FATAL, msg, args, kwargs)


def vlog(level: int, msg: Any, *args: Any, **kwargs: Any) -> None:
    """Log at ``level`` (TF's name for :func:`log`)."""
    _emit(level, msg, args, kwargs, kwargs.pop("_depth", 3))


def log_if(level: int, msg: Any, condition: Any, *args: Any, _depth: int = 4) -> None:
    """Log ``msg % args`` at ``level`` when ``condition`` is true."""
    if condition:
        vlog(level, msg, *args, _depth=_depth)


def _next_count() -> int:
    """How many times this call site has counted before (0 the first time). The site
    is TF's: starting at the caller of ``log_every_n`` / ``log_first_n``, the first
    frame up the stack in another file than the caller's, and its current line -- so
    counted calls made from one function share one count, as in TF."""
    frame = sys._getframe(2)  # the caller of log_every_n / log_first_n
    own = frame.f_code.co_filename
    up = frame.f_back
    while up is not None and up.f_code.co_filename == own:
        up = up.f_back
    token = (up.f_code.co_filename, up.f_lineno) if up is not None else ("<unknown>", 0)
    _counts[token] = _counts.get(token, -1) + 1
    return _counts[token]


def log_every_n(level: int, msg: Any, n: int, *args: Any) -> None:
    """Log on the 1st, (n+1)th, (2n+1)th ... call from the same line."""
    count = _next_count()
    log_if(level, msg, not count % n, *args, _depth=5)


def log_first_n(level: int, msg: Any, n: int, *args: Any) -> None:
    """Log on the first ``n`` calls from the same line only."""
    count = _next_count()
    log_if(level, msg, count < n, *args, _depth=5)


def TaskLevelStatusMessage(msg: Any) -> None:  # noqa: N802 - TF's name
    """Log ``msg`` at ``ERROR``, as TF does."""
    error(msg)


def flush() -> None:
    """Not implemented in TF 1.15 either: raises ``NotImplementedError``."""
    raise NotImplementedError("tf.logging.flush is not implemented (as in TensorFlow)")


def get_verbosity() -> int:
    """The ``tensorflow`` logger's effective level."""
    return get_logger().getEffectiveLevel()


def set_verbosity(v: int | str) -> None:
    """Log only records at level ``v`` and above."""
    get_logger().setLevel(v)


#: published as ``tf.logging.*``
API: dict[str, Any] = {
    "logging.DEBUG": DEBUG, "logging.INFO": INFO, "logging.WARN": WARN,
    "logging.WARNING": WARNING, "logging.ERROR": ERROR, "logging.FATAL": FATAL,
    "logging.set_verbosity": set_verbosity, "logging.get_verbosity": get_verbosity,
    "logging.debug": debug, "logging.info": info, "logging.warn": warn,
    "logging.warning": warning, "logging.error": error, "logging.fatal": fatal,
    "logging.log": log, "logging.log_every_n": log_every_n,
    "logging.log_first_n": log_first_n, "logging.log_if": log_if, "logging.vlog": vlog,
    "logging.flush": flush, "logging.TaskLevelStatusMessage": TaskLevelStatusMessage,
}
