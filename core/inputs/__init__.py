"""Input pipelines, built on the graph and training layers: ``tf.data`` (datasets and
their iterators) and TF1's queue-based input (readers, input producers, batching).

Each module lists what it exports under ``flowrt.<namespace>.<name>`` in its ``API``
table; the standard kernel set publishes those tables, as it does for
:mod:`flowrt.modeling`.
"""
