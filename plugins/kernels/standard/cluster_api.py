"""The ``tf.train`` cluster API: ClusterSpec, ClusterDef/JobDef and the device setter."""
from __future__ import annotations

from flowrt import cluster as _cluster
from flowrt import device_setter as _device_setter
from flowrt.proto import cluster_pb2

from ._common import ks

for _name, _value in (
        ("train.ClusterSpec", _cluster.ClusterSpec),
        ("train.ClusterDef", cluster_pb2.ClusterDef),
        ("train.JobDef", cluster_pb2.JobDef),
        ("train.replica_device_setter", _device_setter.replica_device_setter),
        ("train.GreedyLoadBalancingStrategy", _device_setter.GreedyLoadBalancingStrategy),
        ("train.byte_size_load_fn", _device_setter.byte_size_load_fn),
):
    ks.export(_name, _value)
