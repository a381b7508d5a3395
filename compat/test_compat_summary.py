"""``tf.summary`` and event files under TensorFlow and flowrt (helper R).

The same program runs under both and writes an event file; each file is read back by
both readers (TF's ``summary_iterator`` and flowrt's), and what they hold is compared:
the events' kinds and steps, each value's tag, its simple value, histogram (every field,
exactly), image (size and decoded pixels), audio (the WAV bytes, exactly), tensor
(dtype, shape, values) and plugin name. Wall times differ, and PNG bytes may (only the
pixels must agree).

TF 2.x's ``compat.v1`` adds ``source_metadata`` to the first event, which TF 1.15 does
not write; it is ignored.
"""
from __future__ import annotations

import glob
import io
import os
import tempfile

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from compat_harness import flowrt_module, tf_module

IMPLS = ("tf", "flowrt")


def _mod(impl: str):
    return tf_module() if impl == "tf" else flowrt_module()


def _write(impl: str, program, steps: int = 3) -> str:
    """Run ``program(tf)`` (it returns (fetch, feed_fn)) under ``impl`` for ``steps`` steps,
    writing each result to a fresh logdir; returns the event file's path."""
    tf = _mod(impl)
    logdir = tempfile.mkdtemp(prefix=f"flowrt_compat_summary_{impl}_")
    with tf.Graph().as_default():
        fetch, feed_fn = program(tf)
        with tf.Session() as sess:
            w = tf.summary.FileWriter(logdir, sess.graph)
            for step in range(steps):
                w.add_summary(sess.run(fetch, feed_fn(step) if feed_fn else None), step)
            w.add_session_log(tf.SessionLog(status=tf.SessionLog.STOP, msg="done"), steps)
            w.close()
    files = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    assert len(files) == 1, files
    return files[0]


def _pixels(png: bytes) -> list:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png))).tolist()


def _tensor(tf, proto) -> tuple:
    a = tf.make_ndarray(proto)
    return (int(proto.dtype), list(a.shape), a.tolist())


def _value(tf, v) -> tuple:
    kind = v.WhichOneof("value")
    plugin = v.metadata.plugin_data.plugin_name if v.HasField("metadata") else None
    if kind == "simple_value":
        body = v.simple_value
    elif kind == "histo":
        h = v.histo
        body = (h.min, h.max, h.num, h.sum, h.sum_squares, list(h.bucket_limit),
                list(h.bucket))
    elif kind == "image":
        i = v.image
        body = (i.height, i.width, i.colorspace, _pixels(i.encoded_image_string))
    elif kind == "audio":
        a = v.audio
        body = (a.sample_rate, a.num_channels, a.length_frames, a.content_type,
                a.encoded_audio_string)
    elif kind == "tensor":
        body = _tensor(tf, v.tensor)
    else:
        body = None
    return (v.tag, kind, plugin, body)


def _events(reader: str, path: str) -> list:
    """The comparable content of the event file ``path`` read by ``reader``."""
    tf = _mod(reader)
    out = []
    for e in tf.train.summary_iterator(path):
        what = e.WhichOneof("what")
        if what == "summary":
            body = [_value(tf, v) for v in e.summary.value]
        elif what == "file_version":
            body = e.file_version
        elif what == "session_log":
            body = (e.session_log.status, e.session_log.msg)
        elif what == "graph_def":
            g = tf.GraphDef.FromString(e.graph_def)
            body = sorted(n.op for n in g.node)
        else:
            body = None
        out.append((e.step, what, body))
    return out


def _compare(program, steps: int = 3) -> None:
    paths = {impl: _write(impl, program, steps) for impl in IMPLS}
    for impl, path in paths.items():
        name = os.path.basename(path)
        assert name.startswith("events.out.tfevents.") and name.split(".")[3].isdigit(), name
    for reader in IMPLS:
        got = {impl: _events(reader, paths[impl]) for impl in IMPLS}
        assert got["flowrt"] == got["tf"], f"read by {reader}"


X = np.array([[-3.5, 0.0, 1.25, 7.0], [0.5, -0.25, 2.0, 1e-13]], np.float32)


def _feed(x):
    return lambda step: {x: X * (step + 1)}


def test_scalar_histogram_family_scopes_merge_all() -> None:
    def program(tf):
        x = tf.placeholder(tf.float32, [None, 4], name="x")
        with tf.name_scope("train"):
            loss = tf.reduce_mean(tf.square(x))
            tf.summary.scalar("loss", loss)
            tf.summary.scalar("loss", loss)  # a second one: a unique scope, loss_1
            tf.summary.scalar("lr", 0.5, family="opt")
            tf.summary.histogram("acts", x)
            tf.summary.histogram("ints", tf.constant([1, 2, 2, 900000], tf.int64),
                                 family="fam")
        tf.summary.scalar("bad name:*", tf.reduce_sum(x))
        tf.summary.histogram("empty", tf.zeros([0]))
        tf.summary.scalar("other", loss, collections=["mine"])
        return tf.summary.merge_all(), _feed(x)

    _compare(program)


def test_images_audio_text_tensor() -> None:
    def program(tf):
        x = tf.placeholder(tf.float32, [None, 4], name="x")
        img = tf.reshape(tf.concat([x, x, x], 1), [-1, 2, 2, 3])
        tf.summary.image("float_rgb", img, max_outputs=2)
        tf.summary.image("pos_gray", tf.reshape(tf.abs(x), [-1, 2, 2, 1]), max_outputs=1)
        tf.summary.image("u8", tf.cast(tf.reshape(tf.abs(x) * 30, [-1, 1, 4, 1]), tf.uint8))
        tf.summary.image("half_rgba", tf.cast(tf.reshape(tf.tile(x, [1, 4]), [-1, 2, 2, 4]),
                                              tf.float16), max_outputs=1)
        tf.summary.image("double_nan", tf.reshape(
            tf.cast(x, tf.float64) / tf.constant([1., 0., 1., 1.], tf.float64),
            [-1, 2, 2, 1]))
        tf.summary.audio("clip", x / 8.0, 8000, max_outputs=3)
        tf.summary.audio("stereo", tf.reshape(x, [-1, 2, 2]) / 4.0, 22050.4, max_outputs=1)
        tf.summary.text("note", tf.constant(["hello", "wörld"]))
        tf.summary.tensor_summary("raw", x, summary_description="desc", display_name="Raw")
        tf.summary.tensor_summary("ints", tf.constant([[1, 2], [3, 4]], tf.int64))
        return tf.summary.merge_all(), _feed(x)

    _compare(program, steps=2)


def test_merge_explicit_and_graph_events() -> None:
    def program(tf):
        a = tf.summary.scalar("a", tf.constant(1.5), collections=[])
        b = tf.summary.histogram("b", tf.constant([1.0, 2.0, 3.0]), collections=[])
        m = tf.summary.merge([a, b], name="mine")
        return tf.summary.merge([m, tf.summary.scalar("c", 2.0)]), None

    _compare(program, steps=2)


@pytest.mark.parametrize("impl", IMPLS)
def test_op_names_and_tags(impl: str) -> None:
    tf = _mod(impl)
    with tf.Graph().as_default():
        with tf.name_scope("outer"):
            s = tf.summary.scalar("loss", 1.0, family="fam")
            h = tf.summary.histogram(None, [1.0])
        m = tf.summary.merge([s, h])
        m2 = tf.summary.merge([s], name="named")
        got = [s.name, h.name, m.name, m2.name, s.op.type, h.op.type, m.op.type,
               len(tf.get_collection(tf.GraphKeys.SUMMARIES))]
    assert got == ["outer/fam/loss:0", "outer/HistogramSummary:0", "Merge/MergeSummary:0",
                   "named/named:0", "ScalarSummary", "HistogramSummary", "MergeSummary", 2]


def _run_error(impl: str, build) -> tuple:
    tf = _mod(impl)
    with tf.Graph().as_default():
        t = build(tf)
        with tf.Session() as sess:
            try:
                sess.run(t)
            except Exception as e:  # the class and the message's kernel line are compared
                line = [ln for ln in str(e).splitlines() if " for: " in ln][0]
                return type(e).__name__, line.split()[0], line.split(" for: ")[1]
    return None, None, None


@pytest.mark.parametrize("case", ["nan", "inf", "nan_after_inf"])
def test_histogram_non_finite_errors(case: str) -> None:
    values = {"nan": [1.0, np.nan], "inf": [1.0, -np.inf], "nan_after_inf": [np.inf, np.nan]}
    got = {impl: _run_error(impl, lambda tf: tf.summary.histogram(
        "h", tf.constant(values[case]))) for impl in IMPLS}
    # TF 1.15 says "Infinity in summary histogram for: h"; TF 2.x's kernel "Infinity in
    # Histogram for: h": the class, the first word and the node are compared
    assert got["flowrt"] == got["tf"]


@pytest.mark.parametrize("impl", IMPLS)
def test_duplicate_tag_in_merge(impl: str) -> None:
    tf = _mod(impl)
    with tf.Graph().as_default():
        a = tf.summary.scalar("a", 1.0)
        m = tf.summary.merge([a, a])
        with tf.Session() as sess:
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match="Duplicate tag a found in summary inputs"):
                sess.run(m)


@given(st.lists(st.floats(-1e6, 1e6, width=32, allow_subnormal=False), min_size=0,
                max_size=40))
def test_histogram_values_match_exactly(values: list) -> None:
    got = {}
    for impl in IMPLS:
        tf = _mod(impl)
        with tf.Graph().as_default():
            h = tf.summary.histogram("h", tf.constant(np.array(values, np.float32)))
            with tf.Session() as sess:
                s = tf.Summary.FromString(sess.run(h))
        got[impl] = _value(tf, s.value[0])
    assert got["flowrt"] == got["tf"]


@given(st.lists(st.floats(-2.0, 2.0, width=32), min_size=1, max_size=30),
       st.sampled_from([1, 2]), st.floats(1.0, 48000.0))
def test_audio_bytes_match_exactly(values: list, channels: int, rate: float) -> None:
    n = len(values) // channels * channels
    if n == 0:
        return
    arr = np.array(values[:n], np.float32).reshape(1, -1, channels)
    got = {}
    for impl in IMPLS:
        tf = _mod(impl)
        with tf.Graph().as_default():
            a = tf.summary.audio("a", tf.constant(arr), rate)
            with tf.Session() as sess:
                s = tf.Summary.FromString(sess.run(a))
        got[impl] = _value(tf, s.value[0])
    assert got["flowrt"] == got["tf"]


@given(st.lists(st.floats(-100.0, 100.0, width=32), min_size=12, max_size=12),
       st.sampled_from(["float32", "float64", "float16"]))
def test_image_pixels_match(values: list, dtype: str) -> None:
    arr = np.array(values, dtype).reshape(1, 2, 2, 3)
    got = {}
    for impl in IMPLS:
        tf = _mod(impl)
        with tf.Graph().as_default():
            i = tf.summary.image("i", tf.constant(arr))
            with tf.Session() as sess:
                s = tf.Summary.FromString(sess.run(i))
        got[impl] = _value(tf, s.value[0])
    assert got["flowrt"] == got["tf"]


@pytest.mark.parametrize("writer", IMPLS)
def test_truncated_file_is_data_loss_for_both_readers(writer: str) -> None:
    def program(tf):
        return tf.summary.scalar("s", tf.constant(3.0)), None

    path = _write(writer, program, steps=2)
    data = open(path, "rb").read()
    cut = path + ".cut"
    with open(cut, "wb") as f:
        f.write(data[:-5])
    for reader in IMPLS:
        tf = _mod(reader)
        seen = []
        with pytest.raises(tf.errors.DataLossError, match="truncated record at"):
            for e in tf.train.summary_iterator(cut):
                seen.append(e.WhichOneof("what"))
        assert seen[0] == "file_version"
