"""``estimator.compat.v1.data``: ``tf.data`` semantics on grain, both executors.

Expected element sequences are TF's rules worked by hand (``repeat`` concatenates passes,
``batch`` cuts the stream, so a batch spans a pass boundary unless ``batch`` comes first;
``take``/``skip``/``shard`` select positions).
"""

import gzip

import numpy as np
import pytest

import estimator as est
import estimator.compat.v1 as tf
from estimator.compat.v1.data import _columnar
from estimator.engine.input_pipeline import batch_pipeline


def _elements(dataset):
    return list(dataset.as_numpy_iterator())


def _columnar_plan(dataset):
    return _columnar.plan(dataset._source, dataset._ops, 0)


def _batches(dataset):
    return [np.asarray(b).tolist() for b in _elements(dataset)]


def _gen_range(n):
    # The same elements as Dataset.range(n), through the element executor.
    return tf.data.Dataset.from_generator(lambda: iter(range(n)))


@pytest.mark.parametrize("source", [tf.data.Dataset.range, _gen_range], ids=["columnar", "grain"])
def test_batching_repeat_take_skip_shard_follow_tf(source):
    # 0..4 twice, cut in 3s: the second batch spans the pass boundary.
    assert _batches(source(5).repeat(2).batch(3)) == [[0, 1, 2], [3, 4, 0], [1, 2, 3], [4]]
    # batch first: each pass keeps its partial batch.
    assert _batches(source(5).batch(3).repeat(2)) == [[0, 1, 2], [3, 4], [0, 1, 2], [3, 4]]
    assert _batches(source(5).batch(3, drop_remainder=True).repeat(2)) == [[0, 1, 2], [0, 1, 2]]
    assert _batches(source(10).skip(2).take(5).batch(2)) == [[2, 3], [4, 5], [6]]
    assert _batches(source(10).shard(3, 1).batch(10)) == [[1, 4, 7]]
    assert _batches(source(4).repeat().take(6).batch(4)) == [[0, 1, 2, 3], [0, 1]]
    assert _batches(source(4).batch(2).repeat().take(3)) == [[0, 1], [2, 3], [0, 1]]
    assert _batches(source(4).batch(3).skip(1)) == [[3]]


def test_the_usual_input_fn_runs_columnar_and_keeps_tfs_structure():
    features = {"a": np.arange(6, dtype=np.float32), "b": np.array(list("uvwxyz"))}
    labels = np.arange(6, dtype=np.int32) % 2
    dataset = tf.data.Dataset.from_tensor_slices((features, labels)).batch(4)
    assert _columnar_plan(dataset.shuffle(10).repeat()) is not None
    first, second = _elements(dataset)
    assert isinstance(first, tuple) and set(first[0]) == {"a", "b"}
    np.testing.assert_array_equal(first[0]["a"], [0, 1, 2, 3])
    np.testing.assert_array_equal(second[0]["b"], [b"y", b"z"])  # TF: strings are bytes
    np.testing.assert_array_equal(second[1], [0, 1])
    # Python lists of floats are float32 tensors in TF, ints int32.
    (element,) = _elements(tf.data.Dataset.from_tensor_slices({"x": [1.5, 2.5]}).batch(2))
    assert element["x"].dtype == np.float32


def test_shuffle_draws_a_new_order_each_pass_reproducibly():
    dataset = tf.data.Dataset.range(20).shuffle(20).repeat(3).batch(20)
    passes = _batches(dataset)
    assert all(sorted(p) == list(range(20)) for p in passes)
    assert passes[0] != passes[1] != passes[2]
    assert _batches(dataset) == passes  # reproducible without a seed (the default seed)
    fixed = _batches(
        tf.data.Dataset.range(20).shuffle(20, seed=3, reshuffle_each_iteration=False).repeat(2)
        .batch(20)
    )  # fmt: skip
    assert fixed[0] == fixed[1] != list(range(20))
    tf.set_random_seed(7)
    try:
        assert _batches(dataset) != passes
    finally:
        tf.set_random_seed(0)
    # The element executor (the engine's shuffle buffer) also permutes within each pass.
    grain_passes = _batches(_gen_range(20).shuffle(20).repeat(2).batch(20))
    assert all(sorted(p) == list(range(20)) for p in grain_passes)
    assert grain_passes[0] != grain_passes[1]


def _text_range(n, tmp_path):
    # The same elements as Dataset.range(n) (as int32), from a text file (streaming executor).
    path = tmp_path / "range.txt"
    path.write_text("".join(f"{i}\n" for i in range(n)))
    return tf.data.TextLineDataset(str(path)).map(
        lambda line: tf.io.decode_csv(line, record_defaults=[[0]])[0]
    )


@pytest.mark.parametrize("executor", ["columnar", "elements", "streaming"])
def test_shuffle_is_tfs_buffer_in_every_executor(executor, tmp_path):
    """Dataset.shuffle(buffer_size) means TF's buffer everywhere: a buffer of one keeps the
    order; an element leaves no more than buffer_size - 1 places early, but may stay in the
    buffer long (a window shuffle would keep it within its window)."""
    source = {
        "columnar": tf.data.Dataset.range,
        "elements": _gen_range,
        "streaming": lambda n: _text_range(n, tmp_path),
    }[executor]
    assert _batches(source(50).shuffle(1).batch(50)) == [list(range(50))]
    (order,) = _batches(source(1000).shuffle(3, seed=5).batch(1000))
    assert sorted(order) == list(range(1000))
    position = {element: p for p, element in enumerate(order)}
    assert all(element <= p + 2 for p, element in enumerate(order))  # at most 2 early
    assert max(p - element for element, p in position.items()) > 3  # held back longer


def test_vectorized_maps_equal_element_maps():
    def f(x):
        return {"x": tf.cast(x, tf.float32) * 2.0 + 1.0, "even": tf.equal(x % 2, 0)}

    columnar = tf.data.Dataset.range(7).map(f).batch(3)
    grain = _gen_range(7).map(f).batch(3)
    assert _columnar_plan(columnar) is not None and _columnar_plan(grain) is None
    for a, b in zip(_elements(columnar), _elements(grain), strict=True):
        np.testing.assert_allclose(a["x"], b["x"])
        np.testing.assert_array_equal(a["even"], b["even"])
    # A tuple element is passed as arguments, as TF's map does.
    pairs = tf.data.Dataset.from_tensor_slices((np.arange(4.0), np.arange(4) % 2))
    (batch,) = _elements(pairs.map(lambda x, y: (x + y, y)).batch(4))
    np.testing.assert_allclose(batch[0], [0.0, 2.0, 2.0, 4.0])


def test_maps_jax_cannot_vectorize_run_element_by_element():
    words = tf.data.Dataset.from_tensor_slices(
        (np.array([b"a", b"b", b"a"], dtype=object), [1, 2, 3])
    )
    dataset = words.map(lambda w, n: (tf.equal(w, b"a"), n)).batch(3)
    assert _columnar_plan(dataset) is None  # strings: grain's element-wise map
    (batch,) = _elements(dataset)
    np.testing.assert_array_equal(batch[0], [True, False, True])
    noisy = tf.data.Dataset.range(50).map(
        lambda x: tf.random_uniform([]) + 0.0 * tf.cast(x, tf.float32)
    )
    assert _columnar_plan(noisy.batch(50)) is None  # random ops: each element its own draw
    (draws,) = _elements(noisy.batch(50))
    assert len(set(np.round(draws, 6).tolist())) > 40


def test_filter_and_map_after_batch():
    dataset = tf.data.Dataset.range(10).filter(lambda x: x % 3 == 0).batch(2)
    assert _batches(dataset) == [[0, 3], [6, 9]]
    doubled = tf.data.Dataset.range(4).batch(2).map(lambda b: b * 10)
    assert _batches(doubled) == [[0, 10], [20, 30]]


def test_text_lines_and_decode_csv(tmp_path):
    path = tmp_path / "rows.csv.gz"
    with gzip.open(path, "wt") as f:
        f.write('age,city,score\n30,Oslo,1.5\n,Rome,\n41,"Lima, PE",-2\n')
    defaults = [[0], [""], [0.0]]

    def parse(line):
        age, city, score = tf.decode_csv(line, record_defaults=defaults)
        return {"age": age, "city": city}, score

    dataset = tf.data.TextLineDataset(str(path)).skip(1).map(parse).batch(3)
    features, scores = _elements(dataset)[0]
    np.testing.assert_array_equal(features["age"], [30, 0, 41])
    np.testing.assert_array_equal(features["city"], [b"Oslo", b"Rome", b"Lima, PE"])
    np.testing.assert_allclose(scores, [1.5, 0.0, -2.0])
    assert scores.dtype == np.float32
    with pytest.raises(ValueError, match="Expect 3 fields but have 2"):
        tf.decode_csv(b"1,2", record_defaults=defaults)
    with pytest.raises(ValueError, match="Field 0 is required but missing"):
        tf.io.decode_csv([b",a,1.0"], record_defaults=[[], [""], [0.0]])


def test_dataset_argument_errors_and_unsupported_ops():
    with pytest.raises(ValueError, match="Batch size must be greater than zero. Got 0."):
        tf.data.Dataset.range(3).batch(0)
    with pytest.raises(ValueError, match="buffer_size must be greater than zero"):
        tf.data.Dataset.range(3).shuffle(tf.data.experimental.AUTOTUNE)
    with pytest.raises(ValueError, match="first dimensions .* must agree|must agree"):
        tf.data.Dataset.from_tensor_slices((np.zeros(3), np.zeros(4)))
    with pytest.raises(tf.errors.NotFoundError, match="^x.tfrecord; No such file"):
        list(tf.data.TFRecordDataset("x.tfrecord"))  # TF's class and message, when read


def test_an_estimator_trains_and_counts_every_example_from_a_dataset(tmp_path):
    x = np.arange(10, dtype=np.float32)[:, None]

    def input_fn(training):
        dataset = tf.data.Dataset.from_tensor_slices(({"x": x}, 2.0 * x[:, 0]))
        if training:
            dataset = dataset.shuffle(10).repeat()
        return dataset.batch(4)

    def model_fn(features, labels, mode):
        w = tf.get_variable("w", [1, 1], initializer=tf.zeros_initializer())
        pred = tf.squeeze(tf.matmul(features["x"], w), 1)
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.EstimatorSpec(mode, predictions=pred)
        loss = tf.losses.mean_squared_error(labels, pred)
        train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
        metrics = {"n": tf.metrics.mean(tf.ones_like(pred), weights=tf.ones_like(pred))}
        return tf.estimator.EstimatorSpec(
            mode, loss=loss, train_op=train_op, eval_metric_ops=metrics, predictions=pred
        )

    estimator = tf.estimator.Estimator(model_fn, str(tmp_path))
    estimator.train(lambda: input_fn(True), steps=200)
    np.testing.assert_allclose(estimator.get_variable_value("w"), [[2.0]], rtol=1e-3)
    assert len(list(estimator.predict(lambda: input_fn(False)))) == 10  # 4 + 4 + 2


def _linear_model_fn(features, labels, mode):
    w = tf.get_variable("w", [1, 1], initializer=tf.zeros_initializer())
    pred = tf.squeeze(tf.matmul(features["x"], w), 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions=pred)
    loss = tf.losses.mean_squared_error(labels, pred)
    n = tf.metrics.mean(tf.ones_like(pred), weights=tf.ones_like(pred))
    train_op = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
    return tf.estimator.EstimatorSpec(
        mode, loss=loss, train_op=train_op, eval_metric_ops={"n": n}, predictions=pred
    )


def test_input_fns_ending_in_tf1_iterators_feed_the_estimator(tmp_path):
    # TF 1 input_fns end in make_one_shot_iterator().get_next().
    x = np.arange(10, dtype=np.float32)[:, None]

    def one_shot():  # the element itself
        dataset = tf.data.Dataset.from_tensor_slices(({"x": x}, 2.0 * x[:, 0]))
        return dataset.shuffle(10).repeat().batch(4).make_one_shot_iterator().get_next()

    def unpacked():  # features and labels unpacked and rebuilt
        dataset = tf.data.Dataset.from_tensor_slices((x, 2.0 * x[:, 0])).batch(4)
        xs, ys = tf.data.make_one_shot_iterator(dataset).get_next()
        return {"x": xs}, ys

    def initializable():
        dataset = tf.data.Dataset.from_tensor_slices(({"x": x}, 2.0 * x[:, 0])).batch(4)
        iterator = dataset.make_initializable_iterator()
        tf.add_to_collection(tf.GraphKeys.TABLE_INITIALIZERS, iterator.initializer)
        features, labels = iterator.get_next()
        return features, labels

    estimator = tf.estimator.Estimator(_linear_model_fn, str(tmp_path))
    estimator.train(one_shot, steps=200)
    np.testing.assert_allclose(estimator.get_variable_value("w"), [[2.0]], rtol=1e-3)
    assert estimator.evaluate(unpacked)["n"] == 1.0
    assert estimator.evaluate(initializable)["n"] == 1.0
    assert len(list(estimator.predict(unpacked))) == 10  # every example once: 4 + 4 + 2


def test_iterator_values_say_what_to_do_instead():
    dataset = tf.data.Dataset.from_tensor_slices(({"x": np.zeros(4)}, np.zeros(4))).batch(2)
    features, labels = dataset.make_one_shot_iterator().get_next()
    with pytest.raises(TypeError, match="not an array inside input_fn.*Dataset.map"):
        labels * 2  # noqa: B018
    other = tf.data.Dataset.range(3).make_one_shot_iterator().get_next()
    with pytest.raises(ValueError, match="two different iterators"):
        batch_pipeline((features, other), "train", None, lambda b: b)
    empty = tf.data.Dataset.range(3).filter(lambda v: v > 5)
    with pytest.raises(ValueError, match="get_next\\(\\) on an empty dataset"):
        empty.make_one_shot_iterator().get_next()


def test_the_estimator_still_reads_any_as_numpy_iterator_dataset(tmp_path):
    # What a real tf.data.Dataset offers (TensorFlow is not installed here).
    class RealDataset:
        def as_numpy_iterator(self):
            return iter([({"x": np.ones((2, 1), np.float32)}, np.ones(2, np.float32))] * 3)

    def model_fn(features, labels, mode):
        w = tf.get_variable("w", [1, 1], initializer=tf.zeros_initializer())
        loss = tf.losses.mean_squared_error(labels, tf.squeeze(tf.matmul(features["x"], w), 1))
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    estimator = est.Estimator(model_fn, str(tmp_path))
    estimator.train(lambda: RealDataset())
    assert estimator.get_variable_value("global_step") == 3


@pytest.mark.slow
def test_a_real_tf_data_pipeline_feeds_a_compat_program(tmp_path):
    # Where TensorFlow is installed (it is not a dependency), an input_fn may keep returning
    # a real tf.data.Dataset: the Estimator reads its as_numpy_iterator().
    real_tf = pytest.importorskip("tensorflow")
    x = np.random.default_rng(0).normal(size=(200, 3)).astype(np.float32)
    y = (x.sum(1) > 0).astype(np.int32)

    def model_fn(features, labels, mode):
        logits = tf.layers.dense(features["x"], 2)
        loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
        train_op = tf.train.AdagradOptimizer(0.5).minimize(loss)
        accuracy = tf.metrics.accuracy(labels, tf.argmax(logits, 1))
        return tf.estimator.EstimatorSpec(
            mode, loss=loss, train_op=train_op, eval_metric_ops={"acc": accuracy}
        )

    estimator = tf.estimator.Estimator(model_fn, str(tmp_path))
    data = real_tf.data.Dataset.from_tensor_slices(({"x": x}, y))
    estimator.train(lambda: data.shuffle(200).repeat().batch(20), steps=100)
    assert estimator.evaluate(lambda: data.batch(50))["acc"] > 0.95


def test_a_row_by_row_host_phase_runs_once_over_in_memory_slices():
    # The Estimator's feature-column host phase (row by row) runs once over the rows of
    # from_tensor_slices(...).shuffle(...).repeat(2).batch(4), not per batch and pass.
    rows = {"x": np.arange(10)}, np.arange(10, dtype=np.float32)
    dataset = tf.data.Dataset.from_tensor_slices(rows).shuffle(100).repeat(2).batch(4)
    assert dataset.last_batch_size is None  # 20 = 4 x 5: no shorter batch
    assert tf.data.Dataset.from_tensor_slices(rows).batch(4).last_batch_size == 2
    assert tf.data.Dataset.from_tensor_slices(rows).repeat().batch(4).last_batch_size is None
    # How many batches, known as far as the length is: 5; 10 / 4 -> 3, or 2 without the
    # remainder; none for an endless or a batch-level repeated pipeline.
    assert dataset.batch_count == 5
    assert tf.data.Dataset.from_tensor_slices(rows).batch(4).batch_count == 3
    assert tf.data.Dataset.from_tensor_slices(rows).batch(4, drop_remainder=True).batch_count == 2
    assert tf.data.Dataset.from_tensor_slices(rows).repeat().batch(4).batch_count is None
    assert tf.data.Dataset.from_tensor_slices(rows).batch(4).repeat(2).batch_count is None
    calls = []

    def host_phase(element):
        (features, labels) = element
        calls.append(len(labels))
        return {"ids": 2 * features["x"]}, labels

    mapped = dataset.map_rows(host_phase)
    assert calls == [10]
    assert (mapped.batch_count, mapped.last_batch_size) == (5, None)  # still known
    tail = tf.data.Dataset.from_tensor_slices(rows).batch(4).map_rows(host_phase)
    assert (tail.batch_count, tail.last_batch_size) == (3, 2)
    calls.clear()
    direct = [host_phase(b) for b in _elements(dataset)]
    once = list(mapped)
    assert len(once) == len(direct) == 5
    for (f1, l1), (f2, l2) in zip(once, direct, strict=True):  # the same batches
        np.testing.assert_array_equal(f1["ids"], f2["ids"])
        np.testing.assert_array_equal(l1, l2)
    # A map must see the raw rows: such a pipeline keeps its host phase per batch.
    with_map = tf.data.Dataset.from_tensor_slices(rows).map(lambda f, y: (f, y + 1)).batch(4)
    assert with_map.map_rows(host_phase) is None


@pytest.mark.parametrize(
    "pipeline",
    [
        lambda d: d.shuffle(10).repeat().batch(4).take(40),  # batches across passes
        lambda d: d.shuffle(10).repeat(7).batch(3),  # a shorter last batch
        lambda d: d.shuffle(10).batch(4).repeat(5),  # passes of batches, each reshuffled
        lambda d: d.repeat(3).shuffle(10).batch(4),  # shuffle after repeat: within each pass
    ],
    ids=["repeat-batch", "finite", "batch-repeat", "repeat-shuffle"],
)
def test_batches_gathered_in_chunks_are_the_batches_gathered_one_by_one(pipeline, monkeypatch):
    data = tf.data.Dataset.from_tensor_slices(({"x": np.arange(10)}, np.arange(10) * 10))
    dataset = pipeline(data)
    monkeypatch.setattr(_columnar, "CHUNK_BATCHES", 1)
    one_by_one = _elements(dataset)
    monkeypatch.setattr(_columnar, "CHUNK_BATCHES", 3)  # chunks end inside passes
    chunked = _elements(dataset)
    assert len(chunked) == len(one_by_one) > 5
    for (f1, l1), (f2, l2) in zip(chunked, one_by_one, strict=True):
        np.testing.assert_array_equal(f1["x"], f2["x"])
        np.testing.assert_array_equal(l1, f1["x"] * 10)  # rows stay whole
        np.testing.assert_array_equal(l1, l2)
    # Each pass of 10 rows is a permutation of them, and passes differ (reshuffled).
    rows = np.concatenate([f["x"] for f, _ in chunked])
    passes = rows[: len(rows) // 10 * 10].reshape(-1, 10)
    assert all(sorted(p) == list(range(10)) for p in passes)
    assert len({tuple(p) for p in passes}) > 1


def test_tfrecord_dataset_parse_single_example_then_batch(tmp_path):
    # TF 1's common order: parse each record, then batch; VarLenFeature's sparse values are
    # batched into one sparse value, as tf.data batches SparseTensors, equal to parsing the
    # batch at once.
    path = str(tmp_path / "d.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for i in range(5):
            example = tf.train.Example()
            example.features.feature["x"].float_list.value.append(float(i))
            example.features.feature["tags"].int64_list.value.extend(range(i % 3))
            writer.write(example.SerializeToString())
    spec = {"x": tf.io.FixedLenFeature([1], tf.float32), "tags": tf.io.VarLenFeature(tf.int64)}
    dataset = tf.data.TFRecordDataset(path).map(lambda s: tf.io.parse_single_example(s, spec))
    batches = list(dataset.batch(2))
    records = list(tf.io.tf_record_iterator(path))
    assert len(batches) == 3
    for i, batch in enumerate(batches):
        alone = tf.io.parse_example(records[2 * i : 2 * i + 2], spec)
        np.testing.assert_array_equal(batch["x"], alone["x"])
        for part in ("indices", "values", "dense_shape"):
            np.testing.assert_array_equal(
                getattr(batch["tags"], part), getattr(alone["tags"], part)
            )
    files = list(tf.data.Dataset.list_files(str(tmp_path / "*.tfrecord"), shuffle=False))
    assert list(files) == [path.encode()]
    interleaved = tf.data.Dataset.from_tensor_slices(np.array([path, path], dtype=object))
    interleaved = interleaved.interleave(tf.data.TFRecordDataset, cycle_length=2, block_length=2)
    assert list(interleaved) == [
        records[0], records[1], records[0], records[1], records[2], records[3],
        records[2], records[3], records[4], records[4],
    ]  # fmt: skip
