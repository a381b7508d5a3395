"""tf.strings.unicode_script: ICU script codes (UScriptCode) of int32 code points, -1 for
values outside the code space; the range table checked against the character names of
Python's unicodedata."""
from __future__ import annotations

import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import flowrt as tf

# ICU UScriptCode numbers
COMMON, INHERITED, ARABIC, CYRILLIC, DEVANAGARI, GREEK = 0, 1, 2, 8, 10, 14
HAN, HANGUL, HEBREW, HIRAGANA, KATAKANA, LATIN, THAI, UNKNOWN = 17, 18, 19, 20, 22, 25, 38, 103


def scripts(cps, dtype=np.int32):
    with tf.Graph().as_default():
        out = tf.strings.unicode_script(tf.constant(np.asarray(cps, dtype)))
        with tf.Session() as s:
            return s.run(out)


def test_examples():
    text = "A\u03b1\u0416\u0627\u05d0\u4e2d\u3042\u30a2\ud55c\u0915\u0e01 \u0301"
    want = [LATIN, GREEK, CYRILLIC, ARABIC, HEBREW, HAN, HIRAGANA, KATAKANA, HANGUL,
            DEVANAGARI, THAI, COMMON, INHERITED]
    got = scripts([ord(c) for c in text])
    assert got.tolist() == want and got.dtype == np.int32


def test_tf_doc_example_and_invalid_code_points():
    # TF's example: [1, 31, 38] are Common
    assert scripts([1, 31, 38]).tolist() == [0, 0, 0]
    # not code points: ICU fails and TF gives -1; unassigned / private use: Unknown
    got = scripts([-1, -2**31, 0x110000, 2**31 - 1, 0x10FFFF, 0xE000, 0x378, 0xD800])
    assert got.tolist() == [-1, -1, -1, -1, UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN]


def test_shape_is_kept_and_static():
    with tf.Graph().as_default():
        x = tf.placeholder(tf.int32, [None, 3])
        y = tf.strings.unicode_script(x, name="us")
        assert y.shape.as_list() == [None, 3] and y.dtype == tf.int32 and y.op.name == "us"
        assert y.op.type == "UnicodeScript"
        with tf.Session() as s:
            got = s.run(y, {x: [[65, 66, 67], [0x5D0, 0x4E00, 0x20]]})
        assert got.tolist() == [[LATIN] * 3, [HEBREW, HAN, COMMON]]
    assert scripts(np.zeros((0, 2))).shape == (0, 2)


def test_only_int32():
    with tf.Graph().as_default():
        with pytest.raises((TypeError, ValueError)):
            tf.strings.unicode_script(tf.constant([65], tf.int64))


NAME_PREFIXES = {
    "LATIN SMALL LETTER ": LATIN, "LATIN CAPITAL LETTER ": LATIN,
    "GREEK SMALL LETTER ": GREEK, "GREEK CAPITAL LETTER ": GREEK,
    "CYRILLIC SMALL LETTER ": CYRILLIC, "CYRILLIC CAPITAL LETTER ": CYRILLIC,
    "ARABIC LETTER ": ARABIC, "HEBREW LETTER ": HEBREW, "HANGUL SYLLABLE ": HANGUL,
    "CJK UNIFIED IDEOGRAPH": HAN, "THAI CHARACTER ": THAI, "DEVANAGARI LETTER ": DEVANAGARI,
    "HIRAGANA LETTER ": HIRAGANA, "KATAKANA LETTER ": KATAKANA,
}


def test_table_agrees_with_character_names():
    cps = np.arange(0, 0x30000, dtype=np.int32)
    got = scripts(cps)
    checked = newer = 0
    for cp in range(0x30000):
        if not unicodedata.category(chr(cp)).startswith("L"):  # marks may be Inherited
            continue
        if got[cp] == UNKNOWN:  # assigned after the table's Unicode version (ICU's)
            newer += 1
            continue
        name = unicodedata.name(chr(cp), "")
        for prefix, code in NAME_PREFIXES.items():
            if name.startswith(prefix):
                assert got[cp] == code, (hex(cp), name, got[cp])
                checked += 1
                break
    assert checked > 100000 and newer < checked // 50
    # combining marks of the generic blocks are Inherited; ASCII digits and punctuation
    # are Common
    assert (got[0x300:0x370] == INHERITED).all()
    assert (got[[ord(c) for c in "0123456789!?.,;: "]] == COMMON).all()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(-2**31, 2**31 - 1), min_size=1, max_size=20))
def test_any_int32_gives_a_code_or_minus_one(vals):
    got = scripts(vals)
    for v, g in zip(vals, got.tolist()):
        if 0 <= v <= 0x10FFFF:
            assert 0 <= g <= 200
        else:
            assert g == -1
