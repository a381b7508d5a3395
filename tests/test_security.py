"""Issue 21: a cluster that checks who calls it. Real ``flowrt server`` processes on
127.0.0.1 run with a cluster token, an admin token and TLS (grpc) or CURVE (zmq); clients
without the token, with a wrong one, with a certificate of another CA or a CURVE key the
servers do not know are refused with the right error class, and the servers keep
serving a good client, which trains. Every wait is bounded; every process is stopped by
its pid at the end."""
from __future__ import annotations

import importlib.util
import os
import stat
import time

import numpy as np
import pytest

import flowrt as tf
import flowrt.testing as ft
from flowrt import errors
from flowrt.distributed import security
from flowrt.distributed.security import SecurityConfig
from flowrt.plugin.runtime import default_runtime
from flowrt.proto import service_pb2 as pb

HAVE_CRYPTO = importlib.util.find_spec("cryptography") is not None
NO_CRYPTO = "TLS needs certificates: the `cryptography` package (pip install " \
    "'flowrt[security]') is not installed"
PROTOCOLS = [pytest.param("grpc", marks=pytest.mark.skipif(not HAVE_CRYPTO,
                                                           reason=NO_CRYPTO)), "zmq"]
#: how long a refusal may take (a refused client must not hang)
REFUSED_WITHIN = 6.0


def _keys(d, tls=HAVE_CRYPTO):
    security.make_dev_keys(str(d), tls=tls)
    return str(d)


def _server_args(protocol, d):
    args = ["--token-file", f"{d}/token", "--admin-token-file", f"{d}/admin-token"]
    if protocol == "grpc":
        return args + ["--tls-cert", f"{d}/server.pem", "--tls-key", f"{d}/server.key",
                       "--tls-ca", f"{d}/ca.pem"]
    return args + ["--curve-secret-key", f"{d}/curve/server.key_secret",
                   "--curve-public-keys", f"{d}/curve/clients"]


def _client(protocol, d, token_name="token", other=None, **kw):
    """A client's config: the token file ``token_name`` of ``d`` (None: none) and the
    transport credentials of ``d``, or the client credentials of ``other`` (the servers'
    CA or key still from ``d``)."""
    c = other or d
    if token_name is not None:
        kw["token_file"] = f"{d}/{token_name}"
    if protocol == "grpc":
        return SecurityConfig(tls_cert=f"{c}/client.pem", tls_key=f"{c}/client.key",
                              tls_ca=f"{d}/ca.pem", **kw)
    return SecurityConfig(curve_secret_key=f"{c}/curve/client.key_secret",
                          curve_server_key=f"{d}/curve/server.key", **kw)


@pytest.fixture(scope="module", params=PROTOCOLS)
def cluster(request, tmp_path_factory):
    """A ps and a worker with every security option on, for the module."""
    protocol = request.param
    d = _keys(tmp_path_factory.mktemp(f"keys-{protocol}"))
    addrs = ft.cluster_addresses(protocol, {"ps": 1, "worker": 1})
    procs = ft.start_server_processes(addrs, protocol, health_check_period=0.5,
                                      extra_args=_server_args(protocol, d))
    yield protocol, d, procs
    for p in procs:
        p.stop()


@pytest.fixture
def as_client():
    """Make a config the process's default (what ``tf.Session`` uses) for one test."""
    yield lambda cfg: security.set_default(cfg)
    security.set_default(None, explicit=False)


def _worker(protocol, procs, cfg):
    return default_runtime().transport(protocol).worker_client(procs[1].address,
                                                               security=cfg)


def _train(target, steps=8):
    g = tf.Graph()
    with g.as_default():
        with tf.device("/job:ps/task:0"):
            w = tf.Variable(0.0, name="w")
        with tf.device("/job:worker/task:0"):
            loss = tf.square(w - 3.0)
            step = tf.train.GradientDescentOptimizer(0.25).minimize(loss)
    with tf.Session(target, graph=g,
                    config=tf.ConfigProto(operation_timeout_in_ms=20000)) as s:
        s.run(w.initializer)
        losses = [s.run([step, loss])[1] for _ in range(steps)]
        return losses, s.run(w)


def _refused(fn):
    t0 = time.monotonic()
    with pytest.raises(errors.OpError) as e:
        fn()
    assert time.monotonic() - t0 < REFUSED_WITHIN
    return e.value


def test_servers_say_what_protects_them(cluster):
    protocol, _, procs = cluster
    want = "cluster token, admin token, " + ("TLS" if protocol == "grpc" else "CURVE")
    for p in procs:
        deadline = time.monotonic() + 10.0  # printed just after the serving line
        while "security:" not in p.output and time.monotonic() < deadline:
            time.sleep(0.05)
        assert f"security: {want}" in p.output, p.output


def test_a_good_client_trains(cluster, as_client):
    protocol, d, procs = cluster
    as_client(_client(protocol, d))
    losses, w = _train(procs[1].target)
    assert losses[-1] < losses[0] / 10
    assert abs(w - 3.0) < 0.05


def test_clients_without_the_right_credentials_are_refused(cluster, tmp_path, as_client):
    protocol, d, procs = cluster
    other = _keys(tmp_path / "other")  # another CA, other CURVE keys
    cases = {
        "plain": None,
        "no token": _client(protocol, d, token_name=None),
        "wrong token": _client(protocol, d, token_name=None, token=b"0" * 64),
        "other CA / unknown CURVE key": _client(protocol, d, other=other),
    }
    if protocol == "zmq":  # the client knows a wrong server key
        cases["wrong server key"] = SecurityConfig(
            token_file=f"{d}/token", curve_secret_key=f"{d}/curve/client.key_secret",
            curve_server_key=f"{other}/curve/server.key")
    for name, cfg in cases.items():
        c = _worker(protocol, procs, cfg)
        try:
            err = _refused(lambda: c.get_status(timeout=3.0))
        finally:
            c.close()
        if name in ("no token", "wrong token"):
            assert isinstance(err, errors.UnauthenticatedError), (name, err)
            assert "/job:worker/task:0" in err.message
            assert ("no token" if name == "no token" else "wrong token") in err.message
        else:  # refused by TLS or CURVE, before any request is read
            assert isinstance(err, (errors.UnauthenticatedError, errors.UnavailableError,
                                    errors.DeadlineExceededError)), (name, err)
            assert procs[1].address in err.message or "refused" in err.message, err
    # the servers still serve a good client
    good = _worker(protocol, procs, _client(protocol, d))
    assert good.get_status(timeout=5.0).job == "worker"
    as_client(_client(protocol, d))
    assert abs(_train(procs[1].target, steps=4)[1] - 3.0) < 1.0


def test_a_raw_register_graph_without_the_token_is_refused(cluster):
    protocol, d, procs = cluster
    c = _worker(protocol, procs, _client(protocol, d, token_name=None))
    try:
        err = _refused(lambda: c.call("Worker/RegisterGraph", pb.RegisterGraphRequest(
            session_handle="intruder", n_fetches=0), pb.RegisterGraphResponse, timeout=5.0))
        assert isinstance(err, errors.UnauthenticatedError)
        assert "Worker/RegisterGraph refused" in err.message
        err = _refused(lambda: c.call("Worker/RunGraph", pb.RunGraphRequest(
            graph_handle="g1", step_id=1), pb.RunGraphResponse, timeout=5.0))
        assert isinstance(err, errors.UnauthenticatedError)
    finally:
        c.close()


def test_resets_need_the_admin_token(cluster, as_client):
    protocol, d, procs = cluster
    member = _client(protocol, d)
    c = _worker(protocol, procs, member)
    try:
        err = _refused(lambda: c.reset())
        assert isinstance(err, errors.PermissionDeniedError)
        assert "Worker/Reset" in err.message and "admin token" in err.message
    finally:
        c.close()
    as_client(member)
    err = _refused(lambda: tf.Session.reset(procs[1].target))
    assert isinstance(err, errors.PermissionDeniedError)
    as_client(_client(protocol, d, token_name=None, admin_token_file=f"{d}/admin-token"))
    tf.Session.reset(procs[1].target)  # the chief may


def test_shutdown_cluster_needs_the_admin_token(cluster):
    """Last of the module for its cluster: the servers exit."""
    protocol, d, procs = cluster
    err = _refused(lambda: tf.train.shutdown_cluster(procs[1].target,
                                                     security=_client(protocol, d)))
    assert isinstance(err, errors.PermissionDeniedError)
    assert "Master/Shutdown" in err.message
    good = _worker(protocol, procs, _client(protocol, d))
    assert good.get_status(timeout=5.0).job == "worker"  # still serving
    admin = _client(protocol, d, token_name=None, admin_token_file=f"{d}/admin-token")
    tf.train.shutdown_cluster(procs[1].target, reason="done", security=admin)
    for p in procs:
        assert p.wait(15.0) == 0, p.output
        assert "stopped (done)" in p.output


# -- configuration ----------------------------------------------------------------------
def test_keys_are_private_and_configs_name_bad_files(tmp_path):
    d = _keys(tmp_path / "k", tls=False)
    for name in ("token", "admin-token", "curve/server.key_secret",
                 "curve/client.key_secret"):
        assert stat.S_IMODE(os.stat(f"{d}/{name}").st_mode) == 0o600, name
    assert len(open(f"{d}/token").read().strip()) == 64
    with pytest.raises(ValueError, match="missing.*token-nope|token-nope"):
        SecurityConfig(token_file=f"{d}/token-nope")
    with pytest.raises(ValueError, match="tls_key, tls_ca missing"):
        SecurityConfig(tls_cert=f"{d}/token")
    with pytest.raises(ValueError, match="no secret key"):
        SecurityConfig(curve_secret_key=f"{d}/curve/server.key")
    cfg = SecurityConfig.from_env({"FLOWRT_TOKEN_FILE": f"{d}/token",
                                   "FLOWRT_CURVE_SECRET_KEY":
                                   f"{d}/curve/server.key_secret"})
    assert cfg.token == open(f"{d}/token", "rb").read().strip() and cfg.curve
    assert cfg.curve_server == cfg.curve_public  # a server calls its peers with its key
    assert SecurityConfig.from_env({}) is None


def test_token_checks_are_exact():
    cfg = SecurityConfig(token=b"m" * 32, admin_token=b"a" * 32)
    cfg.check("Worker/RunGraph", b"m" * 32, "here")
    cfg.check("Worker/RunGraph", b"a" * 32, "here")  # the admin is a member too
    cfg.check("Master/Shutdown", b"a" * 32, "here")
    with pytest.raises(errors.UnauthenticatedError, match="wrong token"):
        cfg.check("Worker/RunGraph", b"m" * 31, "here")
    with pytest.raises(errors.PermissionDeniedError):
        cfg.check("Master/Reset", b"m" * 32, "here")
    with pytest.raises(errors.UnauthenticatedError, match="no token"):
        cfg.check("Master/Shutdown", b"", "here")
    assert cfg.token_for("Master/Shutdown") == b"a" * 32
    assert cfg.token_for("Worker/RunGraph") == b"m" * 32


def test_keys_without_cryptography_name_the_extra(tmp_path, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "cryptography", None)
    with pytest.raises(RuntimeError, match=r"flowrt\[security\]"):
        security.make_dev_keys(str(tmp_path), curve=False)
