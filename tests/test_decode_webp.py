"""tf.io.decode_webp / tf.image.decode_webp: lossless WebP files written by Pillow decode
to their pixels as [frames, h, w, c] uint8, with TF's channel rules and errors."""
from __future__ import annotations

import io

import numpy as np
import pytest

import flowrt as tf
from flowrt import errors

PIL = pytest.importorskip("PIL")
from PIL import Image, features  # noqa: E402

pytestmark = pytest.mark.skipif(not features.check("webp"), reason="Pillow without WebP")


def webp(a: np.ndarray) -> bytes:
    b = io.BytesIO()
    Image.fromarray(a).save(b, "WEBP", lossless=True)
    return b.getvalue()


def run(t: object) -> object:
    with tf.Session() as sess:
        return sess.run(t)


def test_rgb_and_rgba_pixels() -> None:
    rng = np.random.RandomState(0)
    rgb = rng.randint(0, 255, (5, 7, 3), dtype=np.uint8)
    rgba = rng.randint(0, 255, (4, 3, 4), dtype=np.uint8)
    assert tf.image.decode_webp is tf.io.decode_webp
    t = tf.io.decode_webp(webp(rgb))
    assert t.dtype == tf.uint8 and t.shape.as_list() == [None, None, None, None]
    assert tf.io.decode_webp(webp(rgb), channels=3).shape.as_list() == [None, None, None, 3]
    out = run(t)
    assert out.shape == (1, 5, 7, 3)
    np.testing.assert_array_equal(out[0], rgb)
    np.testing.assert_array_equal(run(tf.io.decode_webp(webp(rgba), channels=4))[0], rgba)


def test_animation_frames_are_rgba() -> None:
    frames = [np.full((2, 3, 3), v, np.uint8) for v in (10, 200)]
    b = io.BytesIO()
    Image.fromarray(frames[0]).save(b, "WEBP", save_all=True, lossless=True,
                                    append_images=[Image.fromarray(frames[1])])
    out = run(tf.io.decode_webp(b.getvalue()))
    assert out.shape == (2, 2, 3, 4)
    assert out[0, ..., 0].tolist() == [[10] * 3] * 2 and (out[..., 3] == 255).all()


def test_errors() -> None:
    rgb = webp(np.zeros((2, 2, 3), np.uint8))
    for data, ch, msg in ((rgb, 4, "Number of channels requested does not match input"),
                          (rgb, 1, "WebP only supports 3 or 4 channels"),
                          (b"junk", 0, "Unknown image file format"),
                          (b"RIFF\0\0\0\0WEBPbad", 0, "Invalid WebP data")):
        with pytest.raises(errors.InvalidArgumentError, match=msg):
            run(tf.io.decode_webp(data, channels=ch))
    with pytest.raises(ValueError, match="rank 0"):
        tf.io.decode_webp([rgb])
