"""The ``tf.train`` server API: ``Server`` and the cluster shutdown call."""
from __future__ import annotations

from flowrt import server as _server

from ._common import ks

for _name, _value in (
        ("train.Server", _server.Server),
        ("train.shutdown_cluster", _server.shutdown_cluster),
        ("distribute.Server", _server.Server),
):
    ks.export(_name, _value)
