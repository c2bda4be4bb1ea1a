"""Property-based tests (Hypothesis) of what untrusted input meets first: the feature-column host
phase and a parsing-receiver export's signature.

Whatever arrives, the result is either a correct output or one of the documented errors
(``ValueError``/``TypeError`` with a message); never another exception, never ids out of
range, never a crash.
"""

import os

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import canned
import estimator as est
from canned import feature_column as fc
from estimator import preprocessing as pp

# PROPERTY_EXAMPLES=2000 searches harder (run before a release).
# Random examples on a developer's machine (they find new cases); a fixed sequence in CI,
# so a run there is reproducible.
SETTINGS = settings(
    max_examples=int(os.environ.get("PROPERTY_EXAMPLES", "150")),
    derandomize=bool(os.environ.get("CI")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
DOCUMENTED = (ValueError, TypeError)

# Scalars a batch may hold: strings (empty, unicode), bytes, ints of every width
# (beyond int64 too), floats with NaN and inf, booleans and None.
scalars = st.one_of(
    st.text(max_size=6),
    st.binary(max_size=6),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
)


@st.composite
def batches(draw):
    """A value for one feature: a 1-D or 2-D array (uniform or mixed dtype) or a list."""
    batch = draw(st.integers(1, 4))
    width = draw(st.integers(1, 3))
    kind = draw(st.sampled_from(["str", "int", "float", "object", "ragged"]))
    two_d = draw(st.booleans())
    shape = (batch, width) if two_d else (batch,)
    size = int(np.prod(shape))
    if kind == "str":
        values = draw(st.lists(st.text(max_size=4), min_size=size, max_size=size))
        return np.array(values, dtype=str).reshape(shape)
    if kind == "int":
        values = draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=size, max_size=size))
        return np.array(values, dtype=np.int64).reshape(shape)
    if kind == "float":
        values = draw(st.lists(st.floats(width=32), min_size=size, max_size=size))
        return np.array(values, dtype=np.float32).reshape(shape)
    if kind == "object":
        values = draw(st.lists(scalars, min_size=size, max_size=size))
        array = np.empty(size, dtype=object)
        array[:] = values
        return array.reshape(shape)
    return draw(st.lists(st.lists(scalars, max_size=3), min_size=batch, max_size=batch))


VOCAB = pp.VocabularyList("s", ("a", "b", "c"), num_oov_buckets=2)
HASH = pp.HashBucket("h", 7)
OPS = {
    "vocabulary": (VOCAB, 5),
    "vocabulary_int": (pp.VocabularyList("s", (1, 2, 3), default_value=0), 3),
    "hash": (HASH, 7),
    "identity": (pp.Identity("s", 5), 5),
    "bucketize": (pp.Bucketize(pp.Numeric("s"), (0.0, 1.0)), 3),
    "cross": (pp.Cross((pp.VocabularyList("s", ("a", "b")), pp.HashBucket("s", 3)), 11), 11),
}


@pytest.mark.parametrize("name", sorted(OPS))
@SETTINGS
@given(value=batches())
def test_categorical_host_phase_gives_ids_in_range_or_a_documented_error(name, value):
    op, buckets = OPS[name]
    try:
        out = op.apply({"s": value})
    except DOCUMENTED as err:
        assert str(err)  # a message, not a bare exception
        return
    ids = np.asarray(out.ids)
    assert ids.dtype.kind == "i"
    assert len(ids) == len(value)
    # -1 marks a missing value (TF's sparse "no entry"); every other id is in range.
    assert ((ids == -1) | ((ids >= 0) & (ids < buckets))).all(), ids


@SETTINGS
@given(value=batches())
def test_numeric_host_phase_gives_float_or_a_documented_error(value):
    try:
        out = pp.Numeric("s", shape=(1,), default_value=0.0).apply({"s": value})
    except DOCUMENTED as err:
        assert str(err)
        return
    out = np.asarray(out)
    assert out.dtype == np.float32 and out.shape[0] == len(value)


# ----- a parsing receiver's export ------------------------------------------------------

COLUMNS = [
    fc.numeric_column("age", default_value=30.0),
    fc.categorical_column_with_vocabulary_list("workclass", ["Private", "State-gov"]),
    fc.categorical_column_with_hash_bucket("occupation", 20),
]


@pytest.fixture(scope="module")
def signature(tmp_path_factory):
    model = canned.LinearClassifier(COLUMNS, str(tmp_path_factory.mktemp("model")))
    features = {
        "age": np.array([[25.0], [50.0]], np.float32),
        "workclass": np.array([["Private"], ["State-gov"]], object),
        "occupation": np.array([["a"], ["b"]], object),
    }
    model.train(lambda: (features, np.array([0, 1])), steps=2)
    receiver = est.export.build_parsing_serving_input_receiver_fn(
        fc.make_parse_example_spec(COLUMNS)
    )
    path = model.export_saved_model(str(tmp_path_factory.mktemp("export")), receiver)
    return est.export.load(path).signatures["predict"]


rows = st.lists(
    st.dictionaries(
        st.sampled_from(["age", "workclass", "occupation", "unknown"]),
        st.one_of(scalars, st.lists(scalars, max_size=3)),
        max_size=4,
    ),
    min_size=1,
    max_size=4,
)


@SETTINGS
@given(instances=rows)
@example(instances=[{"age": 3.4028235677973366e38}])  # logit inf: TF's softmax gives NaN
def test_parsing_signature_answers_or_refuses_with_what_it_expects(signature, instances):
    names = sorted({k for row in instances for k in row})
    columns = {k: [row.get(k) for row in instances] for k in names}
    try:
        out = signature(**columns)
    except ValueError as err:
        # The message names the input (the loader's checks, the feature columns' host
        # phase) or says why the batch cannot be read (no input at all).
        message = str(err)
        assert (
            "Input '" in message
            or "feature '" in message
            or "Wrong inputs" in message
            or "Cannot tell the batch size" in message
        ), message
        return
    probabilities = out["probabilities"]
    assert probabilities.shape == (len(instances), 2)
    assert np.isfinite(probabilities).all()
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, rtol=1e-5)
    jax.block_until_ready(probabilities)
