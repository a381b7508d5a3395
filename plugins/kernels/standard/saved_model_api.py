"""Publishes ``tf.saved_model`` (TF 1.15's names) from :mod:`flowrt.modeling.saved_model`:
the builder, the loader, ``simple_save``, the signature and tensor-info utilities, the
constants and the sub-modules (``tf.saved_model.builder``, ``loader``, ``constants``,
``tag_constants``, ``signature_constants``, ``signature_def_utils``, ``utils``,
``main_op``)."""
from __future__ import annotations

from flowrt.modeling import saved_model as _saved_model

from ._common import ks

for _api_name, _value in _saved_model.API.items():
    ks.export(_api_name, _value)
