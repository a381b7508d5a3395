"""Publishes the core's input pipelines (:mod:`flowrt.inputs`): ``tf.data.Dataset``,
``tf.data.Iterator`` and the ``tf.compat.v1.data`` helpers, the file datasets
(``TFRecordDataset`` ...) and the queue-based ``tf.train`` input producers and batching.

Each core module lists its exports in an ``API`` table; this module adds them to the
standard kernel set, as modeling_api does for :mod:`flowrt.modeling`.
"""
from __future__ import annotations

from flowrt.inputs import dataset, file_datasets, input_producers, iterator

from ._common import publish

MODULES = (dataset, iterator, input_producers, file_datasets)
publish(*MODULES)
