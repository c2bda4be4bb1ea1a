"""``TPUEstimator`` on JAX devices and ``tf.train.init_from_checkpoint``.

TF's behaviour is TF 1.15's ``tpu_estimator.py`` / ``tpu_config.py`` (also shipped in
tensorflow-estimator 2.15 as ``tf.compat.v1.estimator.tpu``): the messages below are
TF's. The end-to-end programs (a BERT-style fine-tuning and an MNIST-style TPU sample) are
in ``tests/compat/test_compat_programs.py``.
"""

import jax.numpy as jnp
import numpy as np
import pytest

import estimator.compat.v1 as tf

X = np.linspace(-1.0, 1.0, 8, dtype=np.float32)[:, None]
Y = 3.0 * X[:, 0]


def _config(tmp_path, iterations=4, **kwargs):
    return tf.estimator.tpu.RunConfig(
        model_dir=str(tmp_path),
        tpu_config=tf.estimator.tpu.TPUConfig(iterations_per_loop=iterations, **kwargs),
    )


def _input_fn(params):
    dataset = tf.data.Dataset.from_tensor_slices(({"x": X}, Y))
    return dataset.repeat().batch(params["batch_size"], drop_remainder=True)


def test_tpu_config_maps_iterations_per_loop_and_checks_as_tf(tmp_path):
    config = _config(tmp_path, iterations=7)
    assert config.steps_per_execution == 7 and config.tpu_config.iterations_per_loop == 7
    assert config.tpu_config.per_host_input_for_training == (
        tf.estimator.tpu.InputPipelineConfig.PER_HOST_V1
    )
    with pytest.raises(ValueError, match="iterations_per_loop must be positive integer"):
        tf.estimator.tpu.TPUConfig(iterations_per_loop=0)
    with pytest.raises(ValueError, match="a duration is not supported"):
        tf.estimator.tpu.TPUConfig(iterations_per_loop="30s")
    with pytest.raises(ValueError, match="Model parallelism .* is not supported"):
        tf.estimator.tpu.TPUConfig(num_cores_per_replica=2)
    with pytest.raises(ValueError, match="cluster resolvers are not supported"):
        tf.estimator.tpu.RunConfig(cluster=object())


def _linear_model_fn(seen):
    def model_fn(features, labels, mode, params):
        seen.append((mode, params["batch_size"], params["use_tpu"], features["x"].shape[0]))
        w = tf.get_variable("w", [1, 1], initializer=tf.zeros_initializer())
        predictions = tf.squeeze(tf.matmul(features["x"], w), 1)
        if mode == tf.estimator.ModeKeys.PREDICT:
            return tf.estimator.tpu.TPUEstimatorSpec(mode, predictions={"y": predictions})
        loss = tf.losses.mean_squared_error(labels, predictions)
        optimizer = tf.tpu.CrossShardOptimizer(tf.train.GradientDescentOptimizer(0.1))

        def metric_fn(labels, predictions):
            return {"mse": tf.metrics.mean_squared_error(labels, predictions)}

        def host_call_fn(global_step, loss):
            with tf.contrib.summary.create_file_writer(params["model_dir"]).as_default():
                with tf.contrib.summary.always_record_summaries():
                    tf.contrib.summary.scalar("host_loss", loss[0], step=global_step[0])
                    return tf.contrib.summary.all_summary_ops()

        return tf.estimator.tpu.TPUEstimatorSpec(
            mode,
            loss=loss,
            train_op=optimizer.minimize(loss, tf.train.get_global_step()),
            eval_metrics=(metric_fn, [labels, predictions]),
            host_call=(
                host_call_fn,
                [tf.reshape(tf.train.get_global_step(), [1]), tf.reshape(loss, [1])],
            ),
        )

    return model_fn


@pytest.mark.slow
@pytest.mark.parametrize("use_tpu", [False, True])
def test_batch_sizes_reach_input_fn_and_model_fn_as_params(tmp_path, use_tpu):
    seen = []
    estimator = tf.estimator.tpu.TPUEstimator(
        model_fn=_linear_model_fn(seen),
        config=_config(tmp_path),
        params={"model_dir": str(tmp_path)},
        use_tpu=use_tpu,
        train_batch_size=4,
        eval_batch_size=4,
        predict_batch_size=8,
    )
    estimator.train(_input_fn, max_steps=20)
    metrics = estimator.evaluate(_input_fn, steps=4)
    (batch,) = estimator.predict(
        lambda params: tf.data.Dataset.from_tensor_slices({"x": X}).batch(params["batch_size"]),
        yield_single_examples=False,
    )
    # Global batch sizes by mode, params["use_tpu"] as given (with use_tpu, the tests' four
    # CPU devices share each batch: tests/conftest.py).
    assert {(mode, size, flag) for mode, size, flag, _ in seen} == {
        ("train", 4, use_tpu),
        ("eval", 4, use_tpu),
        ("infer", 8, use_tpu),
    }
    assert all(size == rows for _, size, _, rows in seen)  # model_fn sees the global batch
    assert metrics["global_step"] == 20 and metrics["mse"] < 1.0  # from mean(9 x^2) = 3.86
    assert batch["y"].shape == (8,)
    # The host call's summary was written with the step's loss.
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path)).Reload()
    assert "host_loss" in events.Tags()["scalars"]


def test_tpu_estimator_checks_as_tf(tmp_path):
    model_fn = _linear_model_fn([])
    with pytest.raises(ValueError, match="`config` must be provided with type `tpu_config"):
        tf.estimator.tpu.TPUEstimator(model_fn, config=tf.estimator.RunConfig())
    with pytest.raises(ValueError, match=r"\['batch_size', 'context'\] are reserved keys"):
        tf.estimator.tpu.TPUEstimator(model_fn, config=_config(tmp_path), params={"batch_size": 1})
    with pytest.raises(ValueError, match="`train_batch_size` cannot be `None`"):
        tf.estimator.tpu.TPUEstimator(model_fn, config=_config(tmp_path), use_tpu=True)
    with pytest.raises(ValueError, match="train_batch_size must be positive integer"):
        tf.estimator.tpu.TPUEstimator(model_fn, config=_config(tmp_path), train_batch_size=0)
    with pytest.raises(ValueError, match="asks for more devices than JAX has"):
        tf.estimator.tpu.TPUEstimator(
            model_fn, config=_config(tmp_path, num_shards=64), train_batch_size=64
        )
    with pytest.raises(ValueError, match=r"does not include params argument, required by"):
        tf.estimator.tpu.TPUEstimator(
            lambda features, labels, mode: None, config=_config(tmp_path), use_tpu=False
        )
    estimator = tf.estimator.tpu.TPUEstimator(
        model_fn, config=_config(tmp_path), use_tpu=False, train_batch_size=4
    )
    with pytest.raises(ValueError, match=r"input_fn .* does not include params argument"):
        estimator.train(lambda: ({"x": X}, Y), steps=1)


def test_tpu_estimator_spec_checks_host_calls_as_tf():
    spec = tf.estimator.tpu.TPUEstimatorSpec
    with pytest.raises(ValueError, match="eval_metrics should be tuple or list"):
        spec("eval", eval_metrics={"a": 1})
    with pytest.raises(ValueError, match="host_call should have two elements."):
        spec("train", host_call=(print,))
    with pytest.raises(TypeError, match=r"eval_metrics\[0\] should be callable."):
        spec("eval", eval_metrics=(1, []))
    with pytest.raises(ValueError, match=r"host_call\[1\] should be tuple or list, or dict."):
        spec("train", host_call=(print, 1))
    with pytest.raises(RuntimeError, match="length of tensors 1 does not match method args"):
        spec("eval", eval_metrics=(lambda a, b: {}, [1]))
    with pytest.raises(TypeError, match="All hooks must be SessionRunHook instances"):
        spec("train", training_hooks=[object()])


def _scoped_model_fn(init_checkpoint=None, use_scaffold=False):
    def model_fn(features, labels, mode, params):
        with tf.variable_scope("bert"):
            w = tf.get_variable("w", [1, 1], initializer=tf.zeros_initializer())
        head = tf.get_variable("head", [], initializer=tf.zeros_initializer())
        predictions = tf.squeeze(tf.matmul(features["x"], w), 1) + head
        loss = tf.losses.mean_squared_error(labels, predictions)
        scaffold_fn = None
        if init_checkpoint:
            assignment = {"bert/": "bert/"}
            if use_scaffold:

                def scaffold_fn():
                    tf.train.init_from_checkpoint(init_checkpoint, assignment)
                    return tf.train.Scaffold()

            else:
                tf.train.init_from_checkpoint(init_checkpoint, assignment)
        train_op = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
        return tf.estimator.tpu.TPUEstimatorSpec(
            mode,
            loss=loss,
            train_op=train_op,
            eval_metrics=(lambda w: {"w": tf.metrics.mean(w)}, [tf.reshape(w, [1])]),
            scaffold_fn=scaffold_fn,
        )

    return model_fn


@pytest.mark.parametrize("use_scaffold", [False, True], ids=["model_fn", "scaffold_fn"])
def test_init_from_checkpoint_initialises_only_a_fresh_model(tmp_path, use_scaffold):
    def estimator(path, **kwargs):
        return tf.estimator.tpu.TPUEstimator(
            _scoped_model_fn(**kwargs), config=_config(path), use_tpu=use_scaffold,
            train_batch_size=8, eval_batch_size=8,
        )  # fmt: skip

    first = estimator(tmp_path / "first")
    first.train(_input_fn, steps=30)
    trained = float(first.get_variable_value("bert/w")[0, 0])
    assert trained > 1.0
    second = estimator(tmp_path / "second", init_checkpoint=str(tmp_path / "first"),
                       use_scaffold=use_scaffold)  # fmt: skip
    # No checkpoint of its own: the variables start from the first run's values ...
    assert second.evaluate(_input_fn, steps=1)["w"] == pytest.approx(trained)
    second.train(_input_fn, steps=1)
    after_one = float(second.get_variable_value("bert/w")[0, 0])
    assert after_one != pytest.approx(0.1 * 0.0)  # it started from `trained`, not zero
    # ... and once it has one, restarting reads its own checkpoint, not the first run's.
    second.train(_input_fn, steps=1)
    assert float(second.get_variable_value("bert/w")[0, 0]) != pytest.approx(trained)


def test_init_from_checkpoint_errors_are_tfs(tmp_path):
    first = tf.estimator.tpu.TPUEstimator(
        _scoped_model_fn(), config=_config(tmp_path / "a"), use_tpu=False, train_batch_size=8
    )
    first.train(_input_fn, steps=1)
    ckpt = str(tmp_path / "a")

    def run(assignment):
        def model_fn(features, labels, mode, params):
            with tf.variable_scope("bert"):
                w = tf.get_variable("w", [2, 1])
            tf.train.init_from_checkpoint(ckpt, assignment)
            loss = jnp.sum(w)
            return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=tf.no_op())

        model = tf.estimator.Estimator(model_fn, str(tmp_path / "b"))
        model.evaluate(lambda: ({"x": X}, Y), steps=1)

    with pytest.raises(ValueError, match="Tensor nope is not found in .* checkpoint"):
        run({"nope": "bert/w"})
    with pytest.raises(ValueError, match=r"Shape of variable bert/w:0 \(\(2, 1\)\) doesn't match"):
        run({"bert/w": "bert/w"})
    with pytest.raises(ValueError, match="should map to scope only bert/w. Should be 'scope/'"):
        run({"bert/w": "other/"})


@pytest.mark.slow
def test_use_tpu_splits_the_global_batch_over_the_devices(tmp_path):
    # The tests run with four CPU devices (tests/conftest.py); num_shards=2 takes two. Each
    # global batch of 4 is split over them; CrossShardOptimizer(MEAN) gives the one-device
    # result, SUM adds the two shards' gradients: twice the step.
    def model_fn_with(reduction):
        def model_fn(features, labels, mode, params):
            w = tf.get_variable("w", [1, 1], initializer=tf.zeros_initializer())
            predictions = tf.squeeze(tf.matmul(features["x"], w), 1)
            loss = tf.losses.mean_squared_error(labels, predictions)
            opt = tf.tpu.CrossShardOptimizer(tf.train.GradientDescentOptimizer(0.1), reduction)
            return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=opt.minimize(loss))

        return model_fn

    out = {}
    for name, use_tpu, reduction in (
        ("one", False, tf.losses.Reduction.MEAN),
        ("mean", True, tf.losses.Reduction.MEAN),
        ("sum", True, tf.losses.Reduction.SUM),
    ):
        estimator = tf.estimator.tpu.TPUEstimator(
            model_fn_with(reduction), config=_config(tmp_path / name, num_shards=2),
            use_tpu=use_tpu, train_batch_size=4,
        )  # fmt: skip
        estimator.train(_input_fn, steps=1)
        out[name] = float(estimator.get_variable_value("w")[0, 0])
        out[name + "_devices"] = 0 if estimator.config.mesh is None else estimator.config.mesh.size
    assert out["mean_devices"] == 2 and out["one_devices"] == 0
    # One step of SGD at 0.1 on the first batch (x = -1, -5/7, -3/7, -1/7; y = 3x):
    # dL/dw = mean(-2 * 3x * x) = -6 * mean(x^2); w = 0.6 * mean(x^2) = 0.6 * 0.4286 = 0.2571.
    first = np.linspace(-1.0, 1.0, 8)[:4]
    assert out["one"] == pytest.approx(0.6 * np.mean(first**2), rel=1e-5)
    assert out["mean"] == pytest.approx(out["one"], rel=1e-6)
    assert out["sum"] == pytest.approx(2 * out["one"], rel=1e-6)
