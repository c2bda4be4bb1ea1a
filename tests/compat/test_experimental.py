"""``est.experimental`` mirrors ``tf.estimator.experimental``."""

import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import optax
import pytest
from test_coverage import TF_EXPERIMENTAL

import estimator as est

# dir(tf.estimator.experimental) in TF 2.15.1, public names (the list of test_coverage.py).
TF_NAMES = TF_EXPERIMENTAL


def test_every_tf_name_is_there_or_named_in_the_error():
    import canned  # registers LinearSDCA, RNNClassifier, RNNEstimator

    for name in TF_NAMES:
        assert callable(getattr(est.experimental, name)), name
        assert getattr(canned.experimental, name) is getattr(est.experimental, name), name
    # The top-level names stay, and are the same objects.
    assert est.experimental.stop_if_no_decrease_hook is est.stop_if_no_decrease_hook
    assert est.experimental.InMemoryEvaluatorHook is est.InMemoryEvaluatorHook
    assert est.experimental.LinearSDCA is canned.sdca.LinearSDCA
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        est.experimental.nothing  # noqa: B018


@pytest.mark.slow
def test_canned_names_without_canned_say_where_they_are():
    # A fresh process that imports only estimator (canned would register the names).
    code = (
        "import estimator as est\n"
        "try:\n"
        "    est.experimental.RNNClassifier\n"
        "except AttributeError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "use canned.experimental.RNNClassifier, or `import canned` first" in out


def test_call_logit_fn_passes_what_the_function_takes():
    seen = {}

    def logit_fn(features, mode, config):
        seen.update(mode=mode, config=config)
        return features["x"] * 2

    out = est.experimental.call_logit_fn(logit_fn, {"x": jnp.ones(2)}, "train", {"p": 1}, "cfg")
    np.testing.assert_array_equal(out, [2.0, 2.0])
    assert seen == {"mode": "train", "config": "cfg"}
    with pytest.raises(ValueError, match="logit_fn should return a Tensor or a dictionary"):
        est.experimental.call_logit_fn(lambda features: "x", {}, "train", None, None)


def _model_fn(features, labels, mode):
    logits = est.layers.dense(features["x"], 1, name="logits")[:, 0]
    loss = optax.sigmoid_binary_cross_entropy(logits, labels).mean()
    return est.EstimatorSpec(mode, loss=loss, train_op=optax.sgd(0.1))


def test_stop_at_checkpoint_step_hook_waits_for_the_checkpoint(tmp_path):
    x = np.ones((8, 3), np.float32)
    feed = est.inputs.numpy_input_fn(
        {"x": x}, np.ones(8, np.float32), 8, num_epochs=None, shuffle=False
    )
    chief = est.Estimator(_model_fn, str(tmp_path / "chief"))
    chief.train(feed, steps=5)  # the chief has written model.ckpt_5
    worker = est.Estimator(_model_fn, str(tmp_path / "worker"))
    hook = est.experimental.make_stop_at_checkpoint_step_hook(
        chief, 3, wait_after_file_check_secs=0
    )
    worker.train(feed, hooks=[hook], steps=100)
    # Local step 3 reached and the chief's checkpoint is at 5 >= 3: stopped at 3.
    assert worker.get_variable_value("global_step") == 3
