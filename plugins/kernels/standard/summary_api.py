"""Publishes the core's event-file API (:mod:`flowrt.framework.events`):
``tf.summary.FileWriter``, ``tf.summary.FileWriterCache``, ``tf.train.summary_iterator``
and the summary and event protos (``tf.Summary``, ``tf.Event``, ``tf.SessionLog`` ...).

The summary ops and ``tf.summary.scalar`` and the rest are in :mod:`.summary_ops`.
"""
from __future__ import annotations

from flowrt.framework import events

from ._common import publish

publish(events)
