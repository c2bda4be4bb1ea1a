"""``estimator.io.parse_example`` and friends against TensorFlow: TF 2.15.1's results on a
generated corpus (``example_corpus``; digests and messages made by
``tf215_parse_digests.py``, labelled ``TF215``), the TF in the test environment in process,
and hand-derived cases."""

import example_corpus as corpus
import pytest

from estimator import io

# TF 2.15.1's results on example_corpus (tests/jobs/tf215_parse_digests.py): one digest per batch
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


def _ex(**features):
    """An Example from ``key=(list kind, values)``."""
    return corpus.serialize(features, io.protos.Example)


def test_single_example_outputs_and_tf_messages():
    record = _ex(a=("float", [1.0, 2.0]), t=("bytes", [b"x", b"y"]))
    parsed = io.parse_single_example(
        record, {"a": io.FixedLenFeature([2], "float32"), "t": io.VarLenFeature(str)}
    )
    assert parsed["a"].tolist() == [1.0, 2.0]
    assert parsed["t"].indices.tolist() == [[0], [1]]
    assert parsed["t"].dense_shape.tolist() == [2]
    # TF 2.15.1's single-example messages (no "Name:"/"Index:"): TF 2.15.1's probes
    # printed "Key: a.  Can't parse serialized Example." for a wrong length, and
    # "Feature: b (data type: float) is required but could not be found." for a missing key.
    with pytest.raises(ValueError, match=r"^Key: a\.  Can't parse serialized Example\."):
        io.parse_single_example(record, {"a": io.FixedLenFeature([1], "float32")})
    with pytest.raises(ValueError, match=r"^Feature: b \(data type: float\) is required"):
        io.parse_single_example(record, {"b": io.FixedLenFeature([1], "float32")})
    with pytest.raises(ValueError, match=r"^Key: a\.  Data types don't match\. Data type: float"):
        io.parse_single_example(record, {"a": io.FixedLenFeature([2], "int64")})


def test_sparse_ragged_and_sequence_outputs_by_hand():
    records = [
        _ex(ix=("int64", [3, 1]), v=("float", [0.5, 0.25]), r=("int64", [1, 2, 3]),
            rl=("int64", [2, 1]), q=("float", [1.0, 2.0, 3.0, 4.0])),
        _ex(q=("float", [5.0, 6.0])),
    ]  # fmt: skip
    specs = {
        "s": io.SparseFeature("ix", "v", "float32", 5),
        "r": io.RaggedFeature("int64", partitions=[io.RaggedFeature.RowLengths("rl")]),
        "q": io.FixedLenSequenceFeature([2], "float32", allow_missing=True, default_value=-1.0),
    }
    parsed = io.parse_example(records, specs)
    # SparseFeature: example 0's indices 3, 1 sorted -> [[0, 1], [0, 3]] with their values.
    assert parsed["s"].indices.tolist() == [[0, 1], [0, 3]]
    assert parsed["s"].values.tolist() == [0.25, 0.5]
    assert parsed["s"].dense_shape.tolist() == [2, 5]
    # RowLengths [2, 1] over [1, 2, 3]: [[1, 2], [3]]; example 1 has no rows.
    assert parsed["r"].to_list() == [[[1, 2], [3]], []]
    # Two steps of 2 values, and one step padded with the default (TF 2.15.1 printed
    # [[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [-1.0, -1.0]]]).
    assert parsed["q"].tolist() == [[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [-1.0, -1.0]]]


def _seq(context, lists):
    proto = io.protos.SequenceExample()
    for key, (kind, values) in context.items():
        getattr(proto.context.feature[key], f"{kind}_list").value.extend(values)
    for key, steps in lists.items():
        feature_list = proto.feature_lists.feature_list[key]
        for kind, values in steps:
            getattr(feature_list.feature.add(), f"{kind}_list").value.extend(values)
    return proto.SerializeToString()


def test_sequence_examples_equal_tf_2_15_1():
    x1 = _seq(
        {"c": ("int64", [5])},
        {"s": [("float", [1.0, 2.0]), ("float", [3.0, 4.0])],
         "t": [("bytes", [b"a", b"b"]), ("bytes", [b"c"])]},
    )  # fmt: skip
    x2 = _seq({"c": ("int64", [6])}, {"s": [("float", [5.0, 6.0])], "t": []})
    context, lists, lengths = io.parse_sequence_example(
        [x1, x2],
        {"c": io.FixedLenFeature([1], "int64")},
        {"s": io.FixedLenSequenceFeature([2], "float32"), "t": io.VarLenFeature(str)},
    )
    # TF 2.15.1: {'c': [[5], [6]]}, s [[[1, 2], [3, 4]], [[5, 6], [0, 0]]], lengths [2, 1],
    # t indices [[0,0,0],[0,0,1],[0,1,0]], values [a, b, c], dense_shape [2, 2, 2].
    assert context["c"].tolist() == [[5], [6]]
    assert lists["s"].tolist() == [[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [0.0, 0.0]]]
    assert lengths["s"].tolist() == [2, 1]
    assert lists["t"].indices.tolist() == [[0, 0, 0], [0, 0, 1], [0, 1, 0]]
    assert lists["t"].values.tolist() == [b"a", b"b", b"c"]
    assert lists["t"].dense_shape.tolist() == [2, 2, 2]
    _, ragged, _ = io.parse_sequence_example([x1, x2], None, {"t": io.RaggedFeature(str)})
    assert ragged["t"].to_list() == [[[b"a", b"b"], [b"c"]], []]  # TF 2.15.1's to_list()
    empty = _seq({}, {})
    with pytest.raises(ValueError, match="Feature list 's' is required but could not be found"):
        io.parse_sequence_example(
            [x1, empty], None, {"s": io.FixedLenSequenceFeature([2], "float32")}
        )
    with pytest.raises(
        ValueError, match="Total values size: 4 is not consistent with output shape: \\[\\?,3\\]"
    ):
        io.parse_sequence_example([x1], None, {"s": io.FixedLenSequenceFeature([3], "float32")})
    with pytest.raises(
        ValueError, match="Feature list: s, Index: 0.  Data types don't match. Expected type: int64"
    ):
        io.parse_sequence_example([x1], None, {"s": io.VarLenFeature("int64")})
    with pytest.raises(ValueError, match="Invalid protocol message input, example id: <unknown>"):
        io.parse_sequence_example([b"\x01\x02"], None, {"s": io.VarLenFeature("int64")})
    single_context, single = io.parse_single_sequence_example(
        x1,
        {"c": io.FixedLenFeature([1], "int64")},
        {"s": io.FixedLenSequenceFeature([2], "float32")},
    )
    assert single_context["c"].tolist() == [5] and single["s"].tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_bad_input_and_specs_say_what_and_how_to_fix():
    good = _ex(a=("float", [1.0]))
    spec = {"a": io.FixedLenFeature([1], "float32")}
    with pytest.raises(
        ValueError, match="Could not parse example input, value: .*record 1 of the batch"
    ):
        io.parse_example([good, b"\x0a\x09ab"], spec)
    with pytest.raises(ValueError, match="got a single string. Use parse_single_example"):
        io.parse_example(good, spec)
    with pytest.raises(ValueError, match=r"serialized\[0\] is a str; expected bytes"):
        io.parse_example(["text"], spec)
    with pytest.raises(ValueError, match=r"^Name: row-0, Feature: b \(data type: float\)"):
        io.parse_example([good, good], {"b": io.FixedLenFeature([1], "float32")}, ["row-0", "x"])
    with pytest.raises(
        ValueError, match="is not in the list of allowed values: float, int64, string"
    ):
        io.parse_example([good], {"a": io.FixedLenFeature([1], "int32")})
    with pytest.raises(ValueError, match="requires allow_missing to be True"):
        io.parse_example([good], {"a": io.FixedLenSequenceFeature([1], "float32")})
    with pytest.raises(ValueError, match=r"default_value has 1 values but shape \[3, 2\] needs 6"):
        io.parse_example([good], {"z": io.FixedLenFeature([3, 2], "float32", 1.5)})
    with pytest.raises(TypeError, match="expected a FixedLenFeature, VarLenFeature"):
        io.parse_example([good], {"a": "float32"})
    with pytest.raises(ValueError, match="has 1 values under 'v' but 2 indices under 'ix'"):
        io.parse_example(
            [_ex(ix=("int64", [1, 2]), v=("float", [0.5]))],
            {"s": io.SparseFeature("ix", "v", "float32", 5)},
        )
    with pytest.raises(ValueError, match="partition RowLengths \\[5\\] does not partition"):
        io.parse_example(
            [_ex(r=("int64", [1]), rl=("int64", [5]))],
            {"r": io.RaggedFeature("int64", partitions=[io.RaggedFeature.RowLengths("rl")])},
        )
