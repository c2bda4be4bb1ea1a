"""Tests of canned.feature_column: TF's constructors, names and messages, and the device
phase (linear_model, input_layer) with known weights; expected logits derived by hand."""

import csv
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import canned.feature_column as fc
import estimator as est
from estimator import preprocessing as pp
from estimator.model.variables import APPLY, INIT, Frame, transform_context

ADULT = "../shared/data/adult/adult.data"
ADULT_COLUMNS = (
    "age,workclass,fnlwgt,education,education_num,marital_status,occupation,relationship,race,"
    "gender,capital_gain,capital_loss,hours_per_week,native_country,income_bracket"
).split(",")


def _init_eager(fn):
    """Runs ``fn`` in an INIT frame; returns (result, trainable variables)."""
    frame = Frame(INIT, jax.random.key(0), jnp.int32(0))
    with transform_context(frame):
        out = fn()
    return out, frame.trainable


def _init(fn):
    """:func:`_init_eager` compiled as one function (faster than op-by-op)."""
    return jax.jit(lambda: _init_eager(fn))()


def _apply(fn, trainable):
    """Runs ``fn`` in an APPLY frame with the given variable values."""
    frame = Frame(APPLY, jax.random.key(0), jnp.int32(0), trainable=trainable)
    with transform_context(frame):
        return fn()


def _with_weights(fn, **named):
    """Runs ``fn`` (jitted) with ``named`` variable values, zeros for the others."""

    shapes = jax.eval_shape(lambda: _init_eager(fn)[1])
    unknown = set(named) - set(shapes)
    assert not unknown, (unknown, sorted(shapes))
    values = {k: jnp.zeros(v.shape, v.dtype) for k, v in shapes.items()}
    values.update({k: jnp.asarray(v, jnp.float32) for k, v in named.items()})
    return np.asarray(jax.jit(lambda values: _apply(fn, values))(values))


# ------------------------------------------------------------------ constructors


def test_names_buckets_and_shapes(tmp_path):
    vocab = tmp_path / "v.txt"
    vocab.write_text("a\nb\nc\n")
    age = fc.numeric_column("age")
    buckets = fc.bucketized_column(age, [18, 30])
    workclass = fc.categorical_column_with_vocabulary_list(
        "workclass", ["a", "b"], num_oov_buckets=2
    )
    from_file = fc.categorical_column_with_vocabulary_file("f", str(vocab), num_oov_buckets=1)
    hashed = fc.categorical_column_with_hash_bucket("occupation", 10)
    ident = fc.categorical_column_with_identity("x", 3)
    cross = fc.crossed_column([buckets, "education", "occupation"], 7)
    nested = fc.crossed_column([fc.crossed_column(["b", "a"], 5), "c"], 9)
    weighted = fc.weighted_categorical_column(ident, "w")
    assert age.name == "age" and age.variable_shape == (1,)
    assert fc.numeric_column("p", shape=2).shape == (2,)
    assert buckets.name == "age_bucketized" and buckets.num_buckets == 3
    assert buckets.variable_shape == (1, 3)
    assert fc.bucketized_column(fc.numeric_column("p", 2), [0.0]).num_buckets == 4
    assert workclass.name == "workclass" and workclass.num_buckets == 4
    assert workclass.dtype == "string"
    assert from_file.vocabulary_size == 3 and from_file.num_buckets == 4
    assert from_file.default_value == -1
    assert hashed.num_buckets == 10 and ident.num_buckets == 3
    assert cross.name == "age_bucketized_X_education_X_occupation" and cross.num_buckets == 7
    assert nested.name == "a_X_b_X_c"
    assert weighted.name == "x_weighted_by_w" and weighted.num_buckets == 3
    assert fc.indicator_column(workclass).name == "workclass_indicator"
    assert fc.indicator_column(workclass).variable_shape == (4,)
    embedding = fc.embedding_column(hashed, 3)
    assert embedding.name == "occupation_embedding" and embedding.variable_shape == (3,)
    assert embedding.combiner == "mean"
    assert fc.categorical_column_with_vocabulary_list("i", [3, 1]).dtype == "int64"


def test_make_parse_example_spec():
    age = fc.numeric_column("age", default_value=0.0)
    columns = [
        age,
        fc.bucketized_column(age, [18]),
        fc.categorical_column_with_vocabulary_list("workclass", ["a"]),
        fc.crossed_column(["education", fc.categorical_column_with_identity("n", 3)], 10),
        fc.weighted_categorical_column(
            fc.categorical_column_with_hash_bucket("h", 5, dtype=np.int32), "hw"
        ),
        fc.embedding_column(fc.categorical_column_with_identity("e", 4), 2),
    ]
    assert fc.make_parse_example_spec(columns) == {
        "age": pp.FixedLenFeature((1,), np.float32, (0.0,)),
        "workclass": pp.VarLenFeature(str),
        "education": pp.VarLenFeature(str),
        "n": pp.VarLenFeature(np.int64),
        "h": pp.VarLenFeature(np.int32),
        "hw": pp.VarLenFeature(np.float32),
        "e": pp.VarLenFeature(np.int64),
    }
    with pytest.raises(ValueError, match="All feature_columns must be FeatureColumn instances"):
        fc.make_parse_example_spec(["age"])
    with pytest.raises(ValueError, match="contain different parse_spec for key age"):
        fc.make_parse_example_spec([age, fc.categorical_column_with_hash_bucket("age", 3)])


_IDENT = fc.categorical_column_with_identity("a", 3)


@pytest.mark.parametrize(
    "make, error, message",
    [
        (
            lambda: fc.numeric_column("a", shape=(1.5,)),
            TypeError,
            "shape dimensions must be integer",
        ),
        (lambda: fc.numeric_column("a", shape=0), ValueError, "shape dimensions must be greater"),
        (
            lambda: fc.numeric_column("a", dtype=str),
            ValueError,
            "dtype must be convertible to float",
        ),
        (
            lambda: fc.numeric_column("a", shape=2, default_value=[1.0]),
            ValueError,
            "The shape of default_value must be equal to given shape",
        ),
        (
            lambda: fc.numeric_column("a", default_value="x"),
            TypeError,
            "default_value must be compatible with dtype",
        ),
        (
            lambda: fc.numeric_column("a", default_value=1.5, dtype=np.int64),
            TypeError,
            "default_value must be compatible with dtype",
        ),
        (lambda: fc.numeric_column("a", normalizer_fn=3), TypeError, "normalizer_fn must be a"),
        (lambda: fc.numeric_column(3), ValueError, "key must be a string. Got: type <class 'int'>"),
        (
            lambda: fc.bucketized_column(_IDENT, [1]),
            ValueError,
            r"source_column must be a column generated with numeric_column\(\)",
        ),
        (
            lambda: fc.bucketized_column(fc.numeric_column("a", (2, 2)), [1]),
            ValueError,
            "source_column must be one-dimensional column",
        ),
        (
            lambda: fc.bucketized_column(fc.numeric_column("a", normalizer_fn=abs), [1]),
            ValueError,
            "has a normalizer_fn",
        ),
        (
            lambda: fc.bucketized_column(fc.numeric_column("a"), []),
            ValueError,
            "boundaries must not be empty",
        ),
        (
            lambda: fc.bucketized_column(fc.numeric_column("a"), {1, 2}),
            ValueError,
            "boundaries must be a sorted list",
        ),
        (
            lambda: fc.bucketized_column(fc.numeric_column("a"), [2, 1]),
            ValueError,
            "boundaries must be a sorted list",
        ),
        (
            lambda: fc.categorical_column_with_vocabulary_list("a", []),
            ValueError,
            r"vocabulary_list \[\] must be non-empty, column_name: a",
        ),
        (
            lambda: fc.categorical_column_with_vocabulary_list("a", ["x", "x"]),
            ValueError,
            "Duplicate keys in vocabulary_list",
        ),
        (
            lambda: fc.categorical_column_with_vocabulary_list(
                "a", ["x"], default_value=0, num_oov_buckets=1
            ),
            ValueError,
            "Can't specify both num_oov_buckets and default_value in a",
        ),
        (
            lambda: fc.categorical_column_with_vocabulary_list("a", ["x"], num_oov_buckets=-1),
            ValueError,
            "Invalid num_oov_buckets -1 in a",
        ),
        (
            lambda: fc.categorical_column_with_vocabulary_list("a", [1.5]),
            ValueError,
            "column_name: a vocabulary dtype must be string or integer",
        ),
        (
            lambda: fc.categorical_column_with_vocabulary_list("a", ["x"], dtype=np.int64),
            ValueError,
            "dtype int64 and vocabulary dtype string do not match",
        ),
        (
            lambda: fc.categorical_column_with_vocabulary_file("a", ""),
            ValueError,
            "Missing vocabulary_file in a",
        ),
        (
            lambda: fc.categorical_column_with_vocabulary_file("a", "/nonexistent/v.txt"),
            ValueError,
            "vocabulary_file in a does not exist",
        ),
        (
            lambda: fc.categorical_column_with_vocabulary_file("a", "v.txt", vocabulary_size=0),
            ValueError,
            "Invalid vocabulary_size in a",
        ),
        (
            lambda: fc.categorical_column_with_vocabulary_file(
                "a", "v.txt", 3, default_value=0, num_oov_buckets=1
            ),
            ValueError,
            "Can't specify both num_oov_buckets and default_value in a",
        ),
        (
            lambda: fc.categorical_column_with_vocabulary_file("a", "v.txt", 3, num_oov_buckets=-2),
            ValueError,
            "Invalid num_oov_buckets -2 in a",
        ),
        (
            lambda: fc.categorical_column_with_vocabulary_file("a", "v.txt", 3, dtype=np.float32),
            ValueError,
            "column_name: a dtype must be string or integer",
        ),
        (
            lambda: fc.categorical_column_with_vocabulary_file("a", "v.tfrecord.gz", 3),
            ValueError,
            "file_format None in a is not supported",
        ),
        (
            lambda: fc.categorical_column_with_hash_bucket("a", None),
            ValueError,
            "hash_bucket_size must be set. key: a",
        ),
        (
            lambda: fc.categorical_column_with_hash_bucket("a", 0),
            ValueError,
            "hash_bucket_size must be at least 1. hash_bucket_size: 0, key: a",
        ),
        (
            lambda: fc.categorical_column_with_hash_bucket("a", 3, dtype=np.float32),
            ValueError,
            "column_name: a dtype must be string or integer",
        ),
        (
            lambda: fc.categorical_column_with_identity("a", 0),
            ValueError,
            "num_buckets 0 < 1, column_name a",
        ),
        (
            lambda: fc.categorical_column_with_identity("a", 3, default_value=3),
            ValueError,
            r"default_value 3 not in range \[0, 3\), column_name a",
        ),
        (
            lambda: fc.weighted_categorical_column(_IDENT, "w", str),
            ValueError,
            "is not convertible to float",
        ),
        (
            lambda: fc.weighted_categorical_column(fc.numeric_column("a"), "w"),
            ValueError,
            "categorical_column must be a CategoricalColumn",
        ),
        (lambda: fc.crossed_column(["a", "b"], 0), ValueError, "hash_bucket_size must be > 1"),
        (lambda: fc.crossed_column(["a"], 5), ValueError, "keys must be a list with length > 1"),
        (lambda: fc.crossed_column(["a", 3], 5), ValueError, "Unsupported key type"),
        (
            lambda: fc.crossed_column(["a", fc.categorical_column_with_hash_bucket("b", 3)], 5),
            ValueError,
            "categorical_column_with_hash_bucket is not supported for crossing",
        ),
        (
            lambda: fc.crossed_column(
                [
                    "a",
                    fc.weighted_categorical_column(
                        fc.categorical_column_with_identity("b", 3), "w"
                    ),
                ],
                5,
            ),
            ValueError,
            "crossed_column does not support weight_tensor.*Given column: b_weighted_by_w",
        ),
        (
            lambda: fc.indicator_column(fc.numeric_column("a")),
            ValueError,
            "Unsupported input type. Input must be a CategoricalColumn",
        ),
        (
            lambda: fc.embedding_column(_IDENT, 0),
            ValueError,
            "Invalid dimension 0",
        ),
        (
            lambda: fc.embedding_column(_IDENT, 2, ckpt_to_load_from="x"),
            ValueError,
            "Must specify both `ckpt_to_load_from` and `tensor_name_in_ckpt`",
        ),
        (
            lambda: fc.embedding_column(_IDENT, 2, initializer=1),
            ValueError,
            "initializer must be callable if specified. Embedding of column_name: a",
        ),
        (
            lambda: fc.embedding_column(_IDENT, 2, ckpt_to_load_from="x", tensor_name_in_ckpt="y"),
            NotImplementedError,
            "warm_start_from",
        ),
        (
            lambda: fc.embedding_column(_IDENT, 2, combiner="max"),
            ValueError,
            "combiner must be one of 'mean', 'sqrtn' or 'sum', got max",
        ),
        (
            lambda: fc.embedding_column(fc.numeric_column("a"), 2),
            ValueError,
            "categorical_column must be a CategoricalColumn",
        ),
    ],
)
def test_constructor_errors(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_feature_columns_list_errors():
    age = fc.numeric_column("age")
    features = {"age": np.ones((2, 1), np.float32)}
    with pytest.raises(ValueError, match="Expected feature_columns to be iterable, found dict"):
        _init(lambda: fc.linear_model(features, {"age": age}))
    with pytest.raises(ValueError, match="Items of feature_columns must be a FeatureColumn"):
        _init(lambda: fc.linear_model(features, ["age"]))
    with pytest.raises(ValueError, match="feature_columns must not be empty"):
        _init(lambda: fc.linear_model(features, []))
    with pytest.raises(ValueError, match="Duplicate feature column name found for columns"):
        _init(lambda: fc.linear_model(features, [age, fc.numeric_column("age", shape=2)]))
    with pytest.raises(ValueError, match="combiner must be one of 'mean', 'sqrtn' or 'sum'"):
        _init(lambda: fc.linear_model(features, [age], sparse_combiner="max"))
    with pytest.raises(ValueError, match="Items of feature_columns must be a _DenseColumn"):
        _init(lambda: fc.input_layer(features, [fc.categorical_column_with_identity("n", 3)]))
    ident = fc.categorical_column_with_identity("n", 3)
    missing = r"Feature n/ids is not in features dictionary.*input_transform\(feature_columns\)"
    with pytest.raises(ValueError, match=missing):
        _init(lambda: fc.linear_model({"n": np.array([[1]])}, [ident]))
    mismatched = {"age": np.ones((2, 1)), "n/ids": np.ones((3, 1), np.int32)}
    with pytest.raises(ValueError, match=r"Batch size \(first dimension\) of each feature must"):
        _init(lambda: fc.linear_model(mismatched, [age, ident]))
    with pytest.raises(TypeError, match="need features as a dict"):
        _init(lambda: fc.linear_model(np.ones((2, 1)), [age]))
    other = fc.categorical_column_with_vocabulary_list("n", ["a"])
    with pytest.raises(ValueError, match="Two different feature columns are named 'n'"):
        fc.input_transform([ident, fc.indicator_column(other)])


# -------------------------------------------------------------------- input_transform


def test_input_transform_layout_and_shared_columns():
    age = fc.numeric_column("age")
    workclass = fc.categorical_column_with_vocabulary_list("workclass", ["a", "b"])
    columns = [
        fc.bucketized_column(age, [30]),  # the numeric source alone gives no output
        workclass,
        fc.indicator_column(workclass),  # shares workclass/ids
        fc.embedding_column(fc.categorical_column_with_hash_bucket("h", 5), 2),
        fc.weighted_categorical_column(fc.categorical_column_with_identity("x", 3), "w"),
        fc.crossed_column(["workclass", "h"], 4),
    ]
    transform = fc.input_transform(columns)
    assert isinstance(transform, pp.InputTransform)
    assert transform.output_keys() == (
        "age_bucketized/ids",
        "workclass/ids",
        "h/ids",
        "x_weighted_by_w/ids",
        "x_weighted_by_w/weights",
        "h_X_workclass/ids",
    )
    assert fc.input_transform(fc.numeric_column("z")).output_keys() == ("z",)


# ------------------------------------------------------------------------- linear


def test_linear_model_variable_names_match_tf():
    age = fc.numeric_column("age")
    workclass = fc.categorical_column_with_vocabulary_list("workclass", ["a", "b"])
    columns = [
        age,
        fc.bucketized_column(age, [18, 30]),
        workclass,
        fc.categorical_column_with_hash_bucket("occupation", 10),
        fc.crossed_column(["education", "occupation"], 7),
        fc.weighted_categorical_column(fc.categorical_column_with_identity("x", 3), "w"),
        fc.indicator_column(workclass),
    ]
    raw = {
        "age": np.array([20.0, 40.0]),
        "workclass": np.array(["a", "c"]),
        "occupation": np.array(["z", "y"]),
        "education": np.array(["e", "f"]),
        "x": np.array([1, 2]),
        "w": np.array([0.5, 2.0]),
    }
    features, _ = fc.input_transform(columns).apply(raw)

    def model():
        with est.variable_scope("linear"):
            return fc.linear_model(features, columns)

    logits, variables = _init(model)
    # from TF 2.15.1: LinearClassifier(these columns).get_variable_names(), minus global_step
    # and the Ftrl slots
    assert sorted(variables) == [
        "linear/linear_model/age/weights",
        "linear/linear_model/age_bucketized/weights",
        "linear/linear_model/bias_weights",
        "linear/linear_model/education_X_occupation/weights",
        "linear/linear_model/occupation/weights",
        "linear/linear_model/workclass/weights",
        "linear/linear_model/workclass_indicator/weights",
        "linear/linear_model/x_weighted_by_w/weights",
    ]
    shapes = {k.split("/")[2]: v.shape for k, v in variables.items()}
    assert shapes == {
        "age": (1, 1),
        "age_bucketized": (3, 1),
        "bias_weights": (1,),
        "education_X_occupation": (7, 1),
        "occupation": (10, 1),
        "workclass": (2, 1),
        "workclass_indicator": (2, 1),
        "x_weighted_by_w": (3, 1),
    }
    assert all(not np.any(v) for v in variables.values())  # zero-initialised
    assert logits.shape == (2, 1) and not np.any(logits)


@pytest.mark.parametrize(
    "combiner, expected",
    [
        # age: 0.5 * 20 = 10 and 0.5 * 40 = 20; age_bucketized ([18, 30]): 20 -> bucket 1
        # (weight 2), 40 -> bucket 2 (weight 3); workclass ["a", "b"] / ["b", ""] with
        # weights a=10, b=20; bias 0.25.
        ("sum", [10 + 2 + (10 + 20) + 0.25, 20 + 3 + 20 + 0.25]),  # 42.25, 43.25
        ("mean", [10 + 2 + (10 + 20) / 2 + 0.25, 20 + 3 + 20 + 0.25]),  # 27.25, 43.25
        ("sqrtn", [10 + 2 + (10 + 20) / math.sqrt(2) + 0.25, 20 + 3 + 20 + 0.25]),
    ],
)
def test_linear_model_logits_by_hand(combiner, expected):
    age = fc.numeric_column("age")
    columns = [
        age,
        fc.bucketized_column(age, [18, 30]),
        fc.categorical_column_with_vocabulary_list("workclass", ["a", "b"]),
    ]
    raw = {"age": np.array([20, 40]), "workclass": np.array([["a", "b"], ["b", ""]])}
    features, _ = fc.input_transform(columns).apply(raw)
    logits = _with_weights(
        lambda: fc.linear_model(features, columns, sparse_combiner=combiner),
        **{
            "linear_model/age/weights": [[0.5]],
            "linear_model/age_bucketized/weights": [[1.0], [2.0], [3.0]],
            "linear_model/workclass/weights": [[10.0], [20.0]],
            "linear_model/bias_weights": [0.25],
        },
    )
    np.testing.assert_allclose(logits[:, 0], expected, rtol=1e-6)


@pytest.mark.parametrize(
    "combiner, expected",
    [
        # weights of ids 0..3: 1, 10, 100, 1000.
        # row 0: ids 0, 2 with weights 2, 0.5 -> 2*1 + 0.5*100 = 52
        # row 1: ids 3, 3, 1 with weights 1, 3, 4 -> 1000 + 3000 + 40 = 4040
        # row 2: no id -> 0
        ("sum", [52.0, 4040.0, 0.0]),
        ("mean", [52 / 2.5, 4040 / 8, 0.0]),  # 20.8, 505 (TF 2.15.1 gave the same)
        ("sqrtn", [52 / math.sqrt(4 + 0.25), 4040 / math.sqrt(1 + 9 + 16), 0.0]),
    ],
)
def test_linear_model_weighted_column_and_combiners(combiner, expected):
    column = fc.weighted_categorical_column(fc.categorical_column_with_identity("x", 4), "w")
    raw = {
        "x": np.array([[0, 2, -1], [3, 3, 1], [-1, -1, -1]]),
        "w": np.array([[2.0, 0.5, 0.0], [1.0, 3.0, 4.0], [0.0, 0.0, 0.0]]),
    }
    features, _ = fc.input_transform([column]).apply(raw)
    logits = _with_weights(
        lambda: fc.linear_model(features, [column], sparse_combiner=combiner),
        **{"linear_model/x_weighted_by_w/weights": [[1.0], [10.0], [100.0], [1000.0]]},
    )
    np.testing.assert_allclose(logits[:, 0], expected, rtol=1e-6)


def test_linear_model_units_numeric_shape_indicator_cross_embedding():
    pos = fc.numeric_column("pos", shape=2)
    letters = fc.categorical_column_with_vocabulary_list("s", ["a", "b", "c"])
    cross = fc.crossed_column(["s", "t"], 5)
    embedding = fc.embedding_column(fc.categorical_column_with_identity("e", 3), 2)
    columns = [pos, fc.indicator_column(letters), cross, embedding]
    raw = {
        "pos": np.array([[1.0, 2.0], [0.0, -1.0]]),
        "s": np.array([["a", "a"], ["c", ""]]),
        "t": np.array([["u", ""], ["v", ""]]),
        "e": np.array([0, 2]),
    }
    features, _ = fc.input_transform(columns).apply(raw)
    cross_ids = features["s_X_t/ids"]
    # row 0: s {a, a} x t {u, ""} -> (a, u) twice; row 1: s {c, ""} x t {v, ""} -> (c, v)
    assert (cross_ids >= 0).sum(axis=1).tolist() == [2, 1]
    units = 2
    named = {
        "linear_model/pos/weights": [[10.0, 1.0], [100.0, 2.0]],
        "linear_model/s_indicator/weights": [[1.0, 0.0], [2.0, 0.0], [3.0, 0.0]],
        # the weight of cross bucket j is (j, 0)
        "linear_model/s_X_t/weights": [[float(j), 0.0] for j in range(5)],
        "linear_model/e_embedding/embedding_weights": [[1.0, 2.0], [0.0, 0.0], [3.0, 5.0]],
        "linear_model/e_embedding/weights": [[0.0, 1.0], [0.0, 10.0]],
        "linear_model/bias_weights": [0.0, 0.5],
    }
    logits = _with_weights(lambda: fc.linear_model(features, columns, units=units), **named)
    # row 0: pos [1, 2] -> [1*10 + 2*100, 1*1 + 2*2] = [210, 5]; indicator a,a -> 2 * (1, 0);
    # cross: (a,u) and (a,u) again (s has two values, t one) -> 2 * (id, 0);
    # embedding of id 0 = [1, 2] -> [0, 1*1 + 2*10] = [0, 21]; bias [0, 0.5].
    # row 1: pos [0, -1] -> [-100, -2]; indicator c -> (3, 0); cross (c,v) -> (id, 0);
    # embedding of id 2 = [3, 5] -> [0, 3 + 50] = [0, 53].
    row0_cross = 2 * cross_ids[0][cross_ids[0] >= 0][0]
    row1_cross = cross_ids[1][cross_ids[1] >= 0][0]
    expected = [
        [210 + 2 + row0_cross + 0, 5 + 0 + 0 + 21 + 0.5],
        [-100 + 3 + row1_cross + 0, -2 + 0 + 0 + 53 + 0.5],
    ]
    np.testing.assert_allclose(logits, expected, rtol=1e-6)


def test_linear_model_cols_to_vars_and_scope_naming():
    age = fc.numeric_column("age")
    features = {"age": np.ones((2, 1), np.float32)}
    cols_to_vars = {}

    def model():
        first = fc.linear_model(features, [age], cols_to_vars=cols_to_vars)
        fc.linear_model(features, [age])  # a second call gets a unique scope, as TF
        return first

    _, variables = _init_eager(model)
    assert sorted(variables) == [
        "linear_model/age/weights",
        "linear_model/bias_weights",
        "linear_model_1/age/weights",
        "linear_model_1/bias_weights",
    ]
    assert set(cols_to_vars) == {age, "bias"}
    assert cols_to_vars[age][0].shape == (1, 1) and cols_to_vars["bias"][0].shape == (1,)
    _, frozen = _init(lambda: fc.linear_model(features, [age], trainable=False))
    assert frozen == {}


def test_linear_model_compiles_once_for_a_fixed_shape():
    columns = [fc.numeric_column("age"), fc.categorical_column_with_hash_bucket("h", 7)]
    transform = fc.input_transform(columns)
    first, _ = transform.apply({"age": np.array([1.0, 2.0]), "h": np.array(["a", "b"])})
    second, _ = transform.apply({"age": np.array([3.0, 4.0]), "h": np.array(["c", ""])})
    _, variables = _init(lambda: fc.linear_model(first, columns))
    traces = []

    @jax.jit
    def step(variables, features):
        traces.append(1)
        return _apply(lambda: fc.linear_model(features, columns), variables)

    step(variables, first)
    step(variables, second)
    assert len(traces) == 1


# -------------------------------------------------------------------- input_layer


def test_input_layer_concatenates_by_name():
    zeta = fc.numeric_column("zeta", normalizer_fn=lambda x: (x - 3.0) / 2.0)
    letters = fc.categorical_column_with_vocabulary_list("s", ["a", "b", "c"])
    columns = [
        zeta,
        fc.embedding_column(letters, 2),
        fc.bucketized_column(fc.numeric_column("m"), [0.0, 1.0]),
        fc.indicator_column(letters),
        fc.indicator_column(
            fc.weighted_categorical_column(fc.categorical_column_with_identity("x", 3), "w")
        ),
    ]
    raw = {
        "zeta": np.array([5.0, 3.0, 1.0]),
        "s": np.array([["a", "c"], ["b", ""], ["", ""]]),
        "m": np.array([-1.0, 1.0, 0.5]),
        "x": np.array([[0, 2, 0], [1, -1, -1], [-1, -1, -1]]),
        "w": np.array([[1.0, 2.0, 3.0], [0.5, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    }
    features, _ = fc.input_transform(columns).apply(raw)
    embedding = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
    dense = _with_weights(
        lambda: fc.input_layer(features, columns),
        **{"input_layer/s_embedding/embedding_weights": embedding},
    )
    # Order by name: m_bucketized (3), s_embedding (2), s_indicator (3),
    # x_weighted_by_w_indicator (3), zeta (1).
    expected = [
        # m -1 -> bucket 0; mean of rows a, c = [3, 4]; a + c; x: 0 twice (1 + 3), 2 (2);
        # zeta (5 - 3) / 2 = 1
        [1, 0, 0, 3, 4, 1, 0, 1, 4, 0, 2, 1],
        # m 1 -> bucket 2 (a boundary goes up); row b = [3, 4]; b; x: 1 (0.5); zeta 0
        [0, 0, 1, 3, 4, 0, 1, 0, 0, 0.5, 0, 0],
        # m 0.5 -> bucket 1; no letters -> zeros; no x -> zeros; zeta (1 - 3) / 2 = -1
        [0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1],
    ]
    np.testing.assert_allclose(dense, expected, rtol=1e-6)
    outputs, variables = {}, {}
    _, created = _init_eager(
        lambda: fc.input_layer(
            features, columns, cols_to_vars=variables, cols_to_output_tensors=outputs
        )
    )
    assert list(created) == ["input_layer/s_embedding/embedding_weights"]
    assert outputs[columns[1]].shape == (3, 2) and variables[columns[1]][0].shape == (3, 2)
    assert variables[zeta] == []


@pytest.mark.parametrize(
    "combiner, max_norm, expected",
    [
        # rows: id 0 = [3, 4] (norm 5), id 1 = [0, 1]; example ids [0, 1] and [1]
        ("sum", None, [[3, 5], [0, 1]]),
        ("mean", None, [[1.5, 2.5], [0, 1]]),
        ("sqrtn", None, [[3 / math.sqrt(2), 5 / math.sqrt(2)], [0, 1]]),
        # max_norm 1 rescales [3, 4] to [0.6, 0.8] before combining
        ("sum", 1.0, [[0.6, 1.8], [0, 1]]),
    ],
)
def test_embedding_combiners_and_max_norm(combiner, max_norm, expected):
    column = fc.embedding_column(
        fc.categorical_column_with_identity("e", 2), 2, combiner=combiner, max_norm=max_norm
    )
    features, _ = fc.input_transform([column]).apply({"e": np.array([[0, 1], [1, -1]])})
    dense = _with_weights(
        lambda: fc.input_layer(features, [column]),
        **{"input_layer/e_embedding/embedding_weights": [[3.0, 4.0], [0.0, 1.0]]},
    )
    np.testing.assert_allclose(dense, expected, rtol=1e-6)


def test_embedding_default_initializer_is_truncated_normal():
    column = fc.embedding_column(fc.categorical_column_with_identity("e", 2000), 4)
    features = {"e/ids": np.zeros((1, 1), np.int32)}
    _, variables = _init(lambda: fc.input_layer(features, [column]))
    values = np.asarray(variables["input_layer/e_embedding/embedding_weights"])
    assert values.shape == (2000, 4)
    # truncated_normal(0, 1/sqrt(4) = 0.5): within 2 stddevs; the std of a unit normal
    # truncated to [-2, 2] is 0.8796, so 0.5 * 0.8796 = 0.4398 (8000 draws: +-2%).
    assert np.abs(values).max() <= 1.0
    assert abs(values.std() - 0.4398) < 0.02 and abs(values.mean()) < 0.02
    trainable = fc.embedding_column(fc.categorical_column_with_identity("e", 3), 2, trainable=False)
    frame = Frame(INIT, jax.random.key(0), jnp.int32(0))
    with transform_context(frame):
        fc.input_layer(features, [trainable])
    assert list(frame.non_trainable) == ["input_layer/e_embedding/embedding_weights"]


def test_safe_embedding_lookup_drops_nonpositive_weights_except_for_sum():
    params = jnp.array([[1.0], [10.0]])
    ids = jnp.array([[0, 1]])
    weights = jnp.array([[2.0, -1.0]])
    lookup = jax.jit(fc.safe_embedding_lookup, static_argnums=3)
    # sum keeps the negative weight: 2*1 - 1*10 = -8; mean/sqrtn drop it: 2*1 / 2 = 1 and
    # 2*1 / sqrt(2**2) = 1.
    assert lookup(params, ids, weights, "sum").tolist() == [[-8.0]]
    assert lookup(params, ids, weights, "mean").tolist() == [[1.0]]
    assert lookup(params, ids, weights, "sqrtn").tolist() == [[1.0]]


# ------------------------------------------------------------------- census data


def _adult_rows(n):
    rows = []
    with open(ADULT) as f:
        for row in csv.reader(f, skipinitialspace=True):  # fields after the first start with ", "
            if len(rows) == n:
                break
            rows.append(row)
    columns = zip(*rows, strict=True)
    return {name: np.array(values) for name, values in zip(ADULT_COLUMNS, columns, strict=True)}


def test_census_wide_columns_on_adult_data():
    data = _adult_rows(100)
    raw = {
        "age": data["age"].astype(np.float32),
        "education": data["education"],
        "workclass": data["workclass"],
        "occupation": data["occupation"],
    }
    education_vocab = (
        "Bachelors,HS-grad,11th,Masters,9th,Some-college,Assoc-acdm,Assoc-voc,7th-8th,"
        "Doctorate,Prof-school,5th-6th,10th,1st-4th,Preschool,12th"
    ).split(",")
    workclass_vocab = (
        "Self-emp-not-inc,Private,State-gov,Federal-gov,Local-gov,?,Self-emp-inc,Without-pay,"
        "Never-worked"
    ).split(",")
    boundaries = [18, 25, 30, 35, 40, 45, 50, 55, 60, 65]
    age_buckets = fc.bucketized_column(fc.numeric_column("age"), boundaries)
    columns = [  # the wide columns of TF's census tutorial
        fc.categorical_column_with_vocabulary_list("education", education_vocab),
        fc.categorical_column_with_vocabulary_list("workclass", workclass_vocab),
        fc.categorical_column_with_hash_bucket("occupation", 1000),
        age_buckets,
        fc.crossed_column(["education", "occupation"], 1000),
        fc.crossed_column([age_buckets, "education", "occupation"], 1000),
    ]
    features, _ = fc.input_transform(columns).apply(raw)
    # Vocabulary and bucket ids by an independent reference: list.index and counting.
    assert features["education/ids"][:, 0].tolist() == [
        education_vocab.index(v) for v in data["education"]
    ]
    assert features["workclass/ids"][:, 0].tolist() == [
        workclass_vocab.index(v) for v in data["workclass"]
    ]
    assert (features["workclass/ids"] == 5).sum() == 4  # "?" (missing) is in the vocabulary
    assert features["age_bucketized/ids"][:, 0].tolist() == [
        sum(b <= int(a) for b in boundaries) for a in data["age"]
    ]
    # Row 0: age 39, Bachelors, State-gov, Adm-clerical -> bucket 4 (18, 25, 30, 35 <= 39).
    assert features["age_bucketized/ids"][0, 0] == 4
    # from TF 2.15.1 (first four rows: Adm-clerical, Exec-managerial, Handlers-cleaners x2)
    assert features["occupation/ids"][:4, 0].tolist() == [96, 800, 10, 10]
    assert features["education_X_occupation/ids"][:4, 0].tolist() == [770, 469, 647, 477]
    assert features["age_bucketized_X_education_X_occupation/ids"][:4, 0].tolist() == [
        322,
        736,
        64,
        313,
    ]

    def model():
        with est.variable_scope("linear"):
            return fc.linear_model(features, columns)

    logits, variables = _init(model)
    assert logits.shape == (100, 1)
    name = "linear/linear_model/age_bucketized_X_education_X_occupation/weights"
    assert variables[name].shape == (1000, 1)
    assert variables["linear/linear_model/education/weights"].shape == (16, 1)
