"""The tests a flowrt plugin package ships: the conformance kit on each of its plugins,
plus values against a reference.

Run with ``pytest`` after ``pip install .`` (the plugins must be installed: flowrt finds
them through their entry points, exactly as users' programs will).
"""
from __future__ import annotations

import numpy as np
import pytest

import flowrt as tf
import flowrt.testing


@pytest.mark.parametrize("name", ["example", "example_emu", "example_unix"])
def test_plugin_conforms(name: str) -> None:
    report = flowrt.testing.check_plugin(name)  # the entry-point name
    assert report.subject == f"plugin {name!r}"


def test_plugins_are_loaded_from_their_entry_points() -> None:
    rt = tf.default_runtime()
    rt.op_defs
    for name in ("example", "example_emu", "example_unix"):
        assert rt.plugins[name].status == "loaded"


def test_values_on_cpu_and_on_the_example_device() -> None:
    data = np.linspace(-2, 2, 5, dtype=np.float32)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None])
        on_cpu = tf.example_square_plus_one(x)
        with tf.device("/device:EXAMPLE:0"):
            on_example = tf.example_square_plus_one(x)
    with tf.Session(graph=g) as sess:
        a, b = sess.run([on_cpu, on_example], {x: data})
    np.testing.assert_allclose(a, data * data + 1)
    np.testing.assert_allclose(b, data * data + 1)


def test_values_on_emu_over_the_unix_transport(tmp_path) -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [2, 3])
        with tf.device("/device:EMU:0"):
            y = tf.example_square_plus_one(tf.matmul(x, x, transpose_b=True) - 1.0)
    emu = tf.ConfigProto(device_count={"EMU": 1})
    server = tf.train.Server({"local": [str(tmp_path / "emu.sock")]}, protocol="unix",
                             config=emu)
    try:
        with tf.Session(server.target, graph=g, config=emu) as sess:
            got = sess.run(y, {x: a})
    finally:
        server.stop()
    want = (a @ a.T - 1) ** 2 + 1
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got.dtype == np.float32
