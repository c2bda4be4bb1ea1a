"""The symbols that each blocked several public TF 1 programs: ``tf.ConfigProto``
and ``tf.GPUOptions``, ``tf.estimator.inputs.pandas_input_fn``, ``tf.keras.utils.get_file``,
``tf.errors.*``, ``tf.app.flags`` / ``tf.flags`` and ``tf.app.run``."""

import hashlib
import io
import os
import tarfile

import absl.flags
import numpy as np
import pandas as pd
import pytest

import estimator.compat.v1 as tf


def test_session_configs_are_accepted_by_run_config_and_keep_tfs_fields():
    config = tf.ConfigProto(allow_soft_placement=True, log_device_placement=False)
    config.gpu_options.allow_growth = True
    config.gpu_options.per_process_gpu_memory_fraction = 0.4
    run_config = tf.estimator.RunConfig(session_config=config)
    assert run_config.session_config is config  # accepted, ignored (no session)
    assert tf.GPUOptions(allow_growth=True).allow_growth
    assert config.graph_options.optimizer_options.opt_level == 0
    # A misspelt option fails as protobuf's messages do in TF.
    with pytest.raises(ValueError, match='Protocol message ConfigProto has no "allow_growth"'):
        tf.ConfigProto(allow_growth=True)
    with pytest.raises(AttributeError, match='no field "allow_grow"'):
        config.gpu_options.allow_grow = True


FRAME = pd.DataFrame(
    {"a": [1.0, 2.0, 3.0, 4.0, 5.0], "b": ["u", "v", "w", "x", "y"]}, index=[10, 11, 12, 13, 14]
)
TARGET = pd.Series([0, 1, 0, 1, 1], index=FRAME.index)


def _batches(input_fn):
    return list(input_fn())


def test_pandas_input_fn_batches_the_frames_columns_as_numpy_input_fn():
    batches = _batches(tf.estimator.inputs.pandas_input_fn(FRAME, TARGET, 2, shuffle=False))
    assert len(batches) == 3  # 5 rows in 2s, one epoch: 2 + 2 + 1
    features, labels = batches[0]
    assert set(features) == {"a", "b"}
    np.testing.assert_array_equal(features["a"], [1.0, 2.0])
    assert list(features["b"]) == ["u", "v"]
    np.testing.assert_array_equal(labels, [0, 1])
    np.testing.assert_array_equal(batches[2][1], [1])
    # Shuffled: every row once per epoch, in another order.
    shuffled = _batches(tf.estimator.inputs.pandas_input_fn(FRAME, TARGET, 5, shuffle=True))
    assert sorted(shuffled[0][0]["a"]) == [1.0, 2.0, 3.0, 4.0, 5.0]
    # A DataFrame target gives a dict of labels; no target gives the features alone.
    (both,) = _batches(tf.estimator.inputs.pandas_input_fn(FRAME[["a"]], FRAME[["b"]], 5, 1, False))
    assert list(both[1]) == ["b"]
    (alone,) = _batches(tf.estimator.inputs.pandas_input_fn(FRAME, batch_size=5, shuffle=False))
    assert set(alone) == {"a", "b"}


@pytest.mark.slow
def test_pandas_input_fn_trains_an_estimator(tmp_path):
    x = pd.DataFrame({"x": np.linspace(-1, 1, 20, dtype=np.float32)})
    y = pd.Series((x["x"] > 0).astype(np.int32))
    model = tf.estimator.LinearClassifier(
        [tf.feature_column.numeric_column("x")], model_dir=str(tmp_path)
    )
    model.train(tf.estimator.inputs.pandas_input_fn(x, y, 10, None, shuffle=True), steps=30)
    metrics = model.evaluate(tf.estimator.inputs.pandas_input_fn(x, y, 10, shuffle=False))
    assert metrics["accuracy"] == 1.0


def test_pandas_input_fn_errors_are_tfs():
    with pytest.raises(ValueError, match="shuffle must be provided and explicitly set"):
        tf.estimator.inputs.pandas_input_fn(FRAME, TARGET)
    with pytest.raises(ValueError, match="Cannot use name a for target column"):
        tf.estimator.inputs.pandas_input_fn(FRAME, TARGET, shuffle=False, target_column="a")
    with pytest.raises(ValueError, match="Index for x and y are mismatched"):
        tf.estimator.inputs.pandas_input_fn(FRAME, TARGET.reset_index(drop=True), shuffle=False)
    with pytest.raises(TypeError, match="target_column must be a string type"):
        tf.estimator.inputs.pandas_input_fn(FRAME, TARGET, shuffle=False, target_column=1)


def test_get_file_downloads_once_checks_the_hash_and_extracts(tmp_path):
    source = tmp_path / "adult.data"
    source.write_bytes(b"39, State-gov, 77516\n")
    sha = hashlib.sha256(source.read_bytes()).hexdigest()
    cache = tmp_path / "cache"
    path = tf.keras.utils.get_file(
        "adult.data", source.as_uri(), file_hash=sha, cache_dir=str(cache)
    )
    assert path == str(cache / "datasets" / "adult.data")
    assert open(path, "rb").read() == source.read_bytes()
    source.write_bytes(b"changed\n")  # cached: not fetched again
    assert open(tf.keras.utils.get_file("adult.data", source.as_uri(), cache_dir=str(cache)),
                "rb").read() == b"39, State-gov, 77516\n"  # fmt: skip
    # A download whose hash does not match is refused and leaves nothing behind.
    with pytest.raises(ValueError, match="Incomplete or corrupted file detected. The sha256"):
        tf.keras.utils.get_file("other", source.as_uri(), file_hash=sha, cache_dir=str(cache))
    assert sorted(os.listdir(cache / "datasets")) == ["adult.data"]
    # untar: a .tar.gz extracted next to it; the directory's path returned.
    archive = tmp_path / "data.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("data/rows.csv")
        info.size = 4
        tar.addfile(info, io.BytesIO(b"1,2\n"))
    extracted = tf.keras.utils.get_file("data", archive.as_uri(), untar=True, cache_dir=str(cache))
    assert open(os.path.join(extracted, "rows.csv")).read() == "1,2\n"
    with pytest.raises(Exception, match="URL fetch failure on file:"):
        tf.keras.utils.get_file("missing", (tmp_path / "nope").as_uri(), cache_dir=str(cache))
    with pytest.raises(tf.UnsupportedSymbolError, match=r"tf\.keras\.utils\.to_categorical"):
        tf.keras.utils.to_categorical  # noqa: B018


def test_tf_errors_are_tfs_classes():
    error = tf.errors.OutOfRangeError(None, None, "End of sequence")
    assert isinstance(error, tf.errors.OpError) and isinstance(error, Exception)
    assert error.error_code == tf.errors.OUT_OF_RANGE == 11
    assert error.message == "End of sequence" and str(error) == "End of sequence"
    with pytest.raises(tf.errors.OpError):
        raise tf.errors.NotFoundError(None, None, "no such file")
    assert tf.errors.InvalidArgumentError(None, None, "x").error_code == 3


def test_tf_app_flags_are_absl_flags_and_run_parses_them():
    assert tf.app.flags is absl.flags and tf.flags is absl.flags
    tf.flags.DEFINE_integer("compat34_steps", 10, "steps")
    try:
        seen = []

        def main(argv):
            seen.append((tf.flags.FLAGS.compat34_steps, argv))

        with pytest.raises(SystemExit) as exit_:
            tf.app.run(main, ["prog", "--compat34_steps=3", "--argparse_flag", "x"])
        assert exit_.value.code is None  # main returned None: status 0
        # Known flags parsed; unknown ones left for main (argparse programs), as TF's run.
        assert seen == [(3, ["prog", "--argparse_flag", "x"])]
    finally:
        delattr(absl.flags.FLAGS, "compat34_steps")
