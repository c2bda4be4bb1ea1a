"""String comparisons and string ops of ``estimator.compat.v1`` against TF 2.15.1.

A TF string is bytes, and TF converts a Python ``str`` operand to one: ``tf.equal(labels,
'>50K')`` on the bytes ``tf.decode_csv`` returns is true for ``b'>50K'``. NumPy alone
compares ``b'>50K' == '>50K'`` as False, which once trained a census program on all-zero
labels. ``EXPECTED`` was printed by TF 2.15.1 (``tf.compat.v1`` graph mode,
``tf.Session().run``) for exactly the calls in ``CALLS`` on ``LABELS`` below; bytes shown
as ``b'...'``.
"""

import numpy as np
import pytest

import estimator.compat.v1 as tf

LABELS = np.array([b">50K", b"<=50K", b" Private ", "Café".encode()], dtype=object)

# TF 2.15.1's results (see the module docstring).
EXPECTED = {
    "equal_str": [True, False, False, False],
    "equal_bytes": [True, False, False, False],
    "not_equal_str": [False, True, True, True],
    "where_str": [b">50K", b"none", b"none", b"none"],
    "where_v2_str": [b"yes", b"<=50K", b" Private ", "Café".encode()],
    "add_str": [b">50K!", b"<=50K!", b" Private !", "Café!".encode()],
    "constant": b"abc",
    "concat": [b">50K", b"x"],
    "hash_fast": [406, 71, 178, 649],
    "strings_hash_fast": [5, 5, 6],
    "strip": [b">50K", b"<=50K", b"Private", "Café".encode()],
    "lower": [b">50k", b"<=50k", b" private ", "café".encode()],
    "upper": [b">50K", b"<=50K", b" PRIVATE ", "CAFé".encode()],
    "length": [4, 5, 9, 5],
    "join": [b">50K-x", b"<=50K-x", b" Private -x", "Café-x".encode()],
    "string_join": [b"a/>50K", b"a/<=50K", b"a/ Private ", "a/Café".encode()],
    "to_number": [1.5, -2.0, 300.0],
    "to_number_int": [7, -3],
    "regex": [True, True, False, False],
    "as_string_f": [b"1.500000", b"-0.250000"],
    "as_string_i": [b"3", b"-12"],
    "as_string_p": [b"1.23"],
    "as_string_b": [b"true", b"false"],
}

CALLS = {
    "equal_str": lambda: tf.equal(LABELS, ">50K"),
    "equal_bytes": lambda: tf.equal(LABELS, b">50K"),
    "not_equal_str": lambda: tf.not_equal(LABELS, ">50K"),
    "where_str": lambda: tf.where(tf.equal(LABELS, ">50K"), LABELS, tf.fill([4], "none")),
    "where_v2_str": lambda: tf.where_v2(tf.equal(LABELS, ">50K"), "yes", LABELS),
    "add_str": lambda: tf.add(LABELS, "!"),
    "constant": lambda: tf.constant("abc"),
    "concat": lambda: tf.concat([LABELS[:1], ["x"]], 0),
    "hash_fast": lambda: tf.string_to_hash_bucket_fast(LABELS, 1000),
    "strings_hash_fast": lambda: tf.strings.to_hash_bucket_fast(["a", b"a", ""], 7),
    "strip": lambda: tf.strings.strip(LABELS),
    "lower": lambda: tf.strings.lower(LABELS),
    "upper": lambda: tf.strings.upper(LABELS),
    "length": lambda: tf.strings.length(LABELS),
    "join": lambda: tf.strings.join([LABELS, "x"], separator="-"),
    "string_join": lambda: tf.string_join(["a", LABELS], "/"),
    "to_number": lambda: tf.strings.to_number(["1.5", b"-2", "3e2"]),
    "to_number_int": lambda: tf.string_to_number(["7", "-3"], out_type=tf.int32),
    "regex": lambda: tf.strings.regex_full_match(LABELS, ".*50K"),
    "as_string_f": lambda: tf.as_string([1.5, -0.25]),
    "as_string_i": lambda: tf.as_string([3, -12]),
    "as_string_p": lambda: tf.as_string([1.23456], precision=2),
    "as_string_b": lambda: tf.as_string([True, False]),
}


@pytest.mark.parametrize("key", sorted(CALLS))
def test_string_op_matches_tf(key):
    result = CALLS[key]()
    expected = EXPECTED[key]
    assert np.asarray(result).tolist() == expected
    if isinstance(expected, list) and isinstance(expected[0], bytes):
        assert all(isinstance(v, bytes) for v in np.ravel(result))  # bytes, as TF's


def test_census_labels_from_decode_csv_compared_to_a_str_literal_are_not_all_false():
    # The census tutorial's input_fn: parse a CSV line, then tf.equal(label, '>50K').
    lines = np.array([b"39,<=50K", b"52,>50K", b"31,>50K"], dtype=object)
    age, income = tf.decode_csv(lines, record_defaults=[[0], [""]])
    labels = tf.cast(tf.equal(income, ">50K"), tf.int32)
    assert np.asarray(labels).tolist() == [0, 1, 1]
    # A NumPy str array (numpy_input_fn data) against a bytes literal, too.
    assert tf.equal(np.array(["a", "b"]), b"b").tolist() == [False, True]


def test_string_literals_become_bytes_as_tf_strings():
    assert tf.constant(["a", "b"]).tolist() == [b"a", b"b"]
    assert tf.identity(np.array(["x"])).tolist() == [b"x"]
    assert tf.stack([np.array([b"a"], object), np.array(["b"])]).tolist() == [[b"a"], [b"b"]]


def test_string_op_errors_say_what_arrived():
    with pytest.raises(ValueError, match="could not correctly convert string: abc"):
        tf.strings.to_number(["abc"])
    with pytest.raises(TypeError, match="takes strings .* got int 3.*tf.as_string"):
        tf.strings.strip([3])
    with pytest.raises(ValueError, match="num_buckets must be >= 1, got 0"):
        tf.string_to_hash_bucket_fast(["a"], 0)
    with pytest.raises(tf.UnsupportedSymbolError, match="tf.string_to_hash_bucket_fast"):
        tf.string_to_hash_bucket_strong  # noqa: B018
    with pytest.raises(tf.UnsupportedSymbolError, match=r"tf\.strings\.substr is not supported"):
        tf.strings.substr  # noqa: B018
