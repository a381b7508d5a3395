"""Publishes the core's model-building API (``flowrt.modeling``): ``tf.layers``,
``tf.losses``, ``tf.metrics``, ``tf.nn.rnn_cell`` and the RNN functions of ``tf.nn``.

Each core module lists its exports in an ``API`` table (``{"layers.dense": dense}``);
this module adds them all to the standard kernel set, whose runtime resolves
``flowrt.layers.dense`` and the rest through them.
"""
from __future__ import annotations

import importlib

from ._common import ks

#: the modules of :mod:`flowrt.modeling` whose ``API`` tables are published here
MODULES = ("layers", "losses", "metrics", "rnn_cell", "rnn")

for _name in MODULES:
    try:
        _mod = importlib.import_module(f"flowrt.modeling.{_name}")
    except ModuleNotFoundError as _e:  # a module not written yet publishes nothing
        if _e.name != f"flowrt.modeling.{_name}":
            raise
        continue
    for _api_name, _value in getattr(_mod, "API", {}).items():
        ks.export(_api_name, _value)
