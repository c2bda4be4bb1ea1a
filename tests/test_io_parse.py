"""``estimator.io.parse_example`` and friends against TensorFlow: TF 2.15.1's results on a
generated corpus (``example_corpus``; digests and messages made by
``tf215_parse_digests.py``, labelled ``TF215``), the TF in the test environment in process,
and hand-derived cases."""

import example_corpus as corpus
import pytest

from estimator import io

# TF 2.15.1's results on example_corpus (tests/tf215_parse_digests.py): one digest per batch
# of 120 examples, and each bad batch's error message.
TF215_BATCHES = [
    "385637504a8c17c0d7ff6cb5e39906599f7e137baf43b9e8db104bf05612ec1d",
    "57bd2ebc554713c37d4f1a89428ef8ee9d882a9e5b65bf71b5b2ed51866154bb",
    "163e4a0991184aea37c0f7f93a1f89086dc60b77b647ce46d56c190fa3cb9c0f",
    "6b6b0a08afdd70e3f399964dfe1ae07216db0a730fcb19190c19b56a3a4f7642",
    "8186a8d0b08997de1135e45a6cebc78cc6cf807c1869044b5e44fbb7a01cf3cb",
    "eb272f178f03ffca196c7d0c50994f709593d63d6c49517082a30e9d4486370a",
    "64215890a9f601850e79aa893709e7a170b5e86f5008c443f45e44107d4c9c5d",
    "5d29d70c30ef6a6f687cf593adb4711a19d0c07e0c6b8566c4cb66d85ee65484",
    "bcb0be437ab579bb7e05833805e05bd1509d00ac151605db63665c364694ebf2",
    "0c2bbbccf9d44238e752b285599cb7a05f7670fba6cf270d95f0c9d3ee73f04c",
    "f6522dbafc3bf561b3afea8bc90a0478f336a398075b35c4817562641e9f63cd",
    "698ddcb6bc703f6771b472517741ea9aa81c993cf466df0d931b92f0fe05b33b",
    "b8ca9f8669765ef5e3ac8ef94569203a1e24d5196defa32880b251f6783c8bea",
    "b74a5e06f9a57fb69673632bd6209cbf9e3c5eda32ad1d5e5bd9afe58b2da5f5",
    "ebb33aff5d2ba0fdff90a32139049538dbfe2aaef95917d4758a289e0fa93c2a",
    "78096a9370cb5ff7db2b2a4db218e165934478e0c7b47e4a18fa714978f5978a",
    "0ab9b5576f8b20d72405ee2c1b6b297b77fd4d1685d092d0d1b6919736493544",
    "9c4b1ee92dc8370ab40eeafbc175d1695fd26645748f95822e79be6e804d74cb",
    "fbbc30c7f58e5fa996ea73a00339549ee32602ce0bf9d409e8ab328e852d1d55",
    "5004c7acadb5b517c5658bf28b6b0aa6283d95bbf73f289ae6a6aac86141d74d",
]
TF215_ERRORS = {
    "fixed_wrong_type": (
        "Name: <unknown>, Key: f, Index: 7.  Data types don't match. Data "
        "type: int64 but expected type: float"
    ),
    "fixed_wrong_type_bytes": (
        "Name: <unknown>, Key: i, Index: 7.  Data types don't match. Data "
        "type: string but expected type: int64"
    ),
    "fixed_wrong_length": (
        "Name: <unknown>, Key: f, Index: 7.  Number of float values != "
        "expected.  Values size: 3 but output shape: [2]"
    ),
    "fixed_empty_list": (
        "Name: <unknown>, Key: m, Index: 7.  Number of int64 values != "
        "expected.  Values size: 0 but output shape: [2,2]"
    ),
    "fixed_missing_required": (
        "Name: <unknown>, Feature: i (data type: int64) is required but could not be found."
    ),
    "varlen_wrong_type": (
        "Name: <unknown>, Key: v, Index: 7.  Data types don't match. Expected "
        "type: int64, Actual type: float"
    ),
    "varlen_string_wrong_type": (
        "Name: <unknown>, Key: vs, Index: 7.  Data types don't match. Expected "
        "type: string, Actual type: int64"
    ),
    "sparse_wrong_type": (
        "Name: <unknown>, Key: val, Index: 7.  Data types don't match. "
        "Expected type: float, Actual type: int64"
    ),
    "ragged_wrong_type": (
        "Name: <unknown>, Key: r, Index: 7.  Data types don't match. Expected "
        "type: float, Actual type: string"
    ),
    "sequence_wrong_type": (
        "Name: <unknown>, Key: q, Index: 7.  Data types don't match. Data "
        "type: int64 but expected type: float"
    ),
    "sequence_not_multiple": (
        "Name: <unknown>, Key: q, Index: 7.  Number of float values is not a "
        "multiple of stride length. Saw 9 values but output shape is: [?,2]"
    ),
}
# TF 2.15.1 reports the running count of the minibatch's values ("Saw 9 values") where we
# report the example's own (3): the rest of the message is the same.
DIFFERENT_COUNT = {"sequence_not_multiple": ("Saw 9 values", "Saw 3 values")}


def our_specs():
    out = {}
    for key, (kind, args) in corpus.spec_args().items():
        if kind == "fixed":
            shape, dtype, default = args
            out[key] = io.FixedLenFeature(shape, dtype, default)
        elif kind == "varlen":
            out[key] = io.VarLenFeature(args[0])
        elif kind == "sparse":
            out[key] = io.SparseFeature(*args)
        elif kind == "ragged":
            dtype, value_key, parts = args
            partitions = [io.RaggedFeature.RowLengths(k) for _, k in parts]
            out[key] = io.RaggedFeature(dtype, value_key, partitions)
        else:
            out[key] = io.FixedLenSequenceFeature(*args)
    return out


def as_lists(value):
    if isinstance(value, io.SparseValue):
        return [value.indices.tolist(), value.values.tolist(), value.dense_shape.tolist()]
    if isinstance(value, io.RaggedValue):
        return value.to_list()
    return value.tolist()


@pytest.fixture(scope="module")
def examples():
    return corpus.example_dicts()


@pytest.fixture(scope="module")
def records(examples):
    return [corpus.serialize(e, io.protos.Example) for e in examples]


def test_corpus_results_equal_tf_2_15_1(records):
    specs = our_specs()
    digests = []
    for lo in range(0, len(records), corpus.BATCH):
        parsed = io.parse_example(records[lo : lo + corpus.BATCH], specs)
        digests.append(corpus.digest({k: as_lists(v) for k, v in parsed.items()}))
    assert len(records) >= 2000
    assert digests == TF215_BATCHES


@pytest.mark.parametrize("case", corpus.BAD, ids=[c[0] for c in corpus.BAD])
def test_corpus_errors_equal_tf_2_15_1(examples, case):
    batch = [corpus.serialize(e, io.protos.Example) for e in corpus.bad_batch(examples, case)]
    expected = TF215_ERRORS[case[0]]
    if case[0] in DIFFERENT_COUNT:
        expected = expected.replace(*DIFFERENT_COUNT[case[0]])
    with pytest.raises(ValueError) as info:
        io.parse_example(batch, our_specs())
    assert str(info.value).startswith(expected)
    assert len(str(info.value)) > len(expected) + 20  # and says how to fix it
