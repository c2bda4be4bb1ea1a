"""``estimator.inputs.tfrecord_input_fn`` and ``estimator.io.write_examples``: files of
``tf.Example`` written from columns, read back in batches, and training from them."""

import os

import numpy as np
import pandas as pd
import pytest

import canned
import estimator as est
from canned import feature_column as fc
from estimator import io


def _data(n=40):
    rng = np.random.default_rng(0)
    return {
        "x": rng.normal(size=n).astype(np.float32),
        "pair": rng.integers(0, 5, size=(n, 2)),
        "color": np.array(["red", "green", "blue", "red"] * (n // 4), dtype=object),
        "tags": np.array([["a", "b"], [], ["c"], None] * (n // 4), dtype=object),
        "label": (np.arange(n) % 3 == 0).astype(np.int64),
    }


SPEC = {
    "x": io.FixedLenFeature([1], np.float32),
    "pair": io.FixedLenFeature([2], np.int64),
    "color": io.FixedLenFeature([], str),
    "tags": io.VarLenFeature(str),
    "label": io.FixedLenFeature([1], np.int64),
}


def test_written_columns_parse_back(tmp_path):
    data = _data()
    (path,) = io.write_examples(str(tmp_path / "d.tfrecord.gz"), data)
    parsed = io.parse_example(list(io.read_records(path, "GZIP")), SPEC)
    np.testing.assert_array_equal(parsed["x"][:, 0], data["x"])
    np.testing.assert_array_equal(parsed["pair"], data["pair"])
    assert parsed["color"].tolist() == [c.encode() for c in data["color"]]
    # tags: ["a", "b"], [], ["c"], None (left out) -> rows 0 (2 values) and 2 (1 value).
    assert parsed["tags"].indices[:3].tolist() == [[0, 0], [0, 1], [2, 0]]
    assert parsed["tags"].values[:3].tolist() == [b"a", b"b", b"c"]


def test_a_dataframe_and_shards(tmp_path):
    frame = pd.DataFrame({"a": [1.5, 2.5, 3.5], "b": ["x", "y", "z"], "n": [1, 2, 3]})
    paths = io.write_examples(str(tmp_path / "part"), frame, num_shards=2)
    assert [os.path.basename(p) for p in paths] == ["part-00000-of-00002", "part-00001-of-00002"]
    records = list(io.read_records(str(tmp_path / "part-*"), "GZIP"))
    parsed = io.parse_example(
        records,
        {"a": io.FixedLenFeature([], np.float32), "b": io.FixedLenFeature([], str),
         "n": io.FixedLenFeature([], np.int64)},
    )  # fmt: skip
    assert parsed["a"].tolist() == [1.5, 2.5, 3.5]
    assert parsed["b"].tolist() == [b"x", b"y", b"z"]
    assert parsed["n"].tolist() == [1, 2, 3]


def test_writer_errors_name_the_column(tmp_path):
    with pytest.raises(ValueError, match=r"Columns have different lengths: \{'a': 2, 'b': 3\}"):
        io.write_examples(str(tmp_path / "x"), {"a": [1, 2], "b": [1, 2, 3]})
    with pytest.raises(ValueError, match="Column 'a', row 1: .* mixes types"):
        io.write_examples(str(tmp_path / "x"), {"a": np.array([[1], ["s", 2]], dtype=object)})
    with pytest.raises(ValueError, match=r"Column .t. has dtype datetime64\[D\]; tf.Example"):
        io.write_examples(str(tmp_path / "x"), {"t": np.array(["2020-01-01"], "datetime64[D]")})
    assert os.listdir(tmp_path) == []


def _batches(input_fn, **kwargs):
    return list(input_fn(**kwargs))


def test_batches_in_order_with_labels_and_epochs(tmp_path):
    data = _data()
    io.write_examples(str(tmp_path / "d"), data, compression_type="", num_shards=3)
    input_fn = est.inputs.tfrecord_input_fn(
        str(tmp_path / "d-*"), SPEC, label_key="label", batch_size=16, num_epochs=2,
        shuffle=False,
    )  # fmt: skip
    batches = _batches(input_fn)
    # 80 examples in batches of 16: 5 batches; shards 0..2 in order, epoch after epoch.
    assert [len(labels) for _, labels in batches] == [16] * 5
    labels = np.concatenate([labels[:, 0] for _, labels in batches])
    np.testing.assert_array_equal(labels, np.tile(data["label"], 2))
    assert "label" not in batches[0][0] and set(batches[0][0]) == set(SPEC) - {"label"}


def test_shuffle_reads_each_example_once_per_epoch_and_shards_split(tmp_path):
    data = _data()
    data["id"] = np.arange(40)
    io.write_examples(str(tmp_path / "d"), data, num_shards=4)
    spec = {**SPEC, "id": io.FixedLenFeature([], np.int64)}
    input_fn = est.inputs.tfrecord_input_fn(
        str(tmp_path / "d-*"), spec, batch_size=7, shuffle=True, compression_type="GZIP",
        shuffle_buffer_size=10,
    )  # fmt: skip
    ids = np.concatenate(
        [b["id"] for b in _batches(input_fn, config=est.RunConfig(tf_random_seed=1))]
    )
    assert sorted(ids.tolist()) == list(range(40)) and ids.tolist() != list(range(40))
    shards = [
        np.concatenate(
            [
                b["id"]
                for b in _batches(input_fn, input_context=est.distribute.InputContext(2, i, 2))
            ]
        )
        for i in range(2)
    ]
    assert sorted(np.concatenate(shards).tolist()) == list(range(40))
    assert not set(shards[0].tolist()) & set(shards[1].tolist())


def test_errors_reach_the_caller(tmp_path):
    with pytest.raises(ValueError, match="shuffle must be provided"):
        est.inputs.tfrecord_input_fn("x", SPEC)
    with pytest.raises(ValueError, match="label_key 'y' is not in the feature spec"):
        est.inputs.tfrecord_input_fn("x", SPEC, label_key="y", shuffle=False)
    input_fn = est.inputs.tfrecord_input_fn(str(tmp_path / "none-*"), SPEC, shuffle=False)
    with pytest.raises(ValueError, match="No files matched pattern"):
        input_fn()
    io.write_examples(str(tmp_path / "wrong"), {"x": np.array(["s"], dtype=object)})
    input_fn = est.inputs.tfrecord_input_fn(
        str(tmp_path / "wrong"), {"x": SPEC["x"]}, shuffle=False, compression_type="GZIP"
    )
    with pytest.raises(ValueError, match="Key: x, Index: 0.  Data types don't match"):
        _batches(input_fn)


def _columns():
    return [
        fc.numeric_column("x"),
        fc.categorical_column_with_vocabulary_list("color", ["red", "green", "blue"]),
        fc.categorical_column_with_vocabulary_list("tags", ["a", "b", "c"]),
    ]


@pytest.mark.slow
def test_training_from_files_equals_training_from_arrays(tmp_path):
    data = _data()
    io.write_examples(str(tmp_path / "train.tfrecord.gz"), data)
    columns = _columns()
    from_files = canned.LinearClassifier(columns, model_dir=str(tmp_path / "files"))
    from_files.train(
        est.inputs.tfrecord_input_fn(
            str(tmp_path / "train.tfrecord.gz"), columns, label_key="label", batch_size=8,
            num_epochs=3, shuffle=False, compression_type="GZIP",
        )
    )  # fmt: skip
    # The same rows as arrays: "tags" as TF's dense categorical input (padded with "").
    tags = np.array([["a", "b"], ["", ""], ["c", ""], ["", ""]] * 10, dtype=object)
    features = {"x": data["x"][:, None], "color": data["color"], "tags": tags}
    from_arrays = canned.LinearClassifier(columns, model_dir=str(tmp_path / "arrays"))
    from_arrays.train(
        est.inputs.numpy_input_fn(
            features, data["label"], batch_size=8, num_epochs=3, shuffle=False
        )
    )
    for name in from_files.get_variable_names():
        np.testing.assert_allclose(
            from_files.get_variable_value(name), from_arrays.get_variable_value(name), rtol=1e-6,
            err_msg=name,
        )  # fmt: skip
    assert from_files.get_variable_value("global_step") == 15  # 120 examples / 8


def test_batches_cut_from_a_block_equal_batches_parsed_alone(tmp_path):
    # Blocks of 4096 records are parsed at once and cut into batches: each batch must equal
    # parse_example of its own records (VarLen widths, SparseFeature shapes, ragged rows).
    rng = np.random.default_rng(1)
    n = 300
    data = {
        "v": np.array([list(range(rng.integers(0, 4))) for _ in range(n)], dtype=object),
        "ix": np.array([[int(rng.integers(0, 9))] for _ in range(n)], dtype=object),
        "val": np.array([[float(i)] for i in range(n)], dtype=object),
        "id": np.arange(n),
    }
    (path,) = io.write_examples(str(tmp_path / "b"), data, compression_type="")
    spec = {
        "v": io.VarLenFeature(np.int64),
        "s": io.SparseFeature("ix", "val", np.float32, 9),
        "r": io.RaggedFeature(np.int64, value_key="v"),
        "id": io.FixedLenFeature([], np.int64),
    }
    records = list(io.read_records(path))
    batches = list(est.inputs.tfrecord_input_fn(path, spec, batch_size=32, shuffle=False)())
    assert len(batches) == 10  # 9 of 32 and one of 12
    for i, batch in enumerate(batches):
        alone = io.parse_example(records[32 * i : 32 * (i + 1)], spec)
        np.testing.assert_array_equal(batch["id"], alone["id"])
        for key in ("v", "s"):
            for part in ("indices", "values", "dense_shape"):
                np.testing.assert_array_equal(getattr(batch[key], part), getattr(alone[key], part))
        assert batch["r"].to_list() == alone["r"].to_list()


def test_more_argument_errors(tmp_path):
    with pytest.raises(ValueError, match="batch_size must be >= 1; got 0"):
        est.inputs.tfrecord_input_fn("x", SPEC, batch_size=0, shuffle=False)
    with pytest.raises(ValueError, match="num_epochs must be >= 1 or None"):
        est.inputs.tfrecord_input_fn("x", SPEC, num_epochs=0, shuffle=False)
    with pytest.raises(TypeError, match="has no parse_example_spec"):
        est.inputs.tfrecord_input_fn("x", ["not a column"], shuffle=False)
    with pytest.raises(ValueError, match=r"Column 'a' holds int64 values \(row 0\) and bytes"):
        io.write_examples(str(tmp_path / "x"), {"a": np.array([[1], ["s"]], dtype=object)})
    with pytest.raises(ValueError, match="num_shards must be >= 1"):
        io.write_examples(str(tmp_path / "x"), {"a": [1.0]}, num_shards=0)


def test_an_iterator_dropped_early_stops_its_threads(tmp_path):
    import gc
    import threading
    import time

    io.write_examples(str(tmp_path / "d"), _data(), compression_type="")
    input_fn = est.inputs.tfrecord_input_fn(
        str(tmp_path / "d"), SPEC, batch_size=1, num_epochs=None, shuffle=False,
        prefetch_batches=1,
    )  # fmt: skip
    batches = input_fn()
    next(batches)  # the threads run, the queue fills; then training stops early

    def engine_threads():
        return [
            t
            for t in threading.enumerate()
            if t.name.startswith(("grain-thread-prefetch", "input_map")) and t.is_alive()
        ]

    assert engine_threads()
    del batches
    gc.collect()
    deadline = time.monotonic() + 5
    while engine_threads():
        assert time.monotonic() < deadline, "the reading thread did not stop"
        time.sleep(0.05)


def test_writing_into_a_missing_directory_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist. Create it first"):
        io.TFRecordWriter(tmp_path / "nope" / "x.tfrecord")


def test_the_shuffle_buffer_is_tfs_algorithm():
    # TF's Dataset.shuffle, written out element by element: fill the buffer, then each
    # incoming element takes a uniformly drawn slot, whose element goes out; at the end the
    # buffer drains in random order. The engine's buffer, given the same draws (one
    # rng.integers call per chunk's overflow), must match, for chunks of elements and for
    # the TFRecord reader's records alike.
    from estimator.inputs import engine
    from estimator.io._records import Records

    size, chunks = 10, [list(range(0, 4)), list(range(4, 17)), [17], list(range(18, 60))]
    reference_rng, slots, expected = np.random.default_rng(3), [], []
    for chunk in chunks:
        room = size - len(slots)
        slots += chunk[:room]
        overflow = chunk[room:] if room < len(chunk) else []
        draws = reference_rng.integers(0, size, len(overflow))
        for element, j in zip(overflow, draws, strict=True):
            expected.append(slots[j])
            slots[j] = element
    rest = [slots[i] for i in reference_rng.permutation(len(slots))]
    for as_records in (False, True):
        source = [[f"r{i}".encode() for i in chunk] for chunk in chunks]
        if as_records:
            source = [Records.from_list(chunk) for chunk in source]
        shuffled = engine.Shuffle(
            engine.Source(lambda s=source: s), size, lambda: np.random.default_rng(3)
        )
        got = [bytes(r) for chunk in shuffled for r in chunk]
        assert got == [f"r{i}".encode() for i in expected + rest]
    # Over indices (the in-memory pipelines' shuffle): one chunk of 60, so one draw call.
    reference_rng, slots, expected = np.random.default_rng(5), list(range(size)), []
    for element, j in zip(range(size, 60), reference_rng.integers(0, size, 60 - size), strict=True):
        expected.append(slots[j])
        slots[j] = element
    expected += [slots[i] for i in reference_rng.permutation(size)]
    assert engine.buffer_order(60, size, np.random.default_rng(5)).tolist() == expected


def test_the_first_batches_wait_for_their_elements_not_for_whole_blocks(tmp_path):
    """A repeated small input (a few records, on remote storage: each pass a read of its
    files) gives its first batch after one batch's elements are read, and its next batches
    soon after, as TF's ``batch`` does. The engine used to read ``depth`` blocks of
    ``BLOCK_ROWS`` elements first: 2,048 chunks of 8 here, 512 passes over the files."""
    from estimator.inputs import engine

    read = []

    def chunks():
        while True:
            read.append(len(read))
            yield list(range(8 * len(read) - 8, 8 * len(read)))  # a chunk of 8 elements

    blocks = engine.Blocks(engine.Source(chunks), 8)
    mapped = engine.ParallelMap(
        blocks, lambda block: np.asarray(block.items) * 10, workers=2, depth=4
    )
    batches = iter(engine.Unblock(mapped))
    assert np.asarray(next(batches)).tolist() == [10 * i for i in range(8)]
    assert len(read) == 1
    for i in range(1, 6):  # blocks of 1, 2, 4, ... batches: in order, values mapped
        assert np.asarray(next(batches)).tolist() == [10 * (8 * i + j) for j in range(8)]
    assert len(read) < 64  # one block of BLOCK_ROWS is 512 chunks

    # End to end: a tfrecord_input_fn repeating 2 files of 16 records.
    x = np.arange(32, dtype=np.float32)[:, None]
    files = io.write_examples(str(tmp_path / "t"), {"x": x}, num_shards=2)
    spec = {"x": io.FixedLenFeature([1], np.float32)}
    stats = []
    original = io.tfrecord.reader.ReadStats.__init__

    def recorded(self, *args, **kwargs):
        original(self, *args, **kwargs)
        stats.append(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(io.tfrecord.reader.ReadStats, "__init__", recorded)
        input_fn = est.inputs.tfrecord_input_fn(
            files, spec, batch_size=8, shuffle=False, num_epochs=None, compression_type="GZIP"
        )
        first = next(iter(input_fn()))
    assert first["x"][:, 0].tolist() == list(range(8))
    assert stats and stats[-1].records < 512  # one pass is 32 records; a block is 4,096
