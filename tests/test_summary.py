"""tf.summary ops: the Summary protos they make (values, tags, encodings) and their
errors. Event files are in test_event_files.py."""
from __future__ import annotations

import io
import sys
import wave

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flowrt as tf
from flowrt import errors
from flowrt.graph import apply_op

DBL_MAX = sys.float_info.max


def _run(t, feed=None):
    with tf.Session() as sess:
        return tf.Summary.FromString(sess.run(t, feed))


@pytest.fixture(autouse=True)
def _graph():
    with tf.Graph().as_default() as g:
        yield g


def _limits() -> np.ndarray:
    pos = []
    v = 1e-12
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    pos.append(DBL_MAX)
    return np.array([-x for x in reversed(pos)] + [0.0] + pos)


LIMITS = _limits()


# -- scalar -------------------------------------------------------------------------------
def test_scalar_value_tag_and_collection():
    x = tf.placeholder(tf.float32, [])
    with tf.name_scope("train"):
        s = tf.summary.scalar("loss", x * 2)
        s2 = tf.summary.scalar("loss", tf.constant(7, tf.int64))
    assert s.op.type == "ScalarSummary" and s.name == "train/loss:0"
    assert s2.name == "train/loss_1:0"
    assert tf.get_collection(tf.GraphKeys.SUMMARIES) == [s, s2]
    out = _run(s, {x: 1.25})
    assert [(v.tag, v.simple_value) for v in out.value] == [("train/loss", 2.5)]
    assert _run(s2).value[0].simple_value == 7.0
    assert _run(s2).value[0].tag == "train/loss_1"


def test_family_puts_the_family_first():
    with tf.name_scope("outer"):
        s = tf.summary.scalar("lr", 0.5, family="opt")
    assert s.name == "outer/opt/lr:0"
    assert _run(s).value[0].tag == "opt/outer/opt/lr"


def test_illegal_characters_are_replaced():
    s = tf.summary.scalar("/bad name:*", 1.0)
    assert s.name == "bad_name__:0"
    assert _run(s).value[0].tag == "bad_name__"


def test_collections_argument():
    a = tf.summary.scalar("a", 1.0, collections=["mine"])
    b = tf.summary.scalar("b", 1.0, collections=[])
    assert tf.get_collection(tf.GraphKeys.SUMMARIES) == []
    assert tf.get_collection("mine") == [a]
    assert b not in tf.get_collection("mine")
    assert tf.summary.merge_all() is None
    m = tf.summary.merge_all("mine")
    assert [v.tag for v in _run(m).value] == ["a"]


def test_scalar_summary_op_with_tag_vector():
    s = apply_op("ScalarSummary", tags=["a", "b"], values=np.array([1.5, -2.0], np.float32))
    assert [(v.tag, v.simple_value) for v in _run(s).value] == [("a", 1.5), ("b", -2.0)]


def test_scalar_summary_shape_mismatch():
    s = apply_op("ScalarSummary", tags="a", values=np.array([1.0, 2.0], np.float32))
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"tags and values not the same shape: \[\] != \[2\] "
                             r"\(tag 'a'\)"):
        _run(s)


# -- histogram ----------------------------------------------------------------------------
def test_histogram_fields():
    h = tf.summary.histogram("h", tf.constant([1.0, 2.0, 2.0, -3.0, 0.0]))
    assert h.op.type == "HistogramSummary"
    v = _run(h).value[0]
    assert v.tag == "h"
    p = v.histo
    assert (p.min, p.max, p.num, p.sum, p.sum_squares) == (-3.0, 2.0, 5.0, 2.0, 18.0)
    limits, counts = list(p.bucket_limit), list(p.bucket)
    assert sum(counts) == 5
    # every value counts in the first bucket whose limit is above it
    for x in (1.0, 2.0, -3.0, 0.0):
        i = int(np.searchsorted(LIMITS, x, side="right"))
        assert LIMITS[i] in limits and counts[limits.index(LIMITS[i])] >= 1
    # runs of empty buckets collapse to one entry at the run's last limit
    assert limits[0] == LIMITS[int(np.searchsorted(LIMITS, -3.0, side="right")) - 1]
    assert counts[0] == 0 and limits[-1] == DBL_MAX and counts[-1] == 0
    assert all(c > 0 or (i + 1 < len(counts) and counts[i + 1] > 0) or i == len(counts) - 1
               for i, c in enumerate(counts))


def test_histogram_of_nothing():
    p = _run(tf.summary.histogram("e", tf.zeros([0]))).value[0].histo
    assert (p.min, p.max, p.num, p.sum) == (DBL_MAX, -DBL_MAX, 0.0, 0.0)
    assert list(p.bucket_limit) == [DBL_MAX] and list(p.bucket) == [0.0]


def test_histogram_default_name_and_int_input():
    h = tf.summary.histogram(None, tf.constant([3, 3, 900000], tf.int32))
    assert h.name == "HistogramSummary:0"
    p = _run(h).value[0].histo
    assert (p.num, p.sum, p.max) == (3.0, 900006.0, 900000.0)


@pytest.mark.parametrize("values,word", [([1.0, np.nan], "Nan"), ([np.inf, 1.0], "Infinity"),
                                         ([-np.inf, np.nan], "Infinity")])
def test_histogram_non_finite(values, word):
    with tf.name_scope("s"):
        h = tf.summary.histogram("h", tf.constant(values))
    with pytest.raises(errors.InvalidArgumentError,
                       match=f"^{word} in summary histogram for: s/h\\n"):
        _run(h)


def _reference_histogram(v: np.ndarray) -> tuple:
    """The histogram by the definition: binary search per value, zero runs collapsed."""
    counts = np.zeros(len(LIMITS))
    for x in v:
        counts[min(int(np.searchsorted(LIMITS, x, side="right")), len(LIMITS) - 1)] += 1
    out_l, out_c, i = [], [], 0
    while i < len(counts):
        end, c = LIMITS[i], counts[i]
        i += 1
        if c <= 0:
            while i < len(counts) and counts[i] <= 0:
                end, c = LIMITS[i], counts[i]
                i += 1
        out_l.append(end)
        out_c.append(c)
    total = 0.0
    squares = 0.0
    with np.errstate(over="ignore"):
        for x in v:
            total += x
            squares += x * x
    return out_l, out_c, total, squares


_EDGES = st.sampled_from(LIMITS[1:-1].tolist()).flatmap(
    lambda x: st.sampled_from([x, float(np.nextafter(x, np.inf)),
                               float(np.nextafter(x, -np.inf))]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=64) | _EDGES,
                max_size=30))
def test_histogram_matches_the_definition(values):
    from plugins.kernels.standard.summary_ops import histogram_proto

    v = np.array(values, np.float64)
    p = histogram_proto(v)
    limits, counts, total, squares = _reference_histogram(v)
    assert list(p.bucket_limit) == limits and list(p.bucket) == counts
    if len(v):
        assert (p.min, p.max, p.num) == (v.min(), v.max(), len(v))
        assert p.sum == total or (np.isinf(total) and np.isinf(p.sum))
        assert p.sum_squares == squares or np.isinf(squares)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 3000), st.sampled_from([np.float32, np.float64]), st.integers(0, 2**31),
       st.floats(1e-6, 1e6))
def test_histogram_search_and_table_agree(n, dtype, seed, scale):
    """Up to _SEARCH_MAX values each value's bucket is found by binary search, beyond by
    the table lookup: both give the same proto for any input, zeros and large counts
    included."""
    from plugins.kernels.standard import summary_ops

    v = (np.random.RandomState(seed).standard_normal(n) * scale).astype(dtype)
    v[: n // 10] = 0.0
    saved = summary_ops._SEARCH_MAX
    try:
        summary_ops._SEARCH_MAX = 1 << 30
        searched = summary_ops.histogram_proto(v)
        summary_ops._SEARCH_MAX = -1
        table = summary_ops.histogram_proto(v)
    finally:
        summary_ops._SEARCH_MAX = saved
    assert searched.SerializeToString() == table.SerializeToString()
    assert sum(searched.bucket) == n


# -- image --------------------------------------------------------------------------------
def _pixels(png: bytes) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png)))


def test_image_uint8_unchanged_and_tags():
    rng = np.random.RandomState(0)
    img = rng.randint(0, 256, (3, 4, 5, 3)).astype(np.uint8)
    s = _run(tf.summary.image("pic", tf.constant(img), max_outputs=2))
    assert [v.tag for v in s.value] == ["pic/image/0", "pic/image/1"]
    for i, v in enumerate(s.value):
        assert (v.image.height, v.image.width, v.image.colorspace) == (4, 5, 3)
        assert v.image.encoded_image_string.startswith(b"\x89PNG\r\n\x1a\n")
        np.testing.assert_array_equal(_pixels(v.image.encoded_image_string), img[i])
    one = _run(tf.summary.image("one", tf.constant(img[:, :, :, :1]), max_outputs=1))
    assert [v.tag for v in one.value] == ["one/image"]
    np.testing.assert_array_equal(_pixels(one.value[0].image.encoded_image_string),
                                  img[0, :, :, 0])


def test_image_float_normalization():
    pos = np.array([0.0, 0.5, 1.0, 2.0], np.float32).reshape(1, 2, 2, 1)
    neg = np.array([-2.0, -1.0, 0.0, 1.0], np.float32).reshape(1, 2, 2, 1)
    bad = np.array([[1.0] * 3, [np.nan, 0, 0], [2.0] * 3, [np.inf, 1, 1]],
                   np.float32).reshape(1, 2, 2, 3)
    p = _run(tf.summary.image("p", pos)).value[0].image
    assert _pixels(p.encoded_image_string).tolist() == [[0, 63], [127, 255]]
    n = _run(tf.summary.image("n", neg)).value[0].image
    # shifted so 0 -> 128, scaled by 127 / max|v|, truncated
    assert _pixels(n.encoded_image_string).tolist() == [[1, 64], [128, 191]]
    b = _pixels(_run(tf.summary.image("b", bad)).value[0].image.encoded_image_string)
    # non-finite pixels take bad_color (red); the rest scale by 255 / 2
    assert b.reshape(4, 3).tolist() == [[127] * 3, [255, 0, 0], [255] * 3, [255, 0, 0]]


def test_image_rank_and_depth_errors():
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"Tensor must be 4-D with last dim 1, 3, or 4, not \[1,2,2,2\]"):
        _run(tf.summary.image("i", tf.zeros([1, 2, 2, 2])))
    rank3 = apply_op("ImageSummary", tag="j", tensor=np.zeros((2, 2, 3), np.float32))
    with pytest.raises(errors.InvalidArgumentError, match=r"not \[2,2,3\]"):
        _run(rank3)


# -- audio --------------------------------------------------------------------------------
def _wav(b: bytes) -> tuple:
    with wave.open(io.BytesIO(b)) as w:
        return (w.getnchannels(), w.getframerate(), w.getsampwidth(),
                np.frombuffer(w.readframes(w.getnframes()), "<i2"))


def test_audio_wav_and_tags():
    x = np.array([[0.0, 0.5, -0.5, 1.0, -1.0, 2.0], [0.25] * 6], np.float32)
    s = _run(tf.summary.audio("snd", x, 8000, max_outputs=3))
    assert [v.tag for v in s.value] == ["snd/audio/0", "snd/audio/1"]
    a = s.value[0].audio
    assert (a.sample_rate, a.num_channels, a.length_frames, a.content_type) == \
        (8000.0, 1, 6, "audio/wav")
    ch, rate, width, pcm = _wav(a.encoded_audio_string)
    assert (ch, rate, width) == (1, 8000, 2)
    assert pcm.tolist() == [0, 16384, -16384, 32767, -32768, 32767]


def test_audio_stereo_single_output_rounded_rate():
    x = np.arange(8, dtype=np.float32).reshape(1, 2, 4)[:, :, :2] / 16
    s = _run(tf.summary.audio("st", tf.constant(x), 22050.6, max_outputs=1))
    assert [v.tag for v in s.value] == ["st/audio"]
    a = s.value[0].audio
    assert (a.num_channels, a.length_frames) == (2, 2)
    assert abs(a.sample_rate - 22050.6) < 1e-2
    ch, rate, _, pcm = _wav(a.encoded_audio_string)
    assert (ch, rate) == (2, 22051)
    assert pcm.tolist() == [0, 2048, 8192, 10240]


def test_audio_errors():
    with pytest.raises(errors.InvalidArgumentError, match="sample_rate must be > 0"):
        _run(tf.summary.audio("a", tf.zeros([1, 4]), 0.0))
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"Tensor must be 3-D or 2-D, got: \[4\]"):
        _run(tf.summary.audio("b", tf.zeros([4]), 8000))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-3.0, 3.0, width=32), min_size=1, max_size=50))
def test_wav_samples_round_half_away_and_clip(values):
    from plugins.kernels.standard.summary_ops import encode_wav

    x = np.array(values, np.float32).reshape(-1, 1)
    _, _, _, pcm = _wav(encode_wav(x, 16000))
    want = []
    for v in values:
        y = float(np.float32(v)) * 32768.0
        r = np.floor(abs(y) + 0.5) * (1 if y >= 0 else -1)
        want.append(int(min(max(r, -32768), 32767)))
    assert pcm.tolist() == want


# -- text, tensor_summary -----------------------------------------------------------------
def test_text_summary():
    t = tf.summary.text("note", tf.constant(["hi", "wörld"]))
    assert t.op.type == "TensorSummaryV2"
    v = _run(t).value[0]
    assert v.tag == "note"
    assert v.metadata.plugin_data.plugin_name == "text"
    assert v.tensor.string_val == ["hi".encode(), "wörld".encode()]
    assert tf.make_ndarray(v.tensor).tolist() == ["hi".encode(), "wörld".encode()]
    with pytest.raises(ValueError, match="to have dtype string, got"):
        tf.summary.text("bad", tf.constant(1.0))


def test_tensor_summary_content_and_metadata():
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    t = tf.summary.tensor_summary("raw", x, summary_description="the raw",
                                  display_name="Raw", family="fam")
    v = _run(t).value[0]
    assert v.tag == "fam/fam/raw"
    assert (v.metadata.display_name, v.metadata.summary_description) == ("Raw", "the raw")
    assert v.tensor.tensor_content  # TF's AsProtoTensorContent
    np.testing.assert_array_equal(tf.make_ndarray(v.tensor), x)
    scalar = _run(tf.summary.tensor_summary("s", tf.constant(3, tf.int32))).value[0]
    assert tf.make_ndarray(scalar.tensor) == 3


# -- merge --------------------------------------------------------------------------------
def test_merge_union_names_and_collections():
    a = tf.summary.scalar("a", 1.0)
    b = tf.summary.histogram("b", [1.0, 2.0])
    m = tf.summary.merge([a, b])
    assert m.name == "Merge/MergeSummary:0"
    assert tf.summary.merge([a], name="mine").name == "mine/mine:0"
    m2 = tf.summary.merge([m, tf.summary.scalar("c", 2.0, collections=[])],
                          collections=["merged"])
    assert tf.get_collection("merged") == [m2]
    assert [(v.tag, v.WhichOneof("value")) for v in _run(m2).value] == \
        [("a", "simple_value"), ("b", "histo"), ("c", "simple_value")]
    assert [v.tag for v in _run(tf.summary.merge_all()).value] == ["a", "b"]
    assert tf.summary.merge_all(scope="b") is not None
    assert [v.tag for v in _run(tf.summary.merge_all(scope="b")).value] == ["b"]


def test_merge_duplicate_tag_and_garbage():
    a = tf.summary.scalar("a", 1.0)
    with pytest.raises(errors.InvalidArgumentError,
                       match="Duplicate tag a found in summary inputs"):
        _run(tf.summary.merge([a, a]))
    with pytest.raises(errors.InvalidArgumentError,
                       match="Could not parse one of the summary inputs"):
        _run(tf.summary.merge([a, tf.constant(b"\xff\xff")]))


def test_get_summary_description():
    node = tf.NodeDef(op="TensorSummary", name="t")
    node.attr["description"].s = b'{"type_hint": "image"}'
    assert tf.summary.get_summary_description(node).type_hint == "image"
    with pytest.raises(ValueError, match="Can't get_summary_description on Const"):
        tf.summary.get_summary_description(tf.NodeDef(op="Const"))


def test_tensor_summary_v1_op():
    t = apply_op("TensorSummary", tensor=np.array([1, 2], np.int32), name="old")
    v = _run(t).value[0]
    assert v.node_name == "old" and tf.make_ndarray(v.tensor).tolist() == [1, 2]


def test_protos_are_exported():
    assert tf.summary.Summary is tf.Summary
    assert tf.summary.Event is tf.Event and tf.summary.SessionLog is tf.SessionLog
    s = tf.Summary(value=[tf.Summary.Value(tag="x", simple_value=1.0)])
    assert tf.Summary.FromString(s.SerializeToString()) == s
    assert tf.SessionLog.START == 1 and tf.SessionLog.CHECKPOINT == 3
    assert tf.LogMessage.WARN == 30
    assert tf.HistogramProto(num=2).num == 2
    assert tf.SummaryMetadata.PluginData(plugin_name="p").plugin_name == "p"
    assert tf.summary.TaggedRunMetadata(tag="t").tag == "t"
    assert tf.summary.SummaryDescription(type_hint="x").type_hint == "x"


def test_v2_summary_helpers_of_compat_v1():
    """tf.compat.v1.summary.all_v2_summary_ops / initialize: no TF 2 summary ops or
    writers exist, so an empty list and a no-op that still wants a session."""
    with tf.Graph().as_default():
        tf.summary.scalar("loss", tf.constant(1.0))  # a v1 summary: not a v2 one
        assert tf.summary.all_v2_summary_ops() == []
        with pytest.raises(ValueError, match="session must be passed"):
            tf.summary.initialize()
        with tf.Session() as s:
            assert tf.summary.initialize(session=s) is None
            with s.as_default():
                tf.summary.initialize()
