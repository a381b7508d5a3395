"""``grpcs://``: grpc with TLS required (issue 21). A real ``flowrt server`` process
on 127.0.0.1 serves grpc with mutual TLS; a client reaches it as ``grpcs://`` with the
cluster's certificates, a ``grpcs://`` target without TLS material fails at once with
an InvalidArgumentError naming what is missing, and a plain ``grpc://`` client gets the
transport's UnavailableError with its hint. In-process servers take ``protocol="grpcs"``
(and a resolver's ``rpc_layer``) the same way. Every wait is bounded."""
from __future__ import annotations

import importlib.util
import time

import numpy as np
import pytest

import flowrt as tf
import flowrt.testing as ft
from flowrt import errors
from flowrt.distributed import security
from flowrt.distributed.security import SecurityConfig

pytestmark = [pytest.mark.timeout(120), pytest.mark.skipif(
    importlib.util.find_spec("cryptography") is None,
    reason="TLS needs certificates: the `cryptography` package (pip install "
           "'flowrt[security]') is not installed")]


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    d = tmp_path_factory.mktemp("grpcs-keys")
    security.make_dev_keys(str(d))
    return str(d)


def _client(d: str) -> SecurityConfig:
    return SecurityConfig(token_file=f"{d}/token", tls_cert=f"{d}/client.pem",
                          tls_key=f"{d}/client.key", tls_ca=f"{d}/ca.pem")


@pytest.fixture(scope="module")
def tls_server(keys):
    d = keys
    p = ft.ServerProcess(ft.cluster_addresses("grpc", {"worker": 1}), "worker", 0, "grpc",
                         timeout=60.0, extra_args=[
                             "--token-file", f"{d}/token", "--tls-cert", f"{d}/server.pem",
                             "--tls-key", f"{d}/server.key", "--tls-ca", f"{d}/ca.pem"])
    try:
        yield p
    finally:
        p.stop()


@pytest.fixture
def as_client(monkeypatch):
    """Make a config the process's default (what ``tf.Session`` uses) for one test."""
    for var in security.ENV.values():
        monkeypatch.delenv(var, raising=False)
    yield lambda cfg: security.set_default(cfg)
    security.set_default(None, explicit=False)


def _double(target: str, config=None):  # type: ignore[no-untyped-def]
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [3])
        y = x * 2.0
    with tf.Session(target, graph=g, config=config) as s:
        return s.run(y, {x: [1.0, 2.0, 3.0]})


def test_a_tls_server_is_reached_as_grpcs(tls_server, keys, as_client):
    as_client(_client(keys))
    target = "grpcs://" + tls_server.address
    np.testing.assert_allclose(_double(target), [2.0, 4.0, 6.0])
    tf.Session.reset(target)  # every use of a target takes the scheme


def test_grpcs_without_tls_material_says_what_is_missing(tls_server, keys, as_client,
                                                         monkeypatch):
    target = "grpcs://" + tls_server.address
    as_client(SecurityConfig(token_file=f"{keys}/token"))  # a token, no certificate
    t0 = time.monotonic()
    with pytest.raises(errors.InvalidArgumentError) as e:
        _double(target)
    assert time.monotonic() - t0 < 2.0
    msg = e.value.message
    assert target in msg and "without TLS" in msg and "FLOWRT_TLS_CERT" in msg, msg
    as_client(None)
    with pytest.raises(errors.InvalidArgumentError, match="no security config"):
        _double(target)
    # variables naming only part of it
    security.set_default(None, explicit=False)
    monkeypatch.setenv("FLOWRT_TLS_CERT", f"{keys}/client.pem")
    with pytest.raises(errors.InvalidArgumentError) as e:
        _double(target)
    assert "incomplete" in e.value.message and "tls_key, tls_ca missing" in e.value.message
    with pytest.raises(errors.InvalidArgumentError):
        tf.train.shutdown_cluster(target, security=None)


def test_plain_grpc_to_the_tls_server_gets_the_hint(tls_server, keys, as_client):
    as_client(SecurityConfig(token_file=f"{keys}/token"))
    t0 = time.monotonic()
    with pytest.raises(errors.UnavailableError) as e:
        _double("grpc://" + tls_server.address,
                tf.ConfigProto(operation_timeout_in_ms=5000))
    assert time.monotonic() - t0 < 8.0
    assert tls_server.address in e.value.message, e.value.message
    assert "give this client the cluster's certificates" in e.value.message
    as_client(_client(keys))  # the server still serves a good client
    np.testing.assert_allclose(_double("grpcs://" + tls_server.address), [2.0, 4.0, 6.0])


def test_in_process_servers_take_grpcs(keys, as_client):
    cfg = SecurityConfig(tls_cert=f"{keys}/server.pem", tls_key=f"{keys}/server.key",
                         tls_ca=f"{keys}/ca.pem")
    cluster = {"worker": [f"127.0.0.1:{ft.free_port()}"]}
    with pytest.raises(errors.InvalidArgumentError, match="grpcs://127.0.0.1"):
        tf.train.Server(cluster, protocol="grpcs", security=None, start=False)
    server = tf.train.Server(cluster, protocol="grpcs", security=cfg)
    try:
        assert server.target.startswith("grpcs://127.0.0.1:") and server.security is cfg
        as_client(SecurityConfig(tls_cert=f"{keys}/client.pem",
                                 tls_key=f"{keys}/client.key", tls_ca=f"{keys}/ca.pem"))
        np.testing.assert_allclose(_double(server.target), [2.0, 4.0, 6.0])
    finally:
        server.stop()
    # a resolver's rpc_layer names the protocol too
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec({"worker": [f"127.0.0.1:{ft.free_port()}"]}),
        task_type="worker", task_id=0, rpc_layer="grpcs")
    server = tf.train.Server(resolver, security=cfg, start=False)
    assert server.target.startswith("grpcs://") and server.transport.scheme == "grpc"
    server.stop()
