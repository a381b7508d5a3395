"""Publishes the queue-based input API of :mod:`flowrt.inputs` (``tf.train``'s input
producers and batching) and its file datasets (``tf.data.TFRecordDataset`` ...).

Each core module lists its exports in an ``API`` table; this module adds them to the
standard kernel set, as ``modeling_api`` does for :mod:`flowrt.modeling`.
"""
from __future__ import annotations

import importlib

from ._common import ks

#: the modules of :mod:`flowrt.inputs` whose ``API`` tables are published here
MODULES = ("input_producers", "file_datasets")

for _name in MODULES:
    try:
        _mod = importlib.import_module(f"flowrt.inputs.{_name}")
    except ModuleNotFoundError as _e:  # a module not written yet publishes nothing
        if _e.name != f"flowrt.inputs.{_name}":
            raise
        continue
    for _api_name, _value in getattr(_mod, "API", {}).items():
        ks.export(_api_name, _value)
