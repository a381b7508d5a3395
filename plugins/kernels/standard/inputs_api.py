"""Publishes the core's ``tf.data`` API (:mod:`flowrt.inputs.dataset` and
:mod:`flowrt.inputs.iterator`): ``tf.data.Dataset``, ``tf.data.Iterator`` and the
``tf.compat.v1.data`` helper functions.

Each core module lists its exports in an ``API`` table; this module adds them to the
standard kernel set, as modeling_api does for :mod:`flowrt.modeling`.
"""
from __future__ import annotations

from flowrt.inputs import dataset, iterator

from ._common import ks

#: the modules of :mod:`flowrt.inputs` whose ``API`` tables are published here
MODULES = (dataset, iterator)

for _mod in MODULES:
    for _api_name, _value in _mod.API.items():
        ks.export(_api_name, _value)
