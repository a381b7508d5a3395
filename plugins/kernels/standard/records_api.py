"""Publishes the core's TFRecord API (:mod:`flowrt.framework.tf_record`) and the
``tf.train.Example`` protocol buffers.

``tf.io`` / ``tf.python_io``: ``TFRecordWriter``, ``tf_record_iterator``,
``TFRecordOptions``, ``TFRecordCompressionType``. ``tf.train``: ``Example``,
``SequenceExample``, ``Features``, ``Feature``, ``FeatureList``, ``FeatureLists``,
``BytesList``, ``FloatList``, ``Int64List`` (wire-compatible with TensorFlow's).
"""
from __future__ import annotations

from flowrt.framework import tf_record
from flowrt.proto import example_pb2, feature_pb2

from ._common import ks, publish

publish(tf_record)

for _cls in (example_pb2.Example, example_pb2.SequenceExample, feature_pb2.Features,
             feature_pb2.Feature, feature_pb2.FeatureList, feature_pb2.FeatureLists,
             feature_pb2.BytesList, feature_pb2.FloatList, feature_pb2.Int64List):
    ks.export("train." + _cls.__name__, _cls)
