"""Publishes ``tf.distribute.cluster_resolver`` from :mod:`flowrt.modeling.cluster_resolver`:
TF_CONFIG, Slurm, Kubernetes, simple and union resolvers."""
from __future__ import annotations

from flowrt.modeling import cluster_resolver as _cluster_resolver

from ._common import ks

for _api_name, _value in _cluster_resolver.API.items():
    ks.export(_api_name, _value)
