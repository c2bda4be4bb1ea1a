"""Tests of the host phase of feature columns (estimator.preprocessing).

Hashes and crosses are checked three ways: literals labelled "from TF 2.15.1" (computed
once with TensorFlow 2.15.1, which the tests never import), an independent pure-Python
reference of FingerprintCat64 and of the cartesian product written here, and ids derived by
hand for lookups and buckets.
"""

import dataclasses
import json
import os
import pickle

import farmhash
import numpy as np
import pytest

from estimator import preprocessing as pp

# ------------------------------------------------------------------ references

_MASK = (1 << 64) - 1
_K_MUL = 0xC6A4A7935BD1E995


def _cat64_reference(fp1: int, fp2: int) -> int:
    """FingerprintCat64 (tensorflow/tsl/platform/fingerprint.h) on Python ints mod 2**64."""

    def shift_mix(v):
        return v ^ (v >> 47)

    result = fp1 ^ _K_MUL
    result ^= (shift_mix((fp2 * _K_MUL) & _MASK) * _K_MUL) & _MASK
    result = (result * _K_MUL) & _MASK
    result = (shift_mix(result) * _K_MUL) & _MASK
    return shift_mix(result)


def _cross_reference(values, num_buckets, hash_key=0xDECAFCAFFE):
    """Hashed cross of one combination: strings fingerprinted, ints used as themselves."""
    h = hash_key
    for v in values:
        h = _cat64_reference(h, farmhash.fingerprint64(v) if isinstance(v, str) else v & _MASK)
    return h % num_buckets


def _ids(op, features):
    return op.apply(features).ids.tolist()


# ---------------------------------------------------------------------- hashes


def test_fingerprint64_equals_tf():
    strings = ["a", "hello", "", "Self-emp-not-inc", "12", "é"]
    # from TF 2.15.1: tf.strings.to_hash_bucket_fast(strings, 2**63 - 1)
    tf_values = [
        3694432073954588132,
        3786372426573024489,
        1936946117179621456,
        1153679586483118725,
        3284000456603616081,
        693143013273849025,
    ]
    got = pp.fingerprint64(strings)
    assert got.dtype == np.uint64
    assert [int(v) % (2**63 - 1) for v in got] == tf_values
    # from TF 2.15.1: tf.strings.to_hash_bucket_fast(strings[:5], 1000)
    assert [int(v) % 1000 for v in got[:5]] == [939, 296, 263, 725, 888]
    # bytes hash as their UTF-8 string
    assert pp.fingerprint64([b"hello", "é".encode()]).tolist() == [got[1], got[5]]


@pytest.mark.parametrize(
    "values",
    [
        [b"Private", b"", "é".encode(), b"Self-emp-not-inc"],  # all bytes: decoded at once
        [b"a\0b", b"c", b"", b"\0"],  # NULs inside values: decoded one by one
        [b"x", "y", "é".encode(), ""],  # str among the bytes
    ],
)
def test_bytes_features_decode_as_utf8(values):
    from estimator.preprocessing._base import _categorical_input

    x = np.array(values, dtype=object).reshape(2, 2)
    out, kind = _categorical_input({"k": x}, "k", "who")
    assert kind == "string" and out.shape == (2, 2)
    assert out.ravel().tolist() == [v.decode() if isinstance(v, bytes) else v for v in values]


def test_fixed_width_bytes_are_factorized_once_per_batch():
    """The TFRecord reader's fixed-width bytes are decoded once per distinct value; with the
    batch's op cache those distinct values and each value's index among them are kept as
    the feature's string factors, which the lookups and hashes then read instead of sorting
    the decoded strings again."""
    from estimator.preprocessing._base import _categorical_input, string_factors

    texts = ["Private", "?", "Local-gov", "Private", "État", "", "?", "Private"]
    x = np.array([t.encode() for t in texts], dtype="S").reshape(4, 2)
    cache = {}
    out, kind = _categorical_input({"k": x}, "k", "who", cache)
    assert kind == "string" and out.tolist() == np.array(texts).reshape(4, 2).tolist()
    assert ("string_factors", "k") in cache  # found by the decoding, before any op asks
    distinct, codes = string_factors(out, "k", cache)
    # What sorting the decoded strings gives (code point order, as UTF-8 bytes sort):
    assert distinct == sorted(set(texts)) == ["", "?", "Local-gov", "Private", "État"]
    np.testing.assert_array_equal(np.array(distinct)[codes], out)
    assert codes.dtype == np.int64 and codes.shape == (4, 2)


def test_bytes_that_are_not_utf8_name_the_value():
    from estimator.preprocessing._base import _categorical_input

    x = np.array([[b"ok"], [b"fine"], [b"\xffbad"]], dtype=object)
    with pytest.raises(ValueError, match=r"who: feature 'k' holds bytes that are not UTF-8 "
                       r"text \(b'\\xffbad' at flat index 2\)"):  # fmt: skip
        _categorical_input({"k": x}, "k", "who")


def test_fingerprint_cat64_matches_reference_and_broadcasts():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2**63, size=5, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    b = rng.integers(0, 2**63, size=3, dtype=np.uint64)
    got = pp.fingerprint_cat64(a[:, None], b[None, :])
    assert got.shape == (5, 3)
    for i in range(5):
        for j in range(3):
            assert int(got[i, j]) == _cat64_reference(int(a[i]), int(b[j]))
    assert pp.fingerprint_cat64(np.uint64(1), np.uint64(2)) != pp.fingerprint_cat64(
        np.uint64(2), np.uint64(1)
    )  # not commutative


# ---------------------------------------------------------------------- numeric


def test_numeric_casts_and_reshapes():
    op = pp.Numeric("x")
    out = op.apply({"x": np.array([1, 2, 3], np.int64)})
    assert out.dtype == np.float32 and out.tolist() == [[1.0], [2.0], [3.0]]
    op2 = pp.Numeric("p", shape=(2,))
    assert op2.apply({"p": [[1.5, 2.5], [3.0, 4.0]]}).tolist() == [[1.5, 2.5], [3.0, 4.0]]
    op3 = pp.Numeric("m", shape=(2, 2))
    assert op3.apply({"m": np.arange(8).reshape(2, 4)}).shape == (2, 2, 2)
    assert pp.Numeric("b").apply({"b": np.array([True, False])}).tolist() == [[1.0], [0.0]]


def test_numeric_default_value_fills_missing_feature_and_nan():
    op = pp.Numeric("x", shape=(2,), default_value=(7.0, -1.0))
    assert op.default_value == (7.0, -1.0)
    # The feature is absent: the batch size (3) comes from another feature.
    out = op.apply({"other": np.zeros(3)})
    assert out.tolist() == [[7.0, -1.0]] * 3
    out = op.apply({"x": np.array([[np.nan, 2.0], [3.0, np.nan]])})
    assert out.tolist() == [[7.0, 2.0], [3.0, -1.0]]
    # Without a default, NaN is kept (as TF).
    assert np.isnan(pp.Numeric("x").apply({"x": np.array([np.nan])})[0, 0])


def test_numeric_errors():
    with pytest.raises(ValueError, match=r"Feature age is not in features dictionary.*'b', 'c'"):
        pp.Numeric("age").apply({"c": np.zeros(2), "b": np.zeros(2)})
    with pytest.raises(ValueError, match=r"'age' has dtype <U2; expected numbers"):
        pp.Numeric("age").apply({"age": np.array(["39", "50"])})
    with pytest.raises(ValueError, match=r"has dtype object; expected numbers"):
        pp.Numeric("age").apply({"age": np.array(["a", None], dtype=object)})
    with pytest.raises(ValueError, match=r"shape \(2, 3\); expected \[batch_size, 2\]"):
        pp.Numeric("p", shape=(2,)).apply({"p": np.zeros((2, 3))})
    with pytest.raises(ValueError, match=r"has shape \(\); expected"):
        pp.Numeric("p").apply({"p": 3.0})
    with pytest.raises(ValueError, match="cannot tell the batch size"):
        pp.Numeric("x", default_value=1.0).apply({"y": 2.0})


# ------------------------------------------------------------------ vocabulary


def test_vocabulary_list_strings_multivalent_missing_and_oov():
    op = pp.VocabularyList("s", ("a", "b", "c"), num_oov_buckets=5)
    features = {"s": np.array([["a", "zz"], ["", "hello"], ["c", ""]])}
    # from TF 2.15.1: 'zz' -> 5 and 'hello' -> 4 (3 + Fingerprint64 % 5); '' is dropped.
    assert _ids(op, features) == [[0, 5], [-1, 4], [2, -1]]
    out = op.apply(features)
    assert out.ids.dtype == np.int32 and out.weights is None
    # bytes and object arrays give the same ids
    assert _ids(op, {"s": np.char.encode(features["s"])}) == [[0, 5], [-1, 4], [2, -1]]
    assert _ids(op, {"s": features["s"].astype(object)}) == [[0, 5], [-1, 4], [2, -1]]
    assert _ids(op, {"s": np.array([["a", b"zz"], [b"", "hello"], ["c", ""]], dtype=object)}) == [
        [0, 5],
        [-1, 4],
        [2, -1],
    ]
    # 1-D input is one value per example
    assert _ids(op, {"s": np.array(["b", "a"])}) == [[1], [0]]


def test_string_lookups_hash_each_batch_at_once_and_keep_nothing(monkeypatch):
    # The host phase is O(batch): one vectorized hashing call per column and batch, over
    # the batch's distinct values (sorted), no memo that grows with the distinct values
    # seen (and no per-batch rebuild of one).
    from estimator.preprocessing import _base

    calls = []
    op = pp.HashBucket("h", 1000)
    original = _base.fingerprint64
    monkeypatch.setattr(
        _base, "fingerprint64", lambda strings: calls.append(strings) or original(strings)
    )
    # from TF 2.15.1: a -> 939, hello -> 296 (Fingerprint64 % 1000)
    assert _ids(op, {"h": np.array(["a", "hello", "a"])}) == [[939], [296], [939]]
    assert _ids(op, {"h": np.array(["hello", "b", "", "a"])})[:1] == [[296]]
    assert _ids(op, {"h": np.array([["a", ""], ["b", "hello"]])})[0] == [939, -1]
    assert calls == [["a", "hello"], ["", "a", "b", "hello"], ["", "a", "b", "hello"]]
    fresh = pp.HashBucket("h", 1000)
    _ids(fresh, {"h": np.array(["a", "b"])})
    size = len(pickle.dumps(fresh))
    for i in range(20):
        _ids(fresh, {"h": np.array([f"new-{i}-{j}" for j in range(500)], dtype=object)})
    assert len(pickle.dumps(fresh)) == size  # 10,000 new strings later: nothing was kept


def test_vocabulary_lookup_reads_unknown_strings_without_storing_them():
    op = pp.VocabularyList("s", ("a", "b"), num_oov_buckets=0)
    assert _ids(op, {"s": np.array([f"u{i}" for i in range(100)] + ["b"], dtype=object)})[-2:] == [
        [-1],
        [1],
    ]
    assert len(op._table) == 2  # unknown values are not added to the table


def test_vocabulary_list_default_value_and_ints():
    op = pp.VocabularyList("s", ("a", "b"), default_value=7)
    assert _ids(op, {"s": np.array(["b", "q", ""])}) == [[1], [7], [-1]]
    op = pp.VocabularyList("s", ("a", "b"))  # OOV without buckets is dropped (-1)
    assert _ids(op, {"s": np.array(["q"])}) == [[-1]]
    op = pp.VocabularyList("i", (10, 20, 30), dtype=np.int64, num_oov_buckets=5)
    # from TF 2.15.1: 12345 -> 6 and 7 -> 6 (3 + Fingerprint64("12345") % 5, ...).
    assert _ids(op, {"i": np.array([[10, 12345], [-1, 7]])}) == [[0, 6], [-1, 6]]


def test_vocabulary_list_dtype_mismatch_errors():
    op = pp.VocabularyList("s", ("a", "b"))
    with pytest.raises(
        ValueError, match=r"Column dtype and input dtype must be compatible. key: s"
    ):
        op.apply({"s": np.array([1, 2])})
    with pytest.raises(ValueError, match=r"'s' has dtype float64; expected strings or integers"):
        op.apply({"s": np.array([1.0])})
    with pytest.raises(ValueError, match=r"'s' has dtype object; expected strings or integers"):
        op.apply({"s": np.array(["a", None], dtype=object)})
    with pytest.raises(ValueError, match=r"'s' is a scalar; expected a batch"):
        op.apply({"s": np.array("a")})
    with pytest.raises(TypeError, match="is not a dtype"):
        pp.VocabularyList("s", ("a",), dtype="nonsense")


def test_vocabulary_file(tmp_path):
    path = tmp_path / "vocab.txt"
    path.write_text("Private\r\nState-gov\nSelf-emp\n")
    op = pp.VocabularyFile("w", str(path))
    assert _ids(op, {"w": np.array(["Self-emp", "Private", "x", ""])}) == [[2], [0], [-1], [-1]]
    assert op.assets() == (str(path),)
    # Only the first vocabulary_size lines are used.
    short = pp.VocabularyFile("w", str(path), vocabulary_size=2, num_oov_buckets=1)
    assert _ids(short, {"w": np.array(["Self-emp", "State-gov"])}) == [[2], [1]]
    ints = tmp_path / "ints.txt"
    ints.write_text("30\n10\n")
    assert _ids(pp.VocabularyFile("n", str(ints), dtype=np.int64), {"n": [10, 30, 5]}) == [
        [1],
        [0],
        [-1],
    ]


def test_vocabulary_file_errors(tmp_path):
    with pytest.raises(ValueError, match=r"vocabulary_file .*missing\.txt does not exist"):
        pp.VocabularyFile("w", str(tmp_path / "missing.txt")).apply({"w": ["a"]})
    path = tmp_path / "v.txt"
    path.write_text("a\nb\n")
    with pytest.raises(ValueError, match=r"vocabulary_size is 3 but vocabulary_file .* only 2"):
        pp.VocabularyFile("w", str(path), vocabulary_size=3).apply({"w": ["a"]})
    dup = tmp_path / "dup.txt"
    dup.write_text("a\nb\na\n")
    with pytest.raises(ValueError, match=r"lists 'a' more than once"):
        pp.VocabularyFile("w", str(dup)).apply({"w": ["a"]})
    with pytest.raises(ValueError, match="has a line that is not an integer"):
        pp.VocabularyFile("w", str(path), dtype=np.int64).apply({"w": [1]})


# ---------------------------------------------------------------- hash, identity


def test_hash_bucket_strings_and_ints():
    op = pp.HashBucket("h", 1000)
    # from TF 2.15.1 (to_hash_bucket_fast(..., 1000)): a -> 939, hello -> 296; '' dropped.
    assert _ids(op, {"h": np.array([["a", "hello"], ["", "a"]])}) == [[939, 296], [-1, 939]]
    # from TF 2.15.1: categorical_column_with_hash_bucket('h', 100, dtype=tf.int64) maps 12 to
    # 88 (Fingerprint64("12") % 100) and drops -1.
    op = pp.HashBucket("h", 100, dtype=np.int64)
    assert _ids(op, {"h": np.array([[12], [-1], [12]])}) == [[88], [-1], [88]]


def test_identity():
    op = pp.Identity("i", 5)
    # from TF 2.15.1: [[1, -3], [-1, 4]] -> values [1, -3, 4] (-1 dropped; -3 kept by the
    # transform and dropped by every lookup), so -3 becomes "no id" here.
    assert _ids(op, {"i": np.array([[1, -3], [-1, 4]])}) == [[1, -1], [-1, 4]]
    op = pp.Identity("i", 5, default_value=0)
    # from TF 2.15.1: [[1, -3], [-1, 7]] -> [1, 0, 0].
    assert _ids(op, {"i": np.array([[1, -3], [-1, 7]])}) == [[1, 0], [-1, 0]]
    with pytest.raises(ValueError, match=r"value 5 of feature 'i' is out of range \[0, 5\)"):
        pp.Identity("i", 5).apply({"i": np.array([1, 5])})
    with pytest.raises(ValueError, match=r"Invalid input, not integer\. key: i dtype: <U1"):
        pp.Identity("i", 5).apply({"i": np.array(["1"])})
    with pytest.raises(ValueError, match=r"'i' has dtype float64; expected strings or integers"):
        pp.Identity("i", 5).apply({"i": np.array([1.0])})


# -------------------------------------------------------------------- bucketize


def test_bucketize_boundaries_go_up_and_offsets_per_element():
    op = pp.Bucketize(pp.Numeric("x"), (0.0, 10.0))
    # buckets (-inf, 0), [0, 10), [10, inf): -1 -> 0, 0 -> 1, 5 -> 1, 10 -> 2, 11 -> 2
    assert _ids(op, {"x": np.array([-1.0, 0.0, 5.0, 10.0, 11.0])}) == [[0], [1], [1], [2], [2]]
    # float32 boundary: 0.1 given as float64 equals the float32 value 0.1 -> upper bucket
    assert _ids(pp.Bucketize(pp.Numeric("x"), (0.1,)), {"x": np.float32([0.1])}) == [[1]]
    op2 = pp.Bucketize(pp.Numeric("p", shape=(2,)), (0.0, 10.0))
    # element i adds 3 * i: [5, 20] -> [1 + 0, 2 + 3]
    assert _ids(op2, {"p": np.array([[5.0, 20.0], [-5.0, 0.0]])}) == [[1, 5], [0, 4]]
    with pytest.raises(ValueError, match="source must be one-dimensional"):
        pp.Bucketize(pp.Numeric("m", shape=(2, 2)), (0.0,))


# ------------------------------------------------------------------------- cross


def test_cross_strings_equal_tf_and_reference():
    op = pp.Cross(("a", "b"), 1000)
    features = {"a": np.array([["x", "y"], ["p", "q"]]), "b": np.array([["u"], ["v"]])}
    got = _ids(op, features)
    # from TF 2.15.1: crossed_column(['a', 'b'], 1000) on [['x','y'],['p','']] x [['u'],['v']]
    # gave 989 (x,u), 132 (y,u), 543 (p,v).
    assert got[0] == [989, 132] and got[1][0] == 543
    rows = zip(features["a"], features["b"], strict=True)
    expected = [[_cross_reference((a, b), 1000) for a in ra for b in rb] for ra, rb in rows]
    assert got == expected


def test_cross_ints_bucketized_vocab_and_hash_key():
    # from TF 2.15.1: raw int64 key crossed with strings: (3,u) -> 941, (4,v) -> 709
    op = pp.Cross(("a", "b"), 1000)
    assert _ids(op, {"a": np.array([[3], [4]]), "b": np.array([["u"], ["v"]])}) == [[941], [709]]
    # from TF 2.15.1: bucketized n with [0, 10] (5 -> bucket 1, 10 -> bucket 2) x 'a'
    bucket = pp.Bucketize(pp.Numeric("n"), (0.0, 10.0))
    op = pp.Cross((bucket, "a"), 1000)
    features = {"n": np.array([5.0, 10.0]), "a": np.array([["x"], ["y"]])}
    assert _ids(op, features) == [[859], [604]]
    # from TF 2.15.1: a nested cross (a x b) x s with hash_key=12345, flattened: 533, 590
    op = pp.Cross(("a", "b", "s"), 1000, hash_key=12345)
    features = {"a": [["x"], ["y"]], "b": [["u"], ["v"]], "s": [["b"], ["q"]]}
    assert _ids(op, features) == [[533], [590]]
    # A vocabulary's ids cross as integers: 'b' has id 1, as the bucket id 1 above.
    vocab = pp.VocabularyList("s", ("a", "b"))
    op = pp.Cross((vocab, "a"), 1000)
    assert _ids(op, {"s": [["b"]], "a": [["x"]]}) == [[_cross_reference((1, "x"), 1000)]]
    assert _cross_reference((1, "x"), 1000) == 859


def test_cross_missing_values_and_product_order():
    op = pp.Cross(("a", "b", "c"), 97)
    features = {
        "a": np.array([["x", ""], ["", ""]]),
        "b": np.array([[1, 2], [3, -1]]),
        "c": np.array([["u", "v"], ["w", "z"]]),
    }
    got = _ids(op, features)
    # row 0: a in {x, ""}, b in {1, 2}, c in {u, v}: 8 combinations, last key fastest;
    # those with a == "" are missing. Row 1: a has no value, so no id at all.
    r = _cross_reference
    present = [r(("x", b, c), 97) for b in (1, 2) for c in ("u", "v")]
    assert got[0] == present + [-1, -1, -1, -1]
    assert got[1] == [-1] * 8
    with pytest.raises(ValueError, match="different batch sizes"):
        op.apply({"a": [["x"]], "b": [[1], [2]], "c": [["u"]]})
    with pytest.raises(ValueError, match="must be a raw feature key or an unweighted"):
        pp.Cross((pp.Numeric("x"), "a"), 10)


# ---------------------------------------------------------------------- weighted


def test_weighted_passes_weights_aligned_with_ids():
    op = pp.Weighted(pp.Identity("x", 4), "w")
    out = op.apply({"x": np.array([[0, 2, -1]]), "w": np.array([[2.0, 0.5, 9.0]])})
    assert out.ids.tolist() == [[0, 2, -1]]
    assert out.weights.dtype == np.float32 and out.weights.tolist() == [[2.0, 0.5, 0.0]]
    with pytest.raises(ValueError, match=r"weight feature 'w' has shape \(1, 2\) but the ids"):
        op.apply({"x": np.array([[0, 2, -1]]), "w": np.array([[2.0, 0.5]])})
    with pytest.raises(ValueError, match=r"weight feature 'w' has dtype <U1; expected numbers"):
        op.apply({"x": np.array([[0]]), "w": np.array([["a"]])})
    with pytest.raises(ValueError, match=r"Feature w is not in features dictionary"):
        op.apply({"x": np.array([[0]])})
    with pytest.raises(ValueError, match=r"Parse config VarLenFeature.* already exists for x"):
        pp.Weighted(pp.Identity("x", 4), "x").input_spec()


# ----------------------------------------------------------------- the container


def _census_like_transform(vocab_path):
    bucket = pp.Bucketize(pp.Numeric("age"), (18.0, 30.0))
    vocab = pp.VocabularyFile("workclass", vocab_path, num_oov_buckets=2)
    return pp.InputTransform(
        [
            ("age", pp.Numeric("age")),
            ("age_bucketized", bucket),
            ("workclass", vocab),
            ("occupation", pp.HashBucket("occupation", 50)),
            ("age_bucketized_X_workclass", pp.Cross((bucket, vocab), 30)),
            ("x_weighted_by_w", pp.Weighted(pp.Identity("x", 3), "w")),
        ]
    )


def _batch():
    return {
        "age": np.array([17, 30, 45]),
        "workclass": np.array(["Private", "?", "Other"]),
        "occupation": np.array([["a", ""], ["b", "c"], ["", ""]]),
        "x": np.array([[1], [2], [0]]),
        "w": np.array([[0.5], [2.0], [1.0]]),
        "unused": np.array(["dropped", "from", "output"]),
    }


def test_input_transform_layout(tmp_path):
    vocab = tmp_path / "workclass.txt"
    vocab.write_text("Private\n?\n")
    transform = _census_like_transform(str(vocab))
    labels = np.array([0, 1, 1])
    features, out_labels = transform.apply(_batch(), labels)
    assert out_labels is labels
    assert transform.apply(_batch())[1] is None
    assert list(features) == list(transform.output_keys())
    assert transform.output_keys() == (
        "age",
        "age_bucketized/ids",
        "workclass/ids",
        "occupation/ids",
        "age_bucketized_X_workclass/ids",
        "x_weighted_by_w/ids",
        "x_weighted_by_w/weights",
    )
    assert features["age"].tolist() == [[17.0], [30.0], [45.0]]
    assert features["age_bucketized/ids"].tolist() == [[0], [2], [2]]
    # "Other" is OOV: 2 + Fingerprint64("Other") % 2
    other = 2 + int(pp.fingerprint64(["Other"])[0]) % 2
    assert features["workclass/ids"].tolist() == [[0], [1], [other]]
    occupation = features["occupation/ids"]
    assert occupation[0, 1] == -1 and occupation[2].tolist() == [-1, -1]
    # bucket ids and vocabulary ids cross as integers
    expected_cross = [_cross_reference((b, w), 30) for b, w in [(0, 0), (2, 1), (2, other)]]
    assert features["age_bucketized_X_workclass/ids"][:, 0].tolist() == expected_cross
    assert features["x_weighted_by_w/weights"].tolist() == [[0.5], [2.0], [1.0]]
    for key, value in features.items():
        assert value.dtype == (np.int32 if key.endswith("/ids") else np.float32), key


def test_input_transform_config_round_trip_and_assets(tmp_path):
    vocab = tmp_path / "workclass.txt"
    vocab.write_text("Private\n?\n")
    transform = _census_like_transform(str(vocab))
    config = json.loads(json.dumps(transform.to_config()))
    rebuilt = pp.InputTransform.from_config(config)
    assert rebuilt == transform
    # the shared Bucketize op is one object again after the round trip
    assert rebuilt.outputs[1][1] is rebuilt.outputs[4][1].keys[0]
    a, b = transform.transform_features(_batch()), rebuilt.transform_features(_batch())
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    assert transform.assets() == (str(vocab),)
    # An export loader reads vocabulary files from assets/ by basename.
    assets = tmp_path / "export" / "assets"
    os.makedirs(assets)
    (assets / "workclass.txt").write_text("?\nPrivate\n")  # a different order on purpose
    moved = pp.InputTransform.from_config(config, assets_dir=str(assets))
    assert moved.outputs[2][1].vocabulary_file == str(assets / "workclass.txt")
    assert moved.transform_features(_batch())["workclass/ids"][:2].tolist() == [[1], [0]]


def test_input_transform_input_spec():
    transform = pp.InputTransform(
        {
            "age": pp.Numeric("age", default_value=0.0),
            "s": pp.VocabularyList("s", ("a",)),
            "i": pp.Identity("i", 3),
            "c": pp.Cross(("s", "t"), 5),
            "w": pp.Weighted(pp.HashBucket("h", 4, dtype=np.int32), "hw", dtype=np.float64),
        }
    )
    assert transform.input_spec() == {
        "age": pp.FixedLenFeature((1,), np.float32, (0.0,)),
        "s": pp.VarLenFeature(str),
        "i": pp.VarLenFeature(np.int64),
        "t": pp.VarLenFeature(object),
        "h": pp.VarLenFeature(np.int32),
        "hw": pp.VarLenFeature(np.float64),
    }
    clash = pp.InputTransform({"a": pp.Numeric("k"), "b": pp.HashBucket("k", 3)})
    with pytest.raises(ValueError, match="feature_columns contain different parse_spec for key k"):
        clash.input_spec()


def test_feature_specs_config_round_trip():
    specs = [
        pp.FixedLenFeature((2,), np.int64, [1, 2]),
        pp.FixedLenFeature(3, "float32"),
        pp.VarLenFeature(str),
        pp.VarLenFeature(np.float32),
    ]
    assert specs[0].default_value == (1, 2) and specs[1].shape == (3,)
    assert specs[2].dtype == np.dtype(object) and pp.VarLenFeature(bytes) == specs[2]
    for spec in specs:
        assert pp.feature_from_config(json.loads(json.dumps(spec.to_config()))) == spec
    with pytest.raises(ValueError, match="Unknown feature spec type 'Sparse'"):
        pp.feature_from_config({"type": "Sparse"})


def test_input_transform_errors(tmp_path):
    with pytest.raises(ValueError, match=r"output key 'a/ids' is produced by both"):
        pp.InputTransform([("a", pp.HashBucket("x", 3)), ("a", pp.HashBucket("y", 3))])
    with pytest.raises(TypeError, match=r"entries must be \(name, Op\) pairs"):
        pp.InputTransform([("a", "not an op")])
    transform = pp.InputTransform([("x", pp.Numeric("x")), ("s", pp.HashBucket("s", 3))])
    with pytest.raises(TypeError, match="need features as a dict.*got ndarray"):
        transform.apply(np.zeros(3))
    with pytest.raises(ValueError, match=r"different batch sizes: \{'x': 2, 's/ids': 3\}"):
        transform.apply({"x": np.zeros(2), "s": np.array(["a", "b", "c"])})
    with pytest.raises(ValueError, match=r"Unknown preprocessing op 'Mystery'\. Known ops: "):
        pp.op_from_config({"class_name": "Mystery", "config": {}})
    with pytest.raises(ValueError, match="Not an InputTransform config of version 1"):
        pp.InputTransform.from_config({"format": "other", "version": 1, "outputs": []})
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for d in "ab":
        (tmp_path / d / "v.txt").write_text("x\n")
    same_name = pp.InputTransform(
        [
            ("p", pp.VocabularyFile("p", str(tmp_path / "a" / "v.txt"))),
            ("q", pp.VocabularyFile("q", str(tmp_path / "b" / "v.txt"))),
        ]
    )
    with pytest.raises(ValueError, match="have the same file name"):
        same_name.assets()


def test_ops_too_many_buckets_for_int32():
    with pytest.raises(ValueError, match="do not fit int32 ids"):
        pp.HashBucket("h", 2**31)


def test_transforms_of_row_by_row_ops_may_run_over_whole_datasets():
    vocab = pp.VocabularyList("b", ("x", "y"))
    wide = pp.InputTransform(
        {"a": pp.HashBucket("a", 10), "ab": pp.Cross(("a", vocab), 5), "n": pp.Numeric("n")}
    )
    assert wide.row_wise
    # A sequence is padded to its batch's longest: its host phase stays per batch.
    assert not pp.InputTransform({"s": pp.SequenceCategorical(vocab)}).row_wise

    @dataclasses.dataclass(frozen=True)
    class Custom(pp.Op):  # a user's op: per batch unless it says otherwise
        key: str

    assert not pp.InputTransform({"c": Custom("c")}).row_wise


def test_a_batch_converts_and_hashes_a_shared_key_once(monkeypatch):
    # A vocabulary, a hash bucket and two crosses of the same two string features: each
    # feature is decoded once and fingerprinted once per batch (the ops' shared cache), and
    # the ids equal each op computed alone.
    from estimator.preprocessing import _base

    decoded, hashed = [], []
    original_decoded, original_fingerprint = _base._decoded, _base.fingerprint64
    monkeypatch.setattr(_base, "_decoded", lambda x, *a: decoded.append(x.size) or
                        original_decoded(x, *a))  # fmt: skip
    monkeypatch.setattr(_base, "fingerprint64", lambda v: hashed.append(len(v)) or
                        original_fingerprint(v))  # fmt: skip
    ops = {
        "vocab": pp.VocabularyList("a", ("x", "y")),
        "bucket": pp.HashBucket("b", 100),
        "cross": pp.Cross(("a", "b"), 1000),
        "cross3": pp.Cross(("a", "b", pp.HashBucket("b", 7)), 1000),
    }
    features = {
        "a": np.array([[b"x"], [b"z"], [b"y"]], dtype=object),
        "b": np.array([[b"p"], [b"q"], [b""]], dtype=object),
    }
    transform = pp.InputTransform(list(ops.items()))
    together = transform.apply(features)[0]
    # Once each (op by op: "a" decoded by the vocabulary and the crosses, "b" by the two
    # buckets and the crosses, 5 decodes; "b" fingerprinted by both buckets and the crosses).
    assert decoded == [3, 3] and hashed == [3, 3]
    for name, op in ops.items():
        assert together[name + "/ids"].tolist() == op.apply(features).ids.tolist()


def test_a_non_utf8_value_is_named_by_its_place_in_the_batch():
    # Through an op (a batch decoded at once): the message gives the value's index in the
    # batch.
    x = np.array([[b"ok"], [b"ok"], [b"\xffbad"]], dtype=object)
    with pytest.raises(ValueError, match=r"\(b'\\xffbad' at flat index 2\)"):
        pp.VocabularyList("k", ("ok",)).apply({"k": x})


def test_sparse_input_in_any_order_is_densified_by_its_indices():
    # parse_example's VarLenFeature gives one value per row in row-major order; the same
    # cells in another order (a tf.SparseTensor value built by hand), two values per row
    # and a row without a value are all placed by their indices.
    from estimator.io import SparseValue

    op = pp.VocabularyList("k", ("a", "b", "c"))
    values = np.array([b"a", b"b", b"c", b"a"], dtype=object)
    in_order = SparseValue(np.array([[0, 0], [1, 0], [2, 0], [3, 0]]), values, np.array([4, 1]))
    assert _ids(op, {"k": in_order}) == [[0], [1], [2], [0]]
    reverse = SparseValue(in_order.indices[::-1], values[::-1], np.array([4, 1]))
    assert _ids(op, {"k": reverse}) == [[0], [1], [2], [0]]
    two_per_row = SparseValue(np.array([[0, 1], [0, 0], [1, 0], [1, 1]]), values, np.array([2, 2]))
    assert _ids(op, {"k": two_per_row}) == [[1, 0], [2, 0]]
    missing_row = SparseValue(np.array([[0, 0], [2, 0], [3, 0]]), values[:3], np.array([4, 1]))
    assert _ids(op, {"k": missing_row}) == [[0], [-1], [1], [2]]


def test_fixed_width_bytes_give_the_ids_of_bytes_objects():
    """Strings as fixed-width bytes (the TFRecord reader's for the host phase) are looked
    up and hashed per distinct value with the results of bytes objects and str."""
    values = ["red", "", "blue", "über", "red", "x" * 40]
    ops = [
        pp.VocabularyList("s", ("red", "blue"), num_oov_buckets=3),
        pp.HashBucket("s", 97),
        pp.Cross(("s", "s"), 1000),
    ]
    for op in ops:
        as_str = _ids(op, {"s": np.array(values, dtype=object)[:, None]})
        as_bytes = _ids(op, {"s": np.array([v.encode() for v in values], dtype=object)[:, None]})
        fixed = _ids(op, {"s": np.array([v.encode() for v in values])[:, None]})  # dtype S
        assert fixed == as_bytes == as_str, op
    with pytest.raises(ValueError, match=r"holds bytes that are not UTF-8 text \(b'\\xff'"):
        _ids(ops[0], {"s": np.array([b"ok", b"\xff"])[:, None]})
