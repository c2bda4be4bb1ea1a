"""The tests' small models and the one factory of their Estimators (trained or not).

- The linear model: y = 2 * x0 - x1 + 1 on 40 fixed points; training reads batches of 8 in
  order (5 per epoch), evaluation all 40 at once; ``sgd_reference`` is its NumPy reference.
- The scalar model: ``w`` starts at 0 and fits ``y = 2`` from ``x = 1`` with loss
  ``(w - 2)^2`` and SGD at 0.1: ``w += 0.2 (2 - w)``, so w = 0, 0.4, 0.72, 0.976, 1.1808,
  1.34464 after 0..5 steps.
- ``make_estimator`` builds an Estimator of any ``model_fn``; ``train_estimator`` trains one;
  the ``trained_estimator`` fixture of ``conftest.py`` shares trained ones across a module.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import optax

import estimator as est

X = np.stack([np.linspace(-1, 1, 40), np.cos(np.arange(40))], axis=1).astype(np.float32)
Y = (2 * X[:, 0] - X[:, 1] + 1).astype(np.float32)
TRAIN = est.inputs.numpy_input_fn({"x": X}, Y, batch_size=8, num_epochs=None, shuffle=False)
EVAL = est.inputs.numpy_input_fn({"x": X}, Y, batch_size=40, shuffle=False)

ONES = np.ones((8, 1), np.float32)
TWOS = np.full((8,), 2.0, np.float32)


def sgd_reference(w=None, b: float = 0.0, lr: float = 0.1, steps: int = 0):
    """NumPy reference of ``steps`` SGD steps of the linear model from a fresh input: loss =
    mean((x @ w + b - y)^2) on batches X[8k % 40 : 8k % 40 + 8], from ``w`` (zeros when
    None) and ``b``. Gradients: dL/dw = 2/8 * x^T err, dL/db = 2 * mean(err),
    err = x @ w + b - y. Returns w, b and the loss on all 40 examples."""
    w = np.zeros(2) if w is None else np.asarray(w, np.float64)
    for k in range(steps):
        i = (k * 8) % 40
        xb, yb = X[i : i + 8].astype(np.float64), Y[i : i + 8].astype(np.float64)
        err = xb @ w + b - yb
        w, b = w - lr * 2 * xb.T @ err / 8, b - lr * 2 * err.mean()
    return w, b, float(np.mean((X @ w + b - Y) ** 2))


def reference_eval_loss(steps: int, lr: float = 0.1) -> float:
    """The linear model's loss on all 40 examples after ``steps`` SGD steps from zeros."""
    return sgd_reference(lr=lr, steps=steps)[2]


def model_fn(features, labels, mode, params):
    """The linear model; SGD at ``params["lr"]`` (default 0.1)."""
    w = est.get_variable("w", [2], initializer=est.initializers.zeros_initializer())
    b = est.get_variable("b", [], initializer=est.initializers.zeros_initializer())
    pred = features["x"] @ w + b
    if mode == est.ModeKeys.PREDICT:
        return est.EstimatorSpec(mode, predictions={"pred": pred})
    loss = jnp.mean((pred - labels) ** 2)
    lr = params.get("lr", 0.1)
    return est.EstimatorSpec(mode, loss=loss, predictions={"pred": pred}, train_op=optax.sgd(lr))


def scalar_model_fn(features, labels, mode):
    """The scalar model; ``w_value`` names ``w[0]`` for the hooks' fetches."""
    w = est.get_variable("w", [1], initializer=est.initializers.zeros_initializer())
    pred = features["x"] @ w
    est.identity(w[0], name="w_value")
    if mode == est.ModeKeys.PREDICT:
        return est.EstimatorSpec(mode, predictions={"pred": pred})
    loss = jnp.mean((pred - labels) ** 2)
    return est.EstimatorSpec(mode, loss=loss, predictions={"pred": pred}, train_op=optax.sgd(0.1))


def scalar_input(epochs=None, batch_size=8, examples=8):
    """The scalar model's input: ``examples`` ones labelled 2, in order."""
    x, y = ONES[:examples], TWOS[:examples]
    return est.inputs.numpy_input_fn(
        {"x": x}, y, batch_size=batch_size, num_epochs=epochs, shuffle=False
    )


def make_estimator(
    model_dir, model_fn=model_fn, *, params=None, warm_start_from=None, **config
) -> est.Estimator:
    """An Estimator of ``model_fn`` in ``model_dir``, seeded (``tf_random_seed=0`` unless
    given); ``config`` are ``RunConfig`` arguments."""
    config.setdefault("tf_random_seed", 0)
    return est.Estimator(
        model_fn,
        str(model_dir),
        config=est.RunConfig(**config),
        params=params,
        warm_start_from=warm_start_from,
    )


def make(model_dir, **config) -> est.Estimator:
    """The linear model's Estimator without the step-rate log (the lifecycle tests' one)."""
    config.setdefault("log_step_count_steps", None)
    return make_estimator(model_dir, **config)


def train_estimator(model_dir, steps=3, input_fn=TRAIN, model_fn=model_fn, **kwargs):
    """``make_estimator(model_dir, model_fn, **kwargs)`` trained to ``max_steps=steps``."""
    return make_estimator(model_dir, model_fn, **kwargs).train(input_fn, max_steps=steps)
