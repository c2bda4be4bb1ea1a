"""``tf.data`` over files (``TextLineDataset``, ``TFRecordDataset``): the streaming executor
gives the element executor's elements whatever the maps are (vectorized, element by
element, row by row after ``batch`` or not), reads storage URLs through ``estimator.io.fs``,
and ``decode_csv`` parses arrays of records at once with the per-record parser's results.

The reference for every pipeline is the same pipeline run element by element (the element
executor, which calls each map on each element as TF does).
"""

import gzip
import uuid

import numpy as np
import pytest

import estimator.compat.v1 as tf
from estimator.compat.v1.data import _elements, _streaming
from estimator.io import fs
from estimator.preprocessing import _csv, decode_csv

DEFAULTS = [[0], [""], [0.0]]


def _lines(n: int) -> list[bytes]:
    # Quotes, an empty string field, a missing number, negative values.
    rows = []
    for i in range(n):
        city = '"Lima, PE"' if i % 7 == 0 else ("" if i % 11 == 0 else f"city{i % 5}")
        score = "" if i % 13 == 0 else f"{(i % 9) - 4.5}"
        rows.append(f"{i},{city},{score}".encode())
    return rows


def _parse(line):
    number, city, score = tf.io.decode_csv(line, record_defaults=DEFAULTS)
    return {"number": number, "city": city}, score


def _by_elements(dataset):
    """The pipeline's elements from the element executor."""
    return list(_elements.iterator(dataset._source, dataset._ops, 0))


def _equal(a, b) -> None:
    assert type(a) is type(b)
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            _equal(a[key], b[key])
    elif isinstance(a, tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _equal(x, y)
    else:
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def _same_as_element_by_element(dataset) -> list:
    plan = _streaming.plan(dataset._source, dataset._ops, 0, _elements._stacked)
    assert plan is not None, "not a streaming pipeline"
    got = list(dataset.as_numpy_iterator())
    expected = _by_elements(dataset)
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        _equal(a, b)
    return got


@pytest.fixture
def csv_file(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_bytes(b"\n".join(_lines(3000)) + b"\n")
    return str(path)


@pytest.mark.parametrize("order", ["map_then_batch", "batch_then_map"])
def test_fused_maps_give_the_elements_of_maps_run_one_by_one(csv_file, order):
    lines = tf.data.TextLineDataset(csv_file)
    if order == "map_then_batch":
        dataset = lines.map(_parse, num_parallel_calls=tf.data.AUTOTUNE).batch(256)
    else:
        dataset = lines.batch(256).map(_parse, num_parallel_calls=tf.data.AUTOTUNE)
    batches = _same_as_element_by_element(dataset.prefetch(tf.data.AUTOTUNE))
    assert [len(b[1]) for b in batches] == [256] * 11 + [3000 - 11 * 256]
    features, scores = batches[0]
    # Row 0: '0,"Lima, PE",' + missing score -> default 0.0; row 1: 1,city1,-3.5.
    assert features["city"][:2].tolist() == [b"Lima, PE", b"city1"]
    assert scores[:2].tolist() == [0.0, -3.5] and scores.dtype == np.float32


def test_maps_that_do_not_work_row_by_row_run_as_tf_runs_them(csv_file):
    def centred(features, score):  # depends on the whole batch: not row by row
        return features, score - score.mean()

    lines = tf.data.TextLineDataset(csv_file).take(600)
    _same_as_element_by_element(lines.map(_parse).batch(100).map(centred))
    _same_as_element_by_element(lines.batch(100, drop_remainder=True).map(_parse).map(centred))
    plan = _streaming.plan(*_ops(lines.map(_parse).batch(100).map(centred)))
    list(plan.iterator())
    assert plan.maps.before_vectorized and not plan.maps.after_row_wise
    # A map that takes one element only (here .item()) runs element by element.
    lengths = lines.map(lambda line: len(np.asarray(line).item())).batch(64)
    plan = _streaming.plan(*_ops(lengths))
    list(plan.iterator())
    assert not plan.maps.before_vectorized
    _same_as_element_by_element(lengths)


def _ops(dataset):
    return dataset._source, dataset._ops, 0, _elements._stacked


def test_choosing_operations_over_chunks_follow_tf(csv_file):
    lines = tf.data.TextLineDataset(csv_file)
    for dataset in [
        lines.skip(5).take(1000).map(_parse).batch(300),
        lines.shard(3, 1).repeat(2).map(_parse).batch(512, drop_remainder=True),
        lines.take(10).repeat(3).batch(4).map(_parse).repeat(2),
    ]:
        _same_as_element_by_element(dataset)
    # Shuffled: the same multiset, in a new order each pass.
    shuffled = lines.map(_parse).shuffle(100, seed=1).repeat(2).batch(500)
    numbers = np.concatenate([b[0]["number"] for b in shuffled.as_numpy_iterator()])
    assert sorted(numbers.tolist()) == sorted(list(range(3000)) * 2)
    assert numbers[:3000].tolist() != numbers[3000:].tolist() != list(range(3000))


def test_text_lines_read_storage_urls_and_compressed_files():
    bucket = f"memory://bucket-{uuid.uuid4().hex[:8]}"
    try:
        lines = _lines(700)
        fs.write_bytes(fs.join(bucket, "rows.csv"), b"\r\n".join(lines))  # no final newline
        fs.write_bytes(fs.join(bucket, "rows.csv.gz"), gzip.compress(b"\n".join(lines) + b"\n"))
        for name in ("rows.csv", "rows.csv.gz"):
            dataset = tf.data.TextLineDataset(fs.join(bucket, name)).map(_parse).batch(256)
            got = _same_as_element_by_element(dataset)
            numbers = np.concatenate([b[0]["number"] for b in got])
            assert numbers.tolist() == list(range(700))
        unbatched = list(tf.data.TextLineDataset(fs.join(bucket, "rows.csv")).take(2))
        assert [bytes(x.item() if hasattr(x, "item") else x) for x in unbatched] == lines[:2]
    finally:
        fs.rmtree(bucket)
    with pytest.raises(ValueError, match="TextLineDataset file 'nosuch://b/x' is a nosuch://"):
        tf.data.TextLineDataset("nosuch://b/x")


def test_tfrecord_datasets_batch_parse_and_fuse_like_text(tmp_path):
    path = str(tmp_path / "d.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for i in range(1000):
            example = tf.train.Example()
            example.features.feature["x"].float_list.value.append(i / 2)
            example.features.feature["tags"].int64_list.value.extend(range(i % 4))
            writer.write(example.SerializeToString())
    dense = {"x": tf.io.FixedLenFeature([1], tf.float32)}
    sparse = {**dense, "tags": tf.io.VarLenFeature(tf.int64)}
    records = tf.data.TFRecordDataset(path)
    _same_as_element_by_element(records.batch(128).map(lambda s: tf.io.parse_example(s, dense)))
    # Sparse values take their batch's dense shape: run batch by batch, never cut a block.
    got = _same_as_element_by_element(
        records.batch(128).map(lambda s: tf.io.parse_example(s, sparse))
    )
    assert got[0]["tags"].dense_shape.tolist() == [128, 3]
    _same_as_element_by_element(
        records.map(lambda s: tf.io.parse_single_example(s, sparse)).batch(100)
    )


def test_decode_csv_parses_arrays_at_once_as_record_by_record(monkeypatch):
    lines = np.array(_lines(500) + [b'7," a ""q"" ",1e3', b"8,x,nan", b"-9, y ,-0.25"], object)
    at_once = decode_csv(lines, DEFAULTS)

    def one_by_one(*args):
        raise AssertionError("parsed record by record")

    with monkeypatch.context() as patch:
        patch.setattr(_csv, "_per_record", one_by_one)
        for a, b in zip(at_once, decode_csv(lines, DEFAULTS), strict=True):
            np.testing.assert_array_equal(a, b)
    monkeypatch.setattr(_csv, "_VECTORIZED_FROM", 10**9)  # the per-record parser alone
    for a, b in zip(at_once, decode_csv(lines, DEFAULTS), strict=True):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    # Where the two could differ, the per-record parser decides (TF's errors included).
    monkeypatch.setattr(_csv, "_VECTORIZED_FROM", 1)
    assert decode_csv(np.array([b"0x10,a,1"] * 40, object), [[""], [""], [0.0]])[0][0] == b"0x10"
    with pytest.raises(ValueError, match="invalid literal for int"):
        decode_csv(np.array([b"0x10,a,1"] * 40, object), DEFAULTS)
    with pytest.raises(ValueError, match=r"Expect 3 fields but have 1 in record ''"):
        decode_csv(np.array([b"1,a,2", b""] * 20, object), DEFAULTS)
    with pytest.raises(ValueError, match=r"Expect 3 fields but have 4 in record '1,a,2,3'"):
        decode_csv(np.array([b"1,a,2,3"] * 40, object), DEFAULTS)
    with pytest.raises(ValueError, match="Field 0 is required but missing in record ',a,2'"):
        decode_csv(np.array([b",a,2"] * 40, object), [[], [""], [0.0]])


def test_an_estimator_trains_from_a_text_pipeline_as_from_arrays(tmp_path):
    """The Estimator fuses the feature columns' host phase into the file pipeline's block
    map (``map_rows``): the model equals the one trained from the same rows in memory."""
    import canned
    import estimator as est
    from canned import feature_column as fc

    path = tmp_path / "rows.csv"
    lines = _lines(240)
    path.write_bytes(b"\n".join(lines) + b"\n")
    columns = [
        fc.numeric_column("number"),
        fc.categorical_column_with_vocabulary_list("city", ["city1", "city2", "Lima, PE"]),
    ]

    def from_text():
        data = tf.data.TextLineDataset(str(path)).map(_parse).batch(32)
        return data.map(lambda features, score: (features, tf.cast(score > 0, tf.int32)))

    assert from_text().map_rows(lambda rows: rows) is not None  # fused, not batch by batch
    number, city, score = (np.asarray(c) for c in decode_csv(np.array(lines, object), DEFAULTS))
    features = {"number": number.astype(np.float32), "city": city}
    labels = (score > 0).astype(np.int32)
    models = []
    for name, input_fn in [
        ("text", from_text),
        ("arrays", est.inputs.numpy_input_fn(features, labels, batch_size=32, shuffle=False)),
    ]:
        model = canned.LinearClassifier(columns, model_dir=str(tmp_path / name))
        model.train(input_fn)
        models.append(model)
    assert models[0].get_variable_value("global_step") == 8  # 240 rows / 32, last partial
    for name in models[1].get_variable_names():
        np.testing.assert_allclose(
            models[0].get_variable_value(name), models[1].get_variable_value(name), rtol=1e-6
        )
