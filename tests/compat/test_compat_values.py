"""TF's Python value types under ``estimator.compat.v1``: what ``as_numpy_iterator()`` and
iteration give, parsed ragged features as TF's ``RaggedTensor`` reads, ``tf.string_split``
/ ``tf.strings.split`` results, and ``Dataset.padded_batch``."""

import numpy as np
import pytest

import estimator.compat.v1 as tf
from estimator.io import RaggedValue, SparseValue


def test_scalar_strings_are_bytes_and_other_values_numpy(tmp_path):
    path = str(tmp_path / "r.tfrecord")
    records = [b"first\x00", b"second"]  # a trailing NUL survives, as in TF
    with tf.io.TFRecordWriter(path) as writer:
        for record in records:
            writer.write(record)
    # TF 2.15.1: list(TFRecordDataset(path).as_numpy_iterator()) == [b"first\x00", b"second"]
    elements = list(tf.data.TFRecordDataset(path).as_numpy_iterator())
    assert elements == records and all(type(e) is bytes for e in elements)
    assert [type(e) for e in tf.data.TFRecordDataset(path)] == [bytes, bytes]  # iteration too
    lines = tmp_path / "lines.txt"
    lines.write_text("a,1\nb,2\n")
    assert list(tf.data.TextLineDataset(str(lines))) == [b"a,1", b"b,2"]
    (element,) = list(tf.data.Dataset.from_tensor_slices({"s": ["x"], "v": [[1.5, 2.5]]}))
    assert type(element["s"]) is bytes and element["s"] == b"x"  # str becomes bytes, as TF
    assert isinstance(element["v"], np.ndarray) and element["v"].dtype == np.float32
    (number,) = list(tf.data.Dataset.range(1))
    assert isinstance(number, np.integer)  # a NumPy scalar, as TF's Tensor.numpy()
    (batch,) = list(tf.data.Dataset.from_tensor_slices(["u", "v"]).batch(2))
    assert batch.dtype == object and batch.tolist() == [b"u", b"v"]
    # What tf.train.Example.FromString needs: bytes.
    example = tf.train.Example()
    example.features.feature["a"].int64_list.value.append(7)
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(example.SerializeToString())
    (record,) = tf.data.TFRecordDataset(path).as_numpy_iterator()
    assert tf.train.Example.FromString(record).features.feature["a"].int64_list.value == [7]


def test_parsed_ragged_features_read_as_tfs_ragged_tensor():
    examples = []
    for values in ([1, 2, 3], [], [4]):
        example = tf.train.Example()
        example.features.feature["r"].int64_list.value.extend(values)
        examples.append(example.SerializeToString())
    parsed = tf.io.parse_example(examples, {"r": tf.io.RaggedFeature(tf.int64)})["r"]
    assert isinstance(parsed, RaggedValue)
    # tf.RaggedTensor's accessors (TF 2.15.1 gives these values for the same examples).
    np.testing.assert_array_equal(parsed.values, [1, 2, 3, 4])
    np.testing.assert_array_equal(parsed.flat_values, [1, 2, 3, 4])
    np.testing.assert_array_equal(parsed.row_splits, [0, 3, 3, 4])
    np.testing.assert_array_equal(parsed.nested_row_splits[0], [0, 3, 3, 4])
    np.testing.assert_array_equal(parsed.row_lengths(), [3, 0, 1])
    assert parsed.to_list() == [[1, 2, 3], [], [4]] and parsed.ragged_rank == 1


def test_string_split_gives_tfs_sparse_and_ragged_results():
    # TF 2.15.1: tf.compat.v1.string_split(["a,,b c", "", "xy"], delimiter=", ") has
    # indices [[0,0],[0,1],[0,2],[2,0]], values [b"a", b"b", b"c", b"xy"], shape [3, 3].
    split = tf.string_split(["a,,b c", "", "xy"], delimiter=", ")
    assert isinstance(split, SparseValue)
    np.testing.assert_array_equal(split.indices, [[0, 0], [0, 1], [0, 2], [2, 0]])
    assert split.values.tolist() == [b"a", b"b", b"c", b"xy"]
    np.testing.assert_array_equal(split.dense_shape, [3, 3])
    # skip_empty=False keeps empty tokens; an empty delimiter splits into bytes (TF's).
    assert tf.string_split(["a,,b"], ",", skip_empty=False).values.tolist() == [b"a", b"", b"b"]
    assert tf.string_split(["ab"], "").values.tolist() == [b"a", b"b"]
    # tf.strings.split: whitespace runs by default, a whole separator, maxsplit (TF's).
    assert tf.strings.split(["a  b ", " c"], result_type="RaggedTensor").to_list() == [
        [b"a", b"b"],
        [b"c"],
    ]
    assert tf.strings.split(["a,,b"], sep=",").values.tolist() == [b"a", b"", b"b"]
    assert tf.strings.split(["a b c"], maxsplit=1).values.tolist() == [b"a", b"b c"]
    with pytest.raises(ValueError, match="1-D batch of strings"):
        tf.string_split([["a b"]])


def test_padded_batch_pads_each_component_to_its_shape():
    def gen():
        for n in (1, 3, 2):
            yield np.arange(1, n + 1, dtype=np.int32), np.int32(n)

    dataset = tf.data.Dataset.from_generator(gen)
    first, second = list(dataset.padded_batch(2))  # None shapes: the batch's longest
    np.testing.assert_array_equal(first[0], [[1, 0, 0], [1, 2, 3]])
    np.testing.assert_array_equal(first[1], [1, 3])
    np.testing.assert_array_equal(second[0], [[1, 2]])
    (fixed,) = list(dataset.padded_batch(3, padded_shapes=([4], []), padding_values=(-1, 0)))
    np.testing.assert_array_equal(fixed[0], [[1, -1, -1, -1], [1, 2, 3, -1], [1, 2, -1, -1]])
    (dropped,) = list(dataset.padded_batch(2, drop_remainder=True))
    assert dropped[0].shape == (2, 3)
    words = tf.data.Dataset.from_generator(lambda: iter([np.array([b"a"], object)] * 2))
    (strings,) = list(words.padded_batch(2, padded_shapes=[2]))
    assert strings.tolist() == [[b"a", b""], [b"a", b""]]  # strings pad with b""


def test_an_estimator_trains_on_batches_padded_to_each_batchs_longest(tmp_path):
    # padded_batch with a None dimension declares batches of varying width (TF's element
    # spec has a None dimension there); the Estimator must not refuse the second width.
    def gen():
        for n in (1, 3, 2, 5):
            yield {"ids": np.arange(1, n + 1, dtype=np.int32)}, np.float32(n)

    def input_fn():
        dataset = tf.data.Dataset.from_generator(gen).padded_batch(
            2, padded_shapes=({"ids": [None]}, [])
        )
        return dataset.make_one_shot_iterator().get_next()

    def model_fn(features, labels, mode):
        w = tf.get_variable("w", [], initializer=tf.zeros_initializer())
        predictions = w * tf.reduce_sum(tf.cast(features["ids"], tf.float32), axis=1)
        loss = tf.reduce_mean(tf.square(predictions - labels))
        train_op = tf.train.GradientDescentOptimizer(0.01).minimize(
            loss, tf.train.get_global_step()
        )
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    estimator = tf.estimator.Estimator(model_fn, str(tmp_path / "m"))
    estimator.train(input_fn)  # widths 3 then 5
    assert estimator.get_variable_value("global_step") == 2
    unpadded = tf.data.Dataset.from_generator(gen).padded_batch(2, padded_shapes=({"ids": [6]}, []))
    assert tf.data.Dataset.from_generator(gen).padded_batch(2).varying_shapes
    assert (
        not unpadded.varying_shapes
        and not tf.data.Dataset.from_generator(gen).batch(2).varying_shapes
    )
