"""tf.strings and the top-level string ops: values (hashes bit for bit), dtypes, static
shapes, op types and error classes against TensorFlow."""
from __future__ import annotations

import gzip
import zlib

import numpy as np
import pytest

from compat_harness import Run, run_both

WORDS = ["hello world", "  a b  ", "\u00dcn\u00ef", "", "x" * 70]


def _progs(d: dict) -> list:
    return [pytest.param(v, id=k) for k, v in sorted(d.items())]


def c(tf):
    return tf.constant(WORDS)


HASH_INPUTS = [b"", b"a", b"abc", b"abcd", b"hello wo", b"0123456789abcdefg", b"y" * 33,
               b"z" * 64, bytes(range(65)), bytes(range(256)) * 2]

PROGRAMS = {
    # hashes
    "hash_fast": lambda tf: tf.strings.to_hash_bucket_fast(HASH_INPUTS, 1000),
    "hash_fast_v1": lambda tf: tf.string_to_hash_bucket_fast(c(tf), 2 ** 40),
    "hash_deprecated": lambda tf: [tf.string_to_hash_bucket(HASH_INPUTS, 2 ** 62),
                                   tf.strings.to_hash_bucket(c(tf), 17)],
    "hash_strong": lambda tf: [tf.strings.to_hash_bucket_strong(HASH_INPUTS, 2 ** 62, [1, 2]),
                               tf.string_to_hash_bucket_strong(c(tf), 99, [-7, 2 ** 40])],
    "fingerprint": lambda tf: [tf.fingerprint(HASH_INPUTS),
                               tf.fingerprint(tf.constant([[1, 2], [3, 4]], tf.int64)),
                               tf.fingerprint(tf.constant([[0.5], [1.5]], tf.float32)),
                               tf.fingerprint(tf.constant([["a", "b"], ["c", "d"]]))],
    "fingerprint_scalar": lambda tf: tf.fingerprint(tf.constant(1)),
    # element-wise
    "join": lambda tf: [tf.strings.join([c(tf), "-", c(tf)]),
                        tf.string_join([c(tf), c(tf)], separator="::")],
    "join_mismatch": lambda tf: tf.strings.join([tf.constant(["a", "b"]),
                                                 tf.constant(["a", "b", "c"])]),
    "join_fed_mismatch": lambda tf: (lambda p: Run(tf.strings.join([p, tf.constant(["a", "b"])]),
                                                   {p: ["x"]}))(
        tf.placeholder(tf.string, [None])),
    "length": lambda tf: [tf.strings.length(c(tf)),
                          tf.strings.length(c(tf), unit="UTF8_CHAR")],
    "lower_upper": lambda tf: [tf.strings.lower(c(tf)), tf.strings.upper(c(tf)),
                               tf.strings.lower(c(tf), encoding="utf-8"),
                               tf.strings.upper(c(tf), encoding="utf-8")],
    "strip": lambda tf: [tf.strings.strip(c(tf)), tf.string_strip(["\t x \n"])],
    "reduce_join": lambda tf: [
        tf.reduce_join(tf.constant([["a", "b"], ["c", "d"]]), 0),
        tf.strings.reduce_join(tf.constant([["a", "b"], ["c", "d"]]), 1, keep_dims=True),
        tf.reduce_join(tf.constant([["a", "b"], ["c", "d"]]), [0, 1], separator="."),
        tf.reduce_join(tf.constant([["a", "b"], ["c", "d"]])),
        tf.reduce_join(tf.constant([["a", "b"], ["c", "d"]]), [])],
    "reduce_join_bad_axis": lambda tf: tf.reduce_join(tf.constant([["a"]]), 2),
    "reduce_join_fed_dup": lambda tf: (lambda p: Run(tf.reduce_join(
        tf.constant([["a", "b"]]), p), {p: [0, -2]}))(tf.placeholder(tf.int32, [None])),
    "as_string": lambda tf: [
        tf.as_string(tf.constant([1.5, 2.0, 1e-7, 123456.789]), precision=3),
        tf.as_string(tf.constant([1.5, -2.0, 1e-7])),
        tf.as_string(tf.constant([1.5, 2.0, 1e-7, 123456.789], tf.float64), shortest=True),
        tf.as_string(tf.constant([1, -22]), width=5, fill="0"),
        tf.as_string(tf.constant([7, 8], tf.int64), width=4),
        tf.strings.as_string(tf.constant([True, False])),
        tf.as_string(tf.constant([1 + 2j])),
        tf.as_string(tf.constant([1.5e10]), scientific=True)],
    "as_string_bad_precision": lambda tf: tf.as_string(tf.constant([1]), precision=2),
    "to_number": lambda tf: [
        tf.strings.to_number(["1.5", " -2e3 ", "inf", ".5", "7.", "-0"]),
        tf.string_to_number(["12", " -7 ", "+3"], out_type=tf.int32),
        tf.strings.to_number(["9007199254740993"], out_type=tf.int64),
        tf.strings.to_number(["0.1"], out_type=tf.float64)],
    "to_number_bad": lambda tf: tf.strings.to_number(["1.5x"]),
    "to_number_int_bad": lambda tf: tf.string_to_number(["1.0"], out_type=tf.int32),
    "to_number_overflow": lambda tf: tf.string_to_number(["3000000000"], out_type=tf.int32),
    "substr": lambda tf: [tf.substr(c(tf), 0, 3), tf.strings.substr(c(tf), [0, 1, 2, 0, 5],
                                                                    [1, 2, 3, 0, 2]),
                          tf.strings.substr(c(tf), 0, 2, unit="UTF8_CHAR"),
                          tf.strings.substr("abcdef", [[0], [2]], [[2], [3]])],
    "substr_negative_pos": lambda tf: tf.strings.substr(["hello", "abc"], -3, 2),
    "substr_oob": lambda tf: tf.substr(c(tf), 20, 1),
    "regex_full_match": lambda tf: [tf.strings.regex_full_match(c(tf), "h.*d"),
                                    tf.strings.regex_full_match(c(tf), tf.constant(".n."))],
    "regex_replace": lambda tf: [
        tf.strings.regex_replace(c(tf), "(l+)", r"<\1>"),
        tf.regex_replace(c(tf), "o", "0", replace_global=False),
        tf.strings.regex_replace(c(tf), tf.constant("[ae]"), tf.constant(r"\0\0")),
        tf.strings.regex_replace(["a.b"], r"\.", r"\\"),
        tf.regex_replace(["x1y22z333"], r"\d+", "#")],
    "regex_bad": lambda tf: tf.strings.regex_full_match(c(tf), "("),
    # split
    "string_split": lambda tf: [tf.string_split(["a b  c", "", "d"]),
                                tf.string_split(["a,b;c"], sep=",;"),
                                tf.string_split(["a b"], skip_empty=False, delimiter=""),
                                tf.string_split(["a  b"], skip_empty=False)],
    "string_split_scalar": lambda tf: tf.string_split("a b"),
    "strings_split": lambda tf: [tf.strings.split(["a  b c ", " x"]),
                                 tf.strings.split(["a<>b<>c"], sep="<>", maxsplit=1),
                                 tf.strings.split(source=["a,,b"], sep=",")],
    # encodings
    "base64": lambda tf: [tf.encode_base64(c(tf)), tf.io.encode_base64(c(tf), pad=True),
                          tf.decode_base64(tf.encode_base64(c(tf))),
                          tf.io.decode_base64(["aGk", "aGk="])],
    "base64_bad": lambda tf: tf.decode_base64(["a*b"]),
    "decode_raw": lambda tf: [tf.decode_raw(["\x01\x00\x00\x00\x02\x00\x00\x00"], tf.int32),
                              tf.decode_raw(["\x01\x00\x00\x00"], tf.int16,
                                            little_endian=False),
                              tf.io.decode_raw(tf.constant([["ab", "cd"]]), tf.uint8),
                              tf.decode_raw([np.float64(2.5).tobytes()], tf.float64)],
    "decode_raw_sizes": lambda tf: tf.decode_raw(["abc", "ab"], tf.uint8),
    "decode_raw_multiple": lambda tf: tf.decode_raw(["abc"], tf.float32),
    "decode_csv": lambda tf: tf.decode_csv(["1,2.5,a", '3,,"x,""y"""', ",4,z"],
                                           [[0], [1.0], ["def"]]),
    "decode_csv_select": lambda tf: tf.io.decode_csv(["1,2,3", "4,5,6"], [[0], [0.0]],
                                                     select_cols=[0, 2]),
    "decode_csv_na": lambda tf: tf.decode_csv(["NA|2", "1|NA"], [[7], [np.int64(8)]],
                                              field_delim="|", na_value="NA"),
    "decode_csv_no_quote": lambda tf: tf.decode_csv(['"a",b'], [[""], [""]],
                                                    use_quote_delim=False),
    "decode_csv_bad_int": lambda tf: tf.decode_csv(["1,a"], [[0], [0]]),
    "decode_csv_missing": lambda tf: tf.decode_csv(["1,"], [[0], tf.constant([], tf.int32)]),
    "decode_csv_count": lambda tf: tf.decode_csv(["1,2,3"], [[0], [0]]),
    "decode_compressed": lambda tf: [
        tf.decode_compressed([zlib.compress(b"hello zlib")], "ZLIB"),
        tf.io.decode_compressed([gzip.compress(b"hello gz", mtime=0)],
                                compression_type="GZIP"),
        tf.decode_compressed(["plain"])],
    # format, segment join, ngrams
    "format": lambda tf: [
        tf.strings.format("x={} y={} s={} b={}", [
            tf.constant([1.5, 2.0, 0.1, 1e20]), tf.constant(np.arange(12).reshape(3, 4)),
            tf.constant(["a", "b"]), tf.constant([True, False])]),
        tf.strings.format("{}", tf.constant(np.arange(10))),
        tf.strings.format("{}", tf.constant(np.arange(24).reshape(2, 3, 4)), summarize=1),
        tf.strings.format("{} and {}", [tf.constant([1.0, 2.5], tf.float64),
                                        tf.constant(123456789.0)]),
        tf.strings.format("<>", [tf.constant(-3)], placeholder="<>")],
    "format_count_mismatch": lambda tf: tf.strings.format("{} {}", [tf.constant(1)]),
    "unsorted_segment_join": lambda tf: [
        tf.strings.unsorted_segment_join(["a", "b", "c", "d"], [1, 0, 1, 3], 4, separator=":"),
        tf.strings.unsorted_segment_join([["a", "b"], ["c", "d"]], [1, 1], 2)],
    "ngrams": lambda tf: [
        tf.strings.ngrams(["a", "b", "c", "d"], 2),
        tf.strings.ngrams(["a", "b", "c"], [1, 3], separator="_", pad_values="#"),
        tf.strings.ngrams([["a", "b", "c"], ["d", "e", "f"]], 2, pad_values=("<", ">"),
                          padding_width=1),
        tf.strings.ngrams(["a"], 3, preserve_short_sequences=True, pad_values="P",
                          padding_width=1),
        tf.strings.ngrams(["a"], 3)],
    # unicode
    "unicode_scalar": lambda tf: [
        tf.strings.unicode_decode("h\u00e9llo", "UTF-8"),
        tf.strings.unicode_decode_with_offsets("h\u20ac", "UTF-8"),
        tf.strings.unicode_encode([104, 8364], "UTF-8"),
        tf.strings.unicode_encode([[104, 105], [8364, 65]], "UTF-16-BE"),
        tf.strings.unicode_split("h\u20acx", "UTF-8"),
        tf.strings.unicode_split_with_offsets("h\u20acx", "UTF-8"),
        tf.strings.bytes_split("abc"),
        tf.strings.unicode_decode(b"a\xffb", "UTF-8", errors="ignore"),
        tf.strings.unicode_decode(b"a\xffb", "UTF-8", replacement_char=63)],
    "unicode_transcode": lambda tf: [
        tf.strings.unicode_transcode(["h\u00e9llo", b"a\xffb"], "UTF-8", "UTF-16-BE"),
        tf.strings.unicode_transcode(["h\u00e9llo".encode("utf-16-be")], "UTF-16-BE",
                                     "UTF-8"),
        tf.strings.unicode_transcode(["ab\x01"], "UTF-8", "UTF-8",
                                     replace_control_characters=True)],
    "unicode_strict": lambda tf: tf.strings.unicode_decode(b"a\xff", "UTF-8",
                                                           errors="strict"),
}


# TF builds these from RaggedTensor internals (other op names and types, shapes known by
# constant folding): values, dtypes and ranks are compared, not the graph's details
RAGGED_BUILT = {"ngrams", "unicode_scalar"}


@pytest.mark.parametrize("program", _progs(PROGRAMS))
def test_string_programs(program, request):
    if request.node.callspec.id in RAGGED_BUILT:
        run_both(program, static_keys=("kind", "dtype"))
    else:
        run_both(program)
