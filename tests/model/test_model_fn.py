"""Tests for ``estimator/model_fn.py`` (EstimatorSpec) and ``estimator/mode_keys.py``.

Messages and the validation order are TF 2.15's ``EstimatorSpec`` (checked against
tensorflow_estimator 2.15.0 in graph mode: e.g. ``EstimatorSpec(TRAIN)`` raises "Missing
train_op." before looking at the loss; a bad ``export_outputs`` is reported before bad hooks;
bad hooks before a bad ``eval_metric_ops``; a bad ``eval_metric_ops`` before a scaffold).
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import estimator as est
from estimator.mode_keys import ALL_MODES

TRAIN, EVAL, PREDICT = est.ModeKeys.TRAIN, est.ModeKeys.EVAL, est.ModeKeys.PREDICT
LOSS = jnp.float32(0.5)
PRED = jnp.ones((2, 1), jnp.float32)
OPT = optax.sgd(0.1)


class _Hook(est.SessionRunHook):
    pass


def test_mode_keys_are_tf_strings():
    assert (TRAIN, EVAL, PREDICT) == ("train", "eval", "infer")
    assert ALL_MODES == ("train", "eval", "infer")


# --- required fields per mode -------------------------------------------------------------


def test_train_missing_both_reports_train_op_first():
    # TF validates train_op before loss: EstimatorSpec(TRAIN) -> 'Missing train_op.'.
    with pytest.raises(ValueError, match=r"^Missing train_op\. "):
        est.EstimatorSpec(TRAIN)


# A missing required field keeps TF's message first, then says the mode and the fix.
@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            dict(mode=TRAIN),
            r"^Missing train_op\. The EstimatorSpec of mode 'train' \(ModeKeys\.TRAIN\) has no "
            r"`train_op`; TRAIN needs an optax\.GradientTransformation .*: return "
            r"EstimatorSpec\(mode, loss=loss, train_op=optax\.adam\(1e-3\)\) from model_fn",
        ),
        (
            dict(mode=TRAIN, train_op=OPT),
            r"^Missing loss\. The EstimatorSpec of mode 'train' \(ModeKeys\.TRAIN\) has no "
            r"`loss`; TRAIN and EVAL need a scalar loss .*: return "
            r"EstimatorSpec\(mode, loss=\.\.\., train_op=\.\.\.\) from model_fn in that mode\.$",
        ),
        (
            dict(mode=EVAL),
            r"^Missing loss\. The EstimatorSpec of mode 'eval' \(ModeKeys\.EVAL\) has no `loss`; "
            r"TRAIN and EVAL need a scalar loss .*: return EstimatorSpec\(mode, loss=\.\.\., "
            r"eval_metric_ops=\.\.\.\) from model_fn in that mode\.$",
        ),
        (
            dict(mode=PREDICT),
            r"^Missing predictions\. The EstimatorSpec of mode 'infer' \(ModeKeys\.PREDICT\) has "
            r"no `predictions`; PREDICT needs .*: return EstimatorSpec\(mode, predictions=\{",
        ),
    ],
)
def test_a_missing_required_field_says_tfs_message_then_the_mode_and_the_fix(kwargs, message):
    with pytest.raises(ValueError, match=message):
        est.EstimatorSpec(**kwargs)


def test_train_missing_loss_through_train_names_the_mode(tmp_path):
    def model_fn(features, labels, mode):
        est.layers.dense(features["x"], 1)
        return est.EstimatorSpec(mode, train_op=OPT)  # no loss

    def input_fn():
        return {"x": np.ones((2, 3), np.float32)}, np.zeros((2,), np.float32)

    e = est.Estimator(model_fn, str(tmp_path))
    with pytest.raises(ValueError, match=r"^Missing loss\. .* mode 'train' \(ModeKeys\.TRAIN\)"):
        e.train(input_fn, steps=1)


def test_minimal_specs_per_mode():
    train = est.EstimatorSpec(TRAIN, loss=LOSS, train_op=OPT)
    assert train.train_op is OPT and train.predictions == {}
    assert train.eval_metric_ops == {} and train.export_outputs is None
    ev = est.EstimatorSpec(EVAL, loss=LOSS)
    assert ev.train_op is None
    pr = est.EstimatorSpec(PREDICT, predictions=PRED)
    assert pr.loss is None and pr.predictions is PRED


def test_hooks_default_to_empty_tuples():
    spec = est.EstimatorSpec(EVAL, loss=LOSS, training_hooks=[_Hook()])
    assert isinstance(spec.training_hooks, tuple) and len(spec.training_hooks) == 1
    for field in ("training_chief_hooks", "evaluation_hooks", "prediction_hooks"):
        assert getattr(spec, field) == ()


# --- train_op -----------------------------------------------------------------------------


@pytest.mark.parametrize("train_op", ["minimize_op", 3, lambda: None, object()])
def test_non_optax_train_op_explains_what_to_pass(train_op):
    # A TF-style op (anything not an optax transformation) gets an error naming the fix.
    with pytest.raises(TypeError, match=r"train_op must be an optax\.GradientTransformation"):
        est.EstimatorSpec(TRAIN, loss=LOSS, train_op=train_op)
    with pytest.raises(TypeError, match=r"optimizer\.minimize\(loss, global_step=\.\.\.\)"):
        est.EstimatorSpec(TRAIN, loss=LOSS, train_op=train_op)


def test_train_op_checked_before_loss_and_in_other_modes():
    # TF order: train_op first, so a bad train_op wins over a missing loss; TF also checks
    # a given train_op's type in EVAL mode.
    with pytest.raises(TypeError, match="train_op must be"):
        est.EstimatorSpec(TRAIN, train_op="op")
    with pytest.raises(TypeError, match="train_op must be"):
        est.EstimatorSpec(EVAL, loss=LOSS, train_op="op")


def test_any_optax_transformation_is_accepted():
    chained = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-3))
    assert est.EstimatorSpec(TRAIN, loss=LOSS, train_op=chained).train_op is chained


# --- loss ---------------------------------------------------------------------------------


def test_loss_of_shape_1_is_reshaped_to_scalar():
    spec = est.EstimatorSpec(EVAL, loss=jnp.array([2.5], jnp.float32))
    assert spec.loss.shape == ()
    assert float(spec.loss) == 2.5


def test_loss_of_shape_1_1_is_reshaped_too():
    # TF: num_elements() == 1 is accepted and reshaped to [] whatever the rank.
    spec = est.EstimatorSpec(EVAL, loss=np.full((1, 1), 3.0, np.float32))
    assert spec.loss.shape == ()


@pytest.mark.parametrize("shape", [(2,), (2, 1), (0,)])
def test_non_scalar_loss(shape):
    with pytest.raises(ValueError, match=r"^Loss must be scalar, given: "):
        est.EstimatorSpec(EVAL, loss=jnp.zeros(shape, jnp.float32))


def test_non_array_loss():
    # TF: 'loss must be Tensor, given: ...'.
    with pytest.raises(TypeError, match=r"^loss must be Tensor, given: \[1\.0\]"):
        est.EstimatorSpec(EVAL, loss=[1.0])


def test_python_float_loss_is_refused_as_tf():
    # From TF 2.15.1 (in a graph): EstimatorSpec(TRAIN, loss=1., train_op=...) raises
    # TypeError 'loss must be Tensor, given: 1.0'. An array works.
    with pytest.raises(TypeError, match=r"^loss must be Tensor, given: 1\.5$"):
        est.EstimatorSpec(EVAL, loss=1.5)
    spec = est.EstimatorSpec(EVAL, loss=jnp.float32(1.5))
    assert spec.loss.dtype == jnp.float32 and float(spec.loss) == 1.5


def test_integer_loss_cannot_be_differentiated():
    with pytest.raises(TypeError, match=r"loss must be a floating-point scalar.*int32"):
        est.EstimatorSpec(EVAL, loss=jnp.int32(1))


def test_loss_checked_even_in_predict_and_before_predictions():
    # TF order: loss before predictions, so a bad loss wins over missing predictions.
    with pytest.raises(ValueError, match="Loss must be scalar"):
        est.EstimatorSpec(PREDICT, loss=jnp.zeros(2))


def test_loss_inside_jit_is_a_tracer_and_reshaped():
    @jax.jit
    def f(x):
        return est.EstimatorSpec(EVAL, loss=x.sum(keepdims=True)).loss

    assert f(jnp.arange(3.0)).shape == ()
    assert float(f(jnp.arange(3.0))) == 3.0  # 0 + 1 + 2


# --- predictions --------------------------------------------------------------------------


def test_predictions_must_be_arrays():
    with pytest.raises(TypeError, match=r"^predictions\[a\] must be Tensor, given: 1$"):
        est.EstimatorSpec(PREDICT, predictions={"a": 1})
    with pytest.raises(TypeError, match=r"^predictions must be Tensor, given: \[1\]$"):
        est.EstimatorSpec(PREDICT, predictions=[1])


def test_predictions_none_becomes_empty_dict_outside_predict():
    assert est.EstimatorSpec(EVAL, loss=LOSS).predictions == {}


def test_index_to_string_is_a_valid_prediction():
    classes = est.index_to_string(jnp.array([0, 1]), ["no", "yes"])
    spec = est.EstimatorSpec(PREDICT, predictions={"classes": classes, "p": PRED})
    assert spec.predictions["classes"] is classes


# --- export_outputs -----------------------------------------------------------------------


def test_export_outputs_default_to_serving_default_predict_output():
    preds = {"p": PRED}
    spec = est.EstimatorSpec(PREDICT, predictions=preds)
    assert list(spec.export_outputs) == ["serving_default"]
    out = spec.export_outputs["serving_default"]
    assert isinstance(out, est.PredictOutput)
    assert out.outputs == preds


def test_export_outputs_default_for_a_single_array_prediction():
    # TF's PredictOutput names a lone tensor "output".
    spec = est.EstimatorSpec(PREDICT, predictions=PRED)
    assert spec.export_outputs["serving_default"].outputs == {"output": PRED}


def test_single_export_output_is_aliased_as_serving_default():
    reg = est.RegressionOutput(PRED)
    spec = est.EstimatorSpec(PREDICT, predictions=PRED, export_outputs={"regression": reg})
    assert sorted(spec.export_outputs) == ["regression", "serving_default"]
    assert spec.export_outputs["serving_default"] is reg


def test_given_export_outputs_dict_is_not_mutated():
    given = {"regression": est.RegressionOutput(PRED)}
    est.EstimatorSpec(PREDICT, predictions=PRED, export_outputs=given)
    assert list(given) == ["regression"]


def test_several_export_outputs_need_a_default():
    outs = {"a": est.RegressionOutput(PRED), "b": est.PredictOutput(PRED)}
    with pytest.raises(
        ValueError,
        match=r"^Multiple `export_outputs` were provided, but none of them are specified as "
        r"the default\. Use `serving_default`",
    ):
        est.EstimatorSpec(PREDICT, predictions=PRED, export_outputs=outs)
    outs["serving_default"] = outs["a"]
    spec = est.EstimatorSpec(PREDICT, predictions=PRED, export_outputs=outs)
    assert sorted(spec.export_outputs) == ["a", "b", "serving_default"]


def test_export_outputs_type_errors_tf_messages():
    # TF 2.15 (tensorflow/python/saved_model/model_utils/export_utils.py) texts.
    with pytest.raises(TypeError, match=r"^`export_outputs` must be dict, received: 3\.$"):
        est.EstimatorSpec(PREDICT, predictions=PRED, export_outputs=3)
    with pytest.raises(
        TypeError,
        match=r"^Values in `export_outputs` must be ExportOutput objects, received: \{'x': 3\}\.$",
    ):
        est.EstimatorSpec(PREDICT, predictions=PRED, export_outputs={"x": 3})


def test_export_outputs_only_validated_in_predict():
    # TF passes export_outputs through untouched in TRAIN and EVAL.
    spec = est.EstimatorSpec(EVAL, loss=LOSS, export_outputs=3)
    assert spec.export_outputs == 3


def test_export_outputs_checked_before_hooks():
    with pytest.raises(TypeError, match="export_outputs"):
        est.EstimatorSpec(PREDICT, predictions=PRED, export_outputs=3, training_hooks=[1])


# --- hooks --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field", ["training_hooks", "evaluation_hooks", "prediction_hooks", "training_chief_hooks"]
)
def test_hooks_must_be_session_run_hooks(field):
    with pytest.raises(TypeError, match=r"^All hooks must be SessionRunHook instances, given: 7$"):
        est.EstimatorSpec(EVAL, loss=LOSS, **{field: [_Hook(), 7]})


def test_hook_fields_checked_in_tf_order():
    # TF: training_hooks, evaluation_hooks, prediction_hooks, then training_chief_hooks.
    with pytest.raises(TypeError, match="given: 2$"):
        est.EstimatorSpec(EVAL, loss=LOSS, training_chief_hooks=[1], prediction_hooks=[2])
    with pytest.raises(TypeError, match="given: 3$"):
        est.EstimatorSpec(EVAL, loss=LOSS, prediction_hooks=[2], evaluation_hooks=[3])


def test_hooks_checked_before_eval_metric_ops():
    with pytest.raises(TypeError, match="All hooks"):
        est.EstimatorSpec(EVAL, loss=LOSS, training_hooks=[1], eval_metric_ops=3)


# --- eval_metric_ops ----------------------------------------------------------------------


def test_eval_metric_ops_of_metrics():
    metric = est.metrics.mean(jnp.array([1.0, 2.0]))
    spec = est.EstimatorSpec(EVAL, loss=LOSS, eval_metric_ops={"m": metric})
    assert spec.eval_metric_ops == {"m": metric}


def test_eval_metric_ops_must_be_a_dict():
    with pytest.raises(TypeError, match=r"^eval_metric_ops must be a dict, given: \[1\]$"):
        est.EstimatorSpec(EVAL, loss=LOSS, eval_metric_ops=[1])


def test_tf_metric_tuple_names_the_replacement():
    value_and_update = (jnp.float32(0.5), jnp.float32(0.5))
    with pytest.raises(
        TypeError,
        match=r"eval_metric_ops\['acc'\] is a \(metric_value, update_op\) tuple.*"
        r"estimator\.metrics\.accuracy\(labels, predictions\)",
    ):
        est.EstimatorSpec(EVAL, loss=LOSS, eval_metric_ops={"acc": value_and_update})


def test_other_metric_values_rejected():
    with pytest.raises(
        TypeError,
        match=r"^Values of eval_metric_ops must be estimator\.metrics\.Metric objects.*"
        r"given: 3 for key: m$",
    ):
        est.EstimatorSpec(EVAL, loss=LOSS, eval_metric_ops={"m": 3})


def test_eval_metric_ops_checked_before_scaffold():
    with pytest.raises(TypeError, match="eval_metric_ops must be a dict"):
        est.EstimatorSpec(EVAL, loss=LOSS, eval_metric_ops=3, scaffold=object())


# --- scaffold -----------------------------------------------------------------------------


def test_scaffold_must_be_none():
    with pytest.raises(ValueError, match=r"scaffold is not supported.*Leave scaffold=None\."):
        est.EstimatorSpec(EVAL, loss=LOSS, scaffold="my_scaffold")


# --- _replace -----------------------------------------------------------------------------


def test_replace_mode_cannot_change():
    spec = est.EstimatorSpec(EVAL, loss=LOSS)
    with pytest.raises(ValueError, match=r"^mode of EstimatorSpec cannot be changed\.$"):
        spec._replace(mode=TRAIN)


def test_replace_revalidates_and_keeps_other_fields():
    hook = _Hook()
    spec = est.EstimatorSpec(EVAL, loss=LOSS, evaluation_hooks=[hook])
    new = spec._replace(mode=EVAL, loss=jnp.array([4.0]))
    assert isinstance(new, est.EstimatorSpec)
    assert new.loss.shape == () and float(new.loss) == 4.0
    assert new.evaluation_hooks == (hook,)
    assert spec.loss is LOSS  # the original is unchanged
    with pytest.raises(ValueError, match="Missing loss."):
        spec._replace(loss=None)


@pytest.mark.parametrize(
    "seed", [0, 1, -1, 2**31 - 1, -(2**31), 2**31, 2**32 + 5, 2**40, 2**63 - 1]
)
def test_the_seeds_key_is_made_on_the_host_as_jax_makes_it(seed):
    from estimator.model.function import seed_key_data

    expected = np.asarray(jax.random.key_data(jax.random.key(seed)))  # JAX's threefry_seed
    got = seed_key_data(seed)
    assert got.dtype == np.uint32 and got.shape == (2,)
    np.testing.assert_array_equal(got, expected)


# --- the features dict model_fn receives -----------------------------------------------


def test_a_missing_feature_key_is_a_key_error_listing_the_keys_present(tmp_path):
    def model_fn(features, labels, mode):
        logits = est.layers.dense(features["incme"], 1)[:, 0]  # a typo of "income"
        return est.EstimatorSpec(mode, loss=jnp.mean((logits - labels) ** 2), train_op=OPT)

    def input_fn():
        x = np.ones((2, 1), np.float32)
        return {"income": x, "age": x}, np.zeros((2,), np.float32)

    e = est.Estimator(model_fn, str(tmp_path))
    with pytest.raises(
        KeyError,
        match=r"^\"'incme': features has no key 'incme'; it has \['age', 'income'\] \(did you "
        r"mean 'income'\?\)\. The keys are those of input_fn's features",
    ):
        e.train(input_fn, steps=1)


def test_the_features_model_fn_receives_are_a_dict_and_a_pytree_like_one():
    seen = {}

    def model_fn(features, labels, mode):
        seen["is_dict"] = isinstance(features, dict)
        seen["get"] = features.get("nope")
        doubled = jax.tree.map(lambda v: 2 * v, features)  # keeps the type (and its errors)
        seen["doubled"] = type(doubled) is type(features)
        seen["paths"] = [
            jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(features)[0]
        ]
        seen["jitted"] = type(jax.jit(lambda f: f)(features)) is type(features)
        seen["copy"] = type(dict(features)) is dict
        with pytest.raises(KeyError, match=r"has no key 'c'; it has \['a', 'b'\]"):
            doubled["c"]
        return est.EstimatorSpec(mode, predictions=features["a"] + features["b"])

    x = jnp.ones((2,), jnp.float32)
    model = est.model.ModelFunction(model_fn, None, est.RunConfig(), 0)
    jax.eval_shape(lambda f: model.apply(PREDICT, f, None)[0].predictions, {"b": x, "a": x})
    # As a dict's: keys sorted, paths ['a'] and ['b'].
    assert seen == {
        "is_dict": True,
        "get": None,
        "doubled": True,
        "paths": ["['a']", "['b']"],
        "jitted": True,
        "copy": True,
    }
