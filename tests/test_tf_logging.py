"""tf.logging: TF's levels, filtering, the shared "tensorflow" logger, the counted
helpers."""
from __future__ import annotations

import logging
from typing import Iterator

import pytest

import flowrt as tf


@pytest.fixture
def records() -> Iterator[list[logging.LogRecord]]:
    """The records reaching the "tensorflow" logger; its level restored afterwards."""
    logger = logging.getLogger("tensorflow")
    got: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            got.append(record)

    h = Keep(level=0)
    level = logger.level
    from flowrt.tools import tf_logging

    tf_logging._counts.clear()  # the counted calls of every test share pytest's site
    logger.addHandler(h)
    try:
        yield got
    finally:
        logger.removeHandler(h)
        logger.setLevel(level)


def test_levels_are_tfs() -> None:
    lg = tf.logging
    assert (lg.DEBUG, lg.INFO, lg.WARN, lg.ERROR, lg.FATAL) == (10, 20, 30, 40, 50)
    assert lg.WARNING == lg.WARN


def test_one_logger_named_tensorflow() -> None:
    assert tf.get_logger() is logging.getLogger("tensorflow")
    from flowrt.tools import tf_logging

    assert tf_logging.get_logger() is tf.get_logger()


def test_verbosity_filters(records: list[logging.LogRecord]) -> None:
    tf.logging.set_verbosity(tf.logging.WARN)
    assert tf.logging.get_verbosity() == 30
    assert logging.getLogger("tensorflow").level == 30
    tf.logging.debug("d")
    tf.logging.info("i %d", 1)
    tf.logging.warn("w %s", "x")
    tf.logging.warning("w2")
    tf.logging.error("e")
    tf.logging.fatal("f")
    assert [(r.levelno, r.getMessage()) for r in records] == \
        [(30, "w x"), (30, "w2"), (40, "e"), (50, "f")]
    records.clear()
    tf.logging.set_verbosity(tf.logging.DEBUG)
    tf.logging.debug("d2")
    tf.logging.log(tf.logging.INFO, "via log %s", "ok")
    tf.logging.vlog(15, "custom level")
    assert [(r.levelno, r.getMessage()) for r in records] == \
        [(10, "d2"), (20, "via log ok"), (15, "custom level")]


def test_get_logger_level_is_set_verbosity(records: list[logging.LogRecord]) -> None:
    tf.get_logger().setLevel(logging.ERROR)
    assert tf.logging.get_verbosity() == tf.logging.ERROR
    tf.logging.warning("hidden")
    tf.get_logger().error("shown")
    assert [r.getMessage() for r in records] == ["shown"]


def test_records_name_the_callers_line(records: list[logging.LogRecord]) -> None:
    tf.logging.set_verbosity(tf.logging.INFO)
    tf.logging.info("here")
    tf.logging.log_if(tf.logging.INFO, "cond", True)
    for _ in range(2):
        tf.logging.log_first_n(tf.logging.INFO, "first", 1)
    assert {r.filename for r in records} == {"test_tf_logging.py"}
    assert [r.funcName for r in records] == ["test_records_name_the_callers_line"] * 3


def test_log_if_every_n_first_n(records: list[logging.LogRecord]) -> None:
    tf.logging.set_verbosity(tf.logging.INFO)
    tf.logging.log_if(tf.logging.INFO, "yes", True)
    tf.logging.log_if(tf.logging.INFO, "no", 0)
    for i in range(7):
        tf.logging.log_every_n(tf.logging.INFO, "every %d", 3, i)
    assert [r.getMessage() for r in records] == ["yes", "every 0", "every 3", "every 6"]


def test_first_n(records: list[logging.LogRecord]) -> None:
    tf.logging.set_verbosity(tf.logging.INFO)
    for i in range(5):
        tf.logging.log_first_n(tf.logging.INFO, "first %d", 2, i)
    assert [r.getMessage() for r in records] == ["first 0", "first 1"]


def test_counts_are_per_site_as_tf(records: list[logging.LogRecord]) -> None:
    """TF keys the count by the frame that called the function making the counted call,
    so two counted calls in one function share one count."""
    tf.logging.set_verbosity(tf.logging.INFO)
    for _ in range(2):
        tf.logging.log_first_n(tf.logging.INFO, "a", 2)
        tf.logging.log_first_n(tf.logging.INFO, "b", 2)
    assert [r.getMessage() for r in records] == ["a", "b"]
    records.clear()

    def helper(msg: str) -> None:  # same file as the caller: the site is further up
        tf.logging.log_first_n(tf.logging.INFO, msg, 1)

    helper("h1")
    helper("h2")
    assert [r.getMessage() for r in records] == []  # pytest's site counted already


def test_task_level_status_and_flush(records: list[logging.LogRecord]) -> None:
    tf.logging.TaskLevelStatusMessage("status")
    assert [(r.levelno, r.getMessage()) for r in records] == [(40, "status")]
    with pytest.raises(NotImplementedError):  # as in TensorFlow 1.15
        tf.logging.flush()


def test_first_use_adds_a_stderr_handler_unless_root_has_one() -> None:
    from flowrt.tools import tf_logging

    logger = logging.getLogger("tensorflow")
    saved_handlers, saved_root = logger.handlers[:], logging.getLogger().handlers[:]
    saved = tf_logging._logger
    try:
        logger.handlers.clear()
        logging.getLogger().handlers.clear()
        tf_logging._logger = None
        assert tf_logging.get_logger() is logger
        assert len(logger.handlers) == 1
        assert logger.handlers[0].formatter._fmt == logging.BASIC_FORMAT
        logger.handlers.clear()
        logging.getLogger().addHandler(logging.NullHandler())
        tf_logging._logger = None
        tf_logging.get_logger()
        assert logger.handlers == []  # the root's handlers serve it: no double logging
    finally:
        logger.handlers[:] = saved_handlers
        logging.getLogger().handlers[:] = saved_root
        tf_logging._logger = saved
