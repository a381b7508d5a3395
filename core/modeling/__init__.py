"""The TF1 model-building API, built on the graph and training layers: ``tf.layers``,
``tf.losses``, ``tf.metrics`` and the recurrent networks of ``tf.nn`` (``rnn_cell``,
``dynamic_rnn`` and friends).

Each module builds its graphs from op API functions (:func:`flowrt.graph.api_function`)
that it declares in its own ``REQUIRED_API_NAMES``, and lists what it exports under
``flowrt.<namespace>.<name>`` in its ``API`` table; the standard kernel set publishes
those tables (``flowrt.plugins.kernels.standard.modeling_api``).
"""
